"""The options every command shares, defined once: ``--runtime``, ``--json``, ``--timeout``, ``--report-dir``.

Each command calls :func:`add_common` with the options it takes; the spelling, help text and type of each are
the same everywhere, and ``--runtime`` lists the spellings of :mod:`surfacecheck.runtime.registry`.
"""
from __future__ import annotations

import argparse

from surfacecheck.core.argtypes import positive_seconds, writable_dir
from surfacecheck.runtime import registry

DEFAULT_RUNTIME = "embedded"
OMIT = object()
JSON_HELP = "print exactly one JSON document (the report) on stdout"
TIMEOUT_HELP = ("seconds the runtime may take to answer one request before it is declared hung and the run "
                "inconclusive (default: %(default)s)")


def runtime_type(allowed: tuple[str, ...] | None = None):
    """``--runtime``'s argparse type: a spelling the registry knows (one of ``allowed``, when given)."""
    def check(value: str) -> str:
        if allowed is not None and value not in allowed:
            raise argparse.ArgumentTypeError(f"runtime {value!r} is not one of {', '.join(allowed)}")
        problem = registry.problem(value)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value
    return check


def add_common(parser: argparse.ArgumentParser, *, runtime: object = OMIT, runtimes: tuple[str, ...] | None = None,
               runtime_note: str = "", json: bool = True, timeout: object = OMIT, timeout_note: str = "",
               report_dir: object = OMIT, reports: str = "") -> None:
    """Add the shared options ``parser`` takes: ``runtime``/``timeout``/``report_dir`` are their defaults (left
    out when not given); ``runtimes`` narrows the runtimes to those names; a ``*_note`` ends that option's help
    (why a default differs, what a timeout bounds here); ``reports`` names the files the report folder gets."""
    if runtime is not OMIT:
        default = runtime if isinstance(runtime, str) else None
        parser.add_argument("--runtime", type=runtime_type(runtimes), default=runtime, metavar="RUNTIME",
                            help="the runtime under test: " + registry.runtime_help(default=default, only=runtimes)
                                 + (f"; {runtime_note}" if runtime_note else ""))
    if json:
        parser.add_argument("--json", action="store_true", help=JSON_HELP)
    if timeout is not OMIT:
        parser.add_argument("--timeout", type=positive_seconds, default=timeout, metavar="S",
                            help=TIMEOUT_HELP + (f"; {timeout_note}" if timeout_note else ""))
    if report_dir is not OMIT:
        parser.add_argument("--report-dir", type=writable_dir, default=report_dir, metavar="DIR",
                            help="the folder the reports go to" + (f" ({reports})" if reports else "")
                                 + (" (default: %(default)s; created if needed)" if report_dir is not None else ""))
