"""``surfacecheck matrix --workers N`` / ``--scheduler ADDRESS``: one runtime's row is one Dask task.

Rule: the table does not depend on the worker count. A row is a pure function of ``(runtime, seed, examples,
timeout)`` (:func:`.run.row_task`: its registered witnesses replayed, its seeded search, bounded by examples), so
the rows are handed out as they are and merged here in the order the runtimes were given: the same ``matrix.json``
as in one process, timings and the ``distributed`` block aside. A worker computes silently and ships the text of
its NEW witnesses back with its row; this process writes every file (``traces/``), so a remote cluster needs no
folder shared with it. One progress bar counts the rows done, with the last finished row's summary.

A worker lost mid-row is retried by Dask, and the retry is said (``retried: matrix-row #i (worker lost)`` on
stderr) and listed in ``distributed.retries``. When Dask gives up (a row's workers kept dying) or the cluster
cannot be reached, the rows already finished are kept and every other row (running or waiting: Dask cancels them)
is ``inconclusive`` with the reason: the run exits 3 (or 1 when a finished row holds a NEW witness), never with a
short table.
"""
from __future__ import annotations

import sys
from pathlib import Path

from tqdm import tqdm

from surfacecheck.core import cluster
from surfacecheck.core.words import count

from .cells import Matrix, Row
from .run import Say, inconclusive_row, keep, matrix_of, row_task, summary

LABEL = "matrix-row"


def run_on_cluster(runtimes: list[str], *, seed: int, examples: int | None, trace_dir: Path, timeout: float,
                   workers: int | None, scheduler: str | None, say: Say) -> tuple[Matrix, dict]:
    """Every runtime's row on Dask, merged in the order given; and the ``distributed`` block (workers,
    scheduler, tasks, retries). :class:`cluster.ClusterUnavailable` propagates (a usage error)."""
    items = [(spec, seed, examples, str(trace_dir), timeout) for spec in runtimes]
    finished: dict[int, Row] = {}
    block = {"workers": workers, "scheduler": scheduler, "tasks": len(items), "retries": []}
    bar = None

    def done(index: int, result: tuple[Row, dict]) -> None:
        finished[index], texts = result
        keep(texts, trace_dir)
        bar.set_postfix_str(summary(finished[index]), refresh=False)
        bar.update()

    lost = None
    try:
        with cluster.pool(workers, scheduler) as pool:
            block["workers"] = len(pool.workers)
            say(f"matrix: one row per Dask task, {count(len(items), 'task')} on {count(block['workers'], 'worker')} "
                f"({'a local cluster' if pool.local else pool.address})")
            bar = tqdm(total=len(items), desc="matrix", unit="row", file=sys.stderr, disable=None, leave=False)
            try:
                pool.map(row_task, items, label=LABEL, done=done, quiet=True)
            except cluster.WorkerLost as exc:
                lost = str(exc)
            finally:
                block["retries"] = pool.retries(LABEL)
    except cluster.WorkerLost as exc:  # the cluster could not be reached
        lost = str(exc)
    finally:
        if bar is not None:
            bar.close()
    why = f"the Dask run lost this row: {lost}" if lost else None
    rows = [finished[i] if i in finished else inconclusive_row(spec, why) for i, spec in enumerate(runtimes)]
    for done_row in rows:
        say(f"matrix: {summary(done_row)}")
    return matrix_of(rows, seed=seed, examples=examples), block
