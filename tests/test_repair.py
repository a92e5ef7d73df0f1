"""Tests for model/repair.py: crash-repair closers (spec 1.6; `packages/core/session/src/repair.ts`).

Ports `packages/core/session/tests/repair.spec.ts` and checks that a repaired log replays cleanly
through the surface fold and leaves a balanced final tool-pairing cut.
"""
from __future__ import annotations

import json

import pytest

from surfacecheck.model.errors import SurfaceError
from surfacecheck.model.event import ABSENT, Event
from surfacecheck.model.pairing import fold_cuts
from surfacecheck.model.repair import (
    NOT_STARTED_TEXT,
    OUTCOME_UNKNOWN_TEXT,
    TOOL_NOT_STARTED,
    TOOL_OUTCOME_UNKNOWN,
    closer_events,
    interruptedTurnClosers,
    interrupted_turn_closers,
    repair,
)
from surfacecheck.model.session import Session, append, replay_events, seeded
from surfacecheck.model.surface import fold_surface


# -- record builders (seq = time = index, as repair.spec.ts does) --------------------------------
def turn_start(turn, seq):
    return Event("turn/start", seq, seq, {"turn": turn})


def turn_end(turn, seq, kind="completed"):
    return Event("turn/end", seq, seq, {"turn": turn, "reason": {"kind": kind}})


def step_start(turn, step, seq):
    return Event("step/start", seq, seq, {"turn": turn, "step": step})


def step_end(turn, step, seq):
    return Event("step/end", seq, seq, {"turn": turn, "step": step})


def assistant(turn, step, seq, *call_ids, text=None):
    content = ([{"type": "text", "text": text}] if text else []) + [
        {"type": "tool-call", "id": c, "name": "bash", "arguments": "{}"} for c in call_ids
    ]
    message = {"role": "assistant", "content": content, "source": {"kind": "model", "provider": "mock", "model": "mock"}, "id": f"a{seq}"}
    return Event("assistant/message", seq, seq, {"turn": turn, "step": step, "message": message}, surface_op="append")


def tool_call(turn, step, seq, call_id):
    return Event("tool/call", seq, seq, {"turn": turn, "step": step, "callId": call_id, "name": "bash", "arguments": "{}"})


def tool_result(turn, step, seq, call_id, call_seq=None, content=()):
    message = {
        "source": {"kind": "tool", "callId": call_id},
        "content": [{"type": "tool-result", "toolCallId": call_id, "content": list(content), "isError": False}],
        "role": "user",
        "id": f"r{seq}",
    }
    sources = [call_seq] if call_seq is not None else ABSENT
    data = {"turn": turn, "step": step, "message": message}
    return Event("tool/result", seq, seq, data, surface_op="append", source_event_seqs=sources)


def user_msg(seq, text="hi"):
    data = {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}, "role": "user", "id": f"u{seq}"}
    return Event("user/message", seq, seq, data, surface_op="append")


def types(closers):
    return [c["type"] for c in closers]


# -- repair.spec.ts ------------------------------------------------------------------------------
def test_balanced_log_returns_nothing():
    assert interrupted_turn_closers([turn_start(1, 0), turn_end(1, 1)]) == []


def test_empty_log_returns_nothing():
    assert interrupted_turn_closers([]) == []


def test_open_turn_without_step():
    closers = interrupted_turn_closers([turn_start(1, 0)])
    assert closers == [{"type": "turn/end", "seq": 1, "time": 0, "data": {"turn": 1, "reason": {"kind": "interrupted"}}}]


def test_open_step_closed_before_turn():
    closers = interrupted_turn_closers([turn_start(1, 0), step_start(1, 1, 1)])
    assert types(closers) == ["step/end", "turn/end"]
    assert [c["seq"] for c in closers] == [2, 3]
    assert closers[0]["data"] == {"turn": 1, "step": 1}
    assert all(c["time"] == 1 for c in closers)  # last real event's time


def test_pending_unrecorded_call_is_not_started():
    events = [turn_start(2, 0), step_start(2, 1, 1), assistant(2, 1, 2, "call-1", text="calling a tool")]
    closers = interrupted_turn_closers(events)
    assert types(closers) == ["tool/result", "step/end", "turn/end"]
    assert [c["seq"] for c in closers] == [3, 4, 5]
    result = closers[0]
    # exact record, key order included (repair.ts object literal order)
    expected = {
        "type": "tool/result",
        "seq": 3,
        "time": 2,
        "data": {
            "turn": 2,
            "step": 1,
            "message": {
                "id": "interrupted-tool-result-call-1-3",
                "role": "user",
                "source": {"kind": "tool", "callId": "call-1"},
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": "call-1",
                        "isError": True,
                        "content": [
                            {
                                "type": "text",
                                "text": "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.",
                            }
                        ],
                    }
                ],
            },
            "error": {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"},
        },
        "surfaceOp": "append",
    }
    assert json.dumps(result) == json.dumps(expected)
    assert "sourceEventSeqs" not in result
    assert TOOL_NOT_STARTED == "TOOL_NOT_STARTED" and result["data"]["message"]["content"][0]["content"][0]["text"] == NOT_STARTED_TEXT


def test_answered_call_gets_no_result():
    events = [
        turn_start(2, 0),
        step_start(2, 1, 1),
        assistant(2, 1, 2, "call-1"),
        tool_result(2, 1, 3, "call-1", content=[{"type": "text", "text": "ok"}]),
    ]
    assert types(interrupted_turn_closers(events)) == ["step/end", "turn/end"]


def test_no_result_after_owning_step_closed():
    events = [turn_start(2, 0), step_start(2, 1, 1), assistant(2, 1, 2, "call-1"), step_end(2, 1, 3)]
    closers = interrupted_turn_closers(events)
    assert types(closers) == ["turn/end"]
    assert closers[0]["seq"] == 4


def test_only_the_open_turn_is_repaired():
    events = [
        turn_start(1, 0),
        step_start(1, 1, 1),
        assistant(1, 1, 2, "old-call"),
        tool_result(1, 1, 3, "old-call"),
        step_end(1, 1, 4),
        turn_end(1, 5),
        turn_start(2, 6),
        step_start(2, 1, 7),
        assistant(2, 1, 8, "new-call"),
    ]
    closers = interrupted_turn_closers(events)
    assert types(closers) == ["tool/result", "step/end", "turn/end"]
    assert closers[0]["data"]["message"]["source"]["callId"] == "new-call"
    assert closers[2]["data"] == {"turn": 2, "reason": {"kind": "interrupted"}}


def test_multiple_calls_in_log_order():
    events = [
        turn_start(1, 0),
        step_start(1, 1, 1),
        assistant(1, 1, 2, "call-a", "call-b", "call-c"),
        tool_result(1, 1, 3, "call-b"),
    ]
    closers = interrupted_turn_closers(events)
    assert types(closers) == ["tool/result", "tool/result", "step/end", "turn/end"]
    assert [c["data"]["message"]["source"]["callId"] for c in closers[:2]] == ["call-a", "call-c"]
    assert [c["data"]["message"]["id"] for c in closers[:2]] == [
        "interrupted-tool-result-call-a-4",
        "interrupted-tool-result-call-c-5",
    ]


def test_recorded_call_outcome_unknown_with_sources():
    events = [turn_start(1, 0), step_start(1, 1, 1), assistant(1, 1, 2, "call-1"), tool_call(1, 1, 3, "call-1")]
    closers = interrupted_turn_closers(events)
    assert types(closers) == ["tool/result", "step/end", "turn/end"]
    result = closers[0]
    assert list(result) == ["type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs"]
    assert result["surfaceOp"] == "append"
    assert result["sourceEventSeqs"] == [3]
    assert result["data"]["error"] == {"name": "ToolOutcomeUnknownError", "code": TOOL_OUTCOME_UNKNOWN}
    text = result["data"]["message"]["content"][0]["content"][0]["text"]
    assert text == OUTCOME_UNKNOWN_TEXT
    assert "retry only if the operation is read-only or idempotent" in text
    assert "first verify external state or ask the user" in text


def test_tool_call_without_assistant_entry():
    events = [turn_start(1, 0), step_start(1, 1, 1), tool_call(1, 1, 2, "orphan")]
    assert types(interrupted_turn_closers(events)) == ["step/end", "turn/end"]


# -- model extras --------------------------------------------------------------------------------
def test_reregistered_call_keeps_position_and_loses_call_seq():
    """JS `Map.set` on an existing key: position kept, value (callSeq) replaced."""
    events = [
        turn_start(1, 0),
        step_start(1, 1, 1),
        assistant(1, 1, 2, "a", "b"),
        tool_call(1, 1, 3, "a"),
        assistant(1, 1, 4, "a"),
    ]
    closers = interrupted_turn_closers(events)
    assert [c["data"]["message"]["source"]["callId"] for c in closers[:2]] == ["a", "b"]
    assert closers[0]["data"]["error"]["code"] == TOOL_NOT_STARTED


def test_compaction_brackets_are_not_closed():
    events = [turn_start(1, 0), Event("compaction/start", 1, 1, {"compactionId": "c", "turn": 1})]
    assert types(interrupted_turn_closers(events)) == ["turn/end"]


def test_accepts_records_and_camel_alias():
    events = [turn_start(1, 0).to_json(), step_start(1, 1, 1).to_json()]
    assert interruptedTurnClosers(events) == interrupted_turn_closers([turn_start(1, 0), step_start(1, 1, 1)])
    assert [e.type for e in closer_events(events)] == ["step/end", "turn/end"]


# -- repair(session): replays cleanly and balances the surface ------------------------------------
def session_of(events) -> Session:
    return replay_events(events)


CRASHED = [
    turn_start(1, 0),
    step_start(1, 1, 1),
    user_msg(2),
    assistant(1, 1, 3, "r1", "r2", "u1", text="three tools"),
    tool_call(1, 1, 4, "r1"),
    tool_result(1, 1, 5, "r1", call_seq=4),
    tool_call(1, 1, 6, "r2"),
]


def check_repaired(session: Session) -> Session:
    repaired = repair(session)
    assert interrupted_turn_closers(repaired.log) == []  # idempotent: no open turn left
    assert repair(repaired) == repaired
    fold = fold_surface(repaired.log)
    assert fold.surface.nodes == repaired.nodes
    cuts = fold_cuts(repaired)
    assert cuts.open_calls == 0 and cuts.balanced[-1]
    # the repaired log also loads as a seed (message shapes, contiguity, surface)
    reloaded = seeded([Event.from_json(e.to_json()) for e in repaired.log])
    assert reloaded.nodes == repaired.nodes
    return repaired


def test_repair_open_turn_with_pending_recorded_and_unrecorded_calls():
    session = session_of(CRASHED)
    assert fold_cuts(session).open_calls == 2
    repaired = check_repaired(session)
    tail = repaired.log[len(CRASHED):]
    assert [e.type for e in tail] == ["tool/result", "tool/result", "step/end", "turn/end"]
    assert tail[0].source_event_seqs == [6] and tail[0].data["error"]["code"] == TOOL_OUTCOME_UNKNOWN
    assert tail[1].source_event_seqs is ABSENT and tail[1].data["error"]["code"] == TOOL_NOT_STARTED
    assert all(e.time == CRASHED[-1].time for e in tail)
    assert [e.seq for e in tail] == [7, 8, 9, 10]
    # the appended events equal the records interrupted_turn_closers returned
    assert [e.to_json() for e in tail] == [Event.from_json(c).to_json() for c in interrupted_turn_closers(CRASHED)]


def test_repair_open_step_only():
    repaired = check_repaired(session_of([turn_start(1, 0), step_start(1, 1, 1), user_msg(2)]))
    assert [e.type for e in repaired.log[3:]] == ["step/end", "turn/end"]


def test_repair_closed_log_is_identity():
    session = session_of([turn_start(1, 0), step_start(1, 1, 1), user_msg(2), step_end(1, 1, 3), turn_end(1, 4)])
    assert interrupted_turn_closers(session.log) == []
    assert repair(session) is session


def test_repair_every_crash_prefix_of_a_rich_log():
    """Every prefix of a well-formed two-turn log repairs to a closed turn and a balanced surface."""
    full = [
        turn_start(1, 0),
        step_start(1, 1, 1),
        user_msg(2, "do things"),
        assistant(1, 1, 3, "c1", "c2"),
        tool_call(1, 1, 4, "c1"),
        tool_result(1, 1, 5, "c1", call_seq=4),
        tool_call(1, 1, 6, "c2"),
        tool_result(1, 1, 7, "c2", call_seq=6),
        step_end(1, 1, 8),
        step_start(1, 2, 9),
        assistant(1, 2, 10, text="done"),
        step_end(1, 2, 11),
        turn_end(1, 12),
        turn_start(2, 13),
        step_start(2, 1, 14),
        user_msg(15, "again"),
        assistant(2, 1, 16, "d1", "d2", "d3"),
        tool_call(2, 1, 17, "d1"),
        tool_call(2, 1, 18, "d2"),
        tool_result(2, 1, 19, "d2", call_seq=18),
        tool_result(2, 1, 20, "d1", call_seq=17),
        tool_call(2, 1, 21, "d3"),
        tool_result(2, 1, 22, "d3", call_seq=21),
        step_end(2, 1, 23),
        turn_end(2, 24),
    ]
    replay_events(full)  # the full log itself is valid
    for cut in range(len(full) + 1):
        prefix = full[:cut]
        repaired = check_repaired(session_of(prefix))
        closers = repaired.log[cut:]
        if closers:
            assert closers[-1].type == "turn/end" and closers[-1].data["reason"] == {"kind": "interrupted"}
            assert all(e.time == prefix[-1].time for e in closers)
        else:
            assert cut == 0 or prefix[-1].type == "turn/end"


def test_repair_goes_through_surface_validation():
    """A closer that cites a call seq is validated like any append (spec 1.4): sources are earlier events."""
    session = session_of(CRASHED)
    repaired = repair(session)
    for event in repaired.log[len(CRASHED):]:
        if event.type == "tool/result":
            assert event.surface_op == "append"
            assert all(s < event.seq for s in event.sources)
    with pytest.raises(SurfaceError):
        append(repaired, "tool/result", repaired.log[-4].data)  # no surfaceOp → refused
