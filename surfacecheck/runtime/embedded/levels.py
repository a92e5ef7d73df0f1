"""The compaction and policy levels of the embedded runtime: protocol glue over :mod:`.compaction`,
:mod:`.transaction`, :mod:`.policy` and :mod:`.seed` (``docs/protocol.md``; spec 6-11, 1.5).

Results carry the spec's result kinds plus ``generation`` (after) and ``appended`` (the event types
the op wrote). Summary scripts: the op's own ``summaries``, else the standing queue from
``configure``, else the default text script; the k-th `compaction/start` of the log uses the script
at its position (so another producer's start shifts the queue exactly as in the reference).
"""
from __future__ import annotations

from typing import Any

from surfacecheck.model.errors import AbortError, ManualCompactionError, ModelError, TargetPressureConfigError
from surfacecheck.model.summary_request import recording

from ...core.protocol import ProtocolError, bind_level_ops
from ..codec import (agent_options, claimed_messages, configure_args, context_sections, fault_fields, refusal, require,
                     signal_passed, snapshot_id, step_marker, summary_scripts, summarize_hook)
from .compaction import NO_FAULTS, Faults
from .policy import COMMAND_TEXTS
from .seed import reopen
from .transaction import TxOptions

_CODE_BY_TEXT = {text: code for code, text in COMMAND_TEXTS.items()}


class Scripts:
    """The summarizer stand-in for one op: the script for the n-th `compaction/start` of the log."""

    def __init__(self, tracker, scripts: tuple) -> None:
        from surfacecheck.model.summarizer import SummaryScript

        self.tracker, self.base, self.scripts, self.default = tracker, tracker.starts, scripts, SummaryScript()

    def next(self):
        """Called right after a `compaction/start` is appended."""
        index = self.tracker.starts - 1 - self.base
        return self.scripts[index] if 0 <= index < len(self.scripts) else self.default


def parse_faults(args: dict) -> Faults:
    """The embedded runtime's :class:`Faults` for a request's optional ``faults`` (spec 8.3, 11.2)."""
    fields = fault_fields(args)
    return NO_FAULTS if fields is None else Faults(*fields)


def failure(error) -> dict | None:
    return None if error is None else refusal(error)["error"]


def install(runtime) -> tuple[str, ...]:
    """Add the compaction and policy ops to ``runtime`` (kept as ``runtime.level_ops``); the levels it supports."""
    ops = runtime.level_ops = LevelOps(runtime)
    return bind_level_ops(runtime._ops, ops)


class LevelOps:
    def __init__(self, runtime) -> None:
        self.rt = runtime
        self.queue: tuple = ()

    def reset(self) -> None:
        self.queue = ()

    def _run(self, args: dict, body) -> tuple[Any, dict]:
        """Run ``body(scripts, faults)`` on the live session; the common result fields."""
        own = summary_scripts(args)
        faults = parse_faults(args)
        tracker = self.rt.tracker
        scripts = Scripts(tracker, own if own is not None else self.queue)
        before, starts = len(self.rt.session.log), tracker.starts
        self.rt.engine.logged = []
        with recording() as requests:
            value = body(scripts, faults)
        if own is None:
            self.queue = self.queue[tracker.starts - starts:]
        return value, {"generation": self.rt.session.generation,
                       "appended": [event["type"] for event in self.rt.session.log[before:]], "requests": requests}

    # -- compaction level ---------------------------------------------------------------------------
    def select_range(self, args: dict) -> dict:
        retain = require(args, "retain_tokens", int)
        if retain < 0:
            raise ProtocolError("bad-args", "retain_tokens must be a non-negative integer")
        try:
            span = self.rt.compaction_class(self.rt).select_range(retain)
        except ModelError as exc:
            return refusal(exc)
        return {"range": None if span is None else {"start": span[0], "end": span[1]}}

    def prune(self, args: dict) -> dict:
        from surfacecheck.model.prune_content import resolve_pruner_config

        try:
            config = resolve_pruner_config(require(args, "pruner", dict, optional=True, default={}))
        except ModelError as exc:
            return refusal(exc)
        (pruned, error), common = self._run(args, lambda _scripts, faults: self.rt.compaction_class(self.rt).prune(config, faults))
        kind = "failed" if error is not None else ("pruned" if pruned else "none")
        removed = {} if error is not None else {"charsRemoved": sum(p["charsBefore"] - p["charsAfter"] for p in pruned)}
        return {"kind": kind, "pruned": pruned, "failure": failure(error), **removed, **common}

    def compact(self, args: dict) -> dict:
        start, end = require(args, "start", int), require(args, "end", int)
        manual = require(args, "manual", bool, optional=True, default=False)
        aborted = require(args, "aborted", bool, optional=True, default=False)
        signal_passed(args)  # without one nothing cancels it: a signal never aborted
        options = TxOptions(manual=manual, **self.rt.engine.summary_options())  # summarize(), spec 8.5
        try:
            outcome, common = self._run(args, lambda scripts, faults: self.rt.transaction_class(self.rt, scripts, faults).run(
                start, end, options, aborted))
        except ModelError as exc:
            return refusal(exc)
        return {"kind": result_kind(outcome.error, bool(common["appended"])), "result": outcome.result,
                "failure": failure(outcome.error), "aborted": outcome.aborted, **common}

    # -- policy level -------------------------------------------------------------------------------
    def configure(self, args: dict) -> dict:
        try:
            policy, capacity, queue = configure_args(args)
        except ModelError as exc:
            return refusal(exc)
        agent, hook = agent_options(args), summarize_hook(args)
        self.rt.engine.policy, self.rt.engine.capacity = policy, capacity
        self.queue = queue or ()
        if agent is not None:
            self.rt.engine.agent = agent
        if hook is not None:
            self.rt.engine.summarize_hook = hook
        return {"configured": True, "auto": policy.compaction.auto, "generation": self.rt.session.generation}

    def pre_step(self, args: dict) -> dict:
        """Spec 13 steps 4-7: the runtime-context candidate (``context``) is projected *before* the pressure
        listener (spec 12 one-request window); then pressure; then `step/start` (``step``), the ``claimed``
        inbox batch, and the candidate last (D9)."""
        sections, marker, claimed = context_sections(args), step_marker(args), claimed_messages(args)
        engine, before = self.rt.engine, len(self.rt.session.log)
        candidate = None if sections is None else self.rt.context.candidate(sections, "")
        if not engine.policy.compaction.auto:
            reply = {"kind": "disabled", "result": None, "failure": None, "logged": []}
        elif require(args, "aborted", bool, optional=True, default=False):  # a cancelled turn: the listener skips
            reply = {"kind": "noop", "result": None, "failure": None, "logged": []}
        else:
            try:
                outcome, common = self._run(args, lambda scripts, faults: engine.pressure(scripts, faults))
            except ModelError as exc:
                return refusal(exc)
            kind = pressure_kind(outcome.error, bool(common["appended"]), outcome.result, engine.warned)
            engine.log_pressure(outcome, silent=kind == "silent")
            reply = {"kind": kind, "result": outcome.result, "failure": failure(outcome.error),
                     "logged": list(engine.logged)}
        reply["measured"] = self.measured(reply["kind"])
        snapshot = self.enter(marker, candidate, claimed or ())
        reply.update(generation=self.rt.session.generation,
                     appended=[event["type"] for event in self.rt.session.log[before:]])
        if sections is not None:
            reply["snapshot"] = snapshot
        return reply

    def measured(self, kind: str) -> int | None:
        """The pressure figure the listener decided on: measure() before the batch is entered (spec 9.2, 13);
        null when auto is off, no route is logged, or the meter is stuck."""
        if kind == "disabled" or self.rt.meter_error is not None:
            return None
        if self.rt.tracker.routed_target() is None:
            return None
        return self.rt.meter.measure()["total"]

    def enter(self, marker: dict | None, candidate: dict | None, claimed=()) -> int | None:
        """Spec 13 step 7 (D9): `step/start`, the claimed messages in order, then the candidate as the last
        member of the entered batch."""
        session = self.rt.session
        if marker is not None:
            session.append("step/start", dict(marker))
        for message in claimed:
            session.append("user/message", message, "append")
        if candidate is None:
            return None
        candidate["id"] = snapshot_id(session.next_seq)
        return session.append("user/message", candidate, "append")["seq"]

    def request_error(self, args: dict) -> dict:
        code = require(args, "code", str)
        aborted = require(args, "aborted", bool, optional=True, default=False)
        engine = self.rt.engine
        try:
            (outcome, retry), common = self._run(args, lambda scripts, faults: engine.request_error(
                code, scripts, faults, aborted))
        except ModelError as exc:
            return refusal(exc)
        return {"kind": "retry" if retry else "next", "retries": engine.retries, "result": outcome.result,
                "failure": failure(outcome.error), "logged": list(engine.logged), **common}

    def manual_compact(self, args: dict) -> dict:
        raw = require(args, "args", str, optional=True, default="")
        command_id = require(args, "command_id", str, optional=True, default=f"cmd-{self.rt.session.next_seq}")
        aborted = require(args, "aborted", bool, optional=True, default=False)
        idle = require(args, "agent_idle", bool, optional=True, default=True)
        try:
            result, common = self._run(args, lambda scripts, faults: self.rt.engine.compact_command(
                command_id, raw, scripts, faults, aborted, idle))
        except ModelError as exc:
            return refusal(exc)
        return {"kind": result["kind"], "code": command_code(result), "text": result["text"],
                "sourceEventSeq": result["sourceEventSeq"], "compact_now": result["compact_now"], **common}

    def reload(self, args: dict) -> dict:
        try:
            session = reopen(self.rt.session.log, self.rt.session_class)
        except ModelError as exc:
            return refusal(exc)
        context = self.rt.context_class()
        try:  # the agent's constructor scan (spec 12): dsh's throw makes agent creation fail
            context.restore(session.log, set(session.surface.nodes))
        except ModelError as exc:
            return refusal(exc)
        before = len(self.rt.session.log)
        self.rt.start_session(session, reopen_engine=True)
        self.rt.context = context
        return {"generation": session.generation, "appended": [event["type"] for event in session.log[before:]]}


def pressure_kind(error, wrote: bool, result, warned: set) -> str:
    """Spec 9.3: the pressure listener's outcome; a TargetPressureConfigError is warned once per target key."""
    if error is None:
        return "compacted" if result is not None else ("pruned" if wrote else "noop")
    if isinstance(error, TargetPressureConfigError):
        if error.target_key in warned:
            return "silent"
        warned.add(error.target_key)
    return "warned"


def result_kind(error, wrote: bool) -> str:
    """Spec 11.2 kinds: success, the six ManualCompactionError codes, aborted; automatic refused/failed."""
    if error is None:
        return "success"
    if isinstance(error, ManualCompactionError):
        return error.code
    if isinstance(error, AbortError):
        return "aborted"
    return "failed" if wrote else "refused"


def command_code(result: dict) -> str:
    if result["kind"] == "success":
        return "nothing" if result["sourceEventSeq"] is None else "success"
    if result["text"].startswith("Usage:"):
        return "usage"
    return _CODE_BY_TEXT.get(result["text"], "aborted")
