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


def always_die(item) -> None:
    os._exit(17)
