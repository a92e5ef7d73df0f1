"""The tool-pairing fold: node deltas, N+1 cuts, corrupt surfaces, cache refresh (spec 3).

Cases ported from packages/compaction/compaction/tests/tool-pairing.spec.ts; Hypothesis checks that the
incremental refresh (extend), a rebuild and an independent oracle agree on random surfaces.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from surfacecheck.model.errors import ToolPairingError
from surfacecheck.model.event import ABSENT, Event
from surfacecheck.model.pairing import (
    EMPTY_CUTS,
    Cuts,
    balanced_after,
    balanced_before,
    event_delta,
    extend_cuts,
    fold_cuts,
    refresh_cuts,
)
from surfacecheck.model.session import Session, append
from surfacecheck.model.surface import Surface


def user_msg(text: str = "go", kind: str = "user") -> dict:
    return {"id": f"u-{text}", "role": "user", "source": {"kind": kind}, "content": [{"type": "text", "text": text}]}


def assistant_data(*calls: str, text: str | None = None) -> dict:
    content = [] if text is None else [{"type": "text", "text": text}]
    content += [{"type": "tool-call", "id": c, "name": "bash", "arguments": "{}"} for c in calls]
    return {"turn": 1, "step": 1, "message": {"id": "a-" + "-".join(calls), "role": "assistant",
                                              "source": {"kind": "model", "provider": "mock", "model": "mock"},
                                              "content": content}}


def tool_data(call: str) -> dict:
    return {"turn": 1, "step": 1, "message": {
        "id": f"t-{call}", "role": "user", "source": {"kind": "tool", "callId": call},
        "content": [{"type": "tool-result", "toolCallId": call, "content": [], "isError": False}]}}


def add(session: Session, type_: str, data: dict, op="append", src=ABSENT) -> Session:
    session, _ = append(session, type_, data, surface_op=op, source_event_seqs=src)
    return session


def closed_tool_step() -> Session:
    session = add(Session(), "user/message", user_msg())          # 0
    session = add(session, "assistant/message", assistant_data("c1"))  # 1
    return add(session, "tool/result", tool_data("c1"))            # 2


def pairing_error(fn) -> str:
    with pytest.raises(ToolPairingError) as info:
        fn()
    return info.value.message


# ==================================================================================================
class TestEventDelta:
    @pytest.mark.parametrize("calls, text, expected", [((), "t", 0), ((), None, 0), (("a",), None, 1),
                                                        (("a", "b", "c"), "t", 3)])
    def test_assistant_counts_tool_call_blocks(self, calls, text, expected):
        assert event_delta(Event("assistant/message", 0, 0, assistant_data(*calls, text=text), surface_op="append")) == expected

    def test_reasoning_and_other_blocks_do_not_count(self):
        data = assistant_data("a")
        data["message"]["content"] += [{"type": "reasoning", "text": "r"}, {"type": "image"}, {"type": "tool-result"}]
        assert event_delta(Event("assistant/message", 0, 0, data, surface_op="append")) == 1

    def test_tool_result_is_minus_one_append_or_replace(self):
        assert event_delta(Event("tool/result", 0, 0, tool_data("x"), surface_op="append")) == -1
        assert event_delta(Event("tool/result", 5, 0, tool_data("x"), surface_op={"op": "replace", "start": 1, "end": 1},
                                 source_event_seqs=[1])) == -1

    def test_user_message_is_neutral(self):
        assert event_delta(Event("user/message", 0, 0, user_msg(), surface_op="append")) == 0


class TestCuts:
    def test_n_plus_one_cuts(self):
        session = closed_tool_step()
        cuts = fold_cuts(session)
        assert cuts.nodes == (0, 1, 2)
        assert cuts.balanced == (True, True, False, True)
        assert cuts.open_calls == 0 and cuts.generation == 0

    def test_empty_surface_has_one_balanced_cut(self):
        assert fold_cuts(Session()).balanced == (True,) == EMPTY_CUTS.balanced

    def test_closed_and_open_single_call_steps(self):
        closed = closed_tool_step()
        assert (balanced_before(closed, 0), balanced_after(closed, 0)) == (True, True)
        assert (balanced_before(closed, 1), balanced_after(closed, 1)) == (True, False)
        assert (balanced_before(closed, 2), balanced_after(closed, 2)) == (False, True)
        open_step = add(Session(), "assistant/message", assistant_data("open"))
        assert balanced_after(open_step, 0) is False
        assert fold_cuts(open_step).open_calls == 1

    def test_multi_call_message_needs_every_result(self):
        session = add(Session(), "assistant/message", assistant_data("c1", "c2"))
        session = add(session, "tool/result", tool_data("c1"))
        session = add(session, "tool/result", tool_data("c2"))
        assert balanced_after(session, 1) is False
        assert balanced_after(session, 2) is True
        assert fold_cuts(session).balanced == (True, False, False, True)

    def test_neutral_node_between_call_and_result_is_unbalanced_on_both_sides(self):
        session = add(Session(), "assistant/message", assistant_data("c1"))
        session = add(session, "user/message", user_msg("background update", "plugin"))
        session = add(session, "tool/result", tool_data("c1"))
        assert (balanced_before(session, 1), balanced_after(session, 1)) == (False, False)
        free = add(Session(), "user/message", user_msg("idle injection"))
        assert (balanced_before(free, 0), balanced_after(free, 0)) == (True, True)

    def test_call_ids_are_not_matched(self):
        session = add(Session(), "assistant/message", assistant_data("c1"))
        session = add(session, "tool/result", tool_data("some-other-call"))
        assert balanced_after(session, 1) is True

    def test_log_only_events_are_not_cuts(self):
        session = add(Session(), "assistant/message", assistant_data("c1"))
        session, _ = append(session, "tool/call", {"callId": "c1"})
        session = add(session, "tool/result", tool_data("c1"))
        assert fold_cuts(session).nodes == (0, 2)
        assert pairing_error(lambda: balanced_before(session, 1)) == "tool-pairing balance: surface seq 1 not found"


class TestCorrupt:
    def test_orphan_result(self):
        session = add(Session(), "tool/result", tool_data("orphan"))
        message = "tool-pairing balance: tool/result at surface seq 0 has no matching tool-call (corrupt surface)"
        assert pairing_error(lambda: fold_cuts(session)) == message
        assert pairing_error(lambda: balanced_after(session, 0)) == message

    def test_orphan_in_an_appended_tail_is_transactional(self):
        """tool-pairing.spec.ts 'retries an orphan result in an appended tail without committing partial cache state'."""
        session = add(Session(), "user/message", user_msg("safe head"))
        cached = refresh_cuts(None, session)
        assert cached.balanced == (True, True)
        grown = add(session, "user/message", user_msg("fine"))
        grown = add(grown, "tool/result", tool_data("orphan"))
        message = "tool-pairing balance: tool/result at surface seq 2 has no matching tool-call (corrupt surface)"
        for _ in range(2):
            assert pairing_error(lambda: refresh_cuts(cached, grown)) == message
            assert cached.nodes == (0,) and cached.balanced == (True, True)

    def test_second_result_after_a_single_call(self):
        session = closed_tool_step()
        session = add(session, "tool/result", tool_data("c1"))
        assert pairing_error(lambda: fold_cuts(session)) == \
            "tool-pairing balance: tool/result at surface seq 3 has no matching tool-call (corrupt surface)"

    def test_surface_seq_without_an_event(self):
        log = (Event("user/message", 0, 0, user_msg(), surface_op="append"),)
        missing = Session(log, Surface((1,), 0))
        assert pairing_error(lambda: balanced_before(missing, 1)) == \
            "tool-pairing balance: surface seq 1 has no matching session event (corrupt surface)"

    def test_surface_seq_indexing_the_wrong_event(self):
        log = (Event("user/message", 99, 0, user_msg(), surface_op="append"),)
        mismatched = Session(log, Surface((0,), 0))
        assert pairing_error(lambda: balanced_before(mismatched, 0)) == \
            "tool-pairing balance: surface seq 0 has no matching session event (corrupt surface)"

    def test_not_found_including_empty_surface(self):
        empty = Session()
        assert pairing_error(lambda: balanced_before(empty, 999)) == "tool-pairing balance: surface seq 999 not found"
        assert pairing_error(lambda: balanced_after(empty, 999)) == "tool-pairing balance: surface seq 999 not found"
        session = add(empty, "user/message", user_msg("first node after empty cache"))
        assert balanced_after(session, 0) is True

    def test_shadowed_seq_is_not_found_after_replace(self):
        """tool-pairing.spec.ts 'rebuilds after replace and rejects sequences removed from current membership'."""
        session = closed_tool_step()
        assert balanced_after(session, 2) is True
        session = add(session, "user/message", user_msg("checkpoint", "plugin"), op={"op": "replace", "start": 0, "end": 2},
                      src=[0, 1, 2])
        assert (balanced_before(session, 3), balanced_after(session, 3)) == (True, True)
        for query in (balanced_before, balanced_after):
            assert pairing_error(lambda: query(session, 2)) == "tool-pairing balance: surface seq 2 not found"


class TestRefresh:
    def test_reuse_without_change_returns_the_cached_value(self):
        session = closed_tool_step()
        cached = refresh_cuts(None, session)
        assert refresh_cuts(cached, session) is cached
        # log-only growth keeps the same surface: still reused
        grown, _ = append(session, "turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        assert refresh_cuts(cached, grown) is cached

    def test_extend_folds_only_the_tail(self):
        session = closed_tool_step()
        cached = refresh_cuts(None, session)
        grown = add(session, "user/message", user_msg("tail"))
        grown = add(grown, "assistant/message", assistant_data("c2"))
        extended = refresh_cuts(cached, grown)
        assert extended.balanced[: len(cached.balanced)] == cached.balanced
        assert extended == fold_cuts(grown)
        assert extended.balanced == (True, True, False, True, True, False)
        assert extended.open_calls == 1

    def test_extension_does_not_reread_the_prefix(self):
        """A cache is trusted for the prefix (spec 3: extend folds only unseen tail nodes)."""
        session = closed_tool_step()
        stale = Cuts(session.nodes, (True, False, False, False), 7, session.generation)  # deliberately wrong
        grown = add(session, "user/message", user_msg("tail"))
        assert refresh_cuts(stale, grown).balanced == (True, False, False, False, False)

    def test_generation_change_rebuilds(self):
        session = closed_tool_step()
        cached = refresh_cuts(None, session)
        replaced = add(session, "user/message", user_msg("k", "plugin"), op={"op": "replace", "start": 0, "end": 0}, src=[0])
        refreshed = refresh_cuts(cached, replaced)
        assert refreshed.generation == 1 and refreshed.nodes == (3, 1, 2)
        assert refreshed == fold_cuts(replaced)

    def test_same_generation_shrink_rebuilds_defensively(self):
        log = tuple(Event("user/message", i, 0, user_msg(str(i)), surface_op="append") for i in range(2))
        full = Session(log, Surface((0, 1), 0))
        cached = refresh_cuts(None, full)
        shrunk = Session(log, Surface((0,), 0))
        assert refresh_cuts(cached, shrunk) == Cuts((0,), (True, True), 0, 0)


class TestCheckpointKeepsBalance:
    def test_balanced_span_replacement(self):
        session = add(Session(), "user/message", user_msg("p"))              # 0
        session = add(session, "assistant/message", assistant_data("c1"))   # 1
        session = add(session, "tool/result", tool_data("c1"))              # 2
        session = add(session, "assistant/message", assistant_data("c2"))   # 3
        session = add(session, "tool/result", tool_data("c2"))              # 4
        session = add(session, "assistant/message", assistant_data("c3"))   # 5 (open)
        before = fold_cuts(session).balanced
        assert before == (True, True, False, True, False, True, False)
        # span 1..4 has balanced cuts on both sides
        after = add(session, "user/message", user_msg("k", "plugin"), op={"op": "replace", "start": 1, "end": 4},
                    src=[1, 2, 3, 4])
        assert fold_cuts(after).balanced == before[:2] + before[5:]


# ==================================================================================================
# Properties
# ==================================================================================================
def oracle(session: Session) -> tuple[bool, ...] | None:
    running, cuts = 0, [True]
    for seq in session.nodes:
        event = session.log[seq]
        if event.type == "assistant/message":
            running += sum(1 for b in event.data["message"]["content"] if b.get("type") == "tool-call")
        elif event.type == "tool/result":
            running -= 1
        if running < 0:
            return None
        cuts.append(running == 0)
    return tuple(cuts)


@st.composite
def surface_ops(draw):
    return draw(st.lists(st.one_of(
        st.tuples(st.just("user")),
        st.tuples(st.just("assistant"), st.integers(0, 3)),
        st.tuples(st.just("tool")),
        st.tuples(st.just("log")),
        st.tuples(st.just("replace"), st.integers(0, 10 ** 6), st.integers(0, 10 ** 6), st.booleans()),
    ), max_size=30))


@settings(max_examples=120, deadline=None)
@given(surface_ops())
def test_refresh_extend_rebuild_and_oracle_agree(ops):
    session, cached, open_calls = Session(), None, 0
    for op in ops:
        kind = op[0]
        seq = session.next_seq
        if kind == "user":
            session = add(session, "user/message", user_msg(str(seq)))
        elif kind == "assistant":
            session = add(session, "assistant/message", assistant_data(*[f"c{seq}-{i}" for i in range(op[1])], text="x"))
        elif kind == "tool":
            session = add(session, "tool/result", tool_data(f"r{seq}"))
        elif kind == "log":
            session, _ = append(session, "plugin/x", {})
        elif session.nodes:
            n = len(session.nodes)
            i, j = sorted((op[1] % n, op[2] % n))
            start, end = session.nodes[i], session.nodes[j]
            shadowed = list(session.nodes[i:j + 1])
            if op[3] and i == j and session.log[start].type == "tool/result":
                data = session.log[start].data
                session = add(session, "tool/result", {**data, "message": {**data["message"], "content": [
                    {**data["message"]["content"][0], "content": [{"type": "text", "text": "pruned"}]}]}},
                    op={"op": "replace", "start": start, "end": end}, src=shadowed)
            else:
                session = add(session, "user/message", user_msg(f"k{seq}", "plugin"),
                              op={"op": "replace", "start": start, "end": end}, src=shadowed)
        expected = oracle(session)
        if expected is None:
            message = pairing_error(lambda: fold_cuts(session))
            assert pairing_error(lambda: refresh_cuts(cached, session)) == message
            continue  # the cache is unchanged on failure
        rebuilt = fold_cuts(session)
        cached = refresh_cuts(cached, session)
        assert cached == rebuilt
        assert rebuilt.balanced == expected
        assert len(rebuilt.balanced) == len(session.nodes) + 1 and rebuilt.balanced[0] is True
        for index, seq in enumerate(session.nodes):
            assert balanced_before(session, seq) == expected[index]
            assert balanced_after(session, seq) == expected[index + 1]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=8), st.data())
def test_checkpoint_over_a_balanced_span_keeps_every_other_cut(call_counts, data):
    """Spec 3: a checkpoint node (delta 0) replacing a balanced span leaves every other cut's balance unchanged."""
    session = Session()
    for step, calls in enumerate(call_counts):
        session = add(session, "user/message", user_msg(f"p{step}"))
        ids = [f"c{step}-{i}" for i in range(calls)]
        session = add(session, "assistant/message", assistant_data(*ids, text="t"))
        results = data.draw(st.integers(0, calls)) if step == len(call_counts) - 1 else calls
        for call in ids[:results]:
            session = add(session, "tool/result", tool_data(call))
    before = fold_cuts(session).balanced
    n = len(session.nodes)
    spans = [(i, j) for i in range(n) for j in range(i, n) if before[i] and before[j + 1]]
    if not spans:
        return
    i, j = data.draw(st.sampled_from(spans))
    shadowed = list(session.nodes[i:j + 1])
    after = add(session, "user/message", user_msg("checkpoint", "plugin"),
                op={"op": "replace", "start": shadowed[0], "end": shadowed[-1]}, src=shadowed)
    cuts = fold_cuts(after)
    assert cuts.balanced == before[: i + 1] + before[j + 1:]
    assert cuts.balanced[i] and cuts.balanced[i + 1]
