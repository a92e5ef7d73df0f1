"""What a proof obligation is and what it reports (the output format of ``prove``).

An :class:`Obligation` has a name, the seed/spec section it states, and ``run(bound)`` returning
:class:`ObligationResult`: status ``proved`` / ``refuted`` / ``unknown``, the bound (or
``"unbounded"``), seconds, the clauses checked, and its negative controls. A negative control is a
deliberately wrong variant that Z3 must refute; its counterexample becomes a :class:`~surfacecheck.core.trace.Trace`
that :mod:`.replay` runs through the executable model to show the same violation.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import z3

from surfacecheck.core.trace import Trace

PROVED, REFUTED, UNKNOWN = "proved", "refuted", "unknown"
CHECK_TIMEOUT_MS = 60_000


@dataclass
class Clause:
    """One checked statement: proved (its negation is unsat), refuted (with a model), or unknown."""

    name: str
    status: str
    detail: str = ""
    counterexample: dict | None = None

    def to_json(self) -> dict:
        out = {"name": self.name, "status": self.status}
        if self.detail:
            out["detail"] = self.detail
        if self.counterexample is not None:
            out["counterexample"] = self.counterexample
        return out


@dataclass
class ControlResult:
    """A negative control: ``status`` must be ``refuted``; ``replayed`` says whether the trace,
    run through the executable model (or the named model variant), showed the same violation."""

    name: str
    description: str
    status: str
    runtime: str = "model"
    trace: Trace | None = None
    trace_path: str | None = None
    replayed: bool | None = None
    replay_message: str = ""
    seconds: float = 0.0
    unbounded: dict | None = None  # how the unbounded proof failed on this variant

    @property
    def ok(self) -> bool:
        return self.status == REFUTED and self.replayed is True

    def to_json(self) -> dict:
        out = {"name": self.name, "description": self.description, "status": self.status,
               "runtime": self.runtime, "trace": self.trace_path, "replayed": self.replayed,
               "replay_violation": self.replay_message, "seconds": round(self.seconds, 3)}
        if self.unbounded is not None:
            out["unbounded"] = self.unbounded
        return out


@dataclass
class ObligationResult:
    name: str
    section: str
    status: str
    bound: Any
    seconds: float
    clauses: list[Clause] = field(default_factory=list)
    controls: list[ControlResult] = field(default_factory=list)
    notes: dict = field(default_factory=dict)
    trace: Trace | None = None  # the counterexample when the obligation itself is refuted
    trace_path: str | None = None
    replayed: bool | None = None
    replay_message: str = ""

    @property
    def ok(self) -> bool:
        return self.status == PROVED and all(control.ok for control in self.controls)

    def to_json(self) -> dict:
        out = {"name": self.name, "section": self.section, "status": self.status, "bound": self.bound,
               "seconds": round(self.seconds, 3), "clauses": [c.to_json() for c in self.clauses],
               "negative_controls": [c.to_json() for c in self.controls], "notes": self.notes}
        if self.trace is not None or self.trace_path:
            out.update(trace=self.trace_path, replayed=self.replayed, replay_violation=self.replay_message)
        return out


@dataclass(frozen=True)
class Obligation:
    name: str
    section: str
    summary: str
    run: Callable[[int], ObligationResult]
    default_bound: int | None = None  # None: the obligation is unbounded (the bound does not apply)


def check(facts: list, goal, timeout_ms: int = CHECK_TIMEOUT_MS,
          mbqi_rounds: int | None = None) -> tuple[str, z3.ModelRef | None]:
    """Prove ``facts ⇒ goal``: ``proved`` when ``facts ∧ ¬goal`` is unsat, else the refuting model
    (``mbqi_rounds`` caps model-based quantifier instantiation, for quantified facts)."""
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    if mbqi_rounds is not None:
        solver.set("smt.mbqi.max_iterations", mbqi_rounds)
    solver.add(*facts)
    solver.add(z3.Not(goal))
    answer = solver.check()
    if answer == z3.unsat:
        return PROVED, None
    if answer == z3.sat:
        return REFUTED, solver.model()
    return UNKNOWN, None


def fold_status(statuses: list[str]) -> str:
    if REFUTED in statuses:
        return REFUTED
    if UNKNOWN in statuses or not statuses:
        return UNKNOWN
    return PROVED


class Stopwatch:
    def __init__(self) -> None:
        self.start = time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.start


def check_all(facts: list, goals: list, timeout_ms: int = CHECK_TIMEOUT_MS,
              accumulate: bool = False) -> tuple[str, int | None, z3.ModelRef | None]:
    """Prove each of ``goals`` from ``facts`` in one incremental solver (push/pop per goal): local
    lemmas are easy one at a time and hard all at once. With ``accumulate`` each proved goal becomes a
    fact for the later ones. Returns (status, index of the first goal not proved, its model)."""
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(*facts)
    for index, goal in enumerate(goals):
        solver.push()
        solver.add(z3.Not(goal))
        answer = solver.check()
        model = solver.model() if answer == z3.sat else None
        solver.pop()
        if answer != z3.unsat:
            return (REFUTED if answer == z3.sat else UNKNOWN), index, model
        if accumulate:
            solver.add(goal)
    return PROVED, None, None
