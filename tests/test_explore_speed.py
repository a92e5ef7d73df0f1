"""The explorer finds the graph recorded in ``tests/golden/explore/``, and ``--workers`` changes nothing but
the cost figures.

* the search loop (:mod:`surfacecheck.explore.bfs`) against the golden data
  (``tests/golden/make_explore_golden.py``): the same states in the same order, the same depths, every
  edge with its label, the same state violations and safety counterexamples — for the correct model, a
  violating control, the reverse order and the search without the VIEW reduction;
* the distributed search (:mod:`surfacecheck.explore.distributed`) against the same golden data at 1 and 3
  partitions, each level merged into the one-process order (and a merge that skips that order is caught);
* ``explore --workers N`` (Dask): the same report at N = 1, 2 and 4 as in this process, violations and
  their shortest traces included; a worker killed mid-search changes nothing but the retry it reports; a
  cluster that is lost for good makes the run inconclusive (exit 3).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import cluster_work
from surfacecheck.core import cluster
from surfacecheck.cli import main as cli
from surfacecheck.explore.bfs import explore
from surfacecheck.explore.distributed import explore_partitioned
from surfacecheck.explore.run import run_explore
from surfacecheck.explore.variants import VARIANTS
from surfacecheck.explore.world import Bounds, World

from golden.make_explore_golden import GRAPH_CASES, HERE, graph_record

COST = ("seconds", "states_per_second", "check_seconds", "model_runs", "distributed")


@pytest.mark.parametrize("name, bounds, variant, reverse, symmetry", GRAPH_CASES, ids=[c[0] for c in GRAPH_CASES])
def test_the_search_finds_the_golden_graph(name, bounds, variant, reverse, symmetry):
    golden = json.loads((HERE / f"graph-{name}.json").read_text())
    assert golden["states"] > 500
    assert graph_record(explore(World(bounds, variant=variant), symmetry=symmetry, reverse=reverse)) == golden


def test_the_golden_data_tells_graphs_apart():
    """A different graph (one event fewer) gives other digests, so the comparison above could fail."""
    name, bounds, variant, reverse, symmetry = GRAPH_CASES[0]
    golden = json.loads((HERE / f"graph-{name}.json").read_text())
    smaller = Bounds(bounds.events - 1, bounds.tool_pairs, bounds.compactions)
    found = graph_record(explore(World(smaller, variant=variant), symmetry=symmetry, reverse=reverse))
    assert all(found["digests"][key] != golden["digests"][key] for key in golden["digests"])


def _in_process(fn, tasks):
    return [fn(task) for task in tasks]


@pytest.mark.parametrize("partitions", [1, 3])
@pytest.mark.parametrize("name, bounds, variant, reverse, symmetry", GRAPH_CASES, ids=[c[0] for c in GRAPH_CASES])
def test_the_partitioned_search_finds_the_golden_graph(name, bounds, variant, reverse, symmetry, partitions):
    golden = json.loads((HERE / f"graph-{name}.json").read_text())
    exp, figures = explore_partitioned(World(bounds, variant=variant), _in_process, partitions, symmetry=symmetry,
                                       reverse=reverse)
    assert figures.tasks == partitions * (max(exp.depth) + 1)
    assert graph_record(exp) == golden


def test_every_partition_holds_states_and_a_merge_out_of_order_is_caught(monkeypatch):
    name, bounds, variant, reverse, symmetry = GRAPH_CASES[0]
    golden = json.loads((HERE / f"graph-{name}.json").read_text())
    sizes = []

    def counted(fn, tasks):
        sizes.append([task.gsids.size for task in tasks])
        return _in_process(fn, tasks)

    explore_partitioned(World(bounds, variant=variant), counted, 3, symmetry=symmetry, reverse=reverse)
    assert all(sum(level[part] for level in sizes) > golden["states"] // 10 for part in range(3))
    monkeypatch.setattr(np, "argsort", lambda values, kind=None: np.arange(len(values)))  # partition order kept
    exp, _figures = explore_partitioned(World(bounds, variant=variant), _in_process, 3, symmetry=symmetry,
                                        reverse=reverse)
    assert len(exp.states) == golden["states"] and graph_record(exp) != golden


def test_a_worker_that_missed_part_of_the_surface_table_gets_the_whole_table():
    """A task carries only the surfaces numbered since the last level; a worker that lost the earlier ones (here:
    every worker's caches dropped before the fourth level, as a restarted worker has none) answers ``missing``,
    the coordinator sends those tasks again with the whole table, and the graph is the golden one."""
    from surfacecheck.explore import partition

    name, bounds, variant, reverse, symmetry = GRAPH_CASES[0]
    golden = json.loads((HERE / f"graph-{name}.json").read_text())
    calls, missing = [], []

    def forgetful(fn, tasks):
        calls.append([task.table_from for task in tasks])
        if len(calls) == 4:
            partition._SEARCHES.clear()
        answers = _in_process(fn, tasks)
        missing.append([answer.missing for answer in answers])
        return answers

    exp, figures = explore_partitioned(World(bounds, variant=variant), forgetful, 2, symmetry=symmetry,
                                       reverse=reverse)
    assert missing[3] == [True, True] and calls[4] == [0, 0] and missing[4] == [False, False]
    assert calls[3][0] > 0  # a delta, not the whole table, until the workers forgot
    assert figures.resent == 2
    assert graph_record(exp) == golden


def test_an_answer_whose_numbers_were_told_in_a_lost_answer_is_asked_again():
    """A worker tells each surface, label and record number once per run; if the answer that told one is not the
    one kept (here: every task of the fourth level run twice, the second answer kept), the coordinator sees
    numbers it cannot read, asks again with ``fresh`` (everything told), and the graph is the golden one."""
    name, bounds, variant, reverse, symmetry = GRAPH_CASES[0]
    golden = json.loads((HERE / f"graph-{name}.json").read_text())
    calls, fresh = [], []

    def twice(fn, tasks):
        calls.append(len(tasks))
        fresh.append([task.fresh for task in tasks])
        if len(calls) == 4:
            _in_process(fn, tasks)
        return _in_process(fn, tasks)

    exp, figures = explore_partitioned(World(bounds, variant=variant), twice, 2, symmetry=symmetry, reverse=reverse)
    assert fresh[4] and all(fresh[4]) and not any(fresh[3])
    assert graph_record(exp) == golden


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


def test_a_worker_killed_mid_search_changes_nothing(tmp_path):
    """The worker that owns a partition dies while expanding the third level; Dask re-runs the task on the
    worker its nanny restarts (a partition's answer is a function of its states), and the graph is the
    golden one."""
    name, bounds, variant, reverse, symmetry = GRAPH_CASES[0]
    golden = json.loads((HERE / f"graph-{name}.json").read_text())
    marker, levels = tmp_path / "died", []
    with cluster.pool(2) as pool:
        def run_map(fn, tasks):
            levels.append(len(tasks))
            items = [(str(marker), len(levels) == 3 and index == 0, task) for index, task in enumerate(tasks)]
            return pool.map(cluster_work.expand_or_die, items, pin=True, label="explore-level")

        exp, _figures = explore_partitioned(World(bounds, variant=variant), run_map, 2, symmetry=symmetry,
                                            reverse=reverse)
        retried = pool.retries("explore-level")
    assert marker.exists()  # a worker process really died mid-search
    assert retried == [{"label": "explore-level", "index": 0, "reason": "worker lost"}]
    assert graph_record(exp) == golden


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
