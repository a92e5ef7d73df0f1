"""The matrix as data: one :class:`Row` per runtime, one :class:`Cell` per contract promise.

A cell is one of

- ``held``: the search judged sessions where the promise's premise occurred (``exercised`` of them) and none broke
  it, and no registered witness breaks it;
- ``broken``: a witness breaks it on this runtime: a registered finding (``finding``, ``class``, ``witness``) or a
  ``NEW`` one the search found; ``replay`` is the witness's exit status on this runtime (1) and ``control`` on the
  reference conversation runtime, which keeps every promise (0);
- ``not-applicable``: the runtime has nothing the promise could judge (``why``, the runtime's own terms);
- ``not-exercised``: the search never produced the promise's premise (``why``); no claim either way;
- ``stale``: a registered witness no longer breaks the promise here (the registry needs an update);
- ``inconclusive``: the runtime hung, died or could not be installed (``why``).

:meth:`Matrix.table` is the part that depends on the seed alone (same seed, same table); timings and example
counts live beside it in :attr:`Row.run`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

HELD, BROKEN, NOT_APPLICABLE, NOT_EXERCISED, STALE, INCONCLUSIVE = (
    "held", "broken", "not-applicable", "not-exercised", "stale", "inconclusive")
STATES = (HELD, BROKEN, NOT_APPLICABLE, NOT_EXERCISED, STALE, INCONCLUSIVE)
MARKS = {HELD: "held", BROKEN: "broken", NOT_APPLICABLE: "n/a", NOT_EXERCISED: "not exercised", STALE: "stale",
         INCONCLUSIVE: "inconclusive"}


@dataclass(frozen=True)
class Cell:
    """One promise on one runtime (see the module docstring for the states)."""

    promise: str
    state: str
    why: str | None = None
    finding: str | None = None  # a registered id, or "NEW"
    klass: str | None = None
    witness: str | None = None  # the witness trace's path
    issue: str | None = None
    replay: int | None = None  # the witness's exit status on this runtime
    control: int | None = None  # its exit status on the reference runtime
    control_judged: bool | None = None  # the control's replay met what the promise judges
    exercised: int = 0
    messages: int | None = None  # the most messages a history held in the witness

    def to_json(self) -> dict:
        out = {"promise": self.promise, "state": self.state}
        for key, value in (("why", self.why), ("finding", self.finding), ("class", self.klass),
                           ("witness", self.witness), ("issue", self.issue), ("replay", self.replay),
                           ("control", self.control), ("control_judged", self.control_judged),
                           ("messages", self.messages)):
            if value is not None:
                out[key] = value
        if self.state in (HELD, NOT_EXERCISED, BROKEN):
            out["exercised"] = self.exercised
        return out


@dataclass(frozen=True)
class Row:
    """One runtime: its announced name and version, the provider whose role rules applied, its cells, and how
    the run went (``run``: seconds, examples, rounds; not part of the table)."""

    runtime: str
    cells: tuple[Cell, ...] = ()
    version: str | None = None
    provider: str | None = None
    inconclusive: str | None = None
    run: dict = field(default_factory=dict)

    def count(self, state: str) -> int:
        return sum(c.state == state for c in self.cells)

    @property
    def new(self) -> list[Cell]:
        return [c for c in self.cells if c.state == BROKEN and c.finding == "NEW"]

    def to_json(self) -> dict:
        return {"runtime": self.runtime, "version": self.version, "provider": self.provider,
                "inconclusive": self.inconclusive, "cells": [c.to_json() for c in self.cells]}


@dataclass(frozen=True)
class Matrix:
    """Every runtime's row, the promises (catalogue order, with their meanings) and the seed."""

    seed: int
    promises: tuple[tuple[str, str], ...]
    rows: tuple[Row, ...]
    examples: int | None = None

    def exit_code(self, strict: bool = False) -> int:
        """1 when a promise is broken by a NEW witness (or by any, ``strict``) or a registered witness went stale;
        3 when a runtime was inconclusive; else 0."""
        cells = [c for r in self.rows for c in r.cells]
        if any(c.state == STALE or (c.state == BROKEN and (strict or c.finding == "NEW")) for c in cells):
            return 1
        if any(r.inconclusive for r in self.rows):
            return 3
        return 0

    def verdict(self, strict: bool = False) -> str:
        return {0: "ok", 1: "violation", 3: "inconclusive"}[self.exit_code(strict)]

    def table(self) -> dict:
        """The seed-determined part: seed, promises, and each row's cells."""
        return {"seed": self.seed, "examples": self.examples, "promises": [p for p, _ in self.promises],
                "rows": [r.to_json() for r in self.rows]}

    def to_json(self, strict: bool = False) -> dict:
        totals = {state: sum(r.count(state) for r in self.rows) for state in STATES}
        return {"verdict": self.verdict(strict), "exit_code": self.exit_code(strict), "strict": strict,
                "totals": totals, "meanings": dict(self.promises), "table": self.table(),
                "runs": {r.runtime: r.run for r in self.rows}}
