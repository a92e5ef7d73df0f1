"""Issue 19: the faster explorer finds the very graph the previous one did, and ``--workers`` changes
nothing but the cost figures.

* the compact search loop (:mod:`surfacecheck.explore.bfs`) against the previous implementation kept
  in ``benchmarks/explore_previous.py``: the same states in the same order, the same depths, every edge
  with its label, the same state violations — for the correct model, a violating control, the reverse
  order and the search without the VIEW reduction;
* ``explore --workers N`` (Dask): the same report at N = 1, 2 and 4 as in this process, violations and
  their shortest traces included; a cluster that is lost for good makes the run inconclusive (exit 3).
"""
from __future__ import annotations

import json

import pytest

from benchmarks import explore_previous as previous
from surfacecheck.core import cluster
from surfacecheck.cli import main as cli
from surfacecheck.explore.bfs import explore
from surfacecheck.explore.run import run_explore
from surfacecheck.explore.shape import masked
from surfacecheck.explore.variants import CORRECT, VARIANTS
from surfacecheck.explore.world import Bounds, World

COST = ("seconds", "states_per_second", "check_seconds", "model_runs", "distributed")


def _graph(exp):
    """The graph; labels with their numbers masked (a shared run reports its representative's token counts)."""
    edges = [(src, dst, action, edge._replace(label=masked(edge.label))) for src, dst, action, edge in exp.edges]
    return exp.states, exp.depth, edges, exp.state_violations


@pytest.mark.parametrize("bounds, variant, reverse, symmetry", [
    (Bounds(4, 2, 1), CORRECT, False, True),
    (Bounds(4, 1, 2), CORRECT, True, True),
    (Bounds(3, 1, 1, max_seq=40), CORRECT, False, False),
    (Bounds(4, 1, 1), VARIANTS["unbalanced-cut"], False, True),
    (Bounds(4, 1, 1), VARIANTS["retry-without-progress"], True, True),
])
def test_compact_search_finds_the_previous_graph(bounds, variant, reverse, symmetry):
    new = explore(World(bounds, variant=variant), symmetry=symmetry, reverse=reverse)
    old = previous.explore(previous.PreviousWorld(bounds, variant=variant), symmetry=symmetry, reverse=reverse)
    assert len(new.states) > 500
    assert _graph(new) == _graph(old)


def test_the_previous_variant_is_really_the_old_loop():
    """The benchmark's losing variant must not quietly be today's code: it builds a tuple per edge."""
    world = previous.PreviousWorld(Bounds(3, 1, 1))
    previous.explore(world)
    assert world._cache and not any(world._compact) and not world._surface_effects
    today = World(Bounds(3, 1, 1))
    explore(today)
    assert not any(key[2][0] == "~s" for key in world._runs)  # keyed on the price sum, as it was
    assert any(key[2][0] == "~s" for key in today._runs) and world.oracle_calls > today.oracle_calls


def _cost_free(report: dict) -> dict:
    return {key: value for key, value in report.items() if key not in COST}


@pytest.fixture(scope="module")
def serial_report(tmp_path_factory):
    return run_explore(Bounds(4, 2, 1), variant=VARIANTS["unbalanced-cut"],
                       trace_dir=tmp_path_factory.mktemp("serial"))


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_workers_give_the_same_report(serial_report, workers, tmp_path):
    report = run_explore(Bounds(4, 2, 1), variant=VARIANTS["unbalanced-cut"], trace_dir=tmp_path, workers=workers)
    assert serial_report["verdict"] == "violation" and serial_report["violations"]
    assert report["distributed"]["workers"] == workers and report["distributed"]["tasks"] >= workers
    for found in (serial_report, report):
        for violation in found["violations"]:
            violation["trace"] = violation["trace"] and violation["trace"].rsplit("/", 1)[-1]
    assert _cost_free(report) == _cost_free(serial_report)


def test_a_lost_cluster_is_inconclusive(monkeypatch, capsys):
    class Gone:
        workers, local, address = ["tcp://w1"], True, "tcp://s"

        def map(self, *_args, **_kw):
            raise cluster.WorkerLost("explore-expand: a worker died running it; the scheduler gave up")

    class Opened:
        def __init__(self, *_args):
            pass

        def __enter__(self):
            return Gone()

        def __exit__(self, *_exc):
            return False

    monkeypatch.setattr(cluster, "pool", Opened)
    code = cli(["explore", "--events", "3", "--workers", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and out["verdict"] == "inconclusive" and "worker died" in out["error"]


def test_workers_need_dask(monkeypatch, capsys):
    monkeypatch.setitem(__import__("sys").modules, "distributed", None)
    code = cli(["explore", "--events", "3", "--workers", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 2 and "surfacecheck[dask]" in out["error"]


def test_oracle_mode_stays_in_process(capsys):
    assert cli(["explore", "--events", "3", "--workers", "2", "--oracle"]) == 2
    assert "--oracle and --cache run in this process only" in capsys.readouterr().err
