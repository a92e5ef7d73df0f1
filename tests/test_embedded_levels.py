"""The embedded runtime's compaction and policy levels against the reference model (spec 6-11, 1.5).

Hypothesis drives ``ModelRuntime`` and ``EmbeddedRuntime`` with the same requests — dsh-shaped
turns, steps, tool rounds with big results, and every compaction/policy op with scripted summary
outcomes (text, failures, cancellations, concurrent appends and replaces) and injected faults —
and requires identical results and identical state after every request. Hand-built cases pin the
result kinds the spec names.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from surfacecheck.model.errors import ModelError
from surfacecheck.runtime.embedded import EmbeddedRuntime
from surfacecheck.runtime.model_runtime import ModelRuntime
from surfacecheck.runtime.sample import sample_requests
from test_embedded_log import call, state

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu ".split()


def text_of(n: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(n))


TEXTS = st.sampled_from([text_of(2), text_of(40), text_of(150), text_of(400), text_of(400)])
POLICIES = [
    {"thresholdRatio": 0.5, "retainTokens": 150, "compactionRetries": 1, "maxOverflowRetries": 1, "maxTokens": 512,
     "toolResultPruner": {"thresholdChars": 1200, "headChars": 300, "tailChars": 200}},
    {"thresholdRatio": 0.3, "retainRatio": 0.1, "compactionRetries": 0, "maxOverflowRetries": 2},
    {"auto": False},
    {"thresholdRatio": 0.5, "retainTokens": 5000},  # retention above the threshold: TargetPressureConfigError
    {"thresholdRatio": 2},  # refused at load (compaction-config)
    {"modelPolicies": [{"provider": "p", "model": "m", "retainTokens": 10, "maxOverflowRetries": 0}]},
]


class Sess:
    """What the generator needs to know about the session: next seq, open turn/step, open calls."""

    def __init__(self, runtime: EmbeddedRuntime) -> None:
        self.rt = runtime

    @property
    def nodes(self) -> list[int]:
        return list(self.rt.session.surface.nodes)

    @property
    def turn_open(self) -> bool:
        return self.rt.tracker.open_turn is not None

    @property
    def step_open(self) -> bool:
        return self.rt.meter.step is not None if self.rt.meter_error is None else False


def message(role: str, text: str, **extra) -> dict:
    return {"id": "m", "role": role, "content": [{"type": "text", "text": text}], **extra}


@st.composite
def script(draw, sess: Sess) -> dict:
    outcome = draw(st.sampled_from(["text", "text", "text", "failure", "empty", "image", "truncated", "cancel",
                                    "agent-cancel", "late-cancel", "concurrent"]))
    out: dict = {"outcome": outcome}
    if draw(st.booleans()):
        out["ratio"] = draw(st.sampled_from([0.05, 0.25, 2.0]))
    elif draw(st.booleans()):
        out["text"] = draw(st.sampled_from(["S", "", text_of(5)]))
    if outcome == "concurrent":
        nodes = sess.nodes
        if nodes and draw(st.booleans()):
            seq = draw(st.sampled_from(nodes))
            out["concurrent"] = [["user/message", message("user", "x"), {"op": "replace", "start": seq, "end": seq}]]
        else:
            out["concurrent"] = [[draw(st.sampled_from(["user/message", "turn/start"])), message("user", "late"),
                                  draw(st.sampled_from(["append", None]))]]
    if draw(st.integers(0, 5)) == 0:
        out["usage"] = [3, 4]
    return out


@st.composite
def request(draw, sess: Sess) -> list[tuple[str, dict]]:
    """One or a few requests (a tool round is several appends)."""
    kind = draw(st.sampled_from(
        ["turn", "step", "header", "user", "user", "assistant", "round", "round", "status", "select_range", "prune",
         "compact", "compact", "configure", "pre_step", "pre_step", "request_error", "manual_compact", "reload"]))
    scripts = {"summaries": draw(st.lists(script(sess), max_size=2))} if draw(st.booleans()) else {}
    faults = {"faults": {"fail_appends": draw(st.lists(st.sampled_from(
        ["compaction/summary", "checkpoint", "compaction/end", "error-close", "prune-replace"]), max_size=1)),
        "flush_fails": draw(st.booleans()), "cancel_during_flush": draw(st.booleans())}} \
        if draw(st.integers(0, 4)) == 0 else {}
    append = lambda type_, data, **kw: ("append", {"event": {"type": type_, "data": data, **kw}})  # noqa: E731
    if kind == "turn":
        return [append("turn/end" if sess.turn_open else "turn/start", {"turn": 1})]
    if kind == "step":
        return [append("step/end" if sess.step_open else "step/start", {"turn": 1, "step": 1})]
    if kind == "header":
        model = draw(st.sampled_from(["m", "n", ""]))
        return [append("request/header", {"reason": "initial", "header": {
            "config": {"provider": "p", "model": model}, "system": draw(TEXTS)}})]
    if kind == "user":
        return [append("user/message", message("user", draw(TEXTS), source={"kind": "user"}), surfaceOp="append")]
    if kind == "status":
        return [append("agent/status", {"status": draw(st.sampled_from(["idle", "busy"]))})]
    if kind in ("assistant", "round"):
        calls = draw(st.integers(1, 2)) if kind == "round" else 0
        content = [{"type": "text", "text": draw(TEXTS)}] + [
            {"type": "tool-call", "id": f"c{i}", "name": "read", "arguments": "{}"} for i in range(calls)]
        data = {"turn": 1, "step": 1, "message": {"id": "a", "role": "assistant", "content": content,
                                                  "source": {"kind": "model", "provider": "p", "model": "m"}}}
        if draw(st.booleans()):
            data["usage"] = {"inputTokens": draw(st.sampled_from([10, 500, 3000])), "outputTokens": 5}
        out = [] if sess.step_open else [append("step/start", {"turn": 1, "step": 1})]
        out.append(append("assistant/message", data, surfaceOp="append"))
        for i in range(calls if draw(st.integers(0, 5)) else calls - 1):
            body = draw(st.sampled_from([text_of(3), text_of(300)]))
            out.append(append("tool/result", {"turn": 1, "step": 1, "message": {
                "id": f"r{i}", "role": "user", "source": {"kind": "tool", "callId": f"c{i}"},
                "content": [{"type": "tool-result", "toolCallId": f"c{i}", "content": [{"type": "text", "text": body}]}]}},
                surfaceOp="append"))
        if draw(st.booleans()):
            out.append(append("step/end", {"turn": 1, "step": 1}))
        return out
    if kind == "select_range":
        return [("select_range", {"retain_tokens": draw(st.sampled_from([0, 50, 200, 1000]))})]
    if kind == "prune":
        return [("prune", {"pruner": draw(st.sampled_from([
            {"thresholdChars": 1200, "headChars": 300, "tailChars": 200}, {}, {"thresholdChars": 10}])), **faults})]
    if kind == "compact":
        nodes = sess.nodes or [0]
        i = 0 if draw(st.booleans()) else draw(st.integers(0, len(nodes) - 1))
        j = draw(st.integers(i, len(nodes) - 1))
        if draw(st.booleans()) and sess.rt.meter_error is None:  # the range the policy would pick
            from surfacecheck.runtime.embedded.compaction import Compactor
            try:
                span = Compactor(sess.rt).select_range(draw(st.sampled_from([0, 100])))
            except ModelError:  # a corrupt surface (spec 3)
                span = None
            i, j = (nodes.index(span[0]), nodes.index(span[1])) if span else (i, j)
        return [("compact", {"start": nodes[i], "end": nodes[j], "manual": draw(st.booleans()),
                             "aborted": draw(st.integers(0, 5)) == 0, **scripts, **faults})]
    if kind == "configure":
        args = {"policy": draw(st.sampled_from(POLICIES)),
                "context_window": draw(st.sampled_from([None, 600, 2000, 100000]))}
        if draw(st.booleans()):
            args["route"] = {"provider": "p", "model": draw(st.sampled_from(["m", "n"]))}
        return [("configure", {**args, **scripts})]
    if kind == "pre_step":  # sometimes with a claimed batch entered after the listener (spec 13 step 7, D9)
        claimed = {"claimed": [message("user", draw(TEXTS), source={"kind": "user"})
                               for _ in range(draw(st.integers(0, 2)))]} if draw(st.booleans()) else {}
        return [("pre_step", {**scripts, **faults, **claimed})]
    if kind == "request_error":
        return [("request_error", {"code": draw(st.sampled_from(["CONTEXT_WINDOW_EXCEEDED"] * 3 + ["RATE_LIMIT"])),
                                   "aborted": draw(st.integers(0, 6)) == 0, **scripts, **faults})]
    if kind == "manual_compact":
        return [("manual_compact", {"args": draw(st.sampled_from(["", "", "now"])),
                                    "agent_idle": draw(st.integers(0, 6)) > 0,
                                    "aborted": draw(st.integers(0, 6)) == 0, **scripts, **faults})]
    return [("reload", {})]


def lockstep(requests) -> tuple[ModelRuntime, EmbeddedRuntime]:
    model, embedded = ModelRuntime(), EmbeddedRuntime()
    for op, args in requests:
        assert call(embedded, op, args) == call(model, op, args), (op, args)
        assert state(embedded) == state(model), (op, args)
    return model, embedded


@settings(max_examples=40)
@given(st.data())
def test_generated_lockstep_all_levels(data):
    """Random dsh-shaped sessions with every compaction and policy op: identical results and state."""
    model, embedded = ModelRuntime(), EmbeddedRuntime()
    sess = Sess(embedded)
    prefix = [("configure", {"policy": data.draw(st.sampled_from(POLICIES[:2])), "context_window": 2000}),
              ("append", {"event": {"type": "request/header", "data": {"reason": "initial", "header": {
                  "config": {"provider": "p", "model": "m"}}}}}),
              ("append", {"event": {"type": "turn/start", "data": {"turn": 1}}})]
    for op, args in prefix[:data.draw(st.sampled_from([0, 1, 2, 3, 3, 3]))]:
        assert call(embedded, op, args) == call(model, op, args)
    for _ in range(data.draw(st.integers(1, 25))):
        for op, args in data.draw(request(sess)):
            got, expected = call(embedded, op, args), call(model, op, args)
            assert got == expected, (op, args)
        assert state(embedded) == state(model)
        assert [e["type"] for e in embedded.session.log] == [e.type for e in model.session.log]


def test_sample_conformance_script():
    """The protocol's sample session (reaches every op) gives the same results on both runtimes."""
    _, embedded = lockstep(sample_requests())
    assert embedded.session.generation >= 2


def test_result_kinds_on_a_hand_built_session():
    """Spec 8-11 result kinds: refused entry, success, shrink-rule failure, manual nothing/usage, reload."""
    append = lambda type_, data, **kw: ("append", {"event": {"type": type_, "data": data, **kw}})  # noqa: E731
    user = lambda text: append("user/message", message("user", text, source={"kind": "user"}),  # noqa: E731
                               surfaceOp="append")
    requests = [user(text_of(200)), user(text_of(200)), user("tail")]
    model, embedded = lockstep(requests)
    rt = embedded
    refused = rt.call("compact", {"start": 0, "end": 1})  # automatic without an open turn: refused, nothing written
    assert refused["kind"] == "refused" and refused["appended"] == []
    rt.call("append", {"event": {"type": "turn/start", "data": {"turn": 1}}})
    done = rt.call("compact", {"start": 0, "end": 1, "summary": {"outcome": "text", "text": "short"}})
    assert done["kind"] == "success" and done["generation"] == 1
    assert done["appended"] == ["compaction/start", "compaction/summary", "user/message", "compaction/end"]
    assert done["result"]["shadowedTokenCount"] == 2 * (-(-len(text_of(200)) // 4) + 8)
    assert rt.call("projection", {})["total"] == sum(rt.call("measure", {})["prices"])
    big = rt.call("compact", {"start": done["result"]["summarySeq"] + 1, "end": 2,
                              "summary": {"outcome": "text", "ratio": 5.0}})
    assert big["kind"] == "failed" and big["failure"]["message"].startswith("summary is not smaller")
    assert rt.call("manual_compact", {"args": "now"})["code"] == "usage"
    assert rt.call("manual_compact", {})["code"] == "busy"  # a turn is open
    reloaded = rt.call("reload", {})
    assert reloaded["appended"] == ["session/end-seed"] and rt.call("reload", {})["appended"] == []


@pytest.mark.parametrize("policy", POLICIES)
def test_configure_matches_model(policy):
    """`configure` accepts or refuses each policy exactly as the model's `RuntimePolicy.from_json` does."""
    lockstep([("configure", {"policy": policy, "context_window": 2000})])


def test_a_pruned_list_text_that_outgrows_the_threshold_fails_the_pass_after_what_landed():
    """Spec 6 step 4: a tool result whose text is a list (no live append checks its shape, §15 G18) is cut by its
    elements; kept strings longer than one character can outgrow the threshold, and pruneContent's guard throws out
    of the pass: the results pruned before it stay, the pass fails (both runtimes alike)."""
    def result(call_id: str, text) -> tuple[str, dict]:
        return ("append", {"event": {"type": "tool/result", "surfaceOp": "append", "data": {
            "turn": 1, "step": 1, "message": {"id": f"r-{call_id}", "role": "user",
                                              "source": {"kind": "tool", "callId": call_id},
                                              "content": [{"type": "tool-result", "toolCallId": call_id,
                                                           "content": [{"type": "text", "text": text}],
                                                           "isError": False}]}}}})
    calls = {"type": "assistant/message", "surfaceOp": "append", "data": {"turn": 1, "step": 1, "message": {
        "id": "a", "role": "assistant", "source": {"kind": "model", "provider": "p", "model": "m"},
        "content": [{"type": "tool-call", "id": c, "name": "read", "arguments": "{}"} for c in ("c1", "c2")]}}}
    model, embedded = lockstep([("append", {"event": {"type": "step/start", "data": {"turn": 1, "step": 1}}}),
                                ("append", {"event": calls}), result("c1", "x" * 100), result("c2", ["abcd"] * 100)])
    budgets = {"pruner": {"thresholdChars": 60, "headChars": 5, "tailChars": 5}}
    answer = call(model, "prune", budgets)
    assert answer == call(embedded, "prune", budgets)
    assert answer["kind"] == "failed" and [e["originalSeq"] for e in answer["pruned"]] == [2]
    assert answer["failure"] == {"type": "PruneGuardError", "rule": "tool-result-prune", "seq": None,
                                 "message": "tool-result prune: replacement must be smaller and within threshold"}
    assert answer["appended"] == ["compaction/prune", "tool/result"] and "charsRemoved" not in answer
