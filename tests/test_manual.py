"""Manual `/compact` and `compactNow` (model/manual.py; spec 11, 8.3).

Ported from dsh's `command-compact.spec.ts` (texts, usage error, no-history) and
`manual-compaction.spec.ts` (result classification). Expected texts are copied from the spec.
"""
from __future__ import annotations

import pytest

from surfacecheck.model.errors import AbortError, ManualCompactionError
from surfacecheck.model.manual import MESSAGES, CommandResult, command_result, compact_command, compact_now
from surfacecheck.model.meter import measure
from surfacecheck.model.session import Session, append
from surfacecheck.model.summarizer import ScriptedSummarizer, SummaryScript
from surfacecheck.model.transaction import Faults, Outcome

P, M = "prov", "mod"
SUMMARY = "## Current Work\n- older history condensed"
TEXTS = {
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
BRACKET = ["compaction/start", "compaction/summary", "user/message", "compaction/end"]


from builders import Log  # noqa: E402  (shared hand-built log)


def closed_conversation(turns=2) -> Session:
    """Closed turns of prompt + answer; the session is idle (no open turn)."""
    log = Log()
    for turn in range(1, turns + 1):
        log.add("turn/start", {"turn": turn})
        log.add("step/start", {"turn": turn, "step": 1})
        log.user(f"older conversation history {turn} " * 30)
        if turn == 1:
            log.add("request/header", {"header": {"config": {"provider": P, "model": M}}, "reason": "initial"})
        log.assistant(turn, 1, f"answer {turn} " * 20)
        log.add("step/end", {"turn": turn, "step": 1})
        log.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return log.session


def scripted(**kw) -> ScriptedSummarizer:
    return ScriptedSummarizer(default=SummaryScript(**kw))


def added(before: Session, after: Session):
    return after.log[len(before.log):]


def done_of(session: Session) -> dict:
    event = session.log[-1]
    assert event.type == "command/done"
    return event.data


# -- success -------------------------------------------------------------------------------------
def test_messages_table_is_exact():
    assert MESSAGES == TEXTS


def test_compact_now_success_is_a_standalone_retain_zero_bracket():
    session = closed_conversation(2)
    nodes = session.nodes
    prices = dict(measure(session).nodes)
    out = compact_now(session, source_command_id="cmd-1", summarizer=scripted(text=SUMMARY))
    assert out.error is None and not out.aborted
    result = out.value
    # retain 0: every node but the newest
    assert (result.start, result.end, result.shadowed_seqs) == (nodes[0], nodes[-2], nodes[:-1])
    assert result.shadowed_token_count == sum(prices[s] for s in nodes[:-1])
    events = added(session, out.session)
    assert [e.type for e in events] == BRACKET
    assert events[0].data == {"compactionId": result.compaction_id, "sourceCommandId": "cmd-1", "turn": None}
    assert events[3].data == {"compactionId": result.compaction_id, "sourceCommandId": "cmd-1", "turn": None}
    assert events[1].data["sourceCommandId"] == "cmd-1"
    assert events[2].data["source"]["sourceCommandId"] == "cmd-1"
    assert not any(e.type == "turn/start" for e in events)  # no turn number consumed


def test_compact_command_success_texts_and_lifecycle():
    session = closed_conversation(3)
    nodes = session.nodes
    prices = dict(measure(session).nodes)
    after, result, _ = compact_command(session, "cmd-9", "", summarizer=scripted(text=SUMMARY))
    events = added(session, after)
    assert [e.type for e in events] == ["command/run", *BRACKET, "command/done"]
    assert events[0].data == {"commandId": "cmd-9", "name": "compact", "args": "", "source": {"kind": "user"}}
    count, tokens = len(nodes) - 1, sum(prices[s] for s in nodes[:-1])
    text = f"Compacted {count} history items (~{tokens} tokens)."
    assert result == CommandResult("success", text, events[2].seq)
    assert events[-1].data == {"commandId": "cmd-9", "kind": "success", "text": text, "sourceEventSeq": events[2].seq}
    assert events[1].data["sourceCommandId"] == "cmd-9"


def test_whitespace_only_arguments_run_the_command():
    session = closed_conversation(2)
    after, result, _ = compact_command(session, "cmd-1", "  \t ", summarizer=scripted(text=SUMMARY))
    assert result.kind == "success" and result.text.startswith("Compacted 3 history items (~")


# -- no history, usage ------------------------------------------------------------------------------
@pytest.mark.parametrize("build", ["empty", "single-node", "single-node-with-live-lock"])
def test_no_compactable_history(build):
    if build == "empty":
        session = Session()
    else:
        log = Log()
        log.user("only prompt " * 50)
        if build == "single-node-with-live-lock":
            # range selection precedes the lock check: nothing to compact wins over busy
            log.add("compaction/start", {"compactionId": "orphan", "turn": None})
        session = log.session
    out = compact_now(session, summarizer=scripted(text=SUMMARY))
    assert out.value is None and out.error is None and out.session is session
    after, result, _ = compact_command(session, "cmd-1")
    assert result == CommandResult("success", "No compactable history yet.")
    assert [e.type for e in added(session, after)] == ["command/run", "command/done"]
    assert done_of(after) == {"commandId": "cmd-1", "kind": "success", "text": "No compactable history yet."}


def test_arguments_are_a_usage_error_without_a_backend_call():
    session = closed_conversation(2)
    after, result, _ = compact_command(session, "cmd-2", " now", summarizer=scripted(text=SUMMARY))
    assert result == CommandResult("error", "Usage: /compact (no arguments)")
    events = added(session, after)
    assert [e.type for e in events] == ["command/run", "command/done"]
    assert events[0].data["args"] == " now"
    assert events[1].data == {"commandId": "cmd-2", "kind": "error", "text": "Usage: /compact (no arguments)"}
    assert after.generation == session.generation


# -- the six failure kinds ----------------------------------------------------------------------------
def test_busy_when_the_agent_is_not_idle():
    session = closed_conversation(2)
    out = compact_now(session, agent_idle=False, summarizer=scripted(text=SUMMARY))
    assert isinstance(out.error, ManualCompactionError) and out.error.code == "busy"
    assert str(out.error) == "manual compaction requires an idle agent with no waking queued work"
    assert out.session is session
    after, result, _ = compact_command(session, "cmd-1", agent_idle=False)
    assert result == CommandResult("error", TEXTS["busy"])
    assert [e.type for e in added(session, after)] == ["command/run", "command/done"]


def test_busy_with_a_live_lock_and_with_an_open_turn():
    session = closed_conversation(2)
    log = Log(session)
    log.add("compaction/start", {"compactionId": "live", "turn": None})
    out = compact_now(log.session, summarizer=scripted(text=SUMMARY))
    assert out.error.code == "busy"
    assert str(out.error) == "compaction: compaction already in progress; the session compaction lock is already active"
    after, result, _ = compact_command(log.session, "cmd-1")
    assert result.text == TEXTS["busy"]
    log = Log(session)
    log.add("turn/start", {"turn": 3})
    out = compact_now(log.session, summarizer=scripted(text=SUMMARY))
    assert out.error.code == "busy" and str(out.error) == "manual compaction: the session already has an open turn"
    assert out.session is log.session


def test_cancelled_when_the_agent_cancels_maintenance():
    session = closed_conversation(2)
    out = compact_now(session, summarizer=scripted(outcome="agent-cancel"))
    assert isinstance(out.error, ManualCompactionError) and out.error.code == "cancelled"
    assert str(out.error) == "manual compaction was cancelled"
    assert [e.type for e in added(session, out.session)] == ["compaction/start", "compaction/end"]
    after, result, _ = compact_command(session, "cmd-1", summarizer=scripted(outcome="agent-cancel"))
    assert result == CommandResult("error", TEXTS["cancelled"])
    assert [e.type for e in added(session, after)] == [
        "command/run", "compaction/start", "compaction/end", "command/done"]


@pytest.mark.parametrize("outcome", ["failure", "empty", "image", "truncated"])
def test_summary_failures(outcome):
    session = closed_conversation(2)
    out = compact_now(session, summarizer=scripted(outcome=outcome))
    assert out.error.code == "summary"
    after, result, _ = compact_command(session, "cmd-1", summarizer=scripted(outcome=outcome))
    assert result == CommandResult("error", TEXTS["summary"])
    assert done_of(after) == {"commandId": "cmd-1", "kind": "error", "text": TEXTS["summary"]}
    assert after.generation == session.generation


def test_non_shrinking_summary_is_a_summary_failure():
    session = closed_conversation(2)
    after, result, _ = compact_command(session, "cmd-1", summarizer=scripted(ratio=3.0))
    assert result.text == TEXTS["summary"]


@pytest.mark.parametrize("fault", ["compaction/summary", "checkpoint", "compaction/end", "error-close"])
def test_commit_failures(fault):
    session = closed_conversation(2)
    summarizer = scripted(outcome="failure") if fault == "error-close" else scripted(text=SUMMARY)
    faults = Faults(fail_appends=frozenset({fault}))
    out = compact_now(session, summarizer=summarizer, faults=faults)
    assert isinstance(out.error, ManualCompactionError) and out.error.code == "commit"
    assert str(out.error) == "manual compaction did not commit cleanly"
    after, result, _ = compact_command(session, "cmd-1", summarizer=summarizer, faults=faults)
    assert result == CommandResult("error", TEXTS["commit"])
    kinds = [e.type for e in added(session, after)]
    expected = {
        "compaction/summary": ["compaction/start", "compaction/end"],
        "checkpoint": ["compaction/start", "compaction/summary", "compaction/end"],
        "compaction/end": ["compaction/start", "compaction/summary", "user/message"],
        "error-close": ["compaction/start"],
    }[fault]
    assert kinds == ["command/run", *expected, "command/done"]


def test_persistence_failure_after_a_committed_bracket():
    session = closed_conversation(2)
    out = compact_now(session, summarizer=scripted(text=SUMMARY), faults=Faults(flush_fails=True))
    assert out.error.code == "persistence" and str(out.error) == "manual compaction durability checkpoint failed"
    after, result, _ = compact_command(session, "cmd-1", summarizer=scripted(text=SUMMARY),
                                       faults=Faults(flush_fails=True))
    assert result == CommandResult("error", TEXTS["persistence"])
    assert [e.type for e in added(session, after)] == ["command/run", *BRACKET, "command/done"]
    assert after.generation == session.generation + 1


@pytest.mark.parametrize("code", sorted(TEXTS))
def test_every_manual_error_code_maps_to_its_text(code):
    outcome = Outcome(Session(), error=ManualCompactionError(code, "backend detail"))
    assert command_result(outcome) == CommandResult("error", TEXTS[code])


def test_unexpected_errors_are_rethrown():
    bug = RuntimeError("unexpected backend bug")
    with pytest.raises(RuntimeError):
        command_result(Outcome(Session(), error=bug))


def test_changed_when_the_selected_span_is_rewritten():
    session = closed_conversation(2)
    head = session.nodes[0]
    rival = ("user/message", {"content": [{"type": "text", "text": "competing replacement"}],
                              "source": {"kind": "plugin", "plugin": "rival"}, "role": "user", "id": "rival"},
             {"op": "replace", "start": head, "end": head})
    after, result, _ = compact_command(session, "cmd-1", summarizer=scripted(text=SUMMARY, concurrent=(rival,)))
    assert result == CommandResult("error", TEXTS["changed"])


# -- caller cancellation ------------------------------------------------------------------------------
def test_pre_aborted_caller_signal_wins_before_anything_is_written():
    for session in (closed_conversation(2), Session()):
        out = compact_now(session, caller_aborted=True, summarizer=scripted(text=SUMMARY))
        assert isinstance(out.error, AbortError) and out.aborted and out.session is session
    log = Log(closed_conversation(2))
    log.add("turn/start", {"turn": 3})  # would be busy; the abort still wins
    out = compact_now(log.session, caller_aborted=True, agent_idle=False)
    assert isinstance(out.error, AbortError)


def test_caller_cancel_during_summary_error_closes():
    session = closed_conversation(2)
    out = compact_now(session, summarizer=scripted(outcome="cancel"))
    assert isinstance(out.error, AbortError) and out.aborted
    events = added(session, out.session)
    assert [e.type for e in events] == ["compaction/start", "compaction/end"]
    assert "error" in events[1].data and events[1].data["turn"] is None


def test_caller_cancel_during_flush_reports_the_abort_although_committed():
    session = closed_conversation(2)
    out = compact_now(session, summarizer=scripted(text=SUMMARY), faults=Faults(cancel_during_flush=True))
    assert isinstance(out.error, AbortError) and out.aborted
    assert [e.type for e in added(session, out.session)] == BRACKET


def test_command_with_a_pre_aborted_signal_logs_nothing():
    session = closed_conversation(2)
    after, _, _ = compact_command(session, "cmd-1", caller_aborted=True, summarizer=scripted(text=SUMMARY))
    assert after.log == session.log


@pytest.mark.parametrize("script, faults, order", [
    (SummaryScript(outcome="cancel"), Faults(),
     ["command/run", "compaction/start", "command/done", "compaction/end"]),
    (SummaryScript(outcome="late-cancel", text=SUMMARY), Faults(),
     ["command/run", "compaction/start", "command/done", "compaction/end"]),
    (SummaryScript(text=SUMMARY), Faults(cancel_during_flush=True),
     ["command/run", "compaction/start", "compaction/summary", "user/message", "compaction/end", "command/done"]),
], ids=["during-summary", "late-cancel", "during-flush"])
def test_command_caller_abort_records_the_abort_message(script, faults, order):
    """dsh-commands' executor settles `command/done` the moment the caller's signal aborts (withAbort), so a
    cancel during the summary writes it before compactNow's error close (DIVERGENCES D5)."""
    session = closed_conversation(2)
    after, result, _ = compact_command(session, "cmd-1", summarizer=ScriptedSummarizer(default=script),
                                       faults=faults)
    new = added(session, after)
    assert [event.type for event in new] == order
    done = next(event for event in new if event.type == "command/done")
    assert done.data == {"commandId": "cmd-1", "kind": "error", "text": "This operation was aborted"}
    assert (result.kind, result.text) == ("error", "This operation was aborted")
    assert "error" in new[-1].data or order[-1] == "command/done"  # the close after done is the error close
