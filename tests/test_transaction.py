"""The locked compaction transaction `compact_surface_region` (model/transaction.py; spec 8, §15 G11/G12).

Small sessions are built by hand with `model.session.append`. Scenarios are ported from dsh's
`compaction-basic.spec.ts` ("compaction region transaction") and `manual-compaction.spec.ts`
("compactNow transaction and failure classification"); every expected value is derived from the
spec (event order, data fields, error texts, the 98-token frame), not read back from the model.
"""
from __future__ import annotations

import math

import pytest

from surfacecheck.model.errors import (
    AbortError,
    CompactionError,
    ManualCompactionError,
    SummarizerError,
    SurfaceChangedError,
)
from surfacecheck.model.estimate import estimate_message
from surfacecheck.model.meter import measure
from surfacecheck.model.region import assert_no_active_compaction
from surfacecheck.model.session import END_SEED, Session, append, derive_messages, replay_events, seeded
from surfacecheck.model.summarizer import (
    CLOSE_TAG,
    OPEN_TAG,
    PREAMBLE,
    ScriptedSummarizer,
    SummaryScript,
    checkpoint_message,
    frame_summary,
    summarization_input,
    summary_request,
    summary_target,
)
from surfacecheck.model.policy import routed_target
from surfacecheck.model.transaction import Faults, TransactionOptions, compact_surface_region

PROVIDER, MODEL = "prov", "mod"
SUMMARY = "## Current Work\n- condensed the repository inspection"
LOCK_MESSAGE = "compaction: compaction already in progress; the session compaction lock is already active"


# -- a tiny hand-built log ----------------------------------------------------------------------
from builders import Log  # noqa: E402  (shared hand-built log)


def tool_turn(close: bool = False) -> tuple[Session, dict]:
    """Turn 1: prompt U, a tool step (A1 call + R1), a text step A2; open unless `close`."""
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    u = log.user("please inspect the repository " * 20)
    log.header()
    a1 = log.assistant(1, 1, "reading", calls=["c1"])
    r1 = log.result(1, 1, "c1", "file contents " * 30)
    log.step_end(1, 1)
    log.step_start(1, 2)
    a2 = log.assistant(1, 2, "done reading " * 10)
    log.step_end(1, 2)
    if close:
        log.turn_end(1)
    return log.session, {"u": u, "a1": a1, "r1": r1, "a2": a2}


def _unrouted_span() -> tuple[Session, int, int]:
    """:func:`tool_turn`'s first step with no request/header logged: the span from its prompt to its result."""
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    u = log.user("please inspect the repository " * 20)
    log.assistant(1, 1, "reading", calls=["c1"])
    r1 = log.result(1, 1, "c1", "file contents " * 30)
    log.step_end(1, 1)
    log.step_start(1, 2)
    return log.session, u, r1


def price_of(session: Session, seq: int) -> int:
    return dict(measure(session).nodes)[seq]


def new_events(before: Session, after: Session):
    return after.log[len(before.log):]


def types(events) -> list[str]:
    return [e.type for e in events]


def scripted(**kw) -> ScriptedSummarizer:
    return ScriptedSummarizer(default=SummaryScript(**kw))


def framed_price(text: str) -> int:
    return 98 + math.ceil(len(text) / 4) + 4


AUTO = TransactionOptions()
MANUAL = TransactionOptions.manual()


# -- the frame (spec 8.2 step 9, Appendix A) -------------------------------------------------------
def test_checkpoint_frame_costs_98_tokens():
    assert len(PREAMBLE) == 300
    assert PREAMBLE.startswith("This is an automatically generated checkpoint condensing an earlier span")
    framed = frame_summary([{"type": "text", "text": "s"}])
    assert framed[0] == {"type": "text", "text": PREAMBLE + "\n\n<compacted-summary>"}
    assert framed[-1] == {"type": "text", "text": "</compacted-summary>"}
    assert (OPEN_TAG, CLOSE_TAG) == ("\n\n<compacted-summary>", "</compacted-summary>")
    assert estimate_message(checkpoint_message([], "c", None, "id")) == 98
    for text in ("x", "x" * 4, "x" * 5, SUMMARY):
        message = checkpoint_message([{"type": "text", "text": text}], "c", "cmd", "id")
        assert estimate_message(message) == framed_price(text)
        assert message["source"] == {"kind": "plugin", "plugin": "compact", "compactionId": "c",
                                     "sourceCommandId": "cmd"}
        assert message["role"] == "user"


# -- success bracket (spec 8.2 steps 6-14) -----------------------------------------------------------
def test_success_bracket_shape_and_prices():
    session, s = tool_turn()
    shadowed = [s["u"], s["a1"], s["r1"]]
    shadow_price = sum(price_of(session, seq) for seq in shadowed)
    out = compact_surface_region(session, s["u"], s["r1"], AUTO, scripted(text=SUMMARY, usage=(40, 5)))
    assert out.error is None and not out.aborted
    events = new_events(session, out.session)
    assert types(events) == ["compaction/start", "compaction/summary", "user/message", "compaction/end"]
    start, summary, checkpoint, end = events
    assert [e.seq for e in events] == list(range(len(session.log), len(session.log) + 4))
    cid = start.data["compactionId"]
    assert start.data == {"compactionId": cid, "turn": 1}
    assert end.data == {"compactionId": cid, "turn": 1}
    data = summary.data
    assert data["compactionId"] == cid and "turn" not in data and "sourceCommandId" not in data
    assert data["summary"] == [{"type": "text", "text": SUMMARY}]
    assert data["shadowedRange"] == {"start": s["u"], "end": s["r1"]}
    assert data["shadowedSeqs"] == shadowed
    assert data["shadowedTokenCount"] == shadow_price
    assert data["maxTokens"] == 8192
    assert data["usage"] == {"inputTokens": 40, "outputTokens": 5}
    assert (data["provider"], data["model"]) == routed_target(session)  # spec 8.5: no pair configured
    assert checkpoint.surface_op == {"op": "replace", "start": s["u"], "end": s["r1"]}
    assert checkpoint.source_event_seqs == [start.seq, summary.seq, *shadowed]
    assert checkpoint.data["content"] == frame_summary([{"type": "text", "text": SUMMARY}])
    assert checkpoint.data["source"] == {"kind": "plugin", "plugin": "compact", "compactionId": cid}
    # the checkpoint is priced 98 + the summary blocks and replaces the span in place
    assert price_of(out.session, checkpoint.seq) == framed_price(SUMMARY)
    assert out.session.nodes == (checkpoint.seq, s["a2"])
    assert out.session.generation == session.generation + 1
    result = out.value
    assert (result.start_seq, result.summary_seq, result.end_seq) == (start.seq, summary.seq, end.seq)
    assert (result.start, result.end, result.shadowed_seqs) == (s["u"], s["r1"], tuple(shadowed))
    assert result.shadowed_token_count == shadow_price and result.compaction_id == cid
    assert_no_active_compaction(out.session, "compaction")
    # the landed log replays and reloads to the same model-visible messages
    assert replay_events(out.session.log).nodes == out.session.nodes
    assert derive_messages(seeded(out.session.log)) == derive_messages(out.session)


def test_manual_bracket_carries_the_source_command_and_no_turn():
    session, s = tool_turn(close=True)
    out = compact_surface_region(session, s["u"], s["r1"], TransactionOptions.manual("cmd-7"), scripted(text=SUMMARY))
    assert out.error is None
    start, summary, checkpoint, end = new_events(session, out.session)
    cid = start.data["compactionId"]
    assert start.data == {"compactionId": cid, "sourceCommandId": "cmd-7", "turn": None}
    assert end.data == {"compactionId": cid, "sourceCommandId": "cmd-7", "turn": None}
    assert list(summary.data)[:2] == ["compactionId", "sourceCommandId"]
    assert summary.data["sourceCommandId"] == "cmd-7"
    assert checkpoint.data["source"] == {"kind": "plugin", "plugin": "compact", "compactionId": cid,
                                         "sourceCommandId": "cmd-7"}
    assert out.value.source_command_id == "cmd-7"
    assert not any(e.type == "turn/start" for e in new_events(session, out.session))


def test_summarization_input_replays_the_logged_header_and_drops_null_messages():
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    u = log.user("question " * 40)
    log.header(system="CONVERSATION SYSTEM", tools=[{"name": "do", "description": "d", "parameters": {}}])
    empty = log.assistant(1, 1)  # empty content derives no message
    log.step_end(1, 1)
    inp = summarization_input(log.session, (u, empty))
    assert inp.system == "CONVERSATION SYSTEM"
    assert inp.tools == ({"name": "do", "description": "d", "parameters": {}},)
    assert inp.messages == (log.session.log[u].data,)
    request = summary_request(inp, "p", "m", 512, "sid")
    assert request["messages"][:-1] == [log.session.log[u].data]
    instruction = request["messages"][-1]
    assert instruction["source"] == {"kind": "plugin", "plugin": "dsh-compaction-basic"}
    assert instruction["role"] == "user"
    words = instruction["content"][0]["text"]
    for section in ("Primary Request and Intent", "Key Technical Concepts", "Files and Code", "Errors and Fixes",
                    "Pending Jobs", "Current Work", "Next Step", "Critical Context", "<compacted-summary>"):
        assert section in words
    assert (request["maxTokens"], request["purpose"], request["sessionId"]) == (512, "compaction", "sid")


# -- shrink rule (spec 8.2 step 10, §15 G7) ------------------------------------------------------------
def test_shrink_rule_error_text_and_error_close():
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    u = log.user("x" * 48)  # 12 + 4 + 4 = 20 tokens
    log.header()
    log.assistant(1, 1, "answer")
    log.step_end(1, 1)
    session = log.session
    assert price_of(session, u) == 20
    out = compact_surface_region(session, u, u, AUTO, scripted(text="x"))
    assert type(out.error) is CompactionError
    message = "summary is not smaller than the shadowed content (103 estimated framed tokens >= 20)"
    assert str(out.error) == message
    events = new_events(session, out.session)
    assert types(events) == ["compaction/start", "compaction/end"]
    assert events[1].data == {"compactionId": events[0].data["compactionId"], "turn": 1, "error": message}
    assert out.session.nodes == session.nodes and out.session.generation == session.generation
    assert_no_active_compaction(out.session, "compaction")


def test_shrink_rule_rejects_equality_and_accepts_one_less():
    session, s = tool_turn()
    shadow = price_of(session, s["u"])
    equal = "y" * (4 * (shadow - 102))  # framed = 98 + (shadow - 102) + 4 = shadow
    assert framed_price(equal) == shadow
    out = compact_surface_region(session, s["u"], s["u"], AUTO, scripted(text=equal))
    assert str(out.error) == (f"summary is not smaller than the shadowed content ({shadow} estimated framed "
                              f"tokens >= {shadow})")
    smaller = "y" * (4 * (shadow - 103))
    out = compact_surface_region(session, s["u"], s["u"], AUTO, scripted(text=smaller))
    assert out.error is None and price_of(out.session, out.session.nodes[0]) == shadow - 1


def test_digest_ratio_one_is_not_smaller():
    session, s = tool_turn()
    out = compact_surface_region(session, s["u"], s["r1"], AUTO, scripted(ratio=1.5))
    assert str(out.error).startswith("summary is not smaller than the shadowed content (")


# -- every SummaryScript outcome (spec 8.5, 8.3) -------------------------------------------------------
FAILURES = {
    "failure": "summarizer request failed (scripted)",
    "empty": "summarization produced no text summary content",
    "image": "compaction summary cannot contain image output",
    "truncated": "summarization truncated at the token cap (incomplete checkpoint)",
}


@pytest.mark.parametrize("outcome", sorted(FAILURES))
def test_summarizer_failures_close_with_error_and_leave_the_surface(outcome):
    session, s = tool_turn()
    out = compact_surface_region(session, s["u"], s["r1"], AUTO, scripted(outcome=outcome))
    assert isinstance(out.error, SummarizerError)
    assert str(out.error) == FAILURES[outcome]
    events = new_events(session, out.session)
    assert types(events) == ["compaction/start", "compaction/end"]
    assert events[1].data["error"] == FAILURES[outcome] and events[1].data["turn"] == 1
    assert out.session.nodes == session.nodes and out.session.generation == session.generation
    assert not out.aborted
    assert_no_active_compaction(out.session, "compaction")


def test_summarizer_error_codes():
    session, s = tool_turn()
    codes = {}
    for outcome in ("failure", "truncated", "image"):
        codes[outcome] = compact_surface_region(session, s["u"], s["r1"], AUTO, scripted(outcome=outcome)).error.code
    assert codes == {"failure": "SCRIPTED_FAILURE", "truncated": "MAX_TOKENS", "image": "UNSUPPORTED_CONTENT"}


def test_whitespace_only_summary_is_rejected():
    session, s = tool_turn()
    out = compact_surface_region(session, s["u"], s["r1"], AUTO, scripted(text=" \n\t "))
    assert str(out.error) == "summarization produced no text summary content"
    assert types(new_events(session, out.session)) == ["compaction/start", "compaction/end"]


@pytest.mark.parametrize("outcome", sorted(FAILURES))
def test_manual_summarizer_failures_classify_as_summary(outcome):
    session, s = tool_turn(close=True)
    out = compact_surface_region(session, s["u"], s["r1"], MANUAL, scripted(outcome=outcome))
    assert isinstance(out.error, ManualCompactionError) and out.error.code == "summary"
    assert str(out.error) == "manual compaction could not produce a smaller summary"
    assert str(out.error.cause) == FAILURES[outcome]
    events = new_events(session, out.session)
    assert types(events) == ["compaction/start", "compaction/end"]
    assert events[1].data["turn"] is None and events[1].data["error"] == FAILURES[outcome]


def test_manual_non_shrinking_summary_classifies_as_summary():
    session, s = tool_turn(close=True)
    out = compact_surface_region(session, s["u"], s["r1"], MANUAL, scripted(ratio=2.0))
    assert out.error.code == "summary"
    assert str(out.error.cause).startswith("summary is not smaller than the shadowed content")


@pytest.mark.parametrize("options", [AUTO, MANUAL], ids=["automatic", "manual"])
def test_cancel_during_summary_error_closes_without_a_summary(options):
    session, s = tool_turn(close=options is MANUAL)
    out = compact_surface_region(session, s["u"], s["r1"], options, scripted(outcome="cancel"))
    assert isinstance(out.error, AbortError) and out.aborted
    events = new_events(session, out.session)
    assert types(events) == ["compaction/start", "compaction/end"]
    assert "error" in events[1].data
    assert out.session.generation == session.generation
    assert_no_active_compaction(out.session, "compaction")


def test_agent_cancel_marks_the_agent_signal():
    session, s = tool_turn(close=True)
    out = compact_surface_region(session, s["u"], s["r1"], MANUAL, scripted(outcome="agent-cancel"))
    assert out.aborted and out.agent_aborted and isinstance(out.error, AbortError)
    assert types(new_events(session, out.session)) == ["compaction/start", "compaction/end"]


def test_late_cancel_manual_aborts_before_commit():
    """Spec 8.2 step 11: a manual summary that returns after the abort is not committed."""
    session, s = tool_turn(close=True)
    out = compact_surface_region(session, s["u"], s["r1"], MANUAL, scripted(outcome="late-cancel", text=SUMMARY))
    assert out.aborted and isinstance(out.error, AbortError)
    events = new_events(session, out.session)
    assert types(events) == ["compaction/start", "compaction/end"]
    assert "error" in events[1].data
    assert out.session.generation == session.generation


def test_late_cancel_automatic_commits():
    """§15 G12: automatic compaction never checks the signal; the checkpoint commits."""
    session, s = tool_turn()
    out = compact_surface_region(session, s["u"], s["r1"], AUTO, scripted(outcome="late-cancel", text=SUMMARY))
    assert out.error is None and out.value is not None and out.aborted
    assert types(new_events(session, out.session)) == [
        "compaction/start", "compaction/summary", "user/message", "compaction/end"]
    assert out.session.generation == session.generation + 1


def test_pre_aborted_signal_manual_writes_nothing_automatic_ignores_it():
    session, s = tool_turn(close=True)
    out = compact_surface_region(session, s["u"], s["r1"], MANUAL, scripted(text=SUMMARY), caller_aborted=True)
    assert isinstance(out.error, AbortError) and out.aborted and out.session is session
    # the manual abort check precedes region validation (spec 8.1 step 1)
    out = compact_surface_region(session, 9001, 9002, MANUAL, scripted(text=SUMMARY), caller_aborted=True)
    assert isinstance(out.error, AbortError) and out.session is session
    session, s = tool_turn()
    out = compact_surface_region(session, s["u"], s["r1"], AUTO, scripted(text=SUMMARY), caller_aborted=True)
    assert out.error is None and out.session.generation == session.generation + 1


# -- stability (spec 8.2 step 12) ----------------------------------------------------------------------
def concurrent_user(text="concurrent surface mutation"):
    return ("user/message", {"content": [{"type": "text", "text": text}], "source": {"kind": "plugin", "plugin": "test"},
                             "role": "user", "id": "concurrent"}, "append")


def test_whole_surface_rejects_a_concurrent_surface_append():
    session, s = tool_turn()
    out = compact_surface_region(session, s["u"], s["r1"], AUTO,
                                 scripted(text=SUMMARY, concurrent=(concurrent_user(),)))
    assert isinstance(out.error, SurfaceChangedError)
    assert str(out.error) == "compaction: session surface changed during summarization"
    events = new_events(session, out.session)
    assert types(events) == ["compaction/start", "user/message", "compaction/end"]
    assert events[2].data["error"] == "compaction: session surface changed during summarization"
    assert out.session.nodes == (*session.nodes, events[1].seq)
    assert out.session.generation == session.generation


def test_whole_surface_tolerates_concurrent_log_only_appends():
    session, s = tool_turn()
    header = ("request/header", {"header": {"config": {"provider": PROVIDER, "model": MODEL}}, "reason": "change"},
              None)
    title = ("session/title", {"title": "t"}, None)
    out = compact_surface_region(session, s["u"], s["r1"], AUTO,
                                 scripted(text=SUMMARY, concurrent=(header, title)))
    assert out.error is None
    assert types(new_events(session, out.session)) == [
        "compaction/start", "request/header", "session/title", "compaction/summary", "user/message",
        "compaction/end"]


def test_selected_span_tolerates_appends_outside_the_span():
    session, s = tool_turn(close=True)
    out = compact_surface_region(session, s["u"], s["r1"], MANUAL,
                                 scripted(text=SUMMARY, concurrent=(concurrent_user(), concurrent_user("again"))))
    assert out.error is None, out.error
    events = new_events(session, out.session)
    assert types(events) == ["compaction/start", "user/message", "user/message", "compaction/summary",
                             "user/message", "compaction/end"]
    checkpoint = events[4]
    assert out.session.nodes == (checkpoint.seq, s["a2"], events[1].seq, events[2].seq)


def two_turns() -> tuple[Session, dict]:
    """[U, A1(call), R1, A2, U2, A3], closed; the span U..U2 leaves A3 retained."""
    session, s = tool_turn(close=True)
    log = Log(session)
    log.turn_start(2)
    log.step_start(2, 1)
    s["u2"] = log.user("second question " * 10)
    s["a3"] = log.assistant(2, 1, "second answer")
    log.step_end(2, 1)
    log.turn_end(2)
    return log.session, s


@pytest.mark.parametrize("target, cause", [
    pytest.param("u", "compaction: the selected span is no longer a valid replacement target", id="head"),
    pytest.param("a2", "compaction: the selected span changed during summarization", id="middle"),
    pytest.param("u2", "compaction: the selected span is no longer a valid replacement target", id="end"),
    pytest.param("a1", "compaction: the selected span is no longer a valid replacement target",
                 id="corrupting-the-pairing"),
])
def test_selected_span_rejects_a_rewrite_inside_it(target, cause):
    session, s = two_turns()
    seq = s[target]
    rival = ("user/message", {"content": [{"type": "text", "text": "competing replacement"}],
                              "source": {"kind": "plugin", "plugin": "rival"}, "role": "user", "id": "rival"},
             {"op": "replace", "start": seq, "end": seq})
    out = compact_surface_region(session, s["u"], s["u2"], MANUAL, scripted(text=SUMMARY, concurrent=(rival,)))
    assert isinstance(out.error, ManualCompactionError) and out.error.code == "changed"
    assert str(out.error) == "the compacted history changed during manual compaction"
    assert str(out.error.cause) == cause
    events = new_events(session, out.session)
    assert types(events) == ["compaction/start", "user/message", "compaction/end"]
    assert events[1].surface_op == {"op": "replace", "start": seq, "end": seq}
    assert events[2].data["error"].startswith(cause)  # errorChain: the cause chain follows ': '
    assert s["a3"] in out.session.nodes and out.session.generation == session.generation + 1


def test_concurrent_replace_with_explicit_sources_and_whole_surface_stability():
    session, s = two_turns()
    log = Log(session)
    log.turn_start(3)
    session = log.session
    rival = ("user/message", {"content": [{"type": "text", "text": "rival"}], "source": {"kind": "plugin",
             "plugin": "rival"}, "role": "user", "id": "rival"}, {"op": "replace", "start": s["a3"], "end": s["a3"]},
             [s["a3"]])
    # automatic: a replacement outside the span still changes the whole surface
    out = compact_surface_region(session, s["u"], s["r1"], AUTO, scripted(text=SUMMARY, concurrent=(rival,)))
    assert isinstance(out.error, SurfaceChangedError)
    assert str(out.error) == "compaction: session surface changed during summarization"
    assert new_events(session, out.session)[1].source_event_seqs == [s["a3"]]


# -- owner rules (spec 8.1 step 5) ----------------------------------------------------------------------
def test_manual_with_an_open_turn_is_busy_and_writes_nothing():
    session, s = tool_turn()
    out = compact_surface_region(session, s["u"], s["r1"], MANUAL, scripted(text=SUMMARY))
    assert isinstance(out.error, ManualCompactionError) and out.error.code == "busy"
    assert str(out.error) == "manual compaction: the session already has an open turn"
    assert out.session is session


def test_automatic_without_an_open_turn_is_an_error_and_writes_nothing():
    session, s = tool_turn(close=True)
    out = compact_surface_region(session, s["u"], s["r1"], AUTO, scripted(text=SUMMARY))
    assert type(out.error) is CompactionError
    assert str(out.error) == "compactRegion: no open turn — automatic compaction events must be enclosed in a turn"
    assert out.session is session


def test_automatic_in_a_session_with_no_turn_boundary_at_all():
    log = Log()
    u = log.user("orphan " * 40)
    out = compact_surface_region(log.session, u, u, AUTO, scripted(text="s"))
    assert str(out.error) == "compactRegion: no open turn — automatic compaction events must be enclosed in a turn"


def test_manual_in_a_session_with_no_turn_boundary_creates_none():
    log = Log()
    u = log.user("older conversation history " * 60)
    log.user("recent tail")
    out = compact_surface_region(log.session, u, u, MANUAL, scripted(text=SUMMARY))
    assert out.error is None
    events = new_events(log.session, out.session)
    assert events[0].data == {"compactionId": events[0].data["compactionId"], "turn": None}
    assert not any(e.type.startswith("turn/") for e in out.session.log)


def test_the_owner_is_the_latest_open_turn():
    session, s = tool_turn(close=True)
    log = Log(session)
    log.turn_start(2)
    out = compact_surface_region(log.session, s["u"], s["r1"], AUTO, scripted(text=SUMMARY))
    start, *_, end = new_events(log.session, out.session)
    assert start.data["turn"] == 2 and end.data["turn"] == 2


# -- injected faults (spec 8.3, 11.2 commit/persistence, §15 G8/G11) ------------------------------------
REFUSED_SUMMARY = "append of compaction/summary refused (injected fault: compaction/summary)"


def test_summary_append_refused_error_closes():
    session, s = tool_turn()
    out = compact_surface_region(session, s["u"], s["r1"], AUTO, scripted(text=SUMMARY),
                                 Faults(fail_appends=frozenset({"compaction/summary"})))
    assert str(out.error) == REFUSED_SUMMARY
    events = new_events(session, out.session)
    assert types(events) == ["compaction/start", "compaction/end"]
    assert events[1].data["error"] == REFUSED_SUMMARY and events[1].data["turn"] == 1
    assert out.session.generation == session.generation
    assert_no_active_compaction(out.session, "compaction")


def test_manual_summary_append_refused_is_a_commit_failure():
    """The failure is in the commit stage, so manual classifies it as `commit`, not `summary`."""
    session, s = tool_turn(close=True)
    out = compact_surface_region(session, s["u"], s["r1"], MANUAL, scripted(text=SUMMARY),
                                 Faults(fail_appends=frozenset({"compaction/summary"})))
    assert out.error.code == "commit"
    assert str(out.error) == "manual compaction did not commit cleanly"
    assert str(out.error.cause) == REFUSED_SUMMARY
    end = out.session.log[-1]
    assert end.type == "compaction/end" and end.data["turn"] is None and "refused" in end.data["error"]


def test_checkpoint_refused_leaves_a_summary_without_replacement():
    session, s = tool_turn(close=True)
    out = compact_surface_region(session, s["u"], s["r1"], MANUAL, scripted(text=SUMMARY),
                                 Faults(fail_appends=frozenset({"checkpoint"})))
    assert out.error.code == "commit"
    events = new_events(session, out.session)
    assert types(events) == ["compaction/start", "compaction/summary", "compaction/end"]
    assert "error" in events[2].data
    assert out.session.nodes == session.nodes and out.session.generation == session.generation
    # the log still replays (the summary's claim simply expires)
    assert replay_events(out.session.log).nodes == session.nodes


@pytest.mark.parametrize("options", [AUTO, MANUAL], ids=["automatic", "manual"])
def test_success_end_refused_orphans_the_lock(options):
    session, s = tool_turn(close=options is MANUAL)
    out = compact_surface_region(session, s["u"], s["r1"], options, scripted(text=SUMMARY),
                                 Faults(fail_appends=frozenset({"compaction/end"}), cancel_during_flush=True))
    events = new_events(session, out.session)
    # summary + checkpoint landed; no second close was attempted (the error-close key is not faulted)
    assert types(events) == ["compaction/start", "compaction/summary", "user/message"]
    assert out.session.generation == session.generation + 1
    cause = "append of compaction/end refused (injected fault: compaction/end)"
    if options is MANUAL:
        # not closed -> no flush, so the flush-time cancellation never happens either
        assert isinstance(out.error, ManualCompactionError) and out.error.code == "commit"
        assert str(out.error.cause) == cause
    else:
        assert str(out.error) == cause
    with pytest.raises(ManualCompactionError) as info:
        assert_no_active_compaction(out.session, "automatic pressure compaction")
    assert info.value.code == "busy"
    assert str(info.value) == ("automatic pressure compaction: compaction already in progress; "
                               "the session compaction lock is already active")
    again = compact_surface_region(out.session, out.session.nodes[0], out.session.nodes[0], options)
    assert again.error.code == "busy" and str(again.error) == LOCK_MESSAGE
    reloaded = seeded(out.session.log)
    assert reloaded.log[-1].type == END_SEED
    assert_no_active_compaction(reloaded, "automatic pressure compaction")


def test_error_close_refused_orphans_the_lock_and_skips_flush():
    session, s = tool_turn(close=True)
    out = compact_surface_region(session, s["u"], s["r1"], MANUAL, scripted(outcome="failure"),
                                 Faults(fail_appends=frozenset({"error-close"}), flush_fails=True,
                                        cancel_during_flush=True))
    assert types(new_events(session, out.session)) == ["compaction/start"]
    assert isinstance(out.error, ManualCompactionError) and out.error.code == "commit"
    assert str(out.error.cause) == "append of compaction/end refused (injected fault: error-close)"
    assert not out.aborted
    with pytest.raises(ManualCompactionError, match="lock is already active"):
        assert_no_active_compaction(out.session, "compaction")
    assert_no_active_compaction(seeded(out.session.log), "compaction")


def test_automatic_error_close_refused_returns_the_close_error():
    session, s = tool_turn()
    out = compact_surface_region(session, s["u"], s["r1"], AUTO, scripted(outcome="failure"),
                                 Faults(fail_appends=frozenset({"error-close"})))
    assert str(out.error) == "append of compaction/end refused (injected fault: error-close)"
    assert types(new_events(session, out.session)) == ["compaction/start"]


def test_flush_failure_after_success_is_persistence():
    session, s = tool_turn(close=True)
    out = compact_surface_region(session, s["u"], s["r1"], MANUAL, scripted(text=SUMMARY),
                                 Faults(flush_fails=True))
    assert isinstance(out.error, ManualCompactionError) and out.error.code == "persistence"
    assert str(out.error) == "manual compaction durability checkpoint failed"
    assert types(new_events(session, out.session)) == [
        "compaction/start", "compaction/summary", "user/message", "compaction/end"]
    assert_no_active_compaction(out.session, "compaction")


@pytest.mark.parametrize("faults, code", [
    (Faults(fail_appends=frozenset({"compaction/summary"}), flush_fails=True), "commit"),
    (Faults(flush_fails=True), "persistence"),
])
def test_flush_failure_is_ignored_when_a_failure_exists(faults, code):
    session, s = tool_turn(close=True)
    out = compact_surface_region(session, s["u"], s["r1"], MANUAL, scripted(text=SUMMARY), faults)
    assert out.error.code == code


def test_summary_failure_with_flush_failure_stays_summary():
    session, s = tool_turn(close=True)
    out = compact_surface_region(session, s["u"], s["r1"], MANUAL, scripted(outcome="failure"),
                                 Faults(flush_fails=True))
    assert out.error.code == "summary"


def test_cancel_during_flush_after_success_is_aborted():
    """§15 G11: cancellation beats success — the committed, closed checkpoint is reported as aborted."""
    session, s = tool_turn(close=True)
    out = compact_surface_region(session, s["u"], s["r1"], MANUAL, scripted(text=SUMMARY),
                                 Faults(cancel_during_flush=True))
    assert out.aborted and isinstance(out.error, AbortError) and out.value is None
    assert types(new_events(session, out.session)) == [
        "compaction/start", "compaction/summary", "user/message", "compaction/end"]
    assert out.session.generation == session.generation + 1


def test_automatic_has_no_flush():
    session, s = tool_turn()
    out = compact_surface_region(session, s["u"], s["r1"], AUTO, scripted(text=SUMMARY),
                                 Faults(flush_fails=True, cancel_during_flush=True))
    assert out.error is None and not out.aborted


# -- the summary's route (spec 8.5) ---------------------------------------------------------------------
def test_the_summary_route_is_the_configured_pair_then_the_logged_header_then_the_agents_options():
    session, _ = tool_turn()
    unrouted = Session()
    agent = ("model", "model-summarizer")
    assert summary_target(session, ("sum", "sum-model"), agent) == ("sum", "sum-model")
    assert summary_target(session, ("", ""), agent) == routed_target(session)
    assert summary_target(unrouted, ("", ""), agent) == agent
    with pytest.raises(SummarizerError, match="^no provider/model available for summarization"):
        summary_target(unrouted, ("", ""), None)


@pytest.mark.parametrize("options", [{}, {"provider": "model"}, {"model": "m"}, {"provider": "", "model": "m"},
                                     {"provider": "p", "model": ""}])
def test_an_incomplete_agent_options_pair_is_no_target(options):
    summarizer = ScriptedSummarizer(provider=options.get("provider"), model=options.get("model"))
    assert summarizer.target is None
    out = compact_surface_region(*_unrouted_span(), AUTO, summarizer)
    assert isinstance(out.error, SummarizerError) and "no provider/model available" in out.error.message
