"""Tests for model/runtime_context.py: the runtime-context projection (seed §14; spec 12, 15 G2/G3).

Ports `packages/core/agent-loop/tests/runtime-context.spec.ts` and the runtime-context cases of
`loop.spec.ts` (spec 14.3), driving the model the way the loop does: the state follows committed
events (`fold_retained`), each pre-step calls `project(...)` and, when it returns a message, the
loop appends it as a `user/message` (spec 13 step 7).
"""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from surfacecheck.model.event import Event
from surfacecheck.model.runtime_context import (
    CLEARED,
    CONTEXT_HEADER,
    NEVER,
    NONE,
    RUNTIME_CONTEXT_SOURCE,
    RetainedSnapshot,
    RuntimeContextShapeError,
    fold_retained,
    fold_retained_log,
    is_owned_snapshot,
    join_context_sections,
    project,
    project_sections,
    restore_retained,
    text_of,
)
from surfacecheck.model.session import Session, append

POLICY = [{"name": "policy", "text": "Mode: read-only."}]
POLICY_TEXT = CONTEXT_HEADER + "Mode: read-only."


# -- helpers ------------------------------------------------------------------------------------
def user(text: str, plugin: str | None = None, *, id: str = "m", blocks: list | None = None) -> dict:
    source = {"kind": "plugin", "plugin": plugin} if plugin else {"kind": "user"}
    content = blocks if blocks is not None else [{"type": "text", "text": text}]
    return {"content": content, "source": source, "role": "user", "id": id}


def owned(text: str, **kw) -> dict:
    return user(text, RUNTIME_CONTEXT_SOURCE, **kw)


class Live:
    """A session plus the live projection state that follows its committed events."""

    def __init__(self, session: Session | None = None, retained=NEVER):
        self.session = session or Session()
        self.retained = retained
        self.entered: list[Event] = []

    def commit(self, type_: str, data, **opts) -> Event:
        self.session, event = append(self.session, type_, data, **opts)
        self.retained = fold_retained(self.retained, event)
        return event

    def msg(self, data: dict) -> Event:
        return self.commit("user/message", data, surface_op="append")

    def replace(self, start: int, end: int, sources: list[int], text: str = "summary", plugin="test-compaction") -> Event:
        return self.commit(
            "user/message",
            user(text, plugin),
            surface_op={"op": "replace", "start": start, "end": end},
            source_event_seqs=sources,
        )

    def pre_step(self, sections) -> Event | None:
        """Spec 13 steps 4 and 7: project, then enter the candidate (if any) as a user/message."""
        candidate = project(self.retained, join_context_sections(sections), sections, id=f"rc-{self.session.next_seq}")
        if candidate is None:
            return None
        event = self.msg(candidate)
        self.entered.append(event)
        return event

    def owned_events(self) -> list[Event]:
        return [e for e in self.session.log if is_owned_snapshot(e)]


# -- constants and pure helpers -----------------------------------------------------------------
def test_constants_are_dsh_verbatim():
    assert RUNTIME_CONTEXT_SOURCE == "@deepseek-ai/dsh-system-prompt"
    assert CONTEXT_HEADER == "Current runtime context. This snapshot supersedes earlier runtime-context snapshots.\n\n"
    assert CLEARED == "Current runtime context: none. Earlier runtime-context snapshots no longer apply."


def test_join_context_sections():
    assert join_context_sections([]) == ""
    assert join_context_sections(POLICY) == POLICY_TEXT
    two = [{"name": "a", "text": "A"}, {"name": "b", "text": "B"}]
    assert join_context_sections(two) == CONTEXT_HEADER + "A\n\nB"
    # the join itself does not filter: only an empty *body* yields ''
    assert join_context_sections([{"name": "a", "text": ""}]) == ""
    assert join_context_sections([{"name": "a", "text": ""}, {"name": "b", "text": ""}]) == CONTEXT_HEADER + "\n\n"


def test_text_of_and_ownership():
    assert text_of(owned("x")) == "x"
    assert text_of(owned("", blocks=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])) is None
    assert text_of(owned("", blocks=[])) is None
    assert text_of(owned("", blocks=[{"type": "image", "attachment": {"id": "i"}}])) is None
    assert text_of(owned("", blocks=[{"type": "text"}])) is None
    with pytest.raises(RuntimeContextShapeError):
        text_of({"source": {}})
    ev = lambda t, d, **kw: Event(t, 0, 0, d, surface_op=kw.get("op", "append"))
    assert is_owned_snapshot(ev("user/message", owned("x")))
    assert not is_owned_snapshot(ev("user/message", user("x", "test-context")))
    assert not is_owned_snapshot(ev("user/message", user("x")))
    assert not is_owned_snapshot(ev("user/message", {"id": "no-source"}))
    assert not is_owned_snapshot(Event("tool/call", 0, 0, owned("x")))


def test_project_message_shape_and_key_order():
    message = project(NEVER, POLICY_TEXT, POLICY, id="id-1")
    assert json.dumps(message) == json.dumps(
        {
            "content": [{"type": "text", "text": POLICY_TEXT}],
            "source": {"kind": "plugin", "plugin": RUNTIME_CONTEXT_SOURCE, "form": "snapshot", "sections": POLICY},
            "role": "user",
            "id": "id-1",
        }
    )
    assert message["source"]["sections"] is not POLICY  # detached copy (structuredClone)
    cleared = project(RetainedSnapshot(3, POLICY_TEXT), "", [], id="id-2")
    assert json.dumps(cleared) == json.dumps(
        {
            "content": [{"type": "text", "text": CLEARED}],
            "source": {"kind": "plugin", "plugin": RUNTIME_CONTEXT_SOURCE},
            "role": "user",
            "id": "id-2",
        }
    )
    # the message passes the seed message-shape check (identified, role, source.kind, content array)
    from surfacecheck.model.session import message_shape_problem

    assert message_shape_problem({"type": "user/message", "data": message}, 0) is None


def test_project_decision_table():
    assert project(NEVER, "", []) is None  # nothing ever existed, nothing active
    assert project(NONE, "", [])["content"][0]["text"] == CLEARED
    assert project(RetainedSnapshot(1, CLEARED), "", []) is None  # already cleared
    assert project(RetainedSnapshot(1, "X"), "X", []) is None  # unchanged
    assert project(RetainedSnapshot(1, "X"), "Y", [])["content"][0]["text"] == "Y"
    assert project(RetainedSnapshot(1, None), "X", [])["content"][0]["text"] == "X"  # malformed
    assert project(NONE, "X", [])["content"][0]["text"] == "X"
    assert project_sections(NEVER, POLICY)["content"][0]["text"] == POLICY_TEXT
    # project is pure: the caller's state is untouched
    state = RetainedSnapshot(1, "X")
    project(state, "Y", [])
    assert state == RetainedSnapshot(1, "X")


# -- runtime-context.spec.ts ---------------------------------------------------------------------
def test_restores_latest_visible_owned_snapshot():
    """`restores the latest visible owned snapshot and ignores other sessions`."""
    live = Live()
    retained = live.msg(owned("retained"))
    shadowed = live.msg(owned("shadowed"))
    live.replace(shadowed.seq, shadowed.seq, [shadowed.seq])

    state = restore_retained(live.session)
    assert retained.seq in live.session.nodes
    assert state == RetainedSnapshot(retained.seq, "retained")
    assert project(state, "retained", []) is None
    assert project(state, "next", [{"name": "sandbox:policy", "text": "policy"}])["source"] == {
        "kind": "plugin",
        "plugin": RUNTIME_CONTEXT_SOURCE,
        "form": "snapshot",
        "sections": [{"name": "sandbox:policy", "text": "policy"}],
    }
    # another session's snapshot is not this session's event: restore reads only this log
    other = Live()
    other.msg(owned("other"))
    assert project(restore_retained(live.session), "retained", []) is None


def test_restore_states():
    assert restore_retained(Session()) is NEVER
    live = Live()
    live.msg(user("hello"))
    assert restore_retained(live.session) is NEVER
    s = live.msg(owned("X"))
    live.replace(s.seq, s.seq, [s.seq])
    assert restore_retained(live.session) is NONE  # existed, none visible
    malformed = live.msg(owned("", blocks=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]))
    assert restore_retained(live.session) == RetainedSnapshot(malformed.seq, None)


def test_restore_throws_where_the_constructor_would():
    session, _ = append(Session(), "user/message", {"id": "x", "content": []}, surface_op="append")
    with pytest.raises(RuntimeContextShapeError):
        restore_retained(session)
    # live, the listener's throw is contained: the state is unchanged
    event = session.log[0]
    assert fold_retained(RetainedSnapshot(7, "X"), event) == RetainedSnapshot(7, "X")


# -- loop.spec.ts runtime-context cases (spec 14.3 / spec 12 "Effects") ---------------------------
def test_materializes_changed_context_and_clears():
    """`materializes changed runtime context at the history tail ...`: emit, skip, change, clear, stay clear."""
    live = Live()
    live.msg(user("first"))
    first = live.pre_step([{"name": "policy", "text": "Mode: read-only."}])
    assert first.data["content"] == [{"type": "text", "text": POLICY_TEXT}]
    live.msg(user("unchanged"))
    assert live.pre_step([{"name": "policy", "text": "Mode: read-only."}]) is None
    changed = live.pre_step([{"name": "policy", "text": "Mode: danger-full-access."}])
    assert "danger-full-access" in changed.data["content"][0]["text"]
    cleared = live.pre_step([])
    assert cleared.data["content"] == [{"type": "text", "text": CLEARED}]
    assert cleared.data["source"] == {"kind": "plugin", "plugin": RUNTIME_CONTEXT_SOURCE}
    assert live.pre_step([]) is None
    assert len(live.owned_events()) == 3


def test_reemits_after_replacement_shadowed_the_snapshot():
    """`re-emits unchanged runtime context when a surface replacement removed the retained snapshot`."""
    live = Live()
    live.msg(user("first"))
    snap = live.pre_step(POLICY)
    assert live.retained == RetainedSnapshot(snap.seq, POLICY_TEXT)
    live.replace(snap.seq, snap.seq, [snap.seq], "compacted summary")
    assert live.retained is NONE
    again = live.pre_step(POLICY)
    assert again is not None and again.data["content"][0]["text"] == POLICY_TEXT
    assert len(live.owned_events()) == 2
    assert again.seq in live.session.nodes and snap.seq not in live.session.nodes


def test_clears_compacted_context_when_active_set_became_empty():
    """`clears compacted runtime context after the active set becomes empty`."""
    live = Live()
    snap = live.pre_step(POLICY)
    live.replace(snap.seq, snap.seq, [snap.seq], "summary retaining old mode: read-only")
    clearing = live.pre_step([])
    assert clearing.data["content"] == [{"type": "text", "text": CLEARED}]


def test_unrelated_replacement_does_not_clear():
    """`does not clear runtime context after an unrelated replacement`."""
    # no owned snapshot ever: a foreign plugin's context replaced → nothing to emit
    live = Live()
    original = live.msg(user("old context", "test-context"))
    live.replace(original.seq, original.seq, [original.seq], "compacted summary")
    assert live.retained is NEVER
    assert live.pre_step([]) is None
    # with a retained snapshot: replacing something else (even with extra citations) keeps it
    live = Live()
    snap = live.pre_step(POLICY)
    other = live.msg(user("chatter"))
    live.replace(other.seq, other.seq, [other.seq])
    assert live.retained == RetainedSnapshot(snap.seq, POLICY_TEXT)
    assert live.pre_step(POLICY) is None


def test_replacement_citing_without_shadowing_clears():
    """The live rule keys on citation, not on shadowing: an extra citation clears a still-visible snapshot."""
    live = Live()
    snap = live.pre_step(POLICY)
    other = live.msg(user("chatter"))
    live.replace(other.seq, other.seq, [snap.seq, other.seq])
    assert snap.seq in live.session.nodes
    assert live.retained is NONE
    assert live.pre_step(POLICY) is not None  # re-sent although still visible
    # restore would have kept the visible one (another restore/live divergence)


def test_non_replacement_citation_does_not_clear():
    live = Live()
    snap = live.pre_step(POLICY)
    live.commit("user/message", user("cites"), surface_op="append", source_event_seqs=[snap.seq])
    assert live.retained == RetainedSnapshot(snap.seq, POLICY_TEXT)


def test_malformed_retained_snapshot_is_replaced():
    """`replaces a malformed retained runtime-context message with the current complete snapshot`."""
    live = Live()
    bad = live.msg(owned("", blocks=[{"type": "text", "text": "broken"}, {"type": "text", "text": "snapshot"}]))
    assert live.retained == RetainedSnapshot(bad.seq, None)
    fixed = live.pre_step(POLICY)
    assert fixed.data["content"] == [{"type": "text", "text": POLICY_TEXT}]
    assert len(live.owned_events()) == 2
    assert live.pre_step(POLICY) is None


def test_unchanged_visible_snapshot_is_never_resent():
    live = Live()
    live.pre_step(POLICY)
    for i in range(5):
        live.msg(user(f"turn {i}"))
        assert live.pre_step(POLICY) is None
    assert len(live.owned_events()) == 1
    # and a resumed agent agrees
    assert project_sections(restore_retained(live.session), POLICY) is None


def test_owned_replacement_sets_retained():
    """An owned user/message replacement is retained by the first branch, even when it cites the old seq."""
    live = Live()
    snap = live.pre_step(POLICY)
    new = live.commit(
        "user/message",
        owned("Y"),
        surface_op={"op": "replace", "start": snap.seq, "end": snap.seq},
        source_event_seqs=[snap.seq],
    )
    assert live.retained == RetainedSnapshot(new.seq, "Y")


# -- spec 15 G2 / G3 ----------------------------------------------------------------------------
def test_g2_one_request_window():
    """G2: the candidate is computed before pressure compaction shadows the retained snapshot."""
    live = Live()
    snap = live.pre_step(POLICY)
    live.msg(user("work"))
    candidate = project_sections(live.retained, POLICY)  # step k pre-step, before the waterfall
    assert candidate is None
    live.replace(snap.seq, snap.seq + 1, [snap.seq, snap.seq + 1])  # pressure compaction in the waterfall
    assert not any(is_owned_snapshot(live.session.log[s]) for s in live.session.nodes)  # request k lacks it
    assert live.pre_step(POLICY) is not None  # step k+1 re-emits


def test_g3_restore_vs_live_divergence():
    """G3: S1(X) at a, S2(Y) at b, replace (b,b) → live re-emits X; a resumed agent retains S1 and emits nothing."""
    x_sections = [{"name": "policy", "text": "X"}]
    y_sections = [{"name": "policy", "text": "Y"}]
    x_text, y_text = join_context_sections(x_sections), join_context_sections(y_sections)
    live = Live()
    s1 = live.pre_step(x_sections)
    live.msg(user("work"))
    s2 = live.pre_step(y_sections)
    assert live.retained == RetainedSnapshot(s2.seq, y_text)
    live.replace(s2.seq, s2.seq, [s2.seq])  # compactRegion(b, b): not head-anchored
    assert s1.seq in live.session.nodes and s2.seq not in live.session.nodes

    # live: shadowing the newest snapshot clears, although S1 is still visible → re-emit X
    assert live.retained is NONE
    emitted = project_sections(live.retained, x_sections)
    assert emitted is not None and emitted["content"][0]["text"] == x_text

    # restore: the constructor scan picks the newest *visible* snapshot → S1, nothing emitted
    restored = restore_retained(live.session)
    assert restored == RetainedSnapshot(s1.seq, x_text)
    assert project_sections(restored, x_sections) is None
    assert restored != live.retained  # the documented tradeoff


# -- restore vs live: where they must agree -----------------------------------------------------
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("owned"), st.sampled_from(["X", "Y", "Z"])),
        st.tuples(st.just("malformed"), st.just("")),
        st.tuples(st.just("user"), st.just("u")),
        st.tuples(st.just("replace"), st.tuples(st.integers(0, 30), st.integers(0, 3), st.booleans())),
    ),
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_restore_agrees_with_live_unless_live_cleared(ops):
    """Restore == live whenever live retains something or nothing ever existed; when live is NONE,
    restore is NONE or a still-visible older (or cited-but-visible) snapshot (G3)."""
    live = Live()
    for kind, arg in ops:
        if kind == "owned":
            live.msg(owned(arg))
        elif kind == "malformed":
            live.msg(owned("", blocks=[]))
        elif kind == "user":
            live.msg(user(arg))
        else:
            nodes = live.session.nodes
            if not nodes:
                continue
            pick, width, cite_extra = arg
            i = pick % len(nodes)
            j = min(i + width, len(nodes) - 1)
            shadowed = list(nodes[i : j + 1])
            sources = shadowed + ([0] if cite_extra and 0 not in shadowed else [])
            live.replace(nodes[i], nodes[j], sources)
        restored = restore_retained(live.session)
        if live.retained is NONE:
            assert restored is NONE or (
                isinstance(restored, RetainedSnapshot) and restored.seq in live.session.nodes
            )
        else:
            assert restored == live.retained
        if isinstance(live.retained, RetainedSnapshot):
            assert live.retained.seq in live.session.nodes  # a retained snapshot is always visible
    assert fold_retained_log(live.session.log) == live.retained
