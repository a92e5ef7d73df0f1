"""``surfacecheck e2e dsh --generate K --workers N`` (one script per Dask task): the same JSON report at any
worker count (times aside); Dask giving up is inconclusive (exit 3); no Dask is a usage error with the hint."""
from __future__ import annotations

import json
import os
import sys

import pytest

import cluster_work
from surfacecheck.e2e import sharded
from test_e2e_cli import main

pytest.importorskip("distributed")


def _run(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["e2e", "dsh", *argv, "--json"])
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out  # exactly one JSON document
    return code, json.loads(out)


def test_generated_scripts_give_the_same_report_on_one_and_two_workers(tmp_path, capsys):
    from surfacecheck.e2e.stage import sdk_installed

    if not sdk_installed() and not os.environ.get("CI"):
        pytest.skip("deepseek-harness-sdk not installed: pip install -e '.[dsh]'")
    common = ("--generate", "2", "--seed", "5", "--bundle-dir", str(tmp_path / "b"))
    one_code, one = _run(capsys, *common, "--workers", "1")
    two_code, two = _run(capsys, *common, "--workers", "2")
    assert one_code == two_code and one["verdict"] == two["verdict"] != "inconclusive", one.get("error")
    assert [s["name"] for s in one["scripts"]] == [f"gen-5-{i:02d}" for i in range(2)]
    assert cluster_work.without_times(one) == cluster_work.without_times(two)


def test_a_run_dask_gives_up_on_is_inconclusive_exit_3(monkeypatch, capsys, tmp_path):
    import dask

    monkeypatch.setattr(sharded, "run_item", cluster_work.always_die)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        code, doc = _run(capsys, "--generate", "1", "--workers", "1", "--bundle-dir", str(tmp_path / "b"))
    assert code == 3 and doc["exit_code"] == 3 and doc["verdict"] == "inconclusive"
    assert "gave up" in doc["error"] and doc["scripts"] == []


def test_without_dask_workers_is_a_usage_error_with_the_install_hint(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "distributed", None)
    code, doc = _run(capsys, "--generate", "1", "--workers", "2")
    assert code == 2 and doc["exit_code"] == 2
    assert "pip install 'surfacecheck[dask]'" in doc["error"]


def test_workers_and_scheduler_together_are_a_usage_error(capsys):
    code, doc = _run(capsys, "--generate", "1", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1")
    assert code == 2 and "not both" in doc["error"]
