"""Manual `/compact` and `compactNow` (seed §13; spec 11).

`/compact` is argument-free idle maintenance: an owner-less (turn null) bracket over the retain-0
range, selected-span stability, a durability flush, and six distinct results — busy, cancelled,
changed, summary, commit, persistence — besides success.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace as dc_replace

from .errors import AbortError, CompactionError, ManualCompactionError, ModelError
from .seams import active
from .session import Session, append
from .summarizer import ScriptedSummarizer
from .transaction import NO_FAULTS, Faults, Outcome, TransactionOptions

MESSAGES = {
    "busy": "Compaction is unavailable because this process has an active compaction, or the agent is not idle.",
    "cancelled": "Compaction cancelled.",
    "changed": "The history selected for compaction changed before it could be replaced. The conversation is "
               "unchanged; the attempt is recorded in the session log.",
    "summary": "Compaction could not produce a useful summary. The conversation is unchanged; the attempt is "
               "recorded in the session log.",
    "commit": "Compaction did not finish cleanly; some session history may have changed. Inspect the current "
              "session state before retrying.",
    "persistence": "Compaction finished, but the session could not be saved.",
}


AGENT_ID = "surfacecheck"
"""The id of the agent the protocol's `/compact` runs on (dsh's `ReactLoopAgent.id`): `runMaintenance` names it when
the agent is busy (the cause of `compactNow`'s busy error, spec 11.2)."""


def compact_now(session: Session, *, agent_idle: bool = True, source_command_id: str | None = None,
                summarizer: ScriptedSummarizer = ScriptedSummarizer(), faults: Faults = NO_FAULTS,
                caller_aborted: bool = False, max_tokens: int = 8192, summarization: tuple[str, str] = ("", ""),
                on_caller_abort: Callable[[Session], Session] | None = None) -> Outcome:
    """`BasicCompactionEngine.compactNow` (spec 11.2). value: CompactionResult or None (nothing to compact).
    ``on_caller_abort``: what the caller writes the moment its signal aborts mid-transaction (the `/compact`
    executor's `command/done`, see :func:`compact_command`)."""
    if caller_aborted:
        return Outcome(session, error=AbortError(), aborted=True, labels=("compactNow: caller signal already aborted",))
    if not agent_idle:
        return Outcome(session, error=ManualCompactionError(
            "busy", "manual compaction requires an idle agent with no waking queued work",
            cause=CompactionError(f'agent "{AGENT_ID}" already has active work')),
            labels=("compactNow: agent not idle",))
    seams = active()
    span = seams.select_compactable_range(session, seams.measure(session), 0)
    if span is None:
        return Outcome(session, labels=("compactNow: no compactable range",))
    tx = seams.compact_surface_region(session, span.start, span.end,
                                      TransactionOptions.manual(source_command_id, max_tokens=max_tokens,
                                                                summarization=summarization,
                                                                on_caller_abort=on_caller_abort),
                                      summarizer, faults, False)
    if tx.error is not None and tx.agent_aborted:
        return Outcome(tx.session, error=ManualCompactionError("cancelled", "manual compaction was cancelled",
                                                               cause=tx.error), labels=tx.labels)
    return tx


@dataclass(frozen=True)
class CommandResult:
    """`command/done {kind, text?, sourceEventSeq?}`."""

    kind: str
    text: str
    source_event_seq: int | None = None
    now: Outcome | ModelError | None = field(default=None, compare=False)
    """What `compactNow` settled with (its outcome, or what it threw); None when the handler never called it."""


def compact_command(session: Session, command_id: str, args: str = "", **kw) -> tuple[Session, CommandResult, tuple]:
    """The `/compact` command as the executor runs it: `command/run`, the handler, `command/done` (spec 11.1)."""
    if kw.get("caller_aborted"):
        # the executor throws abortError(signal) before minting a command id: nothing is logged
        return session, CommandResult("error", AbortError().reason), ("/compact: caller signal already aborted",)
    session, _ = append(session, "command/run", {"commandId": command_id, "name": "compact", "args": args,
                                                 "source": {"kind": "user"}})
    labels: tuple = (f"command/run {command_id}: /compact",)
    settled_early: list[bool] = []

    def settle_on_abort(current: Session) -> Session:
        # dsh-commands' `withAbort`: the caller's abort rejects the executor's await at once and it appends
        # `command/done {kind: 'error', text: <abort message>}` while compactNow's task is still running; the
        # task's error close lands after it (DIVERGENCES D5)
        settled_early.append(True)
        after, _ = append(current, "command/done", {"commandId": command_id, "kind": "error",
                                                    "text": AbortError().reason})
        return after

    if args.strip():
        result = CommandResult("error", "Usage: /compact (no arguments)")
    else:
        try:
            outcome = compact_now(session, source_command_id=command_id, on_caller_abort=settle_on_abort, **kw)
        except ModelError as exc:
            # a throw inside the handler (the token meter stuck on this log, spec 4.2): command-compact rethrows what
            # is no ManualCompactionError, the executor settles `command/done {kind: 'error', text: <message>}` and
            # rejects (spec 11.1; DIVERGENCES D7)
            session, _ = append(session, "command/done", {"commandId": command_id, "kind": "error",
                                                          "text": exc.message})
            return session, CommandResult("error", exc.message, now=exc), labels + (
                f"/compact handler threw: {exc.message}; command/done error, the executor rejects",)
        session, labels = outcome.session, labels + outcome.labels
        result = dc_replace(active().command_result(outcome), now=outcome)
    if settled_early:
        return session, result, labels + (f"command/done {result.kind}: {result.text} (at the caller's abort)",)
    done = {"commandId": command_id, "kind": result.kind, "text": result.text}
    if result.source_event_seq is not None:
        done["sourceEventSeq"] = result.source_event_seq
    session, _ = append(session, "command/done", done)
    return session, result, labels + (f"command/done {result.kind}: {result.text}",)


def command_result(outcome: Outcome) -> CommandResult:
    """Handler mapping (spec 11.1): abort → cancelled text; ManualCompactionError code → its text."""
    error = outcome.error
    if outcome.aborted or isinstance(error, AbortError):
        # the executor awaits the handler through withAbort(signal): the abort reason wins (spec 11.1)
        return CommandResult("error", error.reason if isinstance(error, AbortError) else AbortError().reason)
    if isinstance(error, ManualCompactionError):
        return CommandResult("error", MESSAGES[error.code])
    if error is not None:
        raise error
    if outcome.value is None:
        return CommandResult("success", "No compactable history yet.")
    result = outcome.value
    return CommandResult("success", f"Compacted {len(result.shadowed_seqs)} history items "
                                    f"(~{result.shadowed_token_count} tokens).", result.summary_seq)
