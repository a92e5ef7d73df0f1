"""`prune_session`: the tool-result pruner as session transitions (model/pruner.py; spec 6, §15 G17).

Ported from dsh's `tool-result-pruner.spec.ts` ("prunes a stable snapshot, preserves all data, and
cites the replaced result", "prunes multiple results, skips short ones, and converges in one pass",
"replays to the identical pruned model messages"). Expected content is built with the spec's
head + marker + tail rule directly, not with the model's `prune_content`.
"""
from __future__ import annotations

from surfacecheck.model.errors import ModelError
from surfacecheck.model.estimate import estimate_message
from surfacecheck.model.meter import measure
from surfacecheck.model.prune_content import PRUNE_MARKER, resolve_pruner_config
from surfacecheck.model.pruner import prune_session
from surfacecheck.model.replay import replay
from surfacecheck.model.session import Session, append, derive_messages, replay_events, seeded
from surfacecheck.model.transaction import Faults

from builders import Log as SharedLog  # noqa: E402

P, M = "prov", "mod"
CONFIG = resolve_pruner_config({"thresholdChars": 100, "headChars": 20, "tailChars": 10})


class Log(SharedLog):
    """The shared builder, with tool results whose inner content and meta the tests choose."""

    def assistant(self, turn, step, calls, text=None):
        content = ([] if text is None else [{"type": "text", "text": text}]) + [
            {"type": "tool-call", "id": cid, "name": "bash", "arguments": "{}"} for cid in calls]
        return self.add("assistant/message", {"turn": turn, "step": step, "message": {
            "role": "assistant", "content": content, "source": {"kind": "model", "provider": P, "model": M},
            "id": self._id("a")}}, surface_op="append")

    def result(self, turn, step, call_id, inner, meta=None, is_error=False):
        call = self.add("tool/call", {"turn": turn, "step": step, "callId": call_id, "name": "bash",
                                      "arguments": "{}"})
        data = {"turn": turn, "step": step, "message": {
            "source": {"kind": "tool", "callId": call_id},
            "content": [{"type": "tool-result", "toolCallId": call_id, "content": inner, "isError": is_error}],
            "role": "user", "id": self._id("r")}}
        if meta is not None:
            data["meta"] = meta
        return self.add("tool/result", data, surface_op="append", source_event_seqs=[call])


def text(t):
    return {"type": "text", "text": t}


def expected_prune(s: str, head=20, tail=10) -> str:
    return s[:head] + PRUNE_MARKER + s[len(s) - tail:]


def session_with_results(*results, open_turn=True):
    """One step per result: [(inner blocks, meta?)]. Returns the session and the result seqs."""
    log = Log()
    log.add("turn/start", {"turn": 1})
    log.add("step/start", {"turn": 1, "step": 1})
    log.user("run the commands")
    log.add("request/header", {"header": {"config": {"provider": P, "model": M}}, "reason": "initial"})
    log.add("step/end", {"turn": 1, "step": 1})
    seqs = []
    for step, spec in enumerate(results, start=2):
        inner, meta = spec if isinstance(spec, tuple) else (spec, None)
        log.add("step/start", {"turn": 1, "step": step})
        log.assistant(1, step, [f"call-{step}"])
        seqs.append(log.result(1, step, f"call-{step}", inner, meta=meta))
        log.add("step/end", {"turn": 1, "step": step})
    if not open_turn:
        log.add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return log.session, seqs


BIG = "".join(chr(ord("a") + i % 26) for i in range(300))


def test_prune_pair_is_adjacent_and_cites_the_original():
    session, (seq,) = session_with_results(([text(BIG)], {"presentation": "preserved"}))
    original = session.log[seq]
    out = prune_session(session, CONFIG)
    assert out.error is None
    events = out.session.log[len(session.log):]
    assert [e.type for e in events] == ["compaction/prune", "tool/result"]
    prune, replacement = events
    assert replacement.seq == prune.seq + 1
    assert prune.data == {"shadowedRange": {"start": seq, "end": seq}, "shadowedSeqs": [seq],
                          "shadowedTokenCount": estimate_message(original.data["message"])}
    assert replacement.surface_op == {"op": "replace", "start": seq, "end": seq}
    assert replacement.source_event_seqs == [seq]
    # every field but the inner content is preserved (turn, step, meta, id, source, toolCallId, isError)
    data = replacement.data
    assert data["meta"] == {"presentation": "preserved"}
    assert (data["turn"], data["step"]) == (original.data["turn"], original.data["step"])
    message = data["message"]
    assert {k: v for k, v in message.items() if k != "content"} == {
        k: v for k, v in original.data["message"].items() if k != "content"}
    block = message["content"][0]
    assert {k: v for k, v in block.items() if k != "content"} == {
        "type": "tool-result", "toolCallId": original.data["message"]["content"][0]["toolCallId"], "isError": False}
    assert block["content"] == [text(expected_prune(BIG))]
    # the replacement takes the original's surface position
    assert out.session.nodes == tuple(replacement.seq if n == seq else n for n in session.nodes)
    result = out.value.pruned
    assert len(result) == 1
    entry = result[0]
    assert (entry.original_seq, entry.replacement_seq, entry.call_id) == (seq, replacement.seq, "call-2")
    assert (entry.chars_before, entry.chars_after) == (300, 20 + len(PRUNE_MARKER) + 10)
    assert out.value.chars_removed == 300 - (20 + len(PRUNE_MARKER) + 10)


def test_shadowed_token_count_is_the_estimate_of_the_original_and_the_meter_agrees():
    session, (seq,) = session_with_results([text(BIG), text("tail block " * 10)])
    price_before = dict(measure(session).nodes)[seq]
    out = prune_session(session, CONFIG)
    prune = out.session.log[len(session.log)]
    assert prune.data["shadowedTokenCount"] == price_before
    # the replay's shadow-price fold consumes the claim at the logged price
    replayed = replay(out.session.log)
    assert replayed.error is None
    (rep,) = replayed.replacements
    assert (rep.kind, rep.logged_shadow_tokens, rep.recomputed_shadow_tokens) == ("prune", price_before, price_before)
    assert replayed.projection_total == replayed.recount_total


def test_prunes_multiple_results_in_surface_order_skips_short_ones_and_bumps_generation_per_pair():
    short = [text("short output")]
    session, seqs = session_with_results([text(BIG)], short, [text(BIG.upper())], short)
    out = prune_session(session, CONFIG)
    events = out.session.log[len(session.log):]
    assert [e.type for e in events] == ["compaction/prune", "tool/result"] * 2
    assert [e.data["shadowedSeqs"] for e in events[::2]] == [[seqs[0]], [seqs[2]]]
    assert out.session.generation == session.generation + 2
    assert [entry.original_seq for entry in out.value.pruned] == [seqs[0], seqs[2]]
    assert seqs[1] in out.session.nodes and seqs[3] in out.session.nodes


def test_second_pass_prunes_nothing():
    session, _ = session_with_results([text(BIG)], [text(BIG)])
    first = prune_session(session, CONFIG)
    second = prune_session(first.session, CONFIG)
    assert second.session.log == first.session.log
    assert second.value.pruned == () and second.value.chars_removed == 0
    assert second.session.generation == first.session.generation


def test_a_pruned_replacement_is_itself_a_candidate():
    """Candidates are current tool/result nodes, appended or previously replaced (spec 6 step 1)."""
    session, (seq,) = session_with_results([text("x" * 3000)])
    loose = resolve_pruner_config({"thresholdChars": 1200, "headChars": 600, "tailChars": 500})
    first = prune_session(session, loose)
    replacement = first.value.pruned[0].replacement_seq
    second = prune_session(first.session, CONFIG)
    (entry,) = second.value.pruned
    assert entry.original_seq == replacement
    prune = second.session.log[len(first.session.log)]
    assert prune.data["shadowedSeqs"] == [replacement]
    assert prune.data["shadowedTokenCount"] == estimate_message(first.session.log[replacement].data["message"])


def test_non_text_blocks_are_kept_and_non_tool_nodes_are_never_pruned():
    image = {"type": "image", "attachment": {"id": "att-1"}}
    session, (seq,) = session_with_results([text(BIG[:150]), image, text(BIG[150:])])
    log = Log(session)
    log.add("step/start", {"turn": 1, "step": 9})
    log.user("u" * 5000)  # a huge user message is not a tool result
    log.add("step/end", {"turn": 1, "step": 9})
    out = prune_session(log.session, CONFIG)
    (entry,) = out.value.pruned
    assert entry.original_seq == seq
    content = out.session.log[entry.replacement_seq].data["message"]["content"][0]["content"]
    assert content == [text(BIG[:20] + PRUNE_MARKER), image, text(BIG[-10:])]


def test_pruned_log_replays_and_reloads_to_the_same_messages():
    session, _ = session_with_results([text(BIG)], [text(BIG)])
    out = prune_session(session, CONFIG)
    assert replay_events(out.session.log).nodes == out.session.nodes
    assert derive_messages(seeded(out.session.log)) == derive_messages(out.session)


def test_refused_replacement_leaves_a_dangling_prune():
    """§15 G17: the prune event is appended before its replacement; a refused replacement strands it."""
    session, seqs = session_with_results([text(BIG)], [text(BIG)])
    out = prune_session(session, CONFIG, Faults(fail_appends=frozenset({"prune-replace"})))
    assert isinstance(out.error, ModelError)
    assert str(out.error) == "tool/result replacement refused (injected fault: prune-replace)"
    events = out.session.log[len(session.log):]
    assert [e.type for e in events] == ["compaction/prune"]
    assert events[0].data["shadowedSeqs"] == [seqs[0]]
    assert out.session.generation == session.generation and out.session.nodes == session.nodes
    assert out.value.pruned == ()
    # the dangling claim expires at the next (non-replacement) event: the log still replays
    log = Log(out.session)
    log.add("step/start", {"turn": 1, "step": 20})
    assert replay(log.session.log).error is None


def test_an_earlier_pass_stays_durable_when_a_later_replacement_is_refused():
    session, seqs = session_with_results([text(BIG)])
    first = prune_session(session, CONFIG)
    log = Log(first.session)
    log.add("step/start", {"turn": 1, "step": 30})
    log.assistant(1, 30, ["late"])
    late = log.result(1, 30, "late", [text(BIG)])
    log.add("step/end", {"turn": 1, "step": 30})
    out = prune_session(log.session, CONFIG, Faults(fail_appends=frozenset({"prune-replace"})))
    assert out.error is not None
    assert out.session.log[-1].type == "compaction/prune" and out.session.log[-1].data["shadowedSeqs"] == [late]
    assert first.value.pruned[0].replacement_seq in out.session.nodes
