"""A memory bound for the long searches: ``explore`` and ``verify`` stop, incomplete (exit 3),
before the machine runs out, instead of being killed by the kernel with nothing reported.

The bound is this process's resident set (``/proc/self/statm``; the peak from ``getrusage`` where that file is
absent). A ``cmd:`` runtime child's memory is its own and is not counted.
"""
from __future__ import annotations

import argparse
import os
import re
import resource

_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def parse_size(text: str) -> int:
    """``--max-memory`` values: bytes, or a number with K, M, G or T (powers of 1024; ``MiB``, ``GB`` read alike)."""
    match = _SIZE.match(str(text))
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (examples: 512M, 2G, 1.5GiB, 1000000)")
    size = int(float(match.group(1)) * _UNITS[match.group(2).upper()])
    if size < 16 * 2**20:
        raise argparse.ArgumentTypeError(f"{text!r} is below 16 MiB: the interpreter alone needs more")
    return size


def resident_bytes() -> int:
    """This process's resident set now (its peak where /proc is absent)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def mib(size: int) -> str:
    return f"{size / 2**20:.0f} MiB"


class MemoryLimitReached(BaseException):
    """The resident set passed the bound: stop the search at once (a ``BaseException``, so Hypothesis does not
    take it for a failing example and shrink it)."""

    def __init__(self, limit: int, resident: int):
        super().__init__(f"memory limit {mib(limit)} reached (resident {mib(resident)})")
        self.limit, self.resident = limit, resident


class MemoryLimit:
    """``check()`` raises :class:`MemoryLimitReached` once the resident set is above ``limit`` bytes."""

    def __init__(self, limit: int):
        self.limit = limit
        self.reached: MemoryLimitReached | None = None  # sticky: once passed, every later check raises again

    def check(self) -> None:
        if self.reached is None:
            resident = resident_bytes()
            if resident > self.limit:
                self.reached = MemoryLimitReached(self.limit, resident)
        if self.reached is not None:
            raise self.reached
