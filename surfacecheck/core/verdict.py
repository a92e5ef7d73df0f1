"""The verdict of a run, a stage or a check, with the exit code and the words every command uses for it.

Exit status is one convention across the suite: 0 every property held, 1 a violation was found, 2 bad input or
usage (nothing was checked), 3 inconclusive (a runtime hung or died, a solver said unknown, a search stopped
short). A skipped stage counts as held: it says why it does not apply, and checked nothing that could fail.

A ``Verdict`` is a string enum: its value is the stage status written into reports (``"ok"``,
``"violation"``, ...), so it compares and serialises as that word; :attr:`Verdict.word` is the word a whole run's
verdict is written with (``"held"``, ``"violated"``, ...).
"""
from __future__ import annotations

import enum
from typing import Iterable


class Verdict(enum.StrEnum):
    OK = "ok"
    VIOLATION = "violation"
    BAD_INPUT = "error"
    INCONCLUSIVE = "inconclusive"
    SKIPPED = "skipped"

    @property
    def exit_code(self) -> int:
        return _EXIT[self]

    @property
    def word(self) -> str:
        """The run-level word: held / violated / error / inconclusive / skipped."""
        return _WORD[self]

    @classmethod
    def from_word(cls, word: str) -> "Verdict":
        """The verdict a run-level word (``held``, ``violated``, ...) or a status word (``ok``, ...) names."""
        for verdict, spelled in _WORD.items():
            if word in (spelled, verdict.value):
                return verdict
        raise ValueError(f"not a verdict: {word!r}")

    @classmethod
    def fold(cls, verdicts: Iterable[str]) -> "Verdict":
        """Bad input beats a violation, which beats inconclusive, which beats held; skipped parts count as held."""
        seen = {cls(v) for v in verdicts}
        for verdict in (cls.BAD_INPUT, cls.VIOLATION, cls.INCONCLUSIVE):
            if verdict in seen:
                return verdict
        return cls.OK


_EXIT = {Verdict.OK: 0, Verdict.VIOLATION: 1, Verdict.BAD_INPUT: 2, Verdict.INCONCLUSIVE: 3, Verdict.SKIPPED: 0}
_WORD = {Verdict.OK: "held", Verdict.VIOLATION: "violated", Verdict.BAD_INPUT: "error",
         Verdict.INCONCLUSIVE: "inconclusive", Verdict.SKIPPED: "skipped"}

INTERRUPT_EXIT = {"SIGINT": 130, "SIGTERM": 143}
"""A run cut short by a signal exits as the shell would report it (128 + the signal's number)."""
