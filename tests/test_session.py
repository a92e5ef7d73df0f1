"""The session log: `Session.append` check order and `new Session(id, seed)` validation (spec 1.1-1.5, 2.3).

Messages are dsh's own (packages/core/session/src/index.ts, surface.ts); cases are ported from
packages/core/session/tests/session.spec.ts and surface.spec.ts where one exists.
"""
from __future__ import annotations

import copy

import pytest

from surfacecheck.model.errors import SeedError, SessionAppendError, SurfaceError
from surfacecheck.model.event import ABSENT, Event
from surfacecheck.model.session import (
    END_SEED,
    Session,
    append,
    derive_messages,
    envelope_problem,
    replay_events,
    request_header,
    seeded,
)
from surfacecheck.model.surface import derive_event_message, fold_surface


# -- builders (dsh message shapes, spec 1.2) -------------------------------------------------------
def user_msg(text: str = "hello", mid: str = "u1", **extra) -> dict:
    return {"id": mid, "role": "user", "source": {"kind": "user"}, "content": [{"type": "text", "text": text}], **extra}


def assistant_data(text: str | None = "hi", mid: str = "a1", *, calls: tuple[str, ...] = (), turn: int = 1,
                   step: int = 1) -> dict:
    content = [] if text is None else [{"type": "text", "text": text}]
    content += [{"type": "tool-call", "id": c, "name": "bash", "arguments": "{}"} for c in calls]
    return {"turn": turn, "step": step, "message": {
        "id": mid, "role": "assistant", "source": {"kind": "model", "provider": "mock", "model": "mock"},
        "content": content}}


def tool_data(call: str = "c1", text: str = "done", mid: str = "t1") -> dict:
    return {"turn": 1, "step": 1, "message": {
        "id": mid, "role": "user", "source": {"kind": "tool", "callId": call},
        "content": [{"type": "tool-result", "toolCallId": call, "content": [{"type": "text", "text": text}]}]}}


HEADER_DATA = {"header": {"config": {"provider": "mock", "model": "mock"}}, "reason": "initial"}


def ev(type_: str, seq: int, data=None, *, op=ABSENT, src=ABSENT, time: int = 0, ignorable=ABSENT) -> Event:
    return Event(type_, seq, time, {} if data is None else data, surface_op=op, source_event_seqs=src,
                 ignorable=ignorable)


def live(*steps) -> Session:
    """Append `(type, data, opts)` triples to an empty session."""
    session = Session()
    for type_, data, opts in steps:
        session, _ = append(session, type_, data, **opts)
    return session


def snapshot(session: Session) -> tuple:
    return (tuple(e.to_json() for e in session.log), session.surface, session.first_live_seq)


def valid_seed() -> list[Event]:
    """turn/start, user, request/header, assistant (tool call), tool/call, tool/result — a valid seed."""
    return [
        ev("turn/start", 0, {"turn": 1}),
        ev("user/message", 1, user_msg(), op="append"),
        ev("request/header", 2, HEADER_DATA),
        ev("assistant/message", 3, assistant_data(None, calls=("c1",)), op="append"),
        ev("tool/call", 4, {"turn": 1, "step": 1, "callId": "c1", "name": "bash", "arguments": "{}"}),
        ev("tool/result", 5, tool_data("c1"), op="append", src=[4]),
    ]


# ==================================================================================================
# Session.append (spec 1.3)
# ==================================================================================================
class TestAppendSeqAndShape:
    def test_seq_is_log_length_and_next_seq_tracks_it(self):
        session = Session()
        assert session.next_seq == 0
        types = ["turn/start", "plugin/anything", "step/start", "session/title"]
        for index, type_ in enumerate(types):
            session, event = append(session, type_, {"i": index})
            assert event.seq == index
            assert session.log[-1] is event
            assert session.next_seq == len(session.log) == index + 1
        assert [e.seq for e in session.log] == list(range(len(types)))

    def test_surface_and_non_surface_fields(self):
        session, first = append(Session(), "user/message", user_msg(), surface_op="append")
        session, turn = append(session, "turn/start", {"turn": 1})
        assert first.surface_op == "append" and first.source_event_seqs is ABSENT
        assert turn.surface_op is ABSENT and turn.source_event_seqs is ABSENT
        assert "surfaceOp" not in turn.to_json() and "sourceEventSeqs" not in turn.to_json()
        # spec 1.1 serialization order: type, seq, time, data, sourceEventSeqs?, surfaceOp?
        _, replaced = append(session, "user/message", user_msg("x"), surface_op={"op": "replace", "start": 0, "end": 0},
                             source_event_seqs=[0])
        assert list(replaced.to_json()) == ["type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp"]

    def test_time_defaults_to_last_event_time_or_explicit(self):
        session, _ = append(Session(), "turn/start", {"turn": 1}, time=1234)
        session, second = append(session, "plugin/x", {})
        assert second.time == 1234
        _, third = append(session, "plugin/x", {}, time=-5)
        assert third.time == -5

    def test_unknown_event_types_are_kept_and_are_not_surface_events(self):
        session = live(("user/message", user_msg(), {"surface_op": "append"}))
        session2, event = append(session, "my-plugin/telemetry", {"anything": [1, {"nested": None}]})
        assert session2.log[-1] is event and event.seq == 1
        assert session2.nodes == (0,) and session2.generation == 0
        assert derive_event_message(event) is None
        assert derive_messages(session2) == derive_messages(session)
        # null data is fine for a plugin type (session.spec.ts "unrelatedPrimitiveData")
        session3, nul = append(session2, "plugin/event", None)
        assert nul.data is None and session3.nodes == (0,)

    def test_live_append_does_not_check_message_shapes_but_seed_does(self):
        """Spec 1.3 'Not checked on live append': a user/message without id is accepted live, refused on reload."""
        message = {"role": "user", "source": {"kind": "user"}, "content": []}
        session, event = append(Session(), "user/message", message, surface_op="append")
        assert session.nodes == (0,)
        with pytest.raises(SeedError) as info:
            seeded(session.log)
        assert info.value.message == "seed user/message at index 0 lacks an identified message"


NON_JSON = [
    pytest.param(float("nan"), id="nan"),
    pytest.param(float("inf"), id="infinity"),
    pytest.param(-0.0, id="negative-zero"),
    pytest.param({"nested": {"deep": float("-inf")}}, id="nested-non-finite"),
    pytest.param([1, {2, 3}], id="set-in-array"),
    pytest.param({1: "non-string key"}, id="int-key"),
    pytest.param(object(), id="object"),
    pytest.param(b"bytes", id="bytes"),
    pytest.param(ABSENT, id="undefined"),
    pytest.param(lambda: 0, id="function"),
]


class TestAppendChecks:
    @pytest.mark.parametrize("data", NON_JSON)
    def test_non_json_data(self, data):
        base = live(("turn/start", {"turn": 1}, {}))
        before = snapshot(base)
        with pytest.raises(SessionAppendError) as info:
            append(base, "plugin/x", data)
        assert info.value.message == 'session event "plugin/x" carries non-JSON-serializable data'
        assert snapshot(base) == before

    def test_legacy_header_delta(self):
        with pytest.raises(SessionAppendError) as info:
            append(Session(), "request/header-delta", {"delta": {}})
        assert info.value.message == 'session event "request/header-delta" uses unsupported legacy request/header-delta format'

    def test_legacy_fallback_reason(self):
        with pytest.raises(SessionAppendError) as info:
            append(Session(), "request/header", {**HEADER_DATA, "reason": "fallback"})
        assert info.value.message == 'session event "request/header" uses unsupported legacy request/header reason "fallback"'

    @pytest.mark.parametrize("type_, data", [
        ("request/header", HEADER_DATA),
        ("request/header", {**HEADER_DATA, "reason": "change"}),
        ("request/header", ["reason", "fallback"]),          # not a record: no legacy check
        ("plugin/x", {"reason": "fallback"}),                 # fallback only matters on request/header
    ])
    def test_non_legacy_headers_accepted(self, type_, data):
        session, event = append(Session(), type_, data)
        assert event.seq == 0 and session.log == (event,)

    def test_data_check_precedes_legacy_check(self):
        with pytest.raises(SessionAppendError, match="non-JSON-serializable data"):
            append(Session(), "request/header-delta", float("nan"))

    def test_legacy_check_precedes_surface_metadata_check(self):
        with pytest.raises(SessionAppendError, match="legacy request/header-delta"):
            append(Session(), "request/header-delta", {}, source_event_seqs=[float("nan")])

    @pytest.mark.parametrize("opts", [
        {"source_event_seqs": [float("nan")]},
        {"source_event_seqs": [0, float("inf")]},
        {"surface_op": {"op": "replace", "start": float("inf"), "end": 0}},
        {"surface_op": {"op": "replace", "start": -0.0, "end": 0}},
        {"surface_op": object()},
    ])
    def test_non_json_surface_metadata(self, opts):
        base = live(("user/message", user_msg(), {"surface_op": "append"}))
        before = snapshot(base)
        with pytest.raises(SessionAppendError) as info:
            append(base, "user/message", user_msg("x"), **{"surface_op": "append", **opts})
        assert info.value.message == 'session event "user/message" carries non-JSON-serializable surface metadata'
        assert snapshot(base) == before

    def test_surface_metadata_check_precedes_surface_validation(self):
        # a non-surface type carrying non-JSON metadata reports the JSON problem, not eligibility
        with pytest.raises(SessionAppendError, match="non-JSON-serializable surface metadata"):
            append(Session(), "turn/start", {"turn": 1}, surface_op=float("nan"))

    def test_surface_validation_runs_last_and_refusal_leaves_session_unchanged(self):
        """Port of surface.spec.ts 'leaves incremental state unchanged when candidate validation fails'."""
        base = live(("user/message", user_msg("a"), {"surface_op": "append"}))
        before = snapshot(base)
        with pytest.raises(SurfaceError) as info:
            append(base, "assistant/message", assistant_data("invalid"), surface_op={"op": "replace", "start": 0, "end": 0})
        assert info.value.message == "surface replace: sourceEventSeqs must include every shadowed surface node; missing 0"
        assert snapshot(base) == before
        assert base.nodes == (0,) and base.generation == 0
        after, event = append(base, "user/message", user_msg("b"), surface_op="append")
        assert event.seq == 1 and after.nodes == (0, 1) and after.generation == 0
        assert after.surface == fold_surface(after.log).surface

    def test_markerless_surface_append_refused(self):
        with pytest.raises(SurfaceError) as info:
            append(Session(), "user/message", user_msg())
        assert info.value.message == 'session event "user/message" is surface-eligible and requires a surfaceOp marker'

    def test_non_surface_type_cannot_carry_surface_op(self):
        with pytest.raises(SurfaceError) as info:
            append(Session(), "turn/start", {"turn": 1}, surface_op="append")
        assert info.value.message == 'session event "turn/start" is not surface-eligible and cannot carry surfaceOp'

    def test_dense_nested_plain_objects_accepted(self):
        data = {**user_msg("x"), "extra": [1, 2, [3, {"a": None, "b": True}]], "f": 1.5}
        session, event = append(Session(), "user/message", data, surface_op="append")
        assert event.data == data and session.nodes == (0,)

    def test_tuple_sources_are_stored_as_a_list(self):
        session = live(("user/message", user_msg(), {"surface_op": "append"}))
        _, event = append(session, "user/message", user_msg("b"), surface_op="append", source_event_seqs=(0,))
        assert event.to_json()["sourceEventSeqs"] == [0]


# ==================================================================================================
# seeded() — new Session(id, seed) (spec 1.5)
# ==================================================================================================
def seed_error(seed) -> str:
    with pytest.raises(SeedError) as info:
        seeded(seed)
    return info.value.message


class TestSeedEnvelope:
    PREFIX = [ev("turn/start", 0, {"turn": 1})]

    @pytest.mark.parametrize("bad", [
        pytest.param(Event(1, 1, 0, {}), id="type-not-string"),
        pytest.param(Event(None, 1, 0, {}), id="type-null"),
        pytest.param(Event("plugin/x", "1", 0, {}), id="seq-string"),
        pytest.param(Event("plugin/x", 1.5, 0, {}), id="seq-fraction"),
        pytest.param(Event("plugin/x", -1, 0, {}), id="seq-negative"),
        pytest.param(Event("plugin/x", True, 0, {}), id="seq-bool"),
        pytest.param(Event("plugin/x", 2**53, 0, {}), id="seq-unsafe"),
        pytest.param(Event("plugin/x", 1, "1", {}), id="time-string"),
        pytest.param(Event("plugin/x", 1, 0.5, {}), id="time-fraction"),
        pytest.param(Event("plugin/x", 1, None, {}), id="time-null"),
        pytest.param(Event("plugin/x", 1, 2**53, {}), id="time-unsafe"),
        pytest.param(Event("plugin/x", 1, 0, ABSENT), id="data-missing"),
        pytest.param(Event("plugin/x", 1, 0, {}, ignorable=False), id="ignorable-false"),
        pytest.param(Event("plugin/x", 1, 0, {}, ignorable="yes"), id="ignorable-string"),
        pytest.param(Event("plugin/x", 1, 0, {}, ignorable=None), id="ignorable-null"),
    ])
    def test_invalid_envelope(self, bad):
        assert seed_error(self.PREFIX + [bad]) == "seed event at index 1 has an invalid event envelope"

    @pytest.mark.parametrize("record", [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}, "extra": True},
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}, "meta": None},
        ["turn/start", 0, 1, {}],
        None,
    ])
    def test_envelope_rejects_unknown_keys_and_non_records(self, record):
        assert envelope_problem(record, 3) == "seed event at index 3 has an invalid event envelope"

    def test_envelope_accepts_every_known_key(self):
        record = {"type": "user/message", "seq": 0, "time": -7, "data": user_msg(), "surfaceOp": "append",
                  "sourceEventSeqs": [], "ignorable": True}
        assert envelope_problem(record, 0) is None

    def test_ignorable_true_negative_time_and_null_data_accepted(self):
        session = seeded([Event("plugin/x", 0, -100, None, ignorable=True)])
        assert session.log[0].ignorable is True and session.log[0].time == -100 and session.log[0].data is None
        assert session.log[0].to_json()["ignorable"] is True

    def test_header_delta_is_reported_as_legacy_not_envelope(self):
        assert seed_error(self.PREFIX + [ev("request/header-delta", 1, {})]) == \
            "seed event at index 1 uses unsupported legacy request/header-delta format"

    def test_envelope_checked_before_message_shape(self):
        bad = Event("user/message", 1, 0.5, {"role": "user"}, surface_op="append")
        assert seed_error(self.PREFIX + [bad]) == "seed event at index 1 has an invalid event envelope"

    @pytest.mark.parametrize("data", [float("nan"), {"x": float("inf")}, -0.0], ids=["nan", "inf", "neg-zero"])
    def test_non_json_seed_entry(self, data):
        assert seed_error(self.PREFIX + [Event("plugin/x", 1, 0, data)]) == \
            "seed event at index 1 is not losslessly JSON-serializable"


# (mutation applied to a deep copy of a valid event, expected message suffix)
def _mut(path: tuple, value):
    def apply(data):
        target = data
        for key in path[:-1]:
            target = target[key]
        if value is ABSENT:
            del target[path[-1]]
        else:
            target[path[-1]] = value
        return data
    return apply


USER_CASES = [
    ("missing-id", ("id",), ABSENT, "lacks an identified message"),
    ("empty-id", ("id",), "", "lacks an identified message"),
    ("numeric-id", ("id",), 5, "lacks an identified message"),
    ("role", ("role",), "assistant", 'message must have role "user"'),
    ("role-missing", ("role",), ABSENT, 'message must have role "user"'),
    ("source-null", ("source",), None, "message has invalid source"),
    ("source-string", ("source",), "user", "message has invalid source"),
    ("source-kind-empty", ("source", "kind"), "", "message has invalid source"),
    ("source-kind-missing", ("source", "kind"), ABSENT, "message has invalid source"),
    ("content-string", ("content",), "not-an-array", "message has invalid content"),
    ("content-missing", ("content",), ABSENT, "message has invalid content"),
]
ASSISTANT_CASES = [
    ("missing-message", ("message",), ABSENT, "lacks an identified message"),
    ("missing-id", ("message", "id"), ABSENT, "lacks an identified message"),
    ("role", ("message", "role"), "user", 'message must have role "assistant"'),
    ("source-null", ("message", "source"), None, "message has invalid source"),
    ("content", ("message", "content"), {"type": "text"}, "message has invalid content"),
    ("source-kind", ("message", "source"), {"kind": "user"}, "message must have model source"),
    ("no-provider", ("message", "source"), {"kind": "model", "model": "m"}, "message must have model source"),
    ("empty-model", ("message", "source"), {"kind": "model", "provider": "p", "model": ""},
     "message must have model source"),
]
TOOL_CASES = [
    ("missing-message", ("message",), ABSENT, "lacks an identified message"),
    ("role", ("message", "role"), "tool", 'message must have role "user"'),
    ("source-kind", ("message", "source"), {"kind": "user"}, "message must have tool source"),
    ("callid-empty", ("message", "source"), {"kind": "tool", "callId": ""}, "message must have tool source"),
    ("callid-number", ("message", "source"), {"kind": "tool", "callId": 1}, "message must have tool source"),
    ("no-blocks", ("message", "content"), [], "message must contain one tool-result block"),
    ("two-blocks", ("message", "content"),
     [{"type": "tool-result", "toolCallId": "c1", "content": []}] * 2, "message must contain one tool-result block"),
    ("text-block", ("message", "content"), [{"type": "text", "text": "not a result"}],
     "message must contain one tool-result block"),
    ("inner-not-array", ("message", "content"), [{"type": "tool-result", "toolCallId": "c1", "content": "x"}],
     "message must contain one tool-result block"),
    ("mismatched", ("message", "source"), {"kind": "tool", "callId": "other-call"},
     "message has mismatched tool call ids"),
    ("missing-toolcallid", ("message", "content"), [{"type": "tool-result", "content": []}],
     "message has mismatched tool call ids"),
]


class TestSeedMessageShapes:
    @pytest.mark.parametrize("name, path, value, expected", USER_CASES, ids=[c[0] for c in USER_CASES])
    def test_user_message(self, name, path, value, expected):
        data = _mut(path, value)(copy.deepcopy(user_msg()))
        seed = [ev("turn/start", 0, {"turn": 1}), ev("user/message", 1, data, op="append")]
        assert seed_error(seed) == f"seed user/message at index 1 {expected}"

    @pytest.mark.parametrize("data", [None, [], "text", 5])
    def test_user_message_data_not_a_record(self, data):
        assert seed_error([Event("user/message", 0, 0, data, surface_op="append")]) == \
            "seed user/message at index 0 lacks an identified message"

    @pytest.mark.parametrize("name, path, value, expected", ASSISTANT_CASES, ids=[c[0] for c in ASSISTANT_CASES])
    def test_assistant_message(self, name, path, value, expected):
        data = _mut(path, value)(copy.deepcopy(assistant_data()))
        assert seed_error([ev("assistant/message", 0, data, op="append")]) == \
            f"seed assistant/message at index 0 {expected}"

    def test_legacy_assistant_shape(self):
        """session.spec.ts: a pre-provider assistant/message `{turn, step, content}` is refused."""
        legacy = {"turn": 1, "step": 1, "content": [{"type": "text", "text": "old"}]}
        assert seed_error([ev("assistant/message", 0, legacy, op="append")]) == \
            "seed assistant/message at index 0 lacks an identified message"

    @pytest.mark.parametrize("name, path, value, expected", TOOL_CASES, ids=[c[0] for c in TOOL_CASES])
    def test_tool_result(self, name, path, value, expected):
        data = _mut(path, value)(copy.deepcopy(tool_data()))
        assert seed_error([ev("tool/result", 0, data, op="append")]) == f"seed tool/result at index 0 {expected}"

    def test_checks_run_in_dsh_order(self):
        # role wrong AND source missing AND content missing -> role is reported
        data = {"id": "x", "role": "assistant"}
        assert seed_error([ev("user/message", 0, data, op="append")]) == \
            'seed user/message at index 0 message must have role "user"'
        # source invalid AND content invalid -> source first
        data = {"id": "x", "role": "user", "source": {}, "content": None}
        assert seed_error([ev("user/message", 0, data, op="append")]) == \
            "seed user/message at index 0 message has invalid source"
        # assistant: content invalid before model source
        data = assistant_data()
        data["message"]["source"] = {"kind": "user"}
        data["message"]["content"] = "x"
        assert seed_error([ev("assistant/message", 0, data, op="append")]) == \
            "seed assistant/message at index 0 message has invalid content"
        # tool: tool source before block shape
        data = tool_data()
        data["message"]["source"] = {"kind": "user"}
        data["message"]["content"] = []
        assert seed_error([ev("tool/result", 0, data, op="append")]) == \
            "seed tool/result at index 0 message must have tool source"

    def test_shape_checked_before_seq_and_surface(self):
        # wrong seq AND missing id -> shape error (step 3 before step 5)
        assert seed_error([Event("user/message", 4, 0, {"role": "user"})]) == \
            "seed user/message at index 0 lacks an identified message"

    def test_plugin_block_details_are_not_validated(self):
        data = user_msg()
        data["content"] = [{"type": "my-plugin-block", "payload": {"x": 1}}]
        assert seeded([ev("user/message", 0, data, op="append")]).nodes == (0,)


class TestSeedRequestHeader:
    @staticmethod
    def header_seed(header, reason="initial"):
        return [ev("turn/start", 0, {"turn": 1}), ev("request/header", 1, {"header": header, "reason": reason})]

    @pytest.mark.parametrize("header", [
        {"config": {"model": "old-model"}},
        {"config": {"provider": "p"}},
        {"config": {"provider": "", "model": "m"}},
        {"config": {"provider": "p", "model": ""}},
        {"config": {"provider": 1, "model": "m"}},
        {"config": None},
        {},
        "old-header",
        None,
        ["config"],
    ])
    def test_lacks_provider_model(self, header):
        assert seed_error(self.header_seed(header)) == "seed request/header at index 1 lacks provider/model"

    @pytest.mark.parametrize("data", [None, "x", {}, {"reason": "initial"}])
    def test_lacks_provider_model_when_data_malformed(self, data):
        assert seed_error([ev("request/header", 0, data)]) == "seed request/header at index 0 lacks provider/model"

    @pytest.mark.parametrize("effort", ["", 5, None, True, ["high"]])
    def test_invalid_reasoning_effort(self, effort):
        header = {"config": {"provider": "p", "model": "m", "reasoningEffort": effort}}
        assert seed_error(self.header_seed(header)) == "seed request/header at index 1 has an invalid reasoningEffort"

    def test_provider_checked_before_reasoning_effort(self):
        header = {"config": {"model": "m", "reasoningEffort": ""}}
        assert seed_error(self.header_seed(header)) == "seed request/header at index 1 lacks provider/model"

    @pytest.mark.parametrize("config, defaults", [
        ({}, None),
        ({}, []),
        ({}, "reasoningEffort"),
        ({"reasoningEffort": "high"}, {"reasoningEffort": True, "temperature": True}),
        ({"reasoningEffort": "high"}, {"reasoningEffort": False}),
        ({"maxTokens": 10}, {"maxTokens": 1}),
        ({}, {"reasoningEffort": True}),
        ({}, {"maxTokens": True}),
        ({"reasoningEffort": "high"}, {"reasoningEffort": True, "maxTokens": True}),
    ])
    def test_invalid_adapter_defaults(self, config, defaults):
        header = {"config": {"provider": "p", "model": "m", **config}, "adapterDefaults": defaults}
        assert seed_error(self.header_seed(header)) == "seed request/header at index 1 has invalid adapterDefaults"

    @pytest.mark.parametrize("config, defaults", [
        ({"reasoningEffort": "high"}, {"reasoningEffort": True}),
        ({"maxTokens": 100}, {"maxTokens": True}),
        ({"maxTokens": None}, {"maxTokens": True}),  # JS: null !== undefined, so the field is "present"
        ({"reasoningEffort": "low", "maxTokens": 8}, {"reasoningEffort": True, "maxTokens": True}),
        ({}, {}),
    ])
    def test_valid_adapter_defaults_round_trip(self, config, defaults):
        header = {"config": {"provider": "p", "model": "m", **config}, "adapterDefaults": defaults}
        session = seeded(self.header_seed(header))
        assert request_header(session) == header

    def test_fallback_reason_refused_after_shape_checks(self):
        header = {"config": {"provider": "p", "model": "m"}}
        assert seed_error(self.header_seed(header, reason="fallback")) == \
            'seed event at index 1 uses unsupported legacy request/header reason "fallback"'
        # a fallback header that also lacks provider/model reports the shape problem first
        assert seed_error(self.header_seed({"config": {}}, reason="fallback")) == \
            "seed request/header at index 1 lacks provider/model"


class TestSeedContiguityAndSurface:
    def test_seq_not_contiguous(self):
        seed = valid_seed()
        seed[2] = Event("request/header", 7, 0, HEADER_DATA)
        assert seed_error(seed) == "seed event at index 2 has seq 7 (expected 2); seed must be contiguous from 0"

    def test_seq_not_contiguous_from_zero(self):
        assert seed_error([ev("turn/end", 1, {"turn": 1})]) == \
            "seed event at index 0 has seq 1 (expected 0); seed must be contiguous from 0"

    def test_fallback_reason_precedes_seq_check(self):
        bad = Event("request/header", 5, 0, {**HEADER_DATA, "reason": "fallback"})
        assert seed_error([bad]) == 'seed event at index 0 uses unsupported legacy request/header reason "fallback"'

    @pytest.mark.parametrize("seed, index, inner", [
        ([ev("user/message", 0, user_msg())], 0,
         'session event "user/message" is surface-eligible and requires a surfaceOp marker'),
        ([ev("turn/start", 0, {"turn": 1}, op="append")], 0,
         'session event "turn/start" is not surface-eligible and cannot carry surfaceOp'),
        ([ev("turn/start", 0, {"turn": 1}, src=[0])], 0,
         'session event "turn/start" is not surface-eligible and cannot carry sourceEventSeqs'),
        ([ev("user/message", 0, user_msg(), op="append"),
          ev("user/message", 1, user_msg("b"), op={"op": "replace", "start": 42, "end": 0}, src=[0])], 1,
         "surface replace: start seq 42 not found in surface"),
        ([ev("user/message", 0, user_msg(), op="append"),
          ev("user/message", 1, user_msg("b"), op={"op": "replace", "start": 0, "end": 0})], 1,
         "surface replace: sourceEventSeqs must include every shadowed surface node; missing 0"),
        ([ev("user/message", 0, user_msg(), op="append", src=[0])], 0,
         "sourceEventSeqs must reference earlier events: 0 >= current seq 0"),
    ])
    def test_surface_errors_are_wrapped_with_the_seed_index(self, seed, index, inner):
        with pytest.raises(SeedError) as info:
            seeded(seed)
        assert info.value.message == f"invalid seed event at index {index}: {inner}"
        # the same failure, unwrapped, from the full fold (one validator for append, seed and foldSurface)
        with pytest.raises(SurfaceError) as unwrapped:
            fold_surface(seed)
        assert unwrapped.value.message == inner

    def test_valid_seed_builds_the_same_surface_as_live_appends(self):
        seed = valid_seed()
        session = seeded(seed)
        live_session = Session()
        for event in seed:
            live_session, _ = append(live_session, event.type, event.data, surface_op=event.surface_op,
                                     source_event_seqs=event.source_event_seqs, time=event.time)
        assert session.log[:-1] == live_session.log
        assert session.nodes == live_session.nodes == (1, 3, 5)
        assert derive_messages(session) == derive_messages(live_session)


class TestEndSeed:
    def test_no_seed_writes_nothing(self):
        session = seeded(None)
        assert session.log == () and session.first_live_seq == 0 and session.next_seq == 0

    def test_empty_seed_gets_an_end_seed(self):
        session = seeded([])
        assert [e.to_json() for e in session.log] == [{"type": END_SEED, "seq": 0, "time": 0, "data": {}}]
        assert session.first_live_seq == 0

    def test_end_seed_appended_after_a_seed(self):
        seed = valid_seed()
        session = seeded(seed)
        assert len(session.log) == len(seed) + 1
        marker = session.log[-1]
        assert (marker.type, marker.seq, marker.data) == (END_SEED, len(seed), {})
        assert marker.time == seed[-1].time
        assert session.first_live_seq == len(seed)
        assert session.nodes == fold_surface(seed).surface.nodes

    def test_reopening_is_idempotent(self):
        once = seeded(valid_seed())
        twice = seeded(once.log)
        assert twice.log == once.log
        assert twice.first_live_seq == len(once.log)
        assert derive_messages(twice) == derive_messages(once)
        assert seeded(seeded([]).log).log == seeded([]).log

    def test_end_seed_not_at_the_tail_is_remarked(self):
        first = seeded(valid_seed()[:2])  # [turn/start, user, end-seed]
        grown, _ = append(first, "plugin/x", {})
        reopened = seeded(grown.log)
        assert [e.type for e in reopened.log] == ["turn/start", "user/message", END_SEED, "plugin/x", END_SEED]
        assert reopened.first_live_seq == 4

    def test_end_seed_can_be_disabled(self):
        session = seeded(valid_seed(), end_seed=False)
        assert session.log[-1].type == "tool/result"


class TestDerivedViews:
    def test_derive_messages_follows_the_surface_and_skips_empty_assistants(self):
        session = live(
            ("turn/start", {"turn": 1}, {}),
            ("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "h"}}, {}),
            ("user/message", user_msg("hello"), {"surface_op": "append"}),
            ("assistant/message", assistant_data(None, mid="empty"), {"surface_op": "append"}),
            ("assistant/message", assistant_data("hi"), {"surface_op": "append"}),
            ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}, {}),
        )
        assert session.nodes == (2, 3, 4)
        messages = derive_messages(session)
        assert [m["id"] for m in messages] == ["u1", "a1"]
        assert messages[0] is session.log[2].data  # user/message data verbatim

    def test_derive_messages_respects_replace(self):
        session = live(
            ("user/message", user_msg("original"), {"surface_op": "append"}),
            ("assistant/message", assistant_data("compacted"),
             {"surface_op": {"op": "replace", "start": 0, "end": 0}, "source_event_seqs": [0]}),
        )
        assert [m["content"][0]["text"] for m in derive_messages(session)] == ["compacted"]

    def test_request_header_is_the_latest_logged(self):
        session = live(("turn/start", {"turn": 1}, {}))
        assert request_header(session) is None
        h1 = {"config": {"provider": "p", "model": "one"}}
        h2 = {"config": {"provider": "p", "model": "two"}}
        session = live(("request/header", {"header": h1, "reason": "initial"}, {}),
                       ("plugin/x", {}, {}),
                       ("request/header", {"header": h2, "reason": "change"}, {}),
                       ("plugin/y", {}, {}))
        assert request_header(session) == h2

    def test_replay_events_adds_no_end_seed(self):
        seed = valid_seed()
        session = replay_events(seed)
        assert session.log == tuple(seed) and session.first_live_seq == 0
