"""``verify --workers N`` (issue 19): each level's examples in fixed shards with derived seeds, so the
verdict and the counts are the same at N = 1, 2 and 4; a seeded runtime bug is caught in the same shard
with the same trace at 1 and 2 workers."""
from __future__ import annotations

import io
import json

import pytest

from surfacecheck.core import cluster
from surfacecheck.cli import main as cli
from surfacecheck.core.trace import read_trace
from surfacecheck.verify.run import verify
from surfacecheck.verify.sharded import SHARDS, shard_seed

BUG = "embedded:generation-bumped-on-append"


def _outcome(report) -> dict:
    out = report.to_json()
    for key in ("seconds", "steps_per_second", "distributed"):
        out.pop(key)
    for level in out["levels"]:
        level.pop("seconds"), level.pop("steps_per_second")
    out["traces"] = [path.rsplit("/", 1)[-1] for path in out["traces"]]
    return out


def test_shard_seeds_are_distinct_and_fixed():
    seeds = [shard_seed(2, "log", i) for i in range(SHARDS)]
    assert len(set(seeds)) == SHARDS and seeds == [shard_seed(2, "log", i) for i in range(SHARDS)]
    assert shard_seed(3, "log", 0) != seeds[0] and shard_seed(2, "policy", 0) != seeds[0]


def _run(spec: str, folder, workers: int, shrink: bool):
    return verify(spec, level="log", profile="smoke", seed=2, trace_dir=folder, regressions=None, err=io.StringIO(),
                  workers=workers, shrink=shrink)


@pytest.fixture(scope="module")
def one_worker(tmp_path_factory):
    return _run("embedded", tmp_path_factory.mktemp("w1"), 1, True)


@pytest.mark.parametrize("workers", [2, 4])
def test_workers_give_the_same_verdict_and_counts(one_worker, workers, tmp_path):
    again = _run("embedded", tmp_path, workers, True)
    assert one_worker.status == "ok" and one_worker.levels[0].examples >= SHARDS
    assert _outcome(again) == _outcome(one_worker)


def test_a_seeded_bug_is_caught_in_the_same_shard_with_the_same_trace(tmp_path):
    """Unshrunk (Hypothesis's shrinking is bounded by time, so its example counts depend on the machine)."""
    one, two = _run(BUG, tmp_path / "1", 1, False), _run(BUG, tmp_path / "2", 2, False)
    assert one.status == "violation" and _outcome(one) == _outcome(two)
    name = one.traces[0].rsplit("/", 1)[-1]
    assert read_trace(tmp_path / "1" / name).steps == read_trace(tmp_path / "2" / name).steps


def test_a_lost_cluster_is_inconclusive(monkeypatch, capsys):
    def gone(*_args, **_kw):
        raise cluster.WorkerLost("verify-log: a worker died running it; the scheduler gave up")

    monkeypatch.setattr(cluster.Pool, "map", gone)
    code = cli(["verify", "--runtime", "embedded", "--profile", "smoke", "--level", "log", "--no-save", "--json",
                "--workers", "1"])
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and out["verdict"] == "inconclusive" and "worker died" in out["error"]
