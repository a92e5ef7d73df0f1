"""One capability's part of ``surfacecheck check``: what it ran and its verdict.

Each capability (audit, verify, prove, bench, explore) exposes ``stage(ctx) -> StageResult``;
``check`` runs them in order, folds their verdicts (violation > inconclusive > ok) and writes one
report: the JSON document gets ``stages[name] = summary`` and JUnit gets every stage's cases.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from surfacecheck.reports.junit import TestCase

OK, VIOLATION, INCONCLUSIVE, SKIPPED = "ok", "violation", "inconclusive", "skipped"
EXIT_FOR = {OK: 0, SKIPPED: 0, VIOLATION: 1, INCONCLUSIVE: 3}


class Terminated(BaseException):
    """SIGTERM, raised in the main thread (``surfacecheck.cli.main`` installs the handler) so that a run unwinds,
    kills its runtime children and writes what it has, as an interrupt (SIGINT) does."""


INTERRUPT_EXIT = {"SIGINT": 130, "SIGTERM": 143}


@dataclass
class CheckContext:
    """What ``check`` hands every stage: the runtime spelling, the corpus (or ``None``), whether
    known findings count (``strict``), where reports and traces go, a stream for progress, and how long one
    call to a ``cmd:`` runtime may take before it is declared hung (inconclusive)."""

    runtime: str
    corpus: Path | None
    strict: bool
    report_dir: Path
    err: TextIO
    timeout: float = 10.0  # per-call timeout for cmd: runtimes (``check --timeout``; select.DEFAULT_TIMEOUT)
    requested: tuple[str, ...] = ()  # the stages named with ``--only`` (opt-in stages run only when named)


@dataclass
class StageResult:
    """``status`` is ok / violation / inconclusive / skipped; ``summary`` is JSON; ``text`` the
    human lines; ``cases`` the JUnit test cases; ``seconds`` the wall time."""

    name: str
    status: str
    summary: dict[str, Any]
    text: str = ""
    cases: list[TestCase] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        return EXIT_FOR[self.status]


def fold_status(statuses: list[str]) -> str:
    """violation beats inconclusive beats ok/skipped."""
    if VIOLATION in statuses:
        return VIOLATION
    if INCONCLUSIVE in statuses:
        return INCONCLUSIVE
    return OK
