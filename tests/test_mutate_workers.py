"""``surfacecheck mutate --runtime embedded --workers N``: one mutant per Dask task, its verdict the same on
any worker (so at any worker count); --workers is a usage error with --runtime dsh and without Dask."""
from __future__ import annotations

import argparse
import json
import sys

import pytest

from surfacecheck.core import cluster
from surfacecheck.mutate import sharded

pytest.importorskip("distributed")
pytest.importorskip("mutmut")

SETTINGS = json.dumps({"runtime": "embedded", "gate": ["findings"], "timeout": 10.0, "verify_profile": "smoke",
                       "corpus": None})


def mutate(capsys, *argv: str) -> tuple[int, dict]:
    from surfacecheck.mutate.cli import register

    parser = argparse.ArgumentParser(prog="surfacecheck")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["mutate", "--json", *argv])
    code = args.func(args)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out  # exactly one JSON document
    return code, json.loads(out)


def test_a_mutant_gets_the_same_verdict_whichever_worker_runs_it(tmp_path):
    """Each mutant runs on both workers (pinned, then pinned after a rotation): one verdict per mutant, in
    item order, whatever ran before it on that worker; what any worker count does is a mix of the two."""
    job = sharded.Job(str(tmp_path / "copy"), ("breakdown.py",), SETTINGS, 10.0)
    listed = sharded.prepare(job, tmp_path / "prepare.log")
    assert listed, (tmp_path / "prepare.log").read_text()[-2000:]
    items = [(job, key) for _file, key in listed[:8]]
    with cluster.pool(2) as pool:
        first = pool.map(sharded.run_mutant, items, pin=True, label="mutant")
        second = pool.map(sharded.run_mutant, items[1:] + items[:1], pin=True, label="mutant")
        assert sum(pool.run_on_every_worker(sharded.stop_servers, job.work).values()) == 2
    verdicts = [(row["name"], row["exit"]) for row in first]
    assert [name for name, _ in verdicts] == [key for _job, key in items]
    assert sorted(verdicts) == sorted((row["name"], row["exit"]) for row in second)
    exits = {code for _, code in verdicts}
    assert 1 in exits and exits <= {0, 1}  # kills, maybe survivors; never a crash or a timeout here


def test_workers_with_the_dsh_runtime_is_a_usage_error(capsys, tmp_path):
    code, doc = mutate(capsys, "--runtime", "dsh", "--workers", "2", "--report-dir", str(tmp_path))
    assert code == 2 and "--runtime embedded" in doc["error"]


def test_without_dask_workers_is_a_usage_error_with_the_install_hint(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "distributed", None)
    code, doc = mutate(capsys, "--runtime", "embedded", "--files", "breakdown.py", "--workers", "2",
                       "--report-dir", str(tmp_path))
    assert code == 2 and "pip install 'surfacecheck[dask]'" in doc["error"]
