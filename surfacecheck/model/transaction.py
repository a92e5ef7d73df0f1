"""The locked compaction transaction `compactSurfaceRegion` (seed §9-10; spec 8).

One transaction, in stages, each a small guarded step that labels what it did (the labels are
what a counterexample trace prints):

  entry (validate span, lock, owner; nothing written on failure) → `compaction/start` (the lock)
  → summary stage (measure, summarize, frame, shrink rule, stability) → commit stage
  (`compaction/summary` + checkpoint replace, adjacent) → `compaction/end` → flush (manual).

Every failure after the start makes exactly one close attempt (spec 8.3). Effects the real
runtime gets from the outside world — the summarizer's answer, another producer's appends, a
failing append or flush, a cancelled signal — come from a :class:`SummaryScript` and
:class:`Faults`, so every branch is reachable deterministically.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .errors import AbortError, CompactionError, ManualCompactionError, ModelError, SurfaceChangedError
from .event import Event
from .region import Selection, lock_is_live
from .seams import active
from .session import Session, append
from .summary_request import record_request, stream_request
from .summarizer import ScriptedSummarizer, summary_event_data, checkpoint_message, run_script, summarization_input, summary_target

AUTOMATIC = "current-turn"
MANUAL = None


@dataclass(frozen=True)
class Faults:
    """Injected failures of the outside world (spec 8.3, 11.2 `commit`/`persistence`, §15 G8/G11)."""

    fail_appends: frozenset = frozenset()  # of 'compaction/summary', 'checkpoint', 'compaction/end', 'error-close'
    flush_fails: bool = False
    cancel_during_flush: bool = False


NO_FAULTS = Faults()


@dataclass(frozen=True)
class TransactionOptions:
    """`CompactionTransactionOptions` (spec 8): automatic = numbered owner + whole-surface stability;
    manual = owner null + selected-span stability + flush + optional source command id."""

    owner: str | None = AUTOMATIC
    stability: str = "whole-surface"
    source_command_id: str | None = None
    flush: bool = False
    max_tokens: int = 8192
    summarization: tuple[str, str] = ("", "")  # the configured pair of summarize()'s policy (spec 8.5)
    session_id: str = "session"
    # What the caller's side writes the moment its signal aborts while the transaction runs: dsh-commands'
    # executor stops awaiting the `/compact` handler then and appends `command/done` (spec 11.1 `withAbort`),
    # so that event lands before the transaction's error close (DIVERGENCES D5). None: nobody listens.
    on_caller_abort: Callable[[Session], Session] | None = field(default=None, compare=False)

    @classmethod
    def manual(cls, source_command_id: str | None = None, **kw) -> "TransactionOptions":
        return cls(owner=MANUAL, stability="selected-span", source_command_id=source_command_id, flush=True, **kw)


@dataclass(frozen=True)
class CompactionResult:
    """`CompactionResult` (spec 8.2 step 14)."""

    compaction_id: str
    source_command_id: str | None
    start_seq: int
    summary_seq: int
    end_seq: int
    summary: tuple
    start: int
    end: int
    shadowed_seqs: tuple[int, ...]
    shadowed_token_count: int


@dataclass(frozen=True)
class Outcome:
    """A transition's result: the session after it, its value or error, whether the caller's signal
    ended aborted, and the labelled steps it took."""

    session: Session
    value: object = None
    error: ModelError | None = None
    aborted: bool = False
    labels: tuple[str, ...] = ()
    agent_aborted: bool = False
    logged: tuple[dict, ...] = ()  # what a listener wrote to its logger ({level, text}; spec 9.3, 10.2)


class _AppendRefused(ModelError):
    """An injected append failure (a vetoing invariant, a full disk)."""

    rule = "append-refused"


def _append(session: Session, faults: Faults, fault_key: str, type_: str, data, **kw) -> tuple[Session, Event]:
    if fault_key in faults.fail_appends:
        raise _AppendRefused(f"append of {type_} refused (injected fault: {fault_key})")
    return append(session, type_, data, **kw)


def compaction_id_for(session: Session) -> str:
    """Deterministic stand-in for `randomUUID()`: named after the start's seq."""
    return f"compaction-{session.next_seq}"


def compact_surface_region(
    session: Session,
    start: int,
    end: int,
    options: TransactionOptions,
    summarizer: ScriptedSummarizer = ScriptedSummarizer(),
    faults: Faults = NO_FAULTS,
    caller_aborted: bool = False,
) -> Outcome:
    """`compactSurfaceRegion` (spec 8.1-8.3). Entry errors return with the session untouched."""
    labels: list[str] = []
    manual = options.owner is MANUAL
    if manual and caller_aborted:
        return Outcome(session, error=AbortError(), aborted=True, labels=("entry: caller signal already aborted",))
    # -- 8.1 synchronous entry ----------------------------------------------------------------
    try:
        seams = active()
        selection = seams.validate_surface_region(session, start, end)
        entry = seams.inspect_entry_state(session)
        if lock_is_live(entry):
            raise ManualCompactionError(
                "busy", "compaction: compaction already in progress; the session compaction lock is already active")
        if manual and entry.open_turn is not None:
            raise ManualCompactionError("busy", "manual compaction: the session already has an open turn")
        if not manual and entry.open_turn is None:
            raise CompactionError("compactRegion: no open turn — automatic compaction events must be enclosed in a turn")
    except ModelError as error:
        return Outcome(session, error=error, aborted=caller_aborted, labels=(f"entry refused: {error.message}",))
    owner = None if manual else entry.open_turn
    compaction_id = compaction_id_for(session)
    lifecycle = {"compactionId": compaction_id}
    if options.source_command_id is not None:
        lifecycle["sourceCommandId"] = options.source_command_id
    lifecycle["turn"] = owner
    session, start_event = append(session, "compaction/start", dict(lifecycle))
    labels.append(f"compaction/start at seq {start_event.seq}: lock taken, owner "
                  + ("standalone" if manual else f"turn {owner}") + f", span {start}-{end}")
    script = summarizer.script_for(session)

    stage, closing, closed, failure, result = "summary", False, False, None, None
    agent_aborted = False
    try:
        # -- 8.2 step 7: prepare ---------------------------------------------------------------
        before = seams.measure(session)
        selected = before.nodes[selection.start_index : selection.end_index + 1]
        if tuple(seq for seq, _ in selected) != selection.shadowed:
            raise SurfaceChangedError("compaction: selected surface changed before summarization began")
        shadowed_tokens = sum(price for _, price in selected)
        inp = summarization_input(session, selection.shadowed)
        # -- step 8: summarize (while it runs, other producers may append) ---------------------
        target = summary_target(session, options.summarization, summarizer.target)
        record_request(stream_request(inp.system, inp.tools, inp.messages, *target, options.max_tokens))
        for type_, data, op, *sources in script.concurrent:
            kw = {} if op is None else {"surface_op": op}
            if sources:
                kw["source_event_seqs"] = list(sources[0])
            elif isinstance(op, dict) and op.get("start") in session.nodes and op.get("end") in session.nodes:
                # a well-behaved producer cites what it shadows (spec 1.4 step 3)
                nodes = session.nodes
                kw["source_event_seqs"] = list(nodes[nodes.index(op["start"]): nodes.index(op["end"]) + 1])
            session, extra = append(session, type_, data, **kw)
            labels.append(f"while summarizing: another producer appended {type_} at seq {extra.seq}")
        if script.outcome in ("cancel", "agent-cancel"):
            caller_aborted = True  # the transaction's signal (manual: any(agent, caller))
            agent_aborted = script.outcome == "agent-cancel"
            labels.append("summary stage: signal aborted; the summarizer rejected")
            if not agent_aborted:
                session = _caller_aborts(session, options, labels)
            raise AbortError()
        if script.outcome == "late-cancel":
            caller_aborted = True
            labels.append("summary stage: signal aborted but the summarizer returned anyway")
            session = _caller_aborts(session, options, labels)
        summarized = run_script(script, inp, *(summarizer.reroute or target), options.max_tokens)
        # -- step 9-10: frame and the shrink rule ----------------------------------------------
        checkpoint = checkpoint_message(list(summarized.summary), compaction_id, options.source_command_id,
                                        f"checkpoint-{compaction_id}")
        framed = seams.checkpoint_price(checkpoint)
        if framed >= shadowed_tokens:
            raise CompactionError(f"summary is not smaller than the shadowed content ({framed} estimated framed "
                                  f"tokens >= {shadowed_tokens})")
        labels.append(f"summary stage: framed summary {framed} < shadowed {shadowed_tokens} tokens")
        # -- step 11-12: cancellation (manual) and stability -----------------------------------
        if manual and caller_aborted:
            raise AbortError()
        _assert_stable(session, options, selection, before, selected)
        # -- step 13: commit, adjacent ----------------------------------------------------------
        stage = "commit"
        summary_data = summary_event_data(summarized, summarizer.hook,
                                          {k: v for k, v in lifecycle.items() if k != "turn"},
                                          {"start": start, "end": end}, list(selection.shadowed), shadowed_tokens)
        session, summary_event = _append(session, faults, "compaction/summary", "compaction/summary", summary_data)
        labels.append(f"compaction/summary at seq {summary_event.seq}: shadow price {shadowed_tokens} armed for "
                      f"{start}-{end}")
        session, replace_event = _append(
            session, faults, "checkpoint", "user/message", checkpoint,
            surface_op={"op": "replace", "start": start, "end": end},
            source_event_seqs=[start_event.seq, summary_event.seq, *selection.shadowed])
        labels.append(f"checkpoint replace at seq {replace_event.seq}: {len(selection.shadowed)} nodes -> 1, "
                      f"generation {session.generation}")
        # -- step 14: close ----------------------------------------------------------------------
        closing = True
        session, end_event = _append(session, faults, "compaction/end", "compaction/end", dict(lifecycle))
        closed = True
        labels.append(f"compaction/end at seq {end_event.seq}: lock released")
        result = CompactionResult(compaction_id, options.source_command_id, start_event.seq, summary_event.seq,
                                  end_event.seq, summarized.summary, start, end, selection.shadowed, shadowed_tokens)
    except ModelError as error:
        failure = (error, "commit" if closing else stage)
        if not closing:
            closing = True
            try:
                session, end_event = _append(session, faults, "error-close", "compaction/end",
                                             {**lifecycle, "error": _error_chain(error)})
                closed = True
                labels.append(f"compaction/end at seq {end_event.seq} with error: {error.message}")
            except ModelError as close_error:
                failure = (close_error, "commit")
                labels.append("error close refused: the compaction/start stays unmatched (live lock)")
        else:
            labels.append("success close refused: summary and checkpoint landed, the lock is orphaned")
    # -- 8.3: flush, cancellation precedence, classification --------------------------------------
    flush_failure = None
    if closed and options.flush:
        if faults.flush_fails:
            flush_failure = CompactionError("flush failed (injected fault)")  # a plain Error, as a store throws
            labels.append("flush failed")
        else:
            labels.append("flush: durable")
        if faults.cancel_during_flush:
            caller_aborted = True
            labels.append("caller signal aborted during flush")
            session = _caller_aborts(session, options, labels)
    if manual and caller_aborted:
        return Outcome(session, error=AbortError(), aborted=True, labels=tuple(labels), agent_aborted=agent_aborted)
    if failure is not None:
        error, failed_stage = failure
        if manual:
            error = _manual_failure(error, failed_stage)
        return Outcome(session, error=error, aborted=caller_aborted, labels=tuple(labels), agent_aborted=agent_aborted)
    if flush_failure is not None:
        return Outcome(session, error=ManualCompactionError(
            "persistence", "manual compaction durability checkpoint failed", cause=flush_failure),
            aborted=caller_aborted, labels=tuple(labels))
    return Outcome(session, value=result, aborted=caller_aborted, labels=tuple(labels))


def _caller_aborts(session: Session, options: TransactionOptions, labels: list[str]) -> Session:
    """The caller's signal aborts here: its listener (if any) writes what it writes at that moment."""
    if options.on_caller_abort is None:
        return session
    after = options.on_caller_abort(session)
    labels.append(f"the caller's abort listener wrote {len(after.log) - len(session.log)} event(s) here")
    return after


def _assert_stable(session: Session, options: TransactionOptions, selection: Selection, before, selected) -> None:
    """Spec 8.2 step 12: whole-surface (automatic) or selected-span (manual) stability."""
    seams = active()
    if options.stability == "whole-surface":
        if seams.measure(session).nodes != before.nodes:
            raise SurfaceChangedError("compaction: session surface changed during summarization")
        return
    try:
        current = seams.validate_surface_region(session, selection.start, selection.end)
    except ModelError as error:
        raise SurfaceChangedError("compaction: the selected span is no longer a valid replacement target") from error
    if current.shadowed != selection.shadowed:
        raise SurfaceChangedError("compaction: the selected span changed during summarization")
    if seams.measure(session).nodes[current.start_index : current.end_index + 1] != selected:
        raise SurfaceChangedError("compaction: the selected span was rewritten during summarization")


def _manual_failure(error: ModelError, stage: str) -> ManualCompactionError:
    """`throwManualFailure` (spec 8.3): commit stage → commit; SurfaceChangedError → changed; else summary."""
    if stage == "commit":
        return ManualCompactionError("commit", "manual compaction did not commit cleanly", cause=error)
    if isinstance(error, SurfaceChangedError):
        return ManualCompactionError("changed", "the compacted history changed during manual compaction", cause=error)
    return ManualCompactionError("summary", "manual compaction could not produce a smaller summary", cause=error)


def _error_chain(error: BaseException) -> str:
    """`errorChain` (dsh-llm): the message, then each distinct cause appended with ': '."""
    message = str(error) or type(error).__name__
    cause = error.__cause__ or getattr(error, "cause", None)
    if cause is None:
        return message
    rendered = _error_chain(cause)
    return message if rendered == message else f"{message}: {rendered}"
