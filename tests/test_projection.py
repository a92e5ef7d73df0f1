"""The O(1) claim fold and the three observability surfaces (spec 5.1-5.2, 10.4, 15 G1).

Ported rules from packages/llm/token-meter/src/{surface-projection,usage-projection,breakdown-projection}.ts;
the spec 10.4 figures and the G1 drift are checked on the two corpus logs that contain replacements.
"""
from __future__ import annotations

import pytest

from surfacecheck.model.errors import ProjectionClaimError
from surfacecheck.model.event import ABSENT, Event
from surfacecheck.model.meter import measure_state, node_price, replay_meter
from surfacecheck.model.projection import (
    Buckets,
    Claim,
    ClaimStep,
    ContextBreakdown,
    ContextPressure,
    Observability,
    SurfaceProjection,
    TokenUsage,
    fold_breakdown,
    fold_claim,
    fold_observability,
    fold_pressure,
    fold_projection,
    fold_usage,
)
from surfacecheck.model.replay import replay
from surfacecheck.model.session import Session, append


def user_msg(text: str, mid: str | None = None) -> dict:
    return {"id": mid or f"u-{text[:6]}", "role": "user", "source": {"kind": "user"},
            "content": [{"type": "text", "text": text}]}


def ev(type_: str, seq: int, data=None, *, op=ABSENT, src=ABSENT) -> Event:
    return Event(type_, seq, 0, {} if data is None else data, surface_op=op, source_event_seqs=src)


def rep(start: int, end: int) -> dict:
    return {"op": "replace", "start": start, "end": end}


def summary(seq: int, start: int, end: int, tokens: int, kind: str = "compaction/summary") -> Event:
    return ev(kind, seq, {"shadowedRange": {"start": start, "end": end}, "shadowedSeqs": [start], "shadowedTokenCount": tokens})


def usage_chunk(seq: int, turn: int, step: int, **usage) -> Event:
    return ev("assistant/chunk", seq, {"turn": turn, "step": step, "chunk": {"type": "usage", "usage": usage}})


def assistant(seq: int, text: str, *, turn: int = 1, step: int = 1, usage=None, op="append", src=ABSENT) -> Event:
    data = {"turn": turn, "step": step, "message": {
        "id": f"a{seq}", "role": "assistant", "source": {"kind": "model", "provider": "p", "model": "m"},
        "content": [] if text == "" else [{"type": "text", "text": text}]}}
    if usage is not None:
        data["usage"] = usage
    return ev("assistant/message", seq, data, op=op, src=src)


def fold_all(events, fold, state):
    for event in events:
        state = fold(state, event)
    return state


# ==================================================================================================
# spec 5.1 foldSurfaceProjection
# ==================================================================================================
class TestClaimFold:
    @pytest.mark.parametrize("kind", ["compaction/summary", "compaction/prune"])
    def test_metering_events_arm(self, kind):
        assert fold_claim(None, summary(3, 4, 9, 266, kind)) == ClaimStep(0, Claim(4, 9, 266), "arm")

    def test_arming_overwrites_an_armed_claim(self):
        step = fold_claim(Claim(1, 1, 10), summary(3, 2, 2, 20, "compaction/prune"))
        assert step.claim == Claim(2, 2, 20) and step.delta == 0

    def test_consume_exact_range(self):
        event = ev("user/message", 5, user_msg("abcd"), op=rep(4, 4), src=[4])   # 9 tokens
        assert fold_claim(Claim(4, 4, 266), event) == ClaimStep(9 - 266, None, "consume")

    def test_consume_positional_range_with_start_after_end(self):
        event = ev("user/message", 9, user_msg("abcd"), op=rep(7, 2), src=[7, 2])
        assert fold_claim(Claim(7, 2, 100), event) == ClaimStep(9 - 100, None, "consume")

    def test_empty_assistant_replacement_prices_zero(self):
        event = assistant(5, "", op=rep(1, 1), src=[1])
        assert fold_claim(Claim(1, 1, 40), event) == ClaimStep(-40, None, "consume")

    def test_mismatched_claim(self):
        event = ev("user/message", 5, user_msg("x"), op=rep(1, 2), src=[1, 2])
        with pytest.raises(ProjectionClaimError) as info:
            fold_claim(Claim(1, 3, 50), event)
        assert info.value.message == ("token surface: replace at seq 5 over range 1-2 has no adjacent shadow price "
                                      "(armed claim covers 1-3)")
        with pytest.raises(ProjectionClaimError, match=r"over range 4-4 .* \(armed claim covers 3-4\)$"):
            fold_claim(Claim(3, 4, 50), ev("tool/result", 8, {"message": {"content": []}}, op=rep(4, 4), src=[4]))

    def test_unpriced_replace_is_neutral(self):
        event = ev("user/message", 5, user_msg("x" * 400), op=rep(1, 2), src=[1, 2])
        assert fold_claim(None, event) == ClaimStep(0, None, "unpriced-replace")

    def test_append_expires_the_claim_and_adds_its_price(self):
        assert fold_claim(Claim(1, 1, 5), ev("user/message", 5, user_msg("abcd"), op="append")) == ClaimStep(9, None, "append")
        assert fold_claim(None, assistant(5, "")) == ClaimStep(0, None, "append")

    @pytest.mark.parametrize("event", [
        ev("plugin/x", 5), ev("turn/start", 5, {"turn": 1}), ev("compaction/start", 5, {"compactionId": "c"}),
        ev("compaction/end", 5, {"compactionId": "c"}), ev("assistant/chunk", 5, {"chunk": {"type": "finish"}}),
        ev("user/message", 5, user_msg("markerless")),   # not a surface event without its marker
    ], ids=lambda e: e.type + ("-markerless" if e.is_surface_type else ""))
    def test_any_other_event_expires(self, event):
        assert fold_claim(Claim(1, 1, 5), event) == ClaimStep(0, None, "expire")
        assert fold_claim(None, event) == ClaimStep(0, None, "none")


class TestAdjacency:
    BASE = [ev("user/message", 0, user_msg("a" * 400), op="append"),       # 100 + 8 = 108
            ev("user/message", 1, user_msg("b" * 40), op="append")]        # 10 + 8 = 18

    def run(self, tail):
        events = self.BASE + tail
        projection = fold_all(events, fold_projection, SurfaceProjection())
        meter = replay_meter(events)
        return projection, meter

    def test_adjacent_claim_keeps_projection_exact(self):
        projection, meter = self.run([summary(2, 0, 1, 126), ev("user/message", 3, user_msg("abcd"), op=rep(0, 1), src=[0, 1])])
        assert projection == SurfaceProjection(9, None) and meter.surface_tokens == 9

    @pytest.mark.parametrize("between", [ev("plugin/x", 3), ev("compaction/end", 3, {"compactionId": "c"}),
                                         ev("user/message", 3, user_msg("zz"), op="append")],
                             ids=["log-only", "compaction-end", "append"])
    def test_any_intervening_event_expires_and_the_replace_drifts(self, between):
        checkpoint = ev("user/message", 4, user_msg("abcd"), op=rep(0, 1), src=[0, 1])
        projection, meter = self.run([summary(2, 0, 1, 126), between, checkpoint])
        shadowed, replacement = 108 + 18, 9
        assert projection.claim is None
        # the replace folds with delta 0: drift = shadowed - replacement
        assert projection.total - meter.surface_tokens == shadowed - replacement

    def test_wrong_range_after_a_metering_event_fails(self):
        with pytest.raises(ProjectionClaimError, match="^token surface: replace at seq 3 over range 1-1"):
            self.run([summary(2, 0, 0, 108, "compaction/prune"), ev("user/message", 3, user_msg("x"), op=rep(1, 1), src=[1])])

    def test_later_metering_event_rearms_for_its_own_range(self):
        with pytest.raises(ProjectionClaimError, match=r"\(armed claim covers 1-1\)$"):
            self.run([summary(2, 0, 1, 126), summary(3, 1, 1, 18, "compaction/prune"),
                      ev("user/message", 4, user_msg("x"), op=rep(0, 1), src=[0, 1])])

    def test_logged_price_is_trusted(self):
        """The fold consumes the logged shadowedTokenCount, not a recount: a wrong price drifts by the error."""
        projection, meter = self.run([summary(2, 0, 1, 100), ev("user/message", 3, user_msg("abcd"), op=rep(0, 1), src=[0, 1])])
        assert projection.total - meter.surface_tokens == 126 - 100


# ==================================================================================================
# spec 5.2 observability surfaces
# ==================================================================================================
class TestUsage:
    def test_resample_of_the_same_step_replaces(self):
        state = fold_usage(TokenUsage(), usage_chunk(0, 1, 1, inputTokens=10, outputTokens=2))
        same = fold_usage(state, assistant(1, "x", usage={"inputTokens": 10, "outputTokens": 2}))
        assert same is state                                    # identical sample: unchanged state by reference
        changed = fold_usage(state, assistant(1, "x", usage={"inputTokens": 12, "outputTokens": 3, "cacheReadTokens": 4}))
        assert changed.totals == Buckets(12, 3, 4, 0)

    def test_steps_accumulate_and_never_decrease(self):
        events = [usage_chunk(0, 1, 1, inputTokens=10, outputTokens=2, cacheWriteTokens=1),
                  usage_chunk(1, 1, 2, inputTokens=5, outputTokens=1),
                  usage_chunk(2, 2, 1, inputTokens=7, outputTokens=4, cacheReadTokens=3),
                  ev("user/message", 3, user_msg("checkpoint"), op=rep(0, 0), src=[0])]
        state = fold_all(events, fold_usage, TokenUsage())
        assert state.totals == Buckets(22, 7, 3, 1)
        assert state.last == (2, 1, Buckets(7, 4, 3, 0))

    def test_returning_to_an_earlier_step_counts_again(self):
        """One `last` slot: a resample is recognised only for the immediately previous (turn, step)."""
        events = [usage_chunk(0, 1, 1, inputTokens=10, outputTokens=0), usage_chunk(1, 1, 2, inputTokens=1, outputTokens=0),
                  usage_chunk(2, 1, 1, inputTokens=10, outputTokens=0)]
        assert fold_all(events, fold_usage, TokenUsage()).totals.uncached_input == 21

    def test_summary_usage_is_never_counted(self):
        event = ev("compaction/summary", 0, {"shadowedRange": {"start": 0, "end": 0}, "shadowedSeqs": [0],
                                             "shadowedTokenCount": 1, "usage": {"inputTokens": 99, "outputTokens": 9}})
        assert fold_usage(TokenUsage(), event) == TokenUsage()

    def test_non_usage_chunks_and_usage_less_messages_are_ignored(self):
        state = TokenUsage()
        for event in (ev("assistant/chunk", 0, {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "text": "x"}}),
                      assistant(1, "x")):
            assert fold_usage(state, event) is state


class TestPressure:
    def test_sample_is_stamped_before_the_same_events_delta(self):
        events = [ev("user/message", 0, user_msg("a" * 40), op="append"),                 # 18
                  assistant(1, "abcd", usage={"inputTokens": 30, "cacheReadTokens": 5, "outputTokens": 100})]  # 9
        state = fold_all(events, fold_pressure, ContextPressure())
        assert (state.pressure_tokens, state.sampled_surface_tokens, state.surface_tokens) == (35, 18, 27)
        assert state.projected_tokens == 35 + 27 - 18

    def test_projected_is_undefined_before_a_sample_and_floored_at_zero(self):
        state = fold_pressure(ContextPressure(), ev("user/message", 0, user_msg("abcd"), op="append"))
        assert state.projected_tokens is None and state.pressure_tokens is None
        state = fold_pressure(state, usage_chunk(1, 1, 1, inputTokens=1, outputTokens=0))
        state = fold_pressure(state, summary(2, 0, 0, 9))
        state = fold_pressure(state, ev("user/message", 3, user_msg(""), op=rep(0, 0), src=[0]))    # 4 + 4 = 8 ... -1
        assert state.surface_tokens == 8 and state.projected_tokens == 0

    def test_context_window_last_wins_and_absent_clears(self):
        state = fold_pressure(ContextPressure(), ev("request/context", 0, {"provider": "p", "model": "m", "contextWindow": 1000}))
        assert state.context_window == 1000
        state = fold_pressure(state, ev("request/context", 1, {"provider": "p", "model": "m", "contextWindow": 2000}))
        assert state.context_window == 2000
        state = fold_pressure(state, ev("request/context", 2, {"provider": "p", "model": "m"}))
        assert state.context_window is None

    def test_claim_is_part_of_the_state_while_armed(self):
        state = fold_pressure(ContextPressure(), summary(0, 1, 1, 5))
        assert state.claim == Claim(1, 1, 5)
        assert fold_pressure(state, ev("plugin/x", 1)).claim is None


class TestBreakdown:
    def test_header_prices_are_last_wins(self):
        h1 = {"config": {"provider": "p", "model": "m"}, "system": "abcdefgh", "tools": [{"name": "t"}]}
        state = fold_breakdown(ContextBreakdown(), ev("request/header", 0, {"header": h1, "reason": "initial"}))
        assert (state.system_tokens, state.tools_tokens) == (6, 4 + 4)   # '[{"name":"t"}]' = 14 chars
        h2 = {"config": {"provider": "p", "model": "m"}, "system": "", "tools": []}
        state = fold_breakdown(state, ev("request/header", 1, {"header": h2, "reason": "change"}))
        assert (state.system_tokens, state.tools_tokens) == (0, 0)

    def test_message_tokens_ride_the_claim_fold(self):
        events = [ev("user/message", 0, user_msg("a" * 40), op="append"), summary(1, 0, 0, 18),
                  ev("user/message", 2, user_msg("abcd"), op=rep(0, 0), src=[0]),
                  ev("user/message", 3, user_msg("x" * 400), op=rep(2, 2), src=[2])]   # unpriced: stays 9
        state = fold_all(events, fold_breakdown, ContextBreakdown())
        assert state.message_tokens == 9 and state.claim is None


# ==================================================================================================
# The corpus logs with replacements (spec 10.4, 15 G1)
# ==================================================================================================
RECOVERY = "examples__headless-agent__tests__snapshots__compaction-recovery__session.jsonl"
INSTRUCTIONS = "examples__acp-agent__tests__snapshots__agent-instructions__session.jsonl"


def _events(corpus, name):
    from surfacecheck.model.jsonl import read_log
    return read_log(corpus / "dsh-sessions" / name).events


@pytest.fixture(scope="module")
def recovery(corpus):
    return _events(corpus, RECOVERY)


@pytest.fixture(scope="module")
def instructions(corpus):
    return _events(corpus, INSTRUCTIONS)


class TestSpec104Observability:
    def test_final_surfaces(self, recovery):
        obs = fold_all(recovery, fold_observability, Observability())
        assert (obs.usage.totals.uncached_input, obs.usage.totals.output) == (44, 10)
        assert obs.usage.totals == Buckets(44, 10, 0, 0)
        p = obs.pressure
        assert (p.pressure_tokens, p.projected_tokens, p.context_window) == (20, 33, 128000)
        b = obs.breakdown
        assert (b.system_tokens, b.tools_tokens, b.message_tokens) == (650, 3742, 172)
        assert replay(recovery).observability == obs

    def test_walkthrough(self, recovery):
        at = lambda seq: fold_all(recovery[: seq + 1], fold_observability, Observability())
        assert (at(6).breakdown.system_tokens, at(6).breakdown.tools_tokens, at(6).breakdown.message_tokens) == (650, 3742, 266)
        assert at(7).pressure.context_window == 128000
        s12 = at(12)
        assert s12.usage.totals == Buckets(24, 6, 0, 0)
        assert (s12.pressure.pressure_tokens, s12.pressure.sampled_surface_tokens) == (24, 266)
        s20 = at(20)
        assert s20.pressure.claim == s20.breakdown.claim == Claim(4, 4, 266)
        s21 = at(21)
        assert s21.breakdown.message_tokens == 159 and s21.breakdown.claim is None
        assert s21.pressure.surface_tokens == 159 and s21.pressure.projected_tokens == 0

    def test_fully_metered_projection_equals_the_meter_on_every_prefix(self, recovery):
        """Appendix B P3: with every replace metered, messageTokens == measure().surfaceTokens at every boundary."""
        breakdown, meter = ContextBreakdown(), replay_meter([])
        for event in recovery:
            breakdown = fold_breakdown(breakdown, event)
            meter = replay_meter(recovery[: event.seq + 1])
            assert breakdown.message_tokens == meter.surface_tokens, event.seq
        result = replay(recovery)
        assert result.fully_metered and result.projection_total == result.recount_total == 172


class TestG1Drift:
    def test_unmetered_replace_drifts_the_projection_but_not_measure(self, instructions):
        replace = instructions[17]
        assert replace.replace is not None and (replace.replace.start, replace.replace.end) == (5, 5)
        assert instructions[16].type == "tool/call"  # no metering event before it
        shadowed_price, replacement_price = node_price(instructions[5]), node_price(replace)
        assert (shadowed_price, replacement_price) == (91, 20)

        result = replay(instructions)
        assert result.ok and not result.fully_metered
        [r] = result.replacements
        assert (r.seq, r.kind, r.claim_action, r.logged_shadow_tokens) == (17, "other", "unpriced-replace", None)
        assert (r.recomputed_shadow_tokens, r.replacement_tokens) == (91, 20)

        meter = replay_meter(instructions)
        obs = result.observability
        assert obs.breakdown.message_tokens == 644 != meter.surface_tokens == 573
        assert obs.breakdown.message_tokens - meter.surface_tokens == shadowed_price - replacement_price
        assert result.projection_total - result.recount_total == 71

        # measure() stays exact: nodes == surface, prices are fresh estimateMessage values
        m = measure_state(meter)
        assert m.seqs == result.surface_nodes
        assert m.surface_tokens == sum(node_price(instructions[s]) for s in result.surface_nodes) == 573

    def test_drift_appears_exactly_at_the_replace(self, instructions):
        obs = Observability()
        for event in instructions:
            obs = fold_observability(obs, event)
            drift = obs.breakdown.message_tokens - replay_meter(instructions[: event.seq + 1]).surface_tokens
            assert drift == (71 if event.seq >= 17 else 0), event.seq
            assert obs.pressure.surface_tokens == obs.breakdown.message_tokens

    def test_projected_tokens_reanchor_at_the_next_sample(self, instructions):
        """Spec 15 G1: projectedTokens re-anchors at the next usage sample (drift cancels)."""
        obs = fold_all(instructions, fold_observability, Observability())
        last_sample = max(e.seq for e in instructions
                          if (e.type == "assistant/chunk" and e.data["chunk"]["type"] == "usage")
                          or (e.type == "assistant/message" and e.data.get("usage")))
        assert last_sample > 17
        exact_surface_at_sample = replay_meter(instructions[:last_sample]).surface_tokens
        exact = obs.pressure.pressure_tokens + replay_meter(instructions).surface_tokens - exact_surface_at_sample
        assert obs.pressure.projected_tokens == exact
