"""`TokenMeter.measure()`: step bracket, priced surface, anchors, provider chunk re-assembly (spec 4.2-4.3, 10.4).

Cases ported from packages/llm/token-meter/tests/token-meter.spec.ts (with the numbers worked out), plus
the spec 10.4 walk-through of examples/headless-agent/tests/snapshots/compaction-recovery/session.jsonl.
"""
from __future__ import annotations

import pytest

from surfacecheck.model.errors import TokenMeterError
from surfacecheck.model.estimate import estimate_header, estimate_message
from surfacecheck.model.event import ABSENT, Event
from surfacecheck.model.meter import (
    Baseline,
    MeterState,
    assemble_blocks,
    fold_meter,
    fold_surface_tokens,
    measure,
    measure_state,
    node_price,
    replay_meter,
    usage_tokens,
)
from surfacecheck.model.session import Session, append, replay_events
from surfacecheck.model.surface import fold_surface

USAGE = {"inputTokens": 20, "cacheReadTokens": 3, "cacheWriteTokens": 4, "outputTokens": 7, "reasoningTokens": 6}


def header(model: str = "deepseek-v4-flash", **extras) -> dict:
    return {"config": {"provider": "mock", "model": model}, **extras}


def user_msg(text: str, mid: str | None = None) -> dict:
    return {"id": mid or f"u-{text[:8]}", "role": "user", "source": {"kind": "user"},
            "content": [{"type": "text", "text": text}]}


def assistant_data(text: str, *, turn: int = 1, step: int = 1, usage=None, model: str = "mock") -> dict:
    data = {"turn": turn, "step": step, "message": {
        "id": f"a-{turn}-{step}", "role": "assistant", "source": {"kind": "model", "provider": "mock", "model": model},
        "content": [] if text == "" else [{"type": "text", "text": text}]}}
    if usage is not None:
        data["usage"] = usage
    return data


def add(session: Session, type_: str, data, **opts) -> Session:
    session, _ = append(session, type_, data, **opts)
    return session


def add_user(session: Session, text: str) -> Session:
    return add(session, "user/message", user_msg(text, f"u{session.next_seq}"), surface_op="append")


def successful_call(session: Session, value: dict, *, turn: int = 1, step: int = 1, provider_text: str = "provider answer",
                    durable_text: str | None = None, usage=None, provenance: str = "exact") -> Session:
    """token-meter.spec.ts `appendSuccessfulCall`: step/start, header, chunks, assistant/message, step/end."""
    durable_text = provider_text if durable_text is None else durable_text
    session = add(session, "step/start", {"turn": turn, "step": step})
    session = add(session, "request/header", {"header": value, "reason": "initial"})
    sources = []
    if provenance == "exact":
        chunks = [{"type": "block-start", "index": 0, "blockType": "text"},
                  {"type": "text-delta", "index": 0, "text": provider_text},
                  {"type": "block-end", "index": 0, "block": {"type": "text", "text": provider_text}}]
        if usage is not None:
            chunks.append({"type": "usage", "usage": usage})
        chunks.append({"type": "finish", "reason": {"kind": "stop"}})
        for chunk in chunks:
            sources.append(session.next_seq)
            session = add(session, "assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})
    opts = {"surface_op": "append"}
    if provenance != "absent":
        opts["source_event_seqs"] = [] if provenance == "empty" else sources
    session = add(session, "assistant/message", assistant_data(durable_text, turn=turn, step=step, usage=usage), **opts)
    return add(session, "step/end", {"turn": turn, "step": step})


def meter_error(events) -> str:
    with pytest.raises(TokenMeterError) as info:
        replay_meter(events)
    return info.value.message


def check_surface_invariants(session: Session) -> None:
    """P1: measured node seqs == surface nodes; P2: Σ node tokens == surfaceTokens; prices == estimateMessage."""
    m = measure(session)
    assert m.seqs == session.nodes
    assert sum(t for _, t in m.nodes) == m.surface_tokens
    assert all(t == node_price(session.log[s]) for s, t in m.nodes)


# ==================================================================================================
class TestStepBracket:
    def test_overlapping_step_start(self):
        session = add(add(Session(), "step/start", {"turn": 1, "step": 1}), "step/start", {"turn": 1, "step": 2})
        for _ in range(2):  # a failing event stays unread and fails again
            assert meter_error(session.log) == "token meter: step/start at seq 1 arrived before turn 1/step 1 ended"

    def test_step_end_without_start(self):
        session = add(Session(), "step/end", {"turn": 1, "step": 1})
        assert meter_error(session.log) == "token meter: step/end at seq 0 has no matching step/start event"

    @pytest.mark.parametrize("end", [{"turn": 1, "step": 2}, {"turn": 2, "step": 1}, {}])
    def test_mismatched_step_end(self, end):
        session = add(add(Session(), "step/start", {"turn": 1, "step": 1}), "step/end", end)
        assert meter_error(session.log) == "token meter: step/end at seq 1 has no matching step/start event"

    def test_step_end_clears_the_open_step(self):
        session = successful_call(Session(), header())
        state = replay_meter(session.log)
        assert state.step_start is None
        again = successful_call(session, header(), step=2)
        assert replay_meter(again.log).step_start is None

    def test_assistant_without_step(self):
        session = add(Session(), "request/header", {"header": header(), "reason": "initial"})
        session = add(session, "assistant/message", assistant_data("bad"), surface_op="append", source_event_seqs=[])
        assert meter_error(session.log) == "token meter: assistant/message at seq 1 has no matching step/start event"

    def test_late_assistant_after_step_end(self):
        session = add(Session(), "step/start", {"turn": 1, "step": 1})
        session = add(session, "request/header", {"header": header(), "reason": "initial"})
        session = add(session, "step/end", {"turn": 1, "step": 1})
        session = add(session, "assistant/message", assistant_data(""), surface_op="append", source_event_seqs=[])
        assert meter_error(session.log) == "token meter: assistant/message at seq 3 has no matching step/start event"

    @pytest.mark.parametrize("turn, step", [(1, 2), (2, 1)])
    def test_assistant_of_another_step(self, turn, step):
        session = add(Session(), "step/start", {"turn": 1, "step": 1})
        session = add(session, "assistant/message", assistant_data("x", turn=turn, step=step), surface_op="append")
        assert meter_error(session.log) == "token meter: assistant/message at seq 1 has no matching step/start event"

    def test_assistant_replacement_needs_the_step_too(self):
        """token-meter.spec.ts 'does not partially apply a malformed assistant replacement'."""
        session = add_user(Session(), "head")
        session = add(session, "request/header", {"header": header(), "reason": "initial"})
        session = add(session, "assistant/message", assistant_data("replacement"),
                      surface_op={"op": "replace", "start": 0, "end": 0}, source_event_seqs=[0])
        state = replay_meter(session.log[:2])
        with pytest.raises(TokenMeterError, match="^token meter: assistant/message at seq 2 has no matching step/start event$"):
            fold_meter(state, session.log[2], session.event_at)
        assert state.nodes == ((0, estimate_message(user_msg("head"))),) and state.consumed == 2

    def test_step_start_captures_the_surface_before_the_step(self):
        session = add_user(Session(), "abcd")                     # 9 tokens
        session = add(session, "step/start", {"turn": 1, "step": 1})
        session = add_user(session, "efgh")                       # entered after step/start
        state = replay_meter(session.log)
        assert state.step_start.surface_tokens == 9
        assert state.surface_tokens == 18


class TestSurfacePricing:
    def test_append_and_replace_signed_deltas(self):
        session = add_user(Session(), "a" * 40)                   # 10 + 8 = 18
        session = add_user(session, "b" * 8)                      # 2 + 8 = 10
        assert replay_meter(session.log).surface_tokens == 28
        session = add(session, "user/message", user_msg("c"), surface_op={"op": "replace", "start": 0, "end": 1},
                      source_event_seqs=[0, 1])                   # 1 + 8 = 9
        state = replay_meter(session.log)
        assert state.nodes == ((2, 9),) and state.surface_tokens == 9
        check_surface_invariants(session)

    def test_fold_surface_tokens_returns_price_nodes_and_delta(self):
        nodes = ((0, 18), (1, 10), (2, 7))
        event = Event("user/message", 3, 0, user_msg("abcd"), surface_op={"op": "replace", "start": 1, "end": 2},
                      source_event_seqs=[1, 2])
        tokens, new_nodes, delta = fold_surface_tokens(nodes, event)
        assert (tokens, new_nodes, delta) == (9, ((0, 18), (3, 9)), 9 - 17)
        assert nodes == ((0, 18), (1, 10), (2, 7))  # input untouched

    @pytest.mark.parametrize("nodes, op, expected", [
        (((0, 5),), {"op": "replace", "start": 99, "end": 99}, "99-99"),
        (((0, 5),), {"op": "replace", "start": 0, "end": 99}, "0-99"),
        (((0, 5),), {"op": "replace", "start": 99, "end": 0}, "99-0"),
        (((0, 5), (1, 5)), {"op": "replace", "start": 1, "end": 0}, "1-0"),
        ((), {"op": "replace", "start": 0, "end": 0}, "0-0"),
    ])
    def test_invalid_current_range(self, nodes, op, expected):
        event = Event("user/message", 7, 0, user_msg("x"), surface_op=op, source_event_seqs=[0])
        with pytest.raises(TokenMeterError) as info:
            fold_surface_tokens(nodes, event)
        assert info.value.message == f"token surface: replace at seq 7 has invalid current range {expected}"

    def test_invalid_range_in_an_unchecked_log(self):
        """token-meter.spec.ts 'rejects corrupt replacement ranges without advancing the replay cursor'."""
        events = [Event("user/message", 0, 0, user_msg("head"), surface_op="append"),
                  Event("user/message", 1, 0, user_msg("bad"), surface_op={"op": "replace", "start": 99, "end": 99},
                        source_event_seqs=[0])]
        for _ in range(2):
            assert meter_error(events) == "token surface: replace at seq 1 has invalid current range 99-99"

    def test_empty_assistant_is_priced_zero(self):
        session = successful_call(Session(), header(), provider_text="", durable_text="", provenance="empty")
        m = measure(session)
        assistant = next(e.seq for e in session.log if e.type == "assistant/message")
        assert m.nodes == ((assistant, 0),) and m.surface_tokens == 0

    def test_log_only_events_only_advance_the_revision(self):
        session = add_user(Session(), "abcd")
        session = add(session, "plugin/x", {})
        session = add(session, "compaction/prune", {"shadowedRange": {"start": 0, "end": 0}, "shadowedSeqs": [0],
                                                    "shadowedTokenCount": 1000})
        m = measure(session)
        assert m.log_revision == 3 and m.surface_tokens == 9 and m.seqs == (0,)


class TestAnchors:
    def test_usage_anchor_with_signed_durable_rewrite(self):
        """'uses disjoint provider usage and signed durable-output rewrites' (usage 20+3+4+7 = 34, reasoning not added)."""
        session = add_user(Session(), "before")                                       # 10
        session = successful_call(session, header(), provider_text="short",            # provider 10
                                  durable_text="a much longer rewritten durable assistant answer", usage=USAGE)  # 20
        assert usage_tokens(USAGE) == 34
        state = replay_meter(session.log)
        assert state.anchor.surface_tokens == 10 + 10
        m = measure_state(state)
        assert m.baseline == Baseline("usage", 34)
        assert (m.surface_tokens, m.surface_delta_tokens, m.total_tokens) == (30, 10, 44)

    def test_usage_over_counts_messages_entered_after_step_start(self):
        """Spec 4.3: step-entered user messages are in provider input and again in the heuristic delta."""
        session = add(Session(), "step/start", {"turn": 1, "step": 1})
        session = add_user(session, "abcd")                                            # 9, entered after step/start
        session = add(session, "request/header", {"header": header(), "reason": "initial"})
        session = add(session, "assistant/message", assistant_data("abcd", usage={"inputTokens": 990, "outputTokens": 10}),
                      surface_op="append")                                             # durable price 9, no sources
        m = measure(session)
        assert m.baseline == Baseline("usage", 1000)
        # total = P + (surfaceTokens - stepStartSurface - providerAssistant) = 1000 + (18 - 0 - 9)
        assert m.total_tokens == 1009

    def test_heuristic_anchor_when_usage_undercuts(self):
        """'selects a heuristic anchor when provider usage would undercut its scale'."""
        h = header(system="system context")                                            # 8
        session = successful_call(Session(), h, provider_text="abcd" * 512, usage={"inputTokens": 20, "outputTokens": 7})
        anchored = measure(session)
        assert anchored.baseline == Baseline("estimated", 8 + 520)
        assistant = anchored.nodes[0][0]
        session = add(session, "user/message", user_msg("short"), surface_op={"op": "replace", "start": assistant, "end": assistant},
                      source_event_seqs=[assistant])                                   # 10
        shrunk = measure(session)
        assert shrunk.surface_delta_tokens == 10 - 520
        assert shrunk.total_tokens == 18 == measure(session, header("different-model", system="system context")).total_tokens

    @pytest.mark.parametrize("output, kind, tokens", [(4, "usage", 9), (3, "estimated", 9), (5, "usage", 10)])
    def test_usage_anchor_boundary_is_inclusive(self, output, kind, tokens):
        """P >= E keeps the provider figure (spec 4.2): E = 0 (no system/tools) + 0 + provider 'abcd' (9)."""
        session = successful_call(Session(), header(), provider_text="abcd",
                                  usage={"inputTokens": 5, "outputTokens": output})
        assert measure(session).baseline == Baseline(kind, tokens)

    def test_estimated_anchor_without_usage(self):
        session = successful_call(Session(), header(system="s"), provider_text="provider", durable_text="rewritten")
        anchored = measure(session)
        assert anchored.baseline == Baseline("estimated", 5 + 11)
        assert anchored.surface_delta_tokens == 0 and anchored.total_tokens == 16
        advanced = measure(add_user(session, "later"))
        assert (advanced.surface_delta_tokens, advanced.total_tokens) == (10, 26)

    def test_explicit_empty_sources_vs_absent_legacy_sources(self):
        explicit = successful_call(Session(), header(), durable_text="listener injected text", provider_text="",
                                   usage=USAGE, provenance="empty")
        legacy = successful_call(Session(), header(), durable_text="listener injected text", provider_text="",
                                 usage=USAGE, provenance="absent")
        e, l = measure(explicit), measure(legacy)
        assert (e.baseline, e.surface_delta_tokens, e.total_tokens) == (Baseline("usage", 34), 14, 48)
        assert (l.baseline, l.surface_delta_tokens, l.total_tokens) == (Baseline("usage", 34), 0, 34)

    def test_usage_without_header_takes_the_estimated_branch(self):
        session = add(Session(), "step/start", {"turn": 1, "step": 1})
        session = add(session, "assistant/message", assistant_data("abcd", usage={"inputTokens": 5000, "outputTokens": 1}),
                      surface_op="append", source_event_seqs=[0])  # seq 0 is no chunk: must not be read
        m = measure(session)
        assert m.baseline == Baseline("estimated", 9) and m.total_tokens == 9

    def test_latest_anchor_wins_and_a_header_change_voids_it(self):
        """'keeps only the latest successful request anchor across model switches'."""
        alpha = header("alpha", system="same envelope")                               # 8
        session = successful_call(Session(), alpha, usage=USAGE, provider_text="alpha")
        assert measure(session).baseline == Baseline("usage", 34)
        session = successful_call(session, header("beta"), step=2, usage={"inputTokens": 100, "outputTokens": 50},
                                  provider_text="beta response")
        assert measure(session).baseline == Baseline("usage", 150)
        session = add(session, "request/header", {"header": alpha, "reason": "change"})
        switched = measure(session)
        assert switched.baseline == Baseline("estimated", 8 + 10 + 12)
        assert switched.surface_delta_tokens == 0
        # the next assistant message re-anchors
        session = successful_call(session, alpha, step=3, usage={"inputTokens": 500, "outputTokens": 5}, provider_text="x")
        assert measure(session).baseline == Baseline("usage", 505)

    def test_header_override_uses_canonical_equality(self):
        """'invalidates usage for any canonical envelope change or explicit override'."""
        anchored = header(system="one")
        session = successful_call(Session(), anchored, usage=USAGE)
        logged = measure(session)
        assert measure(session, {**anchored, "tools": []}).baseline.kind == "usage"
        assert measure(session, {**anchored, "system": "one", "unknownKey": 1}).baseline.kind == "usage"
        for other in (header(system="two"), header("deepseek-v4-pro", system="one"),
                      {**anchored, "config": {**anchored["config"], "temperature": 0.2}},
                      {**anchored, "tools": [{"name": "read", "description": "read", "parameters": {"type": "object"}}]}):
            overridden = measure(session, other)
            assert overridden.baseline.kind == "estimated"
            assert overridden.total_tokens == estimate_header(other) + logged.surface_tokens
            assert (overridden.nodes, overridden.surface_tokens) == (logged.nodes, logged.surface_tokens)

    def test_baseline_none_and_estimated_without_anchor(self):
        assert measure(Session()).baseline == Baseline("none", 0)
        only_log = add(Session(), "turn/start", {"turn": 1})
        assert measure(only_log) .total_tokens == 0 and measure(only_log).baseline.kind == "none"
        with_header = add(only_log, "request/header", {"header": header(system="abcdefgh"), "reason": "initial"})
        assert measure(with_header).baseline == Baseline("estimated", 6)
        with_surface = add_user(Session(), "abcd")
        assert measure(with_surface).baseline == Baseline("estimated", 9)

    def test_latest_header_snapshot_is_the_envelope(self):
        session = add(Session(), "request/header", {"header": header(), "reason": "initial"})
        session = add(session, "request/header", {"header": header("pro", system="abcd"), "reason": "change"})
        m = measure(session)
        assert m.baseline == Baseline("estimated", 5) and m.log_revision == 2


class TestProviderChunks:
    @staticmethod
    def step_with(sources, *, source_event: Event | None = None, usage=True, extra: list | None = None):
        events = [Event("step/start", 0, 0, {"turn": 1, "step": 1}),
                  Event("request/header", 1, 0, {"header": header(), "reason": "initial"}),
                  Event("assistant/chunk", 2, 0, {"turn": 1, "step": 1, "chunk": {"type": "finish", "reason": {"kind": "stop"}}}),
                  source_event or Event("assistant/chunk", 3, 0, {"turn": 1, "step": 1,
                                                                   "chunk": {"type": "text-delta", "index": 0, "text": "x"}})]
        events += extra or []
        data = assistant_data("bad", usage={"inputTokens": 1, "outputTokens": 1} if usage else None)
        events.append(Event("assistant/message", len(events), 0, data, surface_op="append", source_event_seqs=sources))
        return events

    def test_not_earlier(self):
        assert meter_error(self.step_with([2, 99])) == "token meter: assistant/message at seq 4 source seq 99 is not earlier"
        assert meter_error(self.step_with([4])) == "token meter: assistant/message at seq 4 source seq 4 is not earlier"

    def test_repeats(self):
        assert meter_error(self.step_with([3, 2, 3])) == "token meter: assistant/message at seq 4 repeats source seq 3"

    def test_not_a_chunk(self):
        user = Event("user/message", 3, 0, user_msg("x"), surface_op="append")
        assert meter_error(self.step_with([2, 3], source_event=user)) == \
            "token meter: assistant/message at seq 4 source seq 3 is not assistant/chunk"
        assert meter_error(self.step_with([1])) == "token meter: assistant/message at seq 4 source seq 1 is not assistant/chunk"

    @pytest.mark.parametrize("turn, step", [(1, 2), (2, 1)])
    def test_another_step(self, turn, step):
        other = Event("assistant/chunk", 3, 0, {"turn": turn, "step": step, "chunk": {"type": "finish", "reason": {"kind": "stop"}}})
        assert meter_error(self.step_with([2, 3], source_event=other)) == \
            "token meter: assistant/message at seq 4 source seq 3 belongs to another step"

    def test_errors_are_reported_in_citation_order(self):
        assert meter_error(self.step_with([3, 3, 99])) == "token meter: assistant/message at seq 4 repeats source seq 3"
        assert meter_error(self.step_with([99, 3, 3])) == "token meter: assistant/message at seq 4 source seq 99 is not earlier"

    def test_sources_are_only_read_for_a_usage_anchor(self):
        state = replay_meter(self.step_with([1, 99, 1], usage=False))
        assert state.anchor.baseline == Baseline("estimated", 1 + 4 + 4)  # durable "bad" (+0 header)

    def test_provider_price_from_reassembled_chunks(self):
        chunks = [{"type": "block-start", "index": 0, "blockType": "reasoning"},
                  {"type": "reasoning-delta", "index": 0, "text": "abcd"},
                  {"type": "reasoning-delta", "index": 0, "text": "efgh"},          # reasoning 'abcdefgh' = 6
                  {"type": "block-start", "index": 1, "blockType": "tool-call"},
                  {"type": "tool-call-delta", "index": 1, "id": "c1", "name": "bash", "argumentsDelta": '{"a"'},
                  {"type": "tool-call-delta", "index": 1, "id": "c1", "argumentsDelta": ":1}"},  # bash/{"a":1} = 7
                  {"type": "usage", "usage": {"inputTokens": 10, "outputTokens": 5}},
                  {"type": "finish", "reason": {"kind": "tool-calls"}}]
        events = [Event("step/start", 0, 0, {"turn": 1, "step": 1}),
                  Event("request/header", 1, 0, {"header": header(), "reason": "initial"})]
        for chunk in chunks:
            events.append(Event("assistant/chunk", len(events), 0, {"turn": 1, "step": 1, "chunk": chunk}))
        data = assistant_data("durable text that is much longer than the stream")
        data["usage"] = {"inputTokens": 10, "outputTokens": 5}
        events.append(Event("assistant/message", len(events), 0, data, surface_op="append",
                            source_event_seqs=list(range(2, len(events)))))
        anchor = replay_meter(events).anchor
        assert anchor.surface_tokens == 6 + 7 + 4
        assert anchor.baseline == Baseline("estimated", 17)  # P = 15 < E = 0 + 17


class TestAssembleBlocks:
    def test_block_end_wins_over_deltas_and_stragglers(self):
        blocks = assemble_blocks([
            {"type": "block-start", "index": 0, "blockType": "text"},
            {"type": "text-delta", "index": 0, "text": "stream"},
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": "final"}},
            {"type": "text-delta", "index": 0, "text": "straggler"},
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": "re-close"}},
        ])
        assert blocks == [{"type": "text", "text": "final"}]

    def test_open_blocks_assemble_from_deltas_in_stream_order(self):
        blocks = assemble_blocks([
            {"type": "text-delta", "index": 1, "text": "b"},
            {"type": "reasoning-delta", "index": 0, "text": "r"},
            {"type": "tool-call-delta", "index": 2, "id": "c9", "argumentsDelta": "{}"},
            {"type": "text-delta", "index": 1, "text": "c"},
        ])
        assert blocks == [{"type": "text", "text": "bc"}, {"type": "reasoning", "text": "r"},
                          {"type": "tool-call", "id": "c9", "name": "", "arguments": "{}"}]

    def test_max_tokens_drops_tool_calls(self):
        chunks = [{"type": "text-delta", "index": 0, "text": "t"},
                  {"type": "tool-call-delta", "index": 1, "id": "c", "name": "n", "argumentsDelta": "{"}]
        assert [b["type"] for b in assemble_blocks(chunks + [{"type": "finish", "reason": {"kind": "max-tokens"}}])] == ["text"]
        assert [b["type"] for b in assemble_blocks(chunks + [{"type": "finish", "reason": {"kind": "stop"}}])] == ["text", "tool-call"]

    def test_usage_and_finish_only_produce_no_blocks(self):
        assert assemble_blocks([{"type": "usage", "usage": {}}, {"type": "finish", "reason": {"kind": "stop"}}]) == []

    def test_incomplete_unknown_block(self):
        with pytest.raises(TokenMeterError, match='^cannot assemble incomplete block of type "image"$'):
            assemble_blocks([{"type": "block-start", "index": 0, "blockType": "image"}])


# ==================================================================================================
# Spec 10.4 on the real compaction-recovery log
# ==================================================================================================
RECOVERY = "examples__headless-agent__tests__snapshots__compaction-recovery__session.jsonl"


@pytest.fixture(scope="module")
def recovery(corpus):
    from surfacecheck.model.jsonl import read_log
    return read_log(corpus / "dsh-sessions" / RECOVERY).events


class TestSpec104:
    def test_envelope_price(self, recovery):
        logged = next(e for e in recovery if e.type == "request/header")
        assert logged.seq == 6
        assert estimate_header(logged.data["header"]) == 4392

    @pytest.mark.parametrize("after_seq, total", [(6, 4658), (15, 4701), (21, 4551), (30, 4564)])
    def test_measure_totals(self, recovery, after_seq, total):
        assert len(recovery) == 31
        assert measure_state(replay_meter(recovery[: after_seq + 1])).total_tokens == total

    def test_prices_and_anchors(self, recovery):
        assert node_price(recovery[4]) == 266
        assert node_price(recovery[21]) == 116
        at13 = replay_meter(recovery[:14])
        assert at13.anchor.baseline == Baseline("estimated", 4421) and at13.anchor.surface_tokens == 29
        at17 = replay_meter(recovery[:18])
        assert at17.step_start.surface_tokens == 309
        final = replay_meter(recovery)
        assert final.nodes == ((21, 116), (13, 29), (15, 14), (28, 13))
        assert final.surface_tokens == 172
        assert final.anchor.surface_tokens == 322 and final.anchor.baseline == Baseline("estimated", 4714)
        m = measure_state(final)
        assert (m.baseline.kind, m.surface_delta_tokens, m.total_tokens) == ("estimated", 172 - 322, 4392 + 172)

    def test_surface_invariants_on_every_prefix(self, recovery):
        for n in range(len(recovery) + 1):
            prefix = replay_events(recovery[:n])
            m = measure(prefix)
            assert m.seqs == prefix.nodes == fold_surface(recovery[:n]).surface.nodes
            assert sum(t for _, t in m.nodes) == m.surface_tokens
            assert m.log_revision == n


# ==================================================================================================
# Model consistency: replay() reports what the meter reports; every fold sees the same replaces
# ==================================================================================================
def _cross_step_source() -> list[Event]:
    """A usage-bearing assistant/message in step 2 citing a chunk of step 1 (dsh: 'belongs to another step')."""
    return [Event("request/header", 0, 0, {"header": header(), "reason": "initial"}),
            Event("step/start", 1, 0, {"turn": 1, "step": 1}),
            Event("assistant/chunk", 2, 0, {"turn": 1, "step": 1, "chunk": {"type": "finish", "reason": {"kind": "stop"}}}),
            Event("step/end", 3, 0, {"turn": 1, "step": 1}),
            Event("step/start", 4, 0, {"turn": 1, "step": 2}),
            Event("assistant/message", 5, 0, assistant_data("x", step=2, usage={"inputTokens": 1, "outputTokens": 1}),
                  surface_op="append", source_event_seqs=[2])]


class TestReplayAgreesWithMeter:
    CASES = {
        "not-chunk": TestProviderChunks.step_with([1]),
        "same-step-other-turn": TestProviderChunks.step_with([3], source_event=Event(
            "assistant/chunk", 3, 0, {"turn": 2, "step": 1, "chunk": {"type": "finish", "reason": {"kind": "stop"}}})),
        "overlapping-step": [Event("step/start", 0, 0, {"turn": 1, "step": 1}), Event("step/start", 1, 0, {"turn": 1, "step": 2})],
    }

    @pytest.mark.parametrize("name", sorted(CASES))
    def test_same_error(self, name):
        from surfacecheck.model.replay import replay
        events = self.CASES[name]
        result = replay(events)
        assert not result.ok
        assert result.error.message == meter_error(events)
        assert result.events == len(events) - 1  # replay stops at the failing event

    def test_surface_validation_comes_first(self):
        """Non-earlier / repeated sources are surface errors before the meter ever sees them (spec 1.4 step 3)."""
        from surfacecheck.model.replay import replay
        assert replay(TestProviderChunks.step_with([2, 99])).error.message == \
            "sourceEventSeqs must reference earlier events: 99 >= current seq 4"
        assert replay(TestProviderChunks.step_with([3, 2, 3])).error.message == "sourceEventSeqs must not contain duplicates"

    def test_cross_step_source_chunk(self):
        from surfacecheck.model.replay import replay
        events = _cross_step_source()
        assert meter_error(events) == "token meter: assistant/message at seq 5 source seq 2 belongs to another step"
        assert replay(events).error.message == meter_error(events)

    def test_float_valued_replace_marker(self):
        events = [Event("user/message", 0, 0, user_msg("a"), surface_op="append"),
                  Event("user/message", 1, 0, user_msg("bbbbbbbbbbbbbbbb"), surface_op={"op": "replace", "start": 0.0, "end": 0},
                        source_event_seqs=[0])]
        assert fold_surface(events).surface.nodes == (1,)  # JS: {start: 0, end: 0}
        assert replay_meter(events).nodes == ((1, node_price(events[1])),)
