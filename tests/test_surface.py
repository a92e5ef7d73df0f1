"""The surface fold: `planSurfaceEvent` validation order, positional replace, derivation (spec 1.4, 2).

Cases ported from packages/core/session/tests/surface.spec.ts; the Hypothesis property checks that the
incremental path (Session append, one event at a time) and the full fold (`fold_surface`) agree with an
independent list oracle on random valid logs.
"""
from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings, strategies as st

from surfacecheck.model.errors import SurfaceError
from surfacecheck.model.event import ABSENT, Event
from surfacecheck.model.session import Session, append, derive_messages, replay_events, seeded
from surfacecheck.model.surface import (
    Surface,
    SurfaceReplacement,
    apply_plan,
    derive_event_message,
    fold_surface,
    next_surface,
    plan_surface_event,
)


# -- builders ----------------------------------------------------------------------------------------
def user_msg(text: str = "hello", mid: str | None = None) -> dict:
    return {"id": mid or f"u-{text}", "role": "user", "source": {"kind": "user"},
            "content": [{"type": "text", "text": text}]}


def assistant_data(text: str | None = "hi", *, calls: tuple[str, ...] = (), step: int = 1) -> dict:
    content = [] if text is None else [{"type": "text", "text": text}]
    content += [{"type": "tool-call", "id": c, "name": "bash", "arguments": "{}"} for c in calls]
    return {"turn": 1, "step": step, "message": {
        "id": f"a-{text}-{step}", "role": "assistant", "source": {"kind": "model", "provider": "mock", "model": "mock"},
        "content": content}}


def tool_data(call: str = "c1", text: str = "done", **extra) -> dict:
    return {"turn": 1, "step": 1, "message": {
        "id": f"t-{call}", "role": "user", "source": {"kind": "tool", "callId": call},
        "content": [{"type": "tool-result", "toolCallId": call, "content": [{"type": "text", "text": text}],
                     "isError": False}]}, **extra}


def ev(type_: str, seq: int, data=None, *, op=ABSENT, src=ABSENT) -> Event:
    return Event(type_, seq, seq, {} if data is None else data, surface_op=op, source_event_seqs=src)


def user(seq: int, src=ABSENT, op="append", text: str | None = None) -> Event:
    return ev("user/message", seq, user_msg(text or f"m{seq}"), op=op, src=src)


def rep(start: int, end: int) -> dict:
    return {"op": "replace", "start": start, "end": end}


def fold_error(events) -> str:
    with pytest.raises(SurfaceError) as info:
        fold_surface(events)
    return info.value.message


def live(*steps) -> Session:
    session = Session()
    for type_, data, opts in steps:
        session, _ = append(session, type_, data, **opts)
    return session


# ==================================================================================================
# planSurfaceEvent errors, spec 1.4, in order
# ==================================================================================================
class TestContiguity:
    def test_gap(self):
        assert fold_error([user(0), user(2, src=[1])]) == "session event seq 2 is not contiguous; expected 1"

    def test_first_event_must_be_seq_zero(self):
        assert fold_error([ev("turn/start", 1, {"turn": 1})]) == "session event seq 1 is not contiguous; expected 0"

    def test_repeated_seq(self):
        assert fold_error([user(0), user(0)]) == "session event seq 0 is not contiguous; expected 1"

    def test_contiguity_is_checked_first(self):
        # wrong seq AND markerless surface event -> contiguity
        assert fold_error([ev("user/message", 3, user_msg())]) == "session event seq 3 is not contiguous; expected 0"

    def test_plan_uses_the_given_expected_seq(self):
        event = user(400_000)
        plan = plan_surface_event(Surface(), event, 400_000, lambda s: None)
        assert (plan.kind, plan.seq) == ("append", 400_000)
        with pytest.raises(SurfaceError, match=r"^session event seq 400000 is not contiguous; expected 7$"):
            plan_surface_event(Surface(), event, 7, lambda s: None)


class TestSurfaceOpMarker:
    def test_non_eligible_with_surface_op(self):
        assert fold_error([ev("turn/start", 0, {"turn": 1}, op="append")]) == \
            'session event "turn/start" is not surface-eligible and cannot carry surfaceOp'

    def test_non_eligible_with_null_surface_op(self):
        assert fold_error([ev("assistant/chunk", 0, op=None)]) == \
            'session event "assistant/chunk" is not surface-eligible and cannot carry surfaceOp'

    def test_non_eligible_with_sources(self):
        assert fold_error([ev("turn/start", 0, {"turn": 1}, src=[0])]) == \
            'session event "turn/start" is not surface-eligible and cannot carry sourceEventSeqs'

    def test_non_eligible_surface_op_reported_before_sources(self):
        assert fold_error([ev("compaction/prune", 0, op=rep(0, 0), src=[0])]) == \
            'session event "compaction/prune" is not surface-eligible and cannot carry surfaceOp'

    @pytest.mark.parametrize("type_", ["user/message", "assistant/message", "tool/result"])
    def test_eligible_without_marker(self, type_):
        assert fold_error([ev(type_, 0, {})]) == \
            f'session event "{type_}" is surface-eligible and requires a surfaceOp marker'

    @pytest.mark.parametrize("op", [None, "replace", "APPEND", "", 0, True, ["append"], []])
    def test_invalid_surface_op(self, op):
        assert fold_error([ev("user/message", 0, user_msg(), op=op)]) == \
            'session event "user/message" carries an invalid surfaceOp'

    @pytest.mark.parametrize("op", [
        {"op": "replace", "start": 0},
        {"op": "replace", "start": 0, "end": 0, "extra": 1},
        {"op": "append", "start": 0, "end": 0},
        {"op": "replace", "start": -1, "end": 0},
        {"op": "replace", "start": 0.5, "end": 0},
        {"op": "replace", "start": 0, "end": "0"},
        {"op": "replace", "start": True, "end": 0},
        {"op": "replace", "start": 0, "end": None},
        {"op": "replace", "start": 2**53, "end": 0},
        {"start": 0, "end": 0, "kind": "replace"},
        {},
    ])
    def test_invalid_replace_surface_op(self, op):
        assert fold_error([user(0), ev("user/message", 1, user_msg("x"), op=op, src=[0])]) == \
            'session event "user/message" carries an invalid replace surfaceOp'

    def test_marker_checked_before_provenance(self):
        assert fold_error([ev("tool/result", 0, tool_data(), op=None, src="bad")]) == \
            'session event "tool/result" carries an invalid surfaceOp'


class TestProvenance:
    @pytest.mark.parametrize("src", ["invalid", {"0": 0}, 5, None])
    def test_not_an_array(self, src):
        assert fold_error([user(0), user(1, src=src)]) == "sourceEventSeqs on event at seq 1 must be an array when present"

    @pytest.mark.parametrize("type_, data", [("user/message", user_msg()), ("tool/result", tool_data())])
    def test_empty_only_on_assistant(self, type_, data):
        assert fold_error([ev(type_, 0, data, op="append", src=[])]) == \
            "sourceEventSeqs must not be empty except on assistant/message"

    def test_empty_accepted_on_assistant(self):
        fold = fold_surface([ev("assistant/message", 0, assistant_data(None), op="append", src=[])])
        assert fold.surface.nodes == (0,)

    @pytest.mark.parametrize("src", [["0"], [0.5], [-1], [None], [True], [0, [1]], [2**53]])
    def test_not_dense_non_negative_safe_integers(self, src):
        events = [user(0), ev("tool/result", 1, tool_data(), op="append", src=src)]
        assert fold_error(events) == 'session event "tool/result" sourceEventSeqs must densely contain non-negative safe integers'

    def test_duplicates(self):
        assert fold_error([user(0), user(1, src=[0, 0])]) == "sourceEventSeqs must not contain duplicates"

    def test_self_reference(self):
        assert fold_error([user(0, src=[0])]) == "sourceEventSeqs must reference earlier events: 0 >= current seq 0"

    def test_first_non_earlier_source_is_named(self):
        assert fold_error([user(0), user(1), user(2, src=[0, 5, 2])]) == \
            "sourceEventSeqs must reference earlier events: 5 >= current seq 2"

    def test_density_before_duplicates_before_earlier(self):
        # a duplicate AND a non-integer later in the list: density wins (checked per element in the loop)
        assert "densely contain" in fold_error([user(0), user(1, src=[0, 0, "x"])])
        # duplicates AND non-earlier: duplicates first
        assert fold_error([user(0), user(1, src=[5, 5])]) == "sourceEventSeqs must not contain duplicates"

    def test_float_integers_are_js_numbers(self):
        # JSON `1.0` is the JS number 1: a valid (and, with 1, duplicate) source
        assert fold_surface([user(0), user(1), user(2, src=[1.0])]).surface.nodes == (0, 1, 2)
        assert fold_error([user(0), user(1), user(2, src=[1, 1.0])]) == "sourceEventSeqs must not contain duplicates"

    def test_extra_citations_of_any_earlier_event_are_allowed(self):
        events = [ev("compaction/start", 0, {"compactionId": "x", "turn": None}), user(1), user(2),
                  ev("plugin/x", 3), user(4, op=rep(1, 2), src=[0, 3, 2, 1])]
        assert fold_surface(events).surface.nodes == (4,)

    def test_replace_must_cite_every_shadowed_node(self):
        """surface.spec.ts 'incomplete replacement coverage'."""
        assert fold_error([user(0), user(1), user(2, op=rep(0, 1), src=[0])]) == \
            "surface replace: sourceEventSeqs must include every shadowed surface node; missing 1"

    def test_missing_nodes_listed_in_surface_order(self):
        events = [user(0), user(1), user(2), user(3), user(4, op=rep(0, 3), src=[1])]
        assert fold_error(events) == \
            "surface replace: sourceEventSeqs must include every shadowed surface node; missing 0, 2, 3"

    def test_absent_sources_on_replace_miss_everything(self):
        assert fold_error([user(0), user(1), user(2, op=rep(0, 1))]) == \
            "surface replace: sourceEventSeqs must include every shadowed surface node; missing 0, 1"


class TestRange:
    def test_start_not_found(self):
        assert fold_error([user(0), user(1, op=rep(42, 0), src=[0])]) == "surface replace: start seq 42 not found in surface"

    def test_end_not_found(self):
        assert fold_error([user(0), user(1, op=rep(0, 42), src=[0])]) == "surface replace: end seq 42 not found in surface"

    def test_start_reported_before_end(self):
        assert fold_error([user(0), user(1, op=rep(41, 42), src=[0])]) == "surface replace: start seq 41 not found in surface"

    def test_log_only_event_is_not_a_node(self):
        assert fold_error([ev("turn/start", 0, {"turn": 1}), user(1, op=rep(0, 0), src=[0])]) == \
            "surface replace: start seq 0 not found in surface"

    def test_reversed(self):
        """surface.spec.ts 'rejects reversed range'."""
        assert fold_error([user(0), user(1), ev("assistant/message", 2, assistant_data("y"), op=rep(1, 0), src=[1, 0])]) == \
            "surface replace: start seq 1 (index 1) is after end seq 0 (index 0)"

    def test_range_checked_before_provenance(self):
        assert fold_error([user(0), user(1), user(2, op=rep(1, 0))]) == \
            "surface replace: start seq 1 (index 1) is after end seq 0 (index 0)"
        assert fold_error([user(0), user(1, op=rep(9, 0), src="bad")]) == "surface replace: start seq 9 not found in surface"

    def test_shadowed_nodes_are_no_longer_addressable(self):
        events = [user(0), user(1), user(2, op=rep(0, 0), src=[0]), user(3, op=rep(0, 1), src=[0, 1])]
        assert fold_error(events) == "surface replace: start seq 0 not found in surface"

    def test_provenance_checked_before_tool_result_rule(self):
        events = [user(0), user(1), ev("tool/result", 2, tool_data(), op=rep(0, 1))]
        assert fold_error(events) == "surface replace: sourceEventSeqs must include every shadowed surface node; missing 0, 1"


class TestToolResultRewrite:
    @staticmethod
    def rewrite(original: dict, **changes) -> dict:
        data = copy.deepcopy(original)
        for path, value in changes.items():
            target = data
            keys = path.split("__")
            for key in keys[:-1]:
                target = target[int(key)] if key.isdigit() else target[key]
            last = keys[-1]
            if value is ABSENT:
                del target[last]
            else:
                target[int(last) if last.isdigit() else last] = value
        return data

    def test_spanning_two_nodes(self):
        events = [user(0), user(1), ev("tool/result", 2, tool_data(), op=rep(0, 1), src=[0, 1])]
        assert fold_error(events) == "tool/result surface replacement must rewrite exactly one current node"

    def test_target_not_a_tool_result(self):
        events = [user(0), ev("tool/result", 1, tool_data(), op=rep(0, 0), src=[0])]
        assert fold_error(events) == "tool/result surface replacement must target a current tool/result"

    def test_count_checked_before_target_type(self):
        events = [user(0), user(1), ev("tool/result", 2, tool_data(), op=rep(0, 1), src=[0, 1])]
        assert "exactly one" in fold_error(events)

    def test_content_only_change_passes(self):
        original = tool_data("c1", "x" * 100)
        pruned = self.rewrite(original, message__content__0__content=[{"type": "text", "text": "x[...]x"}])
        fold = fold_surface([ev("tool/result", 0, original, op="append"), ev("tool/result", 1, pruned, op=rep(0, 0), src=[0])])
        assert fold.surface == Surface((1,), 1)
        assert fold.replacements == (SurfaceReplacement(1, 0, 0, (0,)),)

    def test_content_may_become_empty_or_change_block_shapes(self):
        original = tool_data("c1", "abc")
        emptied = self.rewrite(original, message__content__0__content=[])
        imaged = self.rewrite(original, message__content__0__content=[{"type": "image", "data": "..."}])
        for replacement in (emptied, imaged):
            fold = fold_surface([ev("tool/result", 0, original, op="append"),
                                 ev("tool/result", 1, replacement, op=rep(0, 0), src=[0])])
            assert fold.surface.nodes == (1,)

    def test_rewrite_of_a_rewrite(self):
        original = tool_data("c1", "a" * 50)
        first = self.rewrite(original, message__content__0__content=[{"type": "text", "text": "a" * 10}])
        second = self.rewrite(original, message__content__0__content=[{"type": "text", "text": "a"}])
        fold = fold_surface([ev("tool/result", 0, original, op="append"),
                             ev("tool/result", 1, first, op=rep(0, 0), src=[0]),
                             ev("tool/result", 2, second, op=rep(1, 1), src=[1])])
        assert fold.surface == Surface((2,), 2)

    @pytest.mark.parametrize("change", [
        {"message__content__0__toolCallId": "changed"},
        {"message__content__0__isError": True},
        {"message__content__0__isError": ABSENT},
        {"message__content__0__extra": 1},
        {"message__id": "other-id"},
        {"message__role": "assistant"},
        {"message__source": {"kind": "tool", "callId": "other"}},
        {"message__extra": {}},
        {"turn": 2},
        {"step": 9},
        {"error": {"code": "X"}},
        {"meta": {"path": "/x"}},
    ], ids=lambda c: next(iter(c)))
    def test_any_other_change_is_refused(self, change):
        original = tool_data("c1", "x")
        changed = self.rewrite(original, **change)
        events = [ev("tool/result", 0, original, op="append"), ev("tool/result", 1, changed, op=rep(0, 0), src=[0])]
        assert fold_error(events) == "tool/result surface replacement may change only content"

    def test_extra_content_blocks_are_a_change(self):
        original = tool_data("c1", "x")
        changed = copy.deepcopy(original)
        changed["message"]["content"].append({"type": "tool-result", "toolCallId": "c1", "content": []})
        # dsh truncates both sides to their first block: a second block is *not* seen by the rule
        fold = fold_surface([ev("tool/result", 0, original, op="append"), ev("tool/result", 1, changed, op=rep(0, 0), src=[0])])
        assert fold.surface.nodes == (1,)

    def test_meta_arrays_compared_structurally(self):
        """surface.spec.ts 'compares array-valued rest fields structurally'."""
        def with_meta(meta):
            return {**tool_data("c-meta"), "meta": meta}

        def fold(a, b):
            return fold_surface([ev("tool/result", 0, with_meta(a), op="append"),
                                 ev("tool/result", 1, with_meta(b), op=rep(0, 0), src=[0])])

        assert fold({"tags": ["a", {"n": 1}]}, {"tags": ["a", {"n": 1}]}).surface.nodes == (1,)
        assert fold({"n": 1}, {"n": 1.0}).surface.nodes == (1,)          # one JS number
        assert fold({"b": 1, "a": 2}, {"a": 2, "b": 1}).surface.nodes == (1,)  # key order is irrelevant
        for a, b in [({"tags": ["a"]}, {"tags": ["b"]}), ({"tags": ["a"]}, {"tags": "a"}),
                     ({"left": 1}, {"right": 1}), ({"one": 1}, {"one": 1, "two": 2}),
                     ({"flag": True}, {"flag": 1}), ({"x": None}, {})]:
            with pytest.raises(SurfaceError, match="may change only content"):
                fold(a, b)

    def test_user_and_assistant_replacements_have_no_type_restriction(self):
        events = [ev("tool/result", 0, tool_data(), op="append"), user(1), ev("tool/result", 2, tool_data("c2"), op="append"),
                  user(3, op=rep(0, 0), src=[0]),
                  ev("assistant/message", 4, assistant_data("s"), op=rep(1, 2), src=[1, 2])]
        assert fold_surface(events).surface.nodes == (3, 4)


# ==================================================================================================
# Transitions (spec 2.1, 2.2)
# ==================================================================================================
class TestTransitions:
    def test_positional_replace_with_start_after_end_numerically(self):
        """Port of surface.spec.ts 'shares ordered entries and nested replacement ranges with foldSurface'."""
        session = live(
            ("user/message", user_msg("a"), {"surface_op": "append"}),
            ("user/message", user_msg("b"), {"surface_op": "append"}),
            ("assistant/message", assistant_data("summary"), {"surface_op": rep(0, 0), "source_event_seqs": [0]}),
            ("assistant/message", assistant_data("summary 2", step=2), {"surface_op": rep(2, 1), "source_event_seqs": [2, 1]}),
        )
        folded = fold_surface(session.log)
        assert folded.surface.nodes == session.nodes == (3,)
        assert folded.replacements == (SurfaceReplacement(2, 0, 0, (0,)), SurfaceReplacement(3, 2, 1, (2, 1)))
        assert session.generation == folded.surface.generation == 2

    def test_mid_replace_preserves_surrounding_order(self):
        session = live(*[("user/message", user_msg(t), {"surface_op": "append"}) for t in "abc"],
                       ("assistant/message", assistant_data("x"), {"surface_op": rep(1, 1), "source_event_seqs": [1]}))
        assert session.nodes == (0, 3, 2)

    def test_recursive_checkpoints(self):
        events = [user(0), user(1), user(2), user(3, op=rep(0, 1), src=[0, 1]), user(4),
                  user(5, op=rep(3, 2), src=[3, 2]), user(6, op=rep(5, 4), src=[5, 4])]
        fold = fold_surface(events)
        assert fold.surface == Surface((6,), 3)
        assert [r.shadowed for r in fold.replacements] == [(0, 1), (3, 2), (5, 4)]

    def test_generation_counts_replaces_only(self):
        session = live(("turn/start", {"turn": 1}, {}),
                       ("user/message", user_msg("a"), {"surface_op": "append"}),
                       ("plugin/x", {}, {}),
                       ("user/message", user_msg("b"), {"surface_op": "append"}))
        assert session.generation == 0
        session, _ = append(session, "user/message", user_msg("c"), surface_op=rep(1, 3), source_event_seqs=[1, 3])
        assert session.generation == 1
        session, _ = append(session, "user/message", user_msg("d"), surface_op="append")
        session, _ = append(session, "plugin/y", {})
        assert session.generation == 1
        session, _ = append(session, "user/message", user_msg("e"), surface_op=rep(5, 5), source_event_seqs=[5])
        assert session.generation == 2 and session.nodes == (4, 7)

    def test_whole_surface_single_node_replace_keeps_length(self):
        session = live(("user/message", user_msg("a"), {"surface_op": "append"}),
                       ("user/message", user_msg("b"), {"surface_op": rep(0, 0), "source_event_seqs": [0]}))
        assert session.nodes == (1,) and session.generation == 1

    def test_window_fold_via_next_surface(self):
        """surface.spec.ts 'folds a contiguous window' (SurfaceManager with baseSeq)."""
        base = 400_000
        events = {base: user(base), base + 1: user(base + 1), base + 2: user(base + 2, op=rep(base, base), src=[base])}
        surface = Surface()
        for seq in sorted(events):
            surface, _ = next_surface(surface, events[seq], seq, events.get)
        assert surface == Surface((base + 2, base + 1), 1)
        with pytest.raises(SurfaceError, match=f"^surface replace: start seq {base - 1} not found in surface$"):
            next_surface(surface, user(base + 3, op=rep(base - 1, base + 1), src=[base - 1, base + 1]), base + 3, events.get)

    def test_planning_never_mutates(self):
        surface = Surface((0, 1), 0)
        plan = plan_surface_event(surface, user(2, op=rep(0, 1), src=[0, 1]), 2, lambda s: None)
        assert surface == Surface((0, 1), 0)
        assert (plan.kind, plan.start_index, plan.end_index, plan.shadowed) == ("replace", 0, 1, (0, 1))
        assert apply_plan(surface, plan) == Surface((2,), 1)
        none_plan = plan_surface_event(surface, ev("turn/start", 2, {"turn": 1}), 2, lambda s: None)
        assert none_plan.kind == "none" and apply_plan(surface, none_plan) is surface

    def test_fold_and_seed_report_the_same_failure(self):
        events = [user(0), user(1, op=rep(42, 0), src=[0])]
        assert fold_error(events) == "surface replace: start seq 42 not found in surface"
        with pytest.raises(Exception, match="start seq 42 not found"):
            seeded(events)


class TestDeriveEventMessage:
    def test_user_message_is_data_verbatim(self):
        data = user_msg("x")
        assert derive_event_message(ev("user/message", 0, data, op="append")) is data

    def test_assistant_message(self):
        data = assistant_data("x")
        assert derive_event_message(ev("assistant/message", 0, data, op="append")) is data["message"]

    def test_empty_assistant_derives_nothing(self):
        assert derive_event_message(ev("assistant/message", 0, assistant_data(None), op="append")) is None
        session = live(("assistant/message", assistant_data(None), {"surface_op": "append"}))
        assert session.nodes == (0,) and derive_messages(session) == []

    def test_tool_result_even_with_empty_inner_content(self):
        data = tool_data()
        data["message"]["content"][0]["content"] = []
        assert derive_event_message(ev("tool/result", 0, data, op="append")) is data["message"]

    def test_replacement_events_derive_like_appends(self):
        data = user_msg("checkpoint")
        assert derive_event_message(ev("user/message", 3, data, op=rep(0, 1), src=[0, 1])) is data

    @pytest.mark.parametrize("type_", ["turn/start", "assistant/chunk", "compaction/summary", "tool/call", "plugin/x"])
    def test_other_types_derive_nothing(self, type_):
        assert derive_event_message(ev(type_, 0, {"message": user_msg()})) is None


# ==================================================================================================
# Incremental vs full fold — example and property
# ==================================================================================================
def _rewrite_tool(data: dict, text: str) -> dict:
    out = copy.deepcopy(data)
    out["message"]["content"][0]["content"] = [{"type": "text", "text": text}]
    return out


@st.composite
def valid_logs(draw):
    """Random valid logs plus an independent oracle of (nodes, replacement history)."""
    log: list[Event] = []
    nodes: list[int] = []
    history: list[tuple] = []
    for _ in range(draw(st.integers(1, 28))):
        seq = len(log)
        kind = draw(st.sampled_from(["user", "assistant", "tool", "log", "replace", "replace"]))
        # (st.sets, not st.lists(unique=True): the latter trips a Hypothesis assertion on one-element domains)
        earlier = st.sets(st.integers(0, seq - 1), max_size=min(3, seq)).map(sorted) if seq else st.just([])
        cited = st.sets(st.integers(0, seq - 1), min_size=1, max_size=min(3, seq)).map(sorted) if seq else st.just(ABSENT)
        if kind == "user":
            src = draw(st.one_of(st.just(ABSENT), cited))
            log.append(ev("user/message", seq, user_msg(draw(st.text(max_size=5)), f"u{seq}"), op="append", src=src))
            nodes.append(seq)
        elif kind == "assistant":
            empty = draw(st.booleans())
            calls = tuple(f"c{seq}-{i}" for i in range(draw(st.integers(0, 2))))
            src = draw(st.one_of(st.just(ABSENT), earlier))  # [] allowed on assistant
            log.append(ev("assistant/message", seq, assistant_data(None if empty else "t", calls=calls, step=seq),
                          op="append", src=src))
            nodes.append(seq)
        elif kind == "tool":
            src = draw(st.one_of(st.just(ABSENT), cited))
            log.append(ev("tool/result", seq, tool_data(f"c{seq}", draw(st.text(max_size=5))), op="append", src=src))
            nodes.append(seq)
        elif kind == "log" or not nodes:
            log.append(ev(draw(st.sampled_from(["turn/start", "assistant/chunk", "plugin/x", "compaction/prune"])), seq))
        else:
            i = draw(st.integers(0, len(nodes) - 1))
            j = draw(st.integers(i, len(nodes) - 1))
            shadowed = nodes[i:j + 1]
            extra = [s for s in draw(earlier) if s not in shadowed]
            sources = draw(st.permutations(shadowed + extra))
            start, end = nodes[i], nodes[j]
            target = log[start]
            if i == j and target.type == "tool/result" and draw(st.booleans()):
                log.append(ev("tool/result", seq, _rewrite_tool(target.data, "pruned"), op=rep(start, end), src=sources))
            elif draw(st.booleans()):
                log.append(ev("user/message", seq, user_msg("checkpoint", f"k{seq}"), op=rep(start, end), src=sources))
            else:
                log.append(ev("assistant/message", seq, assistant_data("s", step=seq), op=rep(start, end), src=sources))
            nodes[i:j + 1] = [seq]
            history.append((seq, start, end, tuple(shadowed)))
    return log, tuple(nodes), history


@settings(max_examples=150, deadline=None)
@given(valid_logs())
def test_incremental_and_full_fold_agree_with_oracle(case):
    log, nodes, history = case
    session = Session()
    for event in log:
        session, logged = append(session, event.type, event.data, surface_op=event.surface_op,
                                 source_event_seqs=event.source_event_seqs, time=event.time)
        assert logged.seq == event.seq
        # incremental state after every append equals the full fold of the prefix
        assert session.surface == fold_surface(session.log).surface
    fold = fold_surface(log)
    assert session.nodes == fold.surface.nodes == nodes
    assert session.generation == fold.surface.generation == len(history)
    assert [(r.seq, r.start, r.end, r.shadowed) for r in fold.replacements] == history
    assert replay_events(log).surface == fold.surface
    reseeded = seeded(log)
    assert reseeded.surface == fold.surface
    assert derive_messages(reseeded) == derive_messages(session)
    assert len(set(fold.surface.nodes)) == len(fold.surface.nodes)
