"""The explorer's whole-graph checks (progress properties and the report's graph figures) in seconds, on one
explored graph: at large bounds the whole-graph checks cost as much as the search unless they read arrays.

Variants, each timed on the same exploration:

* ``current`` — :mod:`surfacecheck.explore.progress` and :func:`surfacecheck.explore.arrays.graph_figures`
  (edges and prices as NumPy arrays, SciPy's compiled graph routines), the arrays made inside the round;
* ``naive`` — a deliberately naive baseline written here from the public API: every edge of
  ``Exploration.edges`` walked into a ``networkx.DiGraph`` for the graph figures, and the same progress
  checks. The variant that loses, so the speed of the arrays is tracked as a ratio measured in one run;
  ``main`` fails (exit 1) when ``current`` is not faster.

Bounds: ``default`` (5/2/1) and ``6/2/1`` (162,767 states, 630,418 edges; set ``SURFACECHECK_BENCH_BIG=1``).
``python benchmarks/bench_explore_checks.py [--big]`` prints a plain table (best of 3, variants interleaved);
``python -m pytest benchmarks/bench_explore_checks.py`` runs pytest-benchmark.
"""
from __future__ import annotations

import os
import sys
import time

import networkx as nx
import pytest

from surfacecheck.explore import arrays, bfs, progress
from surfacecheck.explore.world import Bounds, World

BOUNDS = {"default": Bounds(), "6/2/1": Bounds(6, 2, 1)}
_EXPLORED: dict = {}


def explored(label: str) -> bfs.Exploration:
    if label not in _EXPLORED:
        _EXPLORED[label] = bfs.explore(World(BOUNDS[label]))
    return _EXPLORED[label]


def naive_figures(exp: bfs.Exploration) -> dict:
    """The report's graph figures from a ``networkx.DiGraph`` built edge by edge."""
    graph = nx.DiGraph()
    graph.add_nodes_from(range(len(exp.states)))
    graph.add_edges_from((src, dst) for src, dst, _action, _edge in exp.edges)
    return {"nodes": graph.number_of_nodes(), "arcs": graph.number_of_edges(),
            "strongly_connected_components": nx.number_strongly_connected_components(graph)}


def run(variant: str, exp: bfs.Exploration) -> tuple[int, dict, float]:
    """The progress findings and graph figures of ``exp``; (findings, figures, CPU seconds)."""
    exp.cache.clear()  # every round reads the edges into arrays afresh
    began = time.process_time()
    with bfs.no_cyclic_gc():
        found = progress.check_progress(exp)
        figures = naive_figures(exp) if variant == "naive" else arrays.graph_figures(exp)
    return len(found), figures, time.process_time() - began


def _bounds() -> list[str]:
    return ["default", "6/2/1"] if os.environ.get("SURFACECHECK_BENCH_BIG") else ["default"]


@pytest.mark.parametrize("bounds", _bounds())
@pytest.mark.parametrize("variant", ["current", "naive"])
def test_explore_checks(benchmark, variant, bounds):
    exp = explored(bounds)
    found, figures, _seconds = benchmark.pedantic(run, args=(variant, exp), rounds=3, iterations=1)
    assert figures == naive_figures(exp)
    benchmark.extra_info.update(findings=found, **figures)


def main(argv: list[str]) -> int:
    for label in (["default", "6/2/1"] if "--big" in argv else ["default"]):
        exp = explored(label)
        best: dict[str, float] = {}
        for _ in range(3):
            for name in ("naive", "current"):
                _found, _figures, seconds = run(name, exp)
                best[name] = min(best.get(name, seconds), seconds)
        print(f"explore checks at {label} ({len(exp.states)} states, {len(exp.edges)} edges; best of 3, CPU):")
        for name, seconds in best.items():
            print(f"  {name:<9} {seconds:7.3f} s")
        print(f"  current is {best['naive'] / best['current']:.2f}x the naive baseline")
        if best["naive"] <= best["current"]:
            print("  FAIL: the checks over arrays are not faster than the naive baseline")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
