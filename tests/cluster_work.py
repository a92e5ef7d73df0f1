"""Work functions for the cluster tests: top-level, so a Dask worker process imports them by name."""
from __future__ import annotations

import os
from pathlib import Path


def square(item: int) -> int:
    return item * item


def die_once(item: tuple[int, str]) -> int:
    """Kill the worker process the first time item 0 runs (a marker file remembers), then square."""
    value, marker = item
    if value == 0 and not Path(marker).exists():
        Path(marker).write_text(str(os.getpid()))
        os._exit(17)
    return value * value


def loud_square(item: int) -> int:
    """Square, writing on stderr (what a quiet map drops)."""
    import sys

    sys.stderr.write("LOUD\n")
    sys.stderr.flush()
    return item * item


def always_die(item) -> None:
    os._exit(17)


TIME_KEYS = frozenset({"seconds", "minutes", "median_s", "p90_s", "mean_s", "max_s"})


def without_times(value, drop: frozenset = TIME_KEYS):
    """A JSON report with every timing field removed: what must be identical at any worker count."""
    if isinstance(value, dict):
        return {k: without_times(v, drop) for k, v in value.items() if k not in drop}
    if isinstance(value, list):
        return [without_times(v, drop) for v in value]
    return value


def expand_or_die(item: tuple):
    """The explorer's partition task, but the worker process dies the first time a task is marked to (a marker
    file remembers), mid-search."""
    from surfacecheck.explore.partition import expand_partition

    marker, doomed, task = item
    if doomed and not Path(marker).exists():
        Path(marker).write_text(str(os.getpid()))
        os._exit(17)
    return expand_partition(task)

def first_matrix_row_dies(marker: str) -> None:
    """In a worker: the first matrix row any worker starts kills its process (the marker, created atomically,
    says it happened); a worker restarted by its nanny is unpatched."""
    from surfacecheck.matrix import run

    original = run.row

    def row(spec, **kwargs):
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return original(spec, **kwargs)
        os._exit(17)
    run.row = row


def matrix_row_dies_on(doomed: str) -> None:
    """In a worker: the matrix row of runtime ``doomed`` kills its process, every time it is tried here."""
    from surfacecheck.matrix import run

    original = run.row
    run.row = lambda spec, **kwargs: os._exit(17) if spec == doomed else original(spec, **kwargs)
