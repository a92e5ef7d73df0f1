"""The compaction and policy levels of :class:`~surfacecheck.runtime.model_runtime.ModelRuntime`.

Each op runs one model transition (spec 6 pruner, 7 range selection, 8 the transaction, 9 the
pressure listener, 10.2 the overflow listener, 11 ``/compact``, 1.5 reload) on the current session
and adopts the session it returns. Results name the spec's result kinds and carry the generation
after (``docs/protocol.md`` lists every shape). Summaries come from scripts: an op's own
``summaries`` list, else the standing queue given to ``configure``, else the default text script;
each ``compaction/start`` written consumes the next script.
"""
from __future__ import annotations

from dataclasses import replace as dc_replace
from typing import Any

from surfacecheck.model.errors import AbortError, ManualCompactionError, ModelError, TargetPressureConfigError
from surfacecheck.model.manual import MESSAGES, compact_command
from surfacecheck.model.summary_request import recording
from surfacecheck.model.meter import measure_state
from surfacecheck.model.policy import (PRESSURE, Environment, OverflowState, pressure_log, reset_overflow,
                                       summary_options)
from surfacecheck.model.prune_content import resolve_pruner_config
from surfacecheck.model.pruner import prune_session
from surfacecheck.model.runtime_context import project_sections
from surfacecheck.model.seams import active
from surfacecheck.model.session import append, seeded
from surfacecheck.model.summarizer import AGENT_OPTIONS, ScriptedSummarizer, SummaryScript
from surfacecheck.model.transaction import TransactionOptions

from ..core.protocol import ProtocolError, bind_level_ops
from .codec import (agent_options, claimed_messages, command_raw_input, compact_now_json, compaction_result,
                    configure_args, context_sections, failure, faults, refusal, require, signal_passed, snapshot_id,
                    step_marker, summarize_hook, summary_scripts)

_CODE_BY_TEXT = {text: code for code, text in MESSAGES.items()}


class LevelState:
    """What the policy level keeps beside the session: the environment (policy, capacity), the standing
    summary queue, compaction-basic's overflow retries (spec 10.2), its warned target keys (spec 9.3),
    and the number of `compaction/start` events in the log (which script the next one consumes)."""

    def __init__(self) -> None:
        self.env = Environment()
        self.queue: tuple[SummaryScript, ...] = ()
        self.agent: tuple = AGENT_OPTIONS  # the agent's AgentOptions provider and model (None: unset)
        self.hook = "llm"  # what the engine's summarize() returns (codec.SUMMARIZE_HOOKS)
        self.reopen()

    def reopen(self) -> None:
        """A new engine instance (reset or crash + reload): retries and warned keys start empty."""
        self.overflow = OverflowState()
        self.warned: set[str] = set()
        self.starts = 0

    def observe(self, event) -> None:
        """Per committed event: count starts; the overflow counter resets of spec 10.2 (DISAGREES D3)."""
        if event.type == "compaction/start":
            self.starts += 1
        status = event.data.get("status") if isinstance(event.data, dict) else None
        self.overflow = reset_overflow(self.overflow, event.type, status, self.env.policy.compaction.auto)


def install(runtime) -> tuple[str, ...]:
    """Add the compaction and policy ops to ``runtime``; returns the levels it now supports."""
    ops = _Ops(runtime)
    runtime.level_state = LevelState()
    return bind_level_ops(runtime._ops, ops)


class _Ops:
    def __init__(self, runtime) -> None:
        self.rt = runtime

    # -- shared plumbing ----------------------------------------------------------------------
    @property
    def state(self) -> LevelState:
        return self.rt.level_state

    def _summarizer(self, args: dict) -> tuple[ScriptedSummarizer, bool]:
        """Scripts indexed by absolute `compaction/start` number (how :class:`ScriptedSummarizer` counts)."""
        own = summary_scripts(args)
        scripts = own if own is not None else self.state.queue
        default = SummaryScript()
        return ScriptedSummarizer(scripts=(default,) * self.state.starts + tuple(scripts),
                                  provider=self.state.agent[0], model=self.state.agent[1],
                                  hook=self.state.hook), own is None

    def _run(self, args: dict, transition) -> tuple[Any, dict]:
        """Run ``transition(session, summarizer, faults)`` -> Outcome-like; adopt its session; common fields."""
        summarizer, from_queue = self._summarizer(args)
        before_len, starts0 = len(self.rt.session.log), self.state.starts
        try:
            with recording() as requests:
                outcome = transition(self.rt.session, summarizer, faults(args))
        except _SHAPE_ERRORS as exc:
            raise _shape_refusal(exc) from exc
        session = outcome.session if hasattr(outcome, "session") else outcome[0]
        self.rt.last_labels = tuple(getattr(outcome, "labels", ()) or box_labels(outcome))
        self.rt.adopt(session)
        if from_queue:
            self.state.queue = self.state.queue[self.state.starts - starts0:]
        common = {"generation": session.generation,
                  "appended": [event.type for event in session.log[before_len:]], "requests": requests}
        return outcome, common

    # -- compaction level (spec 6, 7, 8) ------------------------------------------------------
    def select_range(self, args: dict) -> dict:
        """`selectCompactableRange(session, measure(), retainTokens)` (spec 7)."""
        retain = require(args, "retain_tokens", int)
        if retain < 0:
            raise ProtocolError("bad-args", "retain_tokens must be a non-negative integer")
        if self.rt.meter_error is not None:
            return refusal(self.rt.meter_error)
        try:
            span = active().select_compactable_range(self.rt.session, measure_state(self.rt.meter), retain)
        except ModelError as exc:
            return refusal(exc)
        except _SHAPE_ERRORS as exc:
            return refusal(_shape_refusal(exc))
        return {"range": None if span is None else {"start": span.start, "end": span.end}}

    def prune(self, args: dict) -> dict:
        """`pruneSession` with the given budgets (spec 6): prune + single-node replace per big result."""
        try:
            config = resolve_pruner_config(require(args, "pruner", dict, optional=True, default={}))
        except ModelError as exc:
            return refusal(exc)
        try:
            outcome, common = self._run(args, lambda s, _summ, f: prune_session(s, config, f))
        except ModelError as exc:
            return refusal(exc)
        pruned = [{"originalSeq": e.original_seq, "replacementSeq": e.replacement_seq, "callId": e.call_id,
                   "charsBefore": e.chars_before, "charsAfter": e.chars_after} for e in outcome.value.pruned]
        kind = "failed" if outcome.error is not None else ("pruned" if pruned else "none")
        removed = {} if outcome.error is not None else {"charsRemoved": sum(e.chars_before - e.chars_after
                                                                              for e in outcome.value.pruned)}
        return {"kind": kind, "pruned": pruned, "failure": failure(outcome.error), **removed, **common}

    def compact(self, args: dict) -> dict:
        """`compactSurfaceRegion(start, end)` (spec 8): automatic (numbered owner, whole-surface stability)
        or ``manual`` (owner null, selected-span stability, flush); result kind as spec 11.2 names it."""
        start, end = require(args, "start", int), require(args, "end", int)
        manual = require(args, "manual", bool, optional=True, default=False)
        aborted = require(args, "aborted", bool, optional=True, default=False)
        signal_passed(args)  # without one nothing cancels: the same transitions as a signal never aborted
        try:
            outcome, common = self._run(args, lambda s, summ, f: active().compact_surface_region(
                s, start, end, self._compact_options(s, summ, manual), summ, f, aborted))
        except ModelError as exc:
            return refusal(exc)
        return {"kind": _kind(outcome.error, bool(common["appended"])), "result": compaction_result(outcome.value),
                "failure": failure(outcome.error), "aborted": outcome.aborted, **common}

    def _compact_options(self, session, summarizer: ScriptedSummarizer, manual: bool) -> TransactionOptions:
        """The engine's region dependencies summarize every request under `conversationTarget`'s policy (spec 8.5,
        D6: `summarize()`), the direct `compact` op's too; found by ``lockstep-log``."""
        kw = summary_options(session, self.state.env.policy.compaction, summarizer.target)
        return TransactionOptions.manual(**kw) if manual else TransactionOptions(**kw)

    # -- policy level (spec 9, 10.2, 11, 1.5) -------------------------------------------------
    def configure(self, args: dict) -> dict:
        """The runtime policy (corpus ``policies/*.json``), the route's context window, the summary queue."""
        try:
            policy, capacity, queue = configure_args(args)
        except ModelError as exc:
            return refusal(exc)
        agent, hook = agent_options(args), summarize_hook(args)
        self.state.env = Environment(policy=policy, capacity=capacity)
        self.state.queue = queue or ()
        if agent is not None:
            self.state.agent = agent
        if hook is not None:
            self.state.hook = hook
        return {"configured": True, "auto": policy.compaction.auto, "generation": self.rt.session.generation}

    def pre_step(self, args: dict) -> dict:
        """Spec 13 steps 4-7: the runtime-context candidate (``context``) is projected *before* the
        `agent/pre-step` pressure listener (spec 12 one-request window); pressure errors are warned once per
        target key (spec 9.2-9.3); then `step/start` (``step``), the ``claimed`` inbox batch, and the candidate,
        last of the entered batch (D9)."""
        sections, marker, claimed = context_sections(args), step_marker(args), claimed_messages(args)
        before = len(self.rt.session.log)
        candidate = None if sections is None else project_sections(self.rt.retained, sections)
        aborted = require(args, "aborted", bool, optional=True, default=False)
        if not self.state.env.policy.compaction.auto:
            reply = {"kind": "disabled", "result": None, "failure": None, "logged": []}
        elif aborted:  # spec 9.3: the listener skips a pre-step whose signal is already aborted
            reply = {"kind": "noop", "result": None, "failure": None, "logged": []}
        else:
            env = self.state.env
            try:
                outcome, common = self._run(args, lambda s, summ, f: active().compact_if_needed(
                    s, PRESSURE, dc_replace(env, summarizer=summ, faults=f)))
            except ModelError as exc:
                return refusal(exc)
            kind = self._pressure_kind(outcome, bool(common["appended"]))
            reply = {"kind": kind, "result": compaction_result(outcome.value), "failure": failure(outcome.error),
                     "logged": list(pressure_log(outcome, kind == "silent"))}
        reply["measured"] = self._measured(reply["kind"])
        snapshot = self._enter(marker, claimed or [], candidate)
        reply.update(generation=self.rt.session.generation,
                     appended=[event.type for event in self.rt.session.log[before:]])
        if sections is not None:
            reply["snapshot"] = snapshot
        return reply

    def _measured(self, kind: str) -> int | None:
        """The pressure figure the listener's decision rests on (spec 9.2 steps 2, 9, 11): measure() as it
        returned, before the batch is entered (spec 13); null when auto is off, no route is logged or the meter
        is stuck (promise-measure-conservative)."""
        from surfacecheck.model.policy import routed_target

        if kind == "disabled" or self.rt.meter_error is not None or routed_target(self.rt.session) is None:
            return None
        return measure_state(self.rt.meter).total_tokens

    def _pressure_kind(self, outcome, wrote: bool) -> str:
        error = outcome.error
        if error is None:
            return "compacted" if outcome.value is not None else ("pruned" if wrote else "noop")
        if isinstance(error, TargetPressureConfigError):
            if error.target_key in self.state.warned:
                return "silent"
            self.state.warned.add(error.target_key)
        return "warned"

    def _enter(self, marker: dict | None, claimed: list[dict], candidate: dict | None) -> int | None:
        """`step/start {turn, step}`, the claimed messages, then the runtime-context candidate, each an
        appended `user/message`: the snapshot is the last member of the entered batch (spec 13 step 7, D9)."""
        session = self.rt.session
        if marker is not None:
            session, _ = append(session, "step/start", dict(marker))
        for message in claimed:
            session, _ = append(session, "user/message", message, surface_op="append")
        seq = None
        if candidate is not None:
            seq = session.next_seq
            session, _ = append(session, "user/message", {**candidate, "id": snapshot_id(seq)}, surface_op="append")
        self.rt.adopt(session)
        return seq

    def request_error(self, args: dict) -> dict:
        """The `agent/request-error` listener (spec 10.2): ``retry`` only after generation progress."""
        code = require(args, "code", str)
        aborted = require(args, "aborted", bool, optional=True, default=False)
        env = self.state.env
        box: dict = {}

        def transition(session, summ, f):
            outcome, state, retry = active().on_request_error(session, self.state.overflow, code,
                                                              dc_replace(env, summarizer=summ, faults=f), aborted)
            box.update(state=state, retry=retry)
            return outcome

        try:
            outcome, common = self._run(args, transition)
        except ModelError as exc:
            return refusal(exc)
        self.state.overflow = box["state"]
        return {"kind": "retry" if box["retry"] else "next", "retries": box["state"].retries,
                "result": compaction_result(outcome.value), "failure": failure(outcome.error),
                "logged": list(outcome.logged), **common}

    def manual_compact(self, args: dict) -> dict:
        """`/compact` (spec 11.1): `command/run`, `compactNow`, `command/done`; the command's kind and text."""
        raw = require(args, "args", str, optional=True, default="")
        command_id = require(args, "command_id", str, optional=True, default=f"cmd-{self.rt.session.next_seq}")
        aborted = require(args, "aborted", bool, optional=True, default=False)
        idle = require(args, "agent_idle", bool, optional=True, default=True)
        box: dict = {}

        def transition(session, summ, f):
            after, result, labels = compact_command(session, command_id, command_raw_input(raw), summarizer=summ,
                                                    faults=f,
                                                    caller_aborted=aborted, agent_idle=idle,
                                                    **summary_options(session, self.state.env.policy.compaction,
                                                                      summ.target))
            box["result"] = result
            return (after, labels)

        try:
            _, common = self._run(args, transition)
        except ModelError as exc:
            return refusal(exc)
        result = box["result"]
        now = result.now
        if isinstance(now, ModelError):
            now = compact_now_json(None, now)
        elif now is not None:
            now = compact_now_json(compaction_result(now.value), now.error)
        return {"kind": result.kind, "code": _command_code(result), "text": result.text,
                "sourceEventSeq": result.source_event_seq, "compact_now": now, **common}

    def reload(self, args: dict) -> dict:
        """Crash and reopen (spec 1.5): the log becomes a seed (shape-checked) and `session/end-seed` is
        appended unless the log already ends with one; the folds and the engine state start afresh."""
        try:
            session = seeded(self.rt.session.log)
        except ModelError as exc:
            return refusal(exc)
        try:  # the agent's constructor scan (spec 12): dsh's throw makes agent creation fail
            retained = active().restore_retained(session)
        except ModelError as exc:
            return refusal(exc)
        before_len = len(self.rt.session.log)
        self.state.reopen()
        self.rt.reset_state(session)
        self.rt.retained = retained
        return {"generation": session.generation,
                "appended": [event.type for event in session.log[before_len:]]}


def box_labels(outcome) -> tuple[str, ...]:
    """Labels of a `(session, labels)` pair (the `/compact` command path)."""
    return tuple(outcome[1]) if isinstance(outcome, tuple) and len(outcome) > 1 else ()


_SHAPE_ERRORS = (KeyError, TypeError, IndexError, AttributeError)


def _shape_refusal(exc: Exception) -> ModelError:
    """A JS TypeError inside a transition: the log holds a live-appended event whose shape dsh cannot
    read (live appends skip shape checks, spec 1.3 / §15 G18). Refused with rule ``message-shape``,
    seq null; the session is left as it was before the op."""
    return ModelError(f"the log holds an event whose shape dsh cannot read: {type(exc).__name__}: {exc}",
                      rule="message-shape")


def _kind(error, wrote: bool) -> str:
    """Spec 11.2 result kinds: success, the six `ManualCompactionError` codes, ``aborted`` (the caller's
    abort reason); automatic failures are ``refused`` (entry, nothing written) or ``failed``."""
    if error is None:
        return "success"
    if isinstance(error, ManualCompactionError):
        return error.code
    if isinstance(error, AbortError):
        return "aborted"
    return "failed" if wrote else "refused"


def _command_code(result) -> str:
    """Which spec 11.1 handler branch produced the `command/done`."""
    if result.kind == "success":
        return "nothing" if result.source_event_seq is None else "success"
    if result.text.startswith("Usage:"):
        return "usage"
    return _CODE_BY_TEXT.get(result.text, "aborted")
