"""surfacecheck/cluster.py: an ordered map on Dask; a lost worker is retried, Dask giving up is WorkerLost,
no Dask is ClusterUnavailable (the install hint)."""
from __future__ import annotations

import sys

import pytest

pytest.importorskip("distributed")

import dask  # noqa: E402

import cluster_work  # noqa: E402
from surfacecheck.core import cluster  # noqa: E402


def test_results_come_back_in_item_order_and_done_sees_every_item():
    seen = []
    with cluster.pool(2) as p:
        assert len(p.workers) == 2
        out = p.map(cluster_work.square, list(range(7)), label="square", done=lambda i, r: seen.append((i, r)))
    assert out == [i * i for i in range(7)]
    assert sorted(seen) == [(i, i * i) for i in range(7)]


def test_a_worker_killed_mid_run_is_rescheduled_the_result_is_complete_and_the_retry_recorded(tmp_path, capsys):
    marker = tmp_path / "died"
    told = []
    with cluster.pool(2) as p:
        p.on_retry = told.append
        first = p.map(cluster_work.square, [1, 2], label="before")
        out = p.map(cluster_work.die_once, [(i, str(marker)) for i in range(4)], label="die-once")
        retried = list(p.retried)
    assert marker.exists()  # a worker process really died
    assert first == [1, 4] and out == [0, 1, 4, 9]
    assert cluster.Retry("die-once", 0, "worker lost") in retried  # item 0 was running on the worker that died
    assert told == retried and {r.label for r in retried} == {"die-once"}
    assert str(retried[0]).startswith("retried: die-once #")


def test_the_default_retry_report_is_a_line_on_stderr(capsys):
    cluster.say_retry(cluster.Retry("matrix-row", 2, "worker lost"))
    assert capsys.readouterr().err == "retried: matrix-row #2 (worker lost)\n"


def test_a_quiet_map_drops_what_the_workers_write_on_stderr(capfd):
    with cluster.pool(1) as p:
        assert p.map(cluster_work.loud_square, [3], label="loud", quiet=True) == [9]
        assert p.retried == []
    assert "LOUD" not in capfd.readouterr().err


def test_when_dask_gives_up_on_a_task_the_run_is_worker_lost_not_a_retry():
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with cluster.pool(1) as p:
            with pytest.raises(cluster.WorkerLost, match="gave up"):
                p.map(cluster_work.always_die, [1], label="doomed")
            assert p.retried == []


def test_without_dask_the_pool_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(cluster.ClusterUnavailable, match=r"pip install 'surfacecheck\[dask\]'"):
        with cluster.pool(2):
            pass
