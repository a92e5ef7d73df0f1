"""Replay a contract witness: run its steps on a runtime again, judge the session, say whether its promise holds.

``replay(trace, spec)`` opens the runtime (the trace's, or ``spec``), runs ``open`` and every ``turn`` and
``compact`` through the same :class:`~.driver.Driver` the search used, and judges the session with the judge of the
trace's promise (:func:`judge_for`: a judge registered for it with :func:`register_judge`, else the contract's).
Exit 1 while the promise is still broken, 0 once it holds, 3 when the runtime hangs or dies; a trace that does not
read is exit 2 with ``PATH:LINE: reason`` (:func:`read_contract_trace`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from surfacecheck.core.protocol import ProtocolError, RuntimeUnavailable
from surfacecheck.core.trace import Trace
from surfacecheck.properties.trace_check import read_valid_trace
from surfacecheck.runtime import registry
from surfacecheck.runtime.conversation.bridge import open_conversation
from surfacecheck.runtime.select import DEFAULT_TIMEOUT

from .driver import Driver, default_provider
from .premises import PREMISES
from .session import Breach, Session

Judge = Callable[[Session], "list[Breach]"]
_JUDGES: dict[str, Judge] = {}


def register_judge(promise: str, judge: Judge) -> None:
    """Make ``judge`` the one that judges traces of ``promise`` (a promise outside the contract's own list)."""
    _JUDGES[promise] = judge


def judge_for(promise: str) -> Judge:
    """The judge of ``promise``'s traces: a registered one, else the contract's (``promises.judge``)."""
    if promise in _JUDGES:
        return _JUDGES[promise]
    from . import promises

    return promises.judge


def promise_error(name: str) -> str | None:
    """Why no judge checks a promise named ``name`` (None when one does)."""
    if name in _JUDGES:
        return None
    try:
        from . import promises
    except ImportError:
        return f"unknown promise {name!r}: the contract's promises are not available"
    known = [p.id for p in promises.PROMISES]
    return None if name in known else f"unknown promise {name!r}; the contract's promises: {', '.join(known)}"


def read_contract_trace(path: str | Path) -> Trace:
    """Read a contract trace, every line checked; :class:`~surfacecheck.core.trace.TraceError` otherwise."""
    return read_valid_trace(path, check_property=promise_error)


@dataclass
class ContractReplay:
    """What a replay found: the trace's promise still broken (``breach``) or held; other promises broken on
    the way (``others``); ``unavailable`` when the runtime hung or died; ``refused`` when it refused a step."""

    runtime: str
    provider: str
    promise: str
    steps_run: int
    steps_total: int
    breach: Breach | None = None
    others: list[Breach] = field(default_factory=list)
    unavailable: str | None = None
    refused: str | None = None
    stderr: str = ""
    dropped: tuple[str, ...] = ()  # the trace runtime's own settings another runtime was not given
    judged: bool = False  # the session met what the trace's promise judges (its premise, :mod:`.premises`)

    @property
    def exit_code(self) -> int:
        return 3 if self.unavailable else 1 if self.breach else 0

    @property
    def verdict(self) -> str:
        return "inconclusive" if self.unavailable else "failing" if self.breach else "fixed"

    def describe(self) -> str:
        if self.unavailable:
            return f"inconclusive: runtime {self.runtime} unavailable: {self.unavailable}"
        tail = f"; also broken: {', '.join(sorted({b.promise for b in self.others}))}" if self.others else ""
        tail += f"; the runtime refused step {self.steps_run}: {self.refused}" if self.refused else ""
        tail += (f"; on its own settings ({', '.join(self.dropped)} belong to the trace's runtime)"
                 if self.dropped else "")
        if self.breach is None:
            return f"fixed: {self.steps_run} of {self.steps_total} steps ran on {self.runtime} and {self.promise} " \
                   f"held{tail}"
        return f"still fails at step {self.breach.step}: {self.promise}: {self.breach.message}{tail}"

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "exit_code": self.exit_code, "runtime": self.runtime,
                "provider": self.provider, "property": self.promise, "steps_run": self.steps_run,
                "steps_total": self.steps_total, "violation": self.breach.to_json() if self.breach else None,
                "also_broken": [b.to_json() for b in self.others], "refused": self.refused,
                "unavailable": self.unavailable, "dropped_settings": list(self.dropped), "judged": self.judged,
                "stderr": self.stderr[-2000:] if self.stderr else ""}


def portable_open(trace: Trace, spec: str) -> tuple[dict, tuple[str, ...]]:
    """The trace's ``open`` args for ``spec``: as recorded on the trace's own runtime (or one that takes the same
    settings); on another runtime without the trace runtime's own settings (their names are that runtime's), keeping the common ``compaction`` switch, so
    the same conversation replays on a runtime that keeps the promise. Returns the args and the dropped keys."""
    from .settings import table

    args = dict(trace.steps[0].args)
    if trace.runtime is None or registry.base(spec) == registry.base(trace.runtime) \
            or (table(spec) is not None and table(spec) is table(trace.runtime)):  # one family: dsh and its model
        return args, ()
    settings = dict(args.get("settings") or {})
    dropped = tuple(sorted(k for k in settings if k != "compaction"))
    args["settings"] = {k: v for k, v in settings.items() if k == "compaction"}
    return args, dropped


def replay(trace: Trace, spec: str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
           judge: Judge | None = None, settings: dict | None = None) -> ContractReplay:
    """Run ``trace`` on ``spec`` (default: the trace's runtime) and judge it; ``settings`` are laid over the
    ``open`` settings (:func:`portable_open`'s). ``ValueError`` for an unknown runtime spelling or a runtime that
    refuses the trace's ``open``."""
    spec = spec or trace.runtime
    provider = trace.provider or default_provider(spec)
    judge = judge or judge_for(trace.property)
    outcome = ContractReplay(spec, provider, trace.property, 0, len(trace.steps))
    try:
        runtime = open_conversation(spec, timeout)
    except RuntimeUnavailable as exc:
        outcome.unavailable, outcome.stderr = f"{exc.kind}: {exc}", exc.stderr
        return outcome
    try:
        driver = Driver(runtime, spec, provider)
        opening, outcome.dropped = portable_open(trace, spec)
        if settings:
            opening["settings"] = {**(opening.get("settings") or {}), **settings}
        try:
            driver.open(opening)
        except ProtocolError as exc:
            raise ValueError(f"runtime {spec} refuses the trace's open: {exc.type}: {exc.message}") from None
        outcome.steps_run = 1
        for step in trace.steps[1:]:
            driver.run(step.op, step.args)
            outcome.steps_run += 1
            if driver.halted is not None:
                outcome.refused = f"{driver.halted.get('type')}: {driver.halted.get('message')}"
                break
    except RuntimeUnavailable as exc:
        outcome.unavailable, outcome.stderr = f"{exc.kind}: {exc}", exc.stderr
        return outcome
    finally:
        runtime.close()
    premise = PREMISES.get(trace.property)
    outcome.judged = premise is None or premise.occurred(driver.session)
    breaches = list(judge(driver.session))
    mine = sorted((b for b in breaches if b.promise == trace.property), key=lambda b: b.step)
    outcome.breach = mine[0] if mine else None
    outcome.others = [b for b in breaches if b.promise != trace.property]
    return outcome
