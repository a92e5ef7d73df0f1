"""A test case of a run, as CI systems count them: passed, or one failure / error / skip.

Every stage reports its checks as test cases; :mod:`surfacecheck.reports.junit` writes them as JUnit XML.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Outcome:
    """A failure / error / skip: ``message`` is the one-line attribute, ``text`` the body."""

    message: str
    type: str = ""
    text: str = ""


@dataclass
class TestCase:
    """One ``<testcase>``: ``classname`` groups cases, ``time`` is in seconds."""

    __test__ = False  # not a pytest test class

    name: str
    classname: str
    time: float = 0.0
    failure: Outcome | None = None
    error: Outcome | None = None
    skipped: Outcome | None = None
    properties: dict[str, str] = field(default_factory=dict)
    system_out: str = ""

    @property
    def status(self) -> str:
        if self.error is not None:
            return "error"
        if self.failure is not None:
            return "failure"
        if self.skipped is not None:
            return "skipped"
        return "passed"
