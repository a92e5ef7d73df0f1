"""``surfacecheck matrix --workers N``: one row per Dask task, the same matrix.json and witness files as in one
process (times and the distributed block aside); one bar and the seed on stderr; a lost worker's row is retried
and said; a row Dask gave up on is inconclusive (exit 3)."""
from __future__ import annotations

import io
import json
from contextlib import contextmanager

import pytest

pytest.importorskip("distributed")

import dask  # noqa: E402

import cluster_work  # noqa: E402
from surfacecheck.cli import main as cli  # noqa: E402
from surfacecheck.core import cluster  # noqa: E402

RUNTIMES = "embedded,model"
ARGS = ["--runtime", RUNTIMES, "--examples", "2", "--seed", "3", "--json"]
COSTS = frozenset({"seconds", "examples"})


class Terminal(io.StringIO):
    """A stderr that says it is a terminal, so the progress bar draws (tqdm's ``disable=None``)."""

    def isatty(self) -> bool:
        return True


def _matrix(folder, capsys, *more) -> tuple[int, dict, str, dict]:
    code = cli(["matrix", *ARGS, "--report-dir", str(folder), *more])
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert json.loads((folder / "matrix.json").read_text()) == data
    traces = {path.name: _without_created(path.read_text()) for path in sorted((folder / "traces").glob("*.jsonl"))}
    return code, data, captured.err, traces


def _without_created(text: str) -> str:
    lines = text.splitlines()
    header = json.loads(lines[0])
    header.pop("created")
    return "\n".join([json.dumps(header)] + lines[1:])


def _table(data: dict) -> dict:
    """What must not depend on the worker count: all but the distributed block and each row's cost (its seconds;
    its examples, which count the shrinker's time-bounded replays)."""
    out = {k: v for k, v in data.items() if k not in ("distributed", "runs")}
    return {**out, "runs": {r: cluster_work.without_times(run, COSTS) for r, run in data["runs"].items()}}


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    folder = tmp_path_factory.mktemp("one")
    with pytest.MonkeyPatch.context() as mp:
        err = Terminal()
        mp.setattr("sys.stderr", err)
        code = cli(["matrix", *ARGS, "--report-dir", str(folder)])
    data = json.loads((folder / "matrix.json").read_text())
    traces = {path.name: _without_created(path.read_text()) for path in sorted((folder / "traces").glob("*.jsonl"))}
    return code, data, traces


def _pool_whose_workers(patch, *patch_args):
    """``cluster.pool``, with ``patch(*patch_args)`` run in every worker before any row is handed out."""
    opened = cluster.pool

    @contextmanager
    def pool(*args, **kwargs):
        with opened(*args, **kwargs) as p:
            p.run_on_every_worker(patch, *patch_args)
            yield p
    return pool


def test_two_workers_give_the_same_matrix_and_witnesses_with_one_bar(in_process, tmp_path, capsys, monkeypatch):
    code, data, traces = in_process
    assert code == 1 and traces  # the model's search finds a NEW witness: a file to ship back
    monkeypatch.setattr("sys.stderr", err := Terminal())
    code2 = cli(["matrix", *ARGS, "--report-dir", str(tmp_path), "--workers", "2"])
    out2 = json.loads((tmp_path / "matrix.json").read_text())
    assert code2 == code and _table(out2) == _table(data)
    assert {p.name: _without_created(p.read_text()) for p in (tmp_path / "traces").glob("*.jsonl")} == traces
    assert out2["distributed"] == {"workers": 2, "scheduler": None, "tasks": 2, "retries": []}
    text = err.getvalue()
    assert text.startswith("matrix: 2 runtimes (embedded, model), seed 3\n")
    assert "2/2" in text and "matrix: " in text.split("2/2")[1]  # the bar's end, with a row's summary
    assert "contract round" not in text and "replaying" not in text  # the workers' own bars and lines are dropped


def test_a_lost_worker_is_retried_said_and_listed(in_process, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cluster, "pool", _pool_whose_workers(cluster_work.first_matrix_row_dies,
                                                             str(tmp_path / "died")))
    code, data, err, traces = _matrix(tmp_path / "r", capsys, "--workers", "2")
    assert (tmp_path / "died").exists()  # a worker process really died
    assert code == in_process[0] and _table(data) == _table(in_process[1]) and traces == in_process[2]
    [retry] = data["distributed"]["retries"]
    assert retry["label"] == "matrix-row" and retry["reason"] == "worker lost" and retry["index"] in (0, 1)
    assert f"retried: matrix-row #{retry['index']} (worker lost)\n" in err


def test_a_row_dask_gave_up_on_is_inconclusive(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cluster, "pool", _pool_whose_workers(cluster_work.matrix_row_dies_on, "model"))
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        code, data, err, _traces = _matrix(tmp_path, capsys, "--workers", "1")
    rows = {r["runtime"]: r for r in data["table"]["rows"]}
    assert code == 3 and data["verdict"] == "inconclusive"
    assert "the Dask run lost this row" in rows["model"]["inconclusive"]
    assert {c["state"] for c in rows["model"]["cells"]} == {"inconclusive"}
    assert data["distributed"]["retries"] == [] and "retried:" not in err  # given up on, not retried


def test_an_existing_cluster_by_its_address_gives_the_same_matrix(in_process, tmp_path, capsys):
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0") as existing:
        code, data, err, traces = _matrix(tmp_path, capsys, "--scheduler", existing.scheduler_address)
    assert code == in_process[0] and _table(data) == _table(in_process[1]) and traces == in_process[2]
    assert data["distributed"]["scheduler"] == existing.scheduler_address and data["distributed"]["workers"] == 1
    assert f"2 tasks on 1 worker ({existing.scheduler_address})" in err
