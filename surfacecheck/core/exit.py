"""Leaving the process without freeing what a command built.

An exploration at 7/2/2 holds tens of millions of small objects (state and edge tuples, the visited set, the
packer's tables); freeing them one by one when the interpreter shuts down takes ~20 s on a 2-core machine,
after the report is printed. A command that built such a heap asks, once its answer is out, to leave
without that teardown: the exit handlers still run (coverage's data file, logging), the streams are flushed,
and the operating system takes the memory back at once (``os._exit``), as mypy does for the same reason.
Only the process's entry point leaves this way; a command called in-process (the tests) returns as usual.
"""
from __future__ import annotations

import atexit
import os
import sys

_WANTED = False


def without_teardown() -> None:
    """Ask the entry point to leave without freeing the heap once the command has returned."""
    global _WANTED
    _WANTED = True


def leave(code: int) -> None:
    """End the process with ``code``: as usual, or, when asked, the exit handlers, flushed streams and
    ``os._exit``."""
    if not _WANTED:
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing left to say
            pass
    os._exit(code)
