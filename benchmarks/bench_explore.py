"""Explorer throughput in distinct states per second.

Each round explores one bounded world from cold caches (γ, the shape and price tables, the
projection folds are cleared first; nothing is read from a transition cache), so the model runs
are paid in every round. Variants:

* ``current`` — today's search (:mod:`surfacecheck.explore.bfs` over packed cores, :mod:`surfacecheck.explore.packed`);
* ``compact`` — the search loop of ``--workers`` and ``--oracle`` (numbered core tuples, one move list per
  core), on today's world;
* ``exact`` — ``explore --exact`` (``World(shared=False)``): one model run per surface instead of one per
  shape; the variant that loses, so the speed of the shared runs is tracked as a ratio measured in one run
  (the figures against older commits are in ``docs/performance-history.md``);
* ``workers-1``, ``workers-2`` — ``explore --workers N`` (:mod:`surfacecheck.explore.distributed`): the packed
  search level by level, each level's frontier partitioned over a local Dask cluster of N processes; its figure
  is the search's wall time once the cluster is up (only at the larger bounds, and only with Dask installed),
  set against ``current``'s wall time (``plain``) in the same run.

Bounds: ``default`` (5/2/1, 23,052 states) and ``6/2/2`` (403,026 states; set ``SURFACECHECK_BENCH_BIG=1``,
a minute or more per round). ``python benchmarks/bench_explore.py [--big]`` prints a plain table
(variants interleaved, each round in a fresh process, best of N); ``python -m pytest benchmarks/bench_explore.py``
runs pytest-benchmark (in one process, caches cleared between rounds).
"""
from __future__ import annotations

import os
import sys
import time

import pytest

from surfacecheck.explore import bfs, oracle, safety, shape
from surfacecheck.explore.world import Bounds, World

BOUNDS = {"default": Bounds(), "6/2/2": Bounds(6, 2, 2)}


def cold() -> None:
    """Forget every memo that outlives a World, so each round pays for its model runs."""
    for table in (oracle.gamma, oracle._gamma_nodes, shape.split, shape.signature, shape._breakpoints, shape.rebase_plan,
                  shape.pruned_at, shape.pairing, shape.alike):
        table.cache_clear()
    safety._PROJECTED.clear()


def run(variant: str, bounds: Bounds) -> tuple[int, int, float]:
    """One cold exploration: (states, edges, CPU seconds of this process; wall seconds with workers)."""
    cold()
    if variant.startswith("workers-"):
        from surfacecheck.core.cluster import pool
        from surfacecheck.explore.distributed import explore_partitioned

        with pool(int(variant.split("-")[1])) as cluster:
            exp, _figures = explore_partitioned(World(bounds), lambda fn, tasks: cluster.map(fn, tasks, pin=True),
                                                len(cluster.workers))
        return len(exp.states), len(exp.edges), exp.seconds
    if variant == "plain":
        exp = bfs.explore(World(bounds))
        return len(exp.states), len(exp.edges), exp.seconds
    world = World(bounds, shared=variant != "exact")
    search = _compact if variant == "compact" else bfs.explore
    began = time.process_time()
    exp = search(world)
    return len(exp.states), len(exp.edges), time.process_time() - began


def _compact(world: World) -> bfs.Exploration:
    with bfs.no_cyclic_gc():
        return bfs._explore(world, True, False, None, None, None)


def _bounds() -> list[str]:
    return ["default", "6/2/2"] if os.environ.get("SURFACECHECK_BENCH_BIG") else ["default"]


@pytest.mark.parametrize("bounds", _bounds())
@pytest.mark.parametrize("variant", ["current", "compact", "exact"])
def test_explore_throughput(benchmark, variant, bounds):
    states, edges, seconds = benchmark.pedantic(run, args=(variant, BOUNDS[bounds]), rounds=3 if bounds == "default"
                                                else 1, iterations=1)
    benchmark.extra_info.update(states=states, edges=edges, states_per_second=round(states / seconds))


def isolated(variant: str, label: str) -> tuple[int, int, float]:
    """:func:`run` in a fresh interpreter: nothing (a model-level memo, the allocator, the collector's
    generations) carries over from an earlier round or another variant."""
    import json
    import subprocess

    code = (f"import json; from benchmarks.bench_explore import run, BOUNDS; "
            f"print(json.dumps(run({variant!r}, BOUNDS[{label!r}])))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return tuple(json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str]) -> int:
    big = "--big" in argv
    names = ["exact", "compact", "current"] + (["plain", "workers-1", "workers-2"] if big else [])
    for label in (["default", "6/2/2"] if big else ["default"]):
        best: dict[str, tuple] = {}
        for _ in range(5 if label == "default" else 1):  # interleaved: a burst of load hits every variant
            for name in names:
                if name in ("plain", "workers-1", "workers-2") and label == "default":
                    continue
                found = isolated(name, label)
                if name not in best or found[2] < best[name][2]:
                    best[name] = found
        print(f"explore at {label} (each round a fresh process; best of {5 if label == 'default' else 1}):")
        for name, (states, edges, seconds) in best.items():
            print(f"  {name:<10} {states:>8} states {edges:>9} edges  {seconds:7.2f} s  {states / seconds:9.0f} states/s"
                  + ("  (CPU)" if name in ("exact", "compact", "current") else "  (search wall)"))
        ratio = best["exact"][2] / best["current"][2]
        print(f"  current is {ratio:.2f}x the exact model runs per core, "
              f"{best['compact'][2] / best['current'][2]:.2f}x the compact loop")
        if ratio <= 1:
            print("  FAIL: the shared model runs are not faster than one run per surface")
            return 1
        if "workers-2" in best:
            print(f"  workers-2 is {best['plain'][2] / best['workers-2'][2]:.2f}x one plain process "
                  f"(workers-1: {best['plain'][2] / best['workers-1'][2]:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
