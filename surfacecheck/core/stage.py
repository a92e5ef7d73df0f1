"""One capability's part of ``surfacecheck check``: what it ran and its verdict.

Each capability (audit, verify, prove, bench, explore) exposes ``stage(ctx) -> StageResult``;
``check`` runs them in order, folds their verdicts (violation > inconclusive > ok) and writes one
report: the JSON document gets ``stages[name] = summary`` and JUnit gets every stage's cases.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from surfacecheck.core.cases import TestCase
from surfacecheck.core.verdict import INTERRUPT_EXIT, Verdict

OK, VIOLATION, INCONCLUSIVE, SKIPPED = Verdict.OK, Verdict.VIOLATION, Verdict.INCONCLUSIVE, Verdict.SKIPPED


class Terminated(BaseException):
    """SIGTERM, raised in the main thread (``surfacecheck.cli.main`` installs the handler) so that a run unwinds,
    kills its runtime children and writes what it has, as an interrupt (SIGINT) does."""


DEFAULT_REPORT_DIR = Path("reports") / "out"
"""Where every command writes its reports and traces unless told otherwise (relative to the working directory)."""

__all__ = ["DEFAULT_REPORT_DIR", "OK", "VIOLATION", "INCONCLUSIVE", "SKIPPED", "INTERRUPT_EXIT", "Terminated", "CheckContext",
           "StageResult", "fold_status"]


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
        return Verdict(self.status).exit_code


def fold_status(statuses: list[str]) -> Verdict:
    """violation beats inconclusive beats ok/skipped."""
    return Verdict.fold(statuses)
