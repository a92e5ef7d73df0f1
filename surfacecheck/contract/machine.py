"""The state machine that drives one conversation session per example and judges it after every step.

:func:`machine_class` builds a Hypothesis ``RuleBasedStateMachine`` bound to a :class:`SearchContext`: the
initialize rule ``open`` (settings of the runtime's table, a system prompt or none, an initial history), the rules
``turn`` and ``compact`` (direct), and one invariant: ``judge(session)`` breaks no promise outside
``context.found``. The first breach fixes the promise the example is about (``context.target``), so shrinking keeps
to that promise and the witness left in ``context.failure`` is the shrunk example of it (Hypothesis runs the
minimal example last).

A runtime that hangs or dies raises :class:`~surfacecheck.properties.stateful.base.RuntimeGone` (no shrinking, the
search is inconclusive); the budget running out between examples raises :class:`BudgetSpent`.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from hypothesis import reject, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from surfacecheck.core.protocol import ProtocolError, Runtime, RuntimeUnavailable
from surfacecheck.core.trace import Step
from surfacecheck.properties.stateful.base import RuntimeGone

from .conversations import SYSTEM_TEXTS, compact_scripts, histories, number_replies, turn_scripts
from .driver import Driver, label, largest_history
from .premises import exercised
from .session import Breach, Session
from .settings import settings_for

Judge = Callable[[Session], "list[Breach]"]


class BudgetSpent(BaseException):
    """The search's time budget ended before this example began (no failure being shrunk)."""


class PromiseBroken(AssertionError):
    """The invariant's failure: a promise not yet found is broken."""

    def __init__(self, breach: Breach):
        super().__init__(f"{breach.promise} at step {breach.step}: {breach.message}")
        self.breach = breach


@dataclass
class Witness:
    """A shrunk example: the trace steps that reproduce it, the breach, the session as judged."""

    steps: list[Step]
    breach: Breach
    session: Session

    @property
    def messages(self) -> int:
        return largest_history(self.session)


@dataclass
class SearchContext:
    """One round of the search: the runtime, its judge, the promises already found, and what happened."""

    runtime: Runtime
    spec: str
    provider: str
    judge: Judge
    found: frozenset = frozenset()
    deadline: float | None = None  # time.monotonic() after which no new example starts
    target: str | None = None
    failure: Witness | None = None
    examples: int = 0
    steps: int = 0
    refusals: Counter = field(default_factory=Counter)
    first_refusal: str | None = None
    progress: Any = None  # a tqdm bar (or None), advanced once per example
    spent: bool = False  # the budget stopped the round
    gone: RuntimeGone | None = None  # the runtime hung or died
    exercised: Counter = field(default_factory=Counter)  # promise -> generated sessions where its premise occurred


def machine_class(context: SearchContext) -> type[RuleBasedStateMachine]:
    """A machine class bound to ``context`` (its settings strategy is the runtime's)."""

    class ConversationMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            if context.target is None and context.deadline is not None and time.monotonic() > context.deadline:
                context.spent = True  # sticky: Hypothesis may run the machine again after the first raise
                raise BudgetSpent()
            context.examples += 1
            if context.progress is not None:
                context.progress.update(1)
            self.driver = Driver(context.runtime, context.spec, context.provider)
            self.steps: list[Step] = []
            self.next_call = 1
            self.compacts = 0
            self.exercised: frozenset[str] = frozenset()
            self.generated = context.target is None  # not a shrink of a failure: its premises are counted

        def _call(self, fn, *args):
            try:
                return fn(*args)
            except RuntimeUnavailable as exc:
                context.gone = RuntimeGone(exc)
                raise context.gone from None

        @initialize(settings=settings_for(context.spec), system=st.one_of(st.none(), st.sampled_from(SYSTEM_TEXTS)),
                    history=histories())
        def open(self, settings, system, history):
            args = {"settings": settings, "history": history}
            if system is not None:
                args["system"] = system
            try:
                answer = self._call(self.driver.open, args)
            except ProtocolError as exc:
                context.refusals["open"] += 1
                context.first_refusal = context.first_refusal or f"open: {exc.type}: {exc.message}"
                reject()
            self.next_call = 1 + sum(len(m.get("calls") or ()) for m in history)
            self.steps.append(Step("open", args, label("open", 1, args, answer)))
            context.steps += 1

        def _run(self, op: str, args: dict) -> None:
            exchange = self._call(self.driver.run, op, args)
            if "error" in exchange.answer:
                context.refusals[op] += 1
                err = exchange.answer["error"]
                context.first_refusal = context.first_refusal or f"{op}: {err.get('type')}: {err.get('message')}"
            ordinal = self.driver.turns if op == "turn" else self.compacts
            self.steps.append(Step(op, args, label(op, ordinal, args, exchange.answer)))
            context.steps += 1

        @rule(script=turn_scripts())
        def turn(self, script):
            if self.driver.halted is not None:
                return
            args, self.next_call = number_replies(script, self.next_call)
            self._run("turn", args)

        @rule(script=compact_scripts())
        def compact(self, script):
            if self.driver.halted is not None:
                return
            self.compacts += 1
            self._run("compact", dict(script))

        @invariant()
        def no_new_promise_broken(self):
            session = self.driver.session
            if session is None:
                return
            if self.generated:
                self.exercised |= exercised(session)
            breaches = [b for b in context.judge(session) if b.promise not in context.found
                        and (context.target is None or b.promise == context.target)]
            if breaches:
                first = min(breaches, key=lambda b: (b.step, b.promise))
                context.target = first.promise
                context.failure = Witness(list(self.steps), first, session)
                raise PromiseBroken(first)

        def teardown(self):
            if self.generated:
                context.exercised.update(self.exercised)

    return ConversationMachine
