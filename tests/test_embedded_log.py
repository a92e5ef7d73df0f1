"""The embedded runtime's log level against the reference model (issue 4 point 2; spec 1.3-1.4, 2, 3, 4, 5).

The embedded runtime is an independent incremental implementation; these tests drive it and
``ModelRuntime`` with the same requests and require identical results: over every corpus log (each
append, and the full state at every replacement and at the end), over Hypothesis-generated event
sequences (valid and invalid), and on hand-built edge cases whose expected values are stated.
"""
from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings, strategies as st

from surfacecheck.model.event import ABSENT
from surfacecheck.model.jsonl import read_log
from surfacecheck.model.replay import replay
from surfacecheck.runtime.embedded import EmbeddedRuntime
from surfacecheck.runtime.embedded.meter import IncrementalMeter, price_message
from surfacecheck.runtime.embedded.projection import ShadowPriceProjection
from surfacecheck.runtime.model_runtime import ModelRuntime

STATE_OPS = ("surface", "cuts", "measure", "projection")


def wire(event) -> dict:
    """A stored model Event as an `append` request's event (seq is assigned by the runtime)."""
    return {k: v for k, v in event.to_json().items() if v is not ABSENT and k not in ("seq", "ignorable")}


def call(runtime, op: str, args: dict | None = None) -> dict:
    """``runtime.call``; a raw exception (a runtime reading a shape dsh cannot read and not reporting it as
    the ``message-shape`` refusal) is shown as that refusal's rule so both sides compare alike."""
    try:
        result = runtime.call(op, args or {})
    except (KeyError, TypeError, IndexError, AttributeError):
        return {"error": {"rule": "message-shape"}}
    if isinstance(result.get("error"), dict) and result["error"].get("rule") == "message-shape":
        return {**result, "error": {"rule": "message-shape"}}
    return result


def state(runtime) -> dict:
    return {op: call(runtime, op) for op in STATE_OPS}


def corpus_logs(corpus: Path) -> list[Path]:
    return sorted(corpus.glob("dsh-sessions/*.jsonl")) + sorted(corpus.glob("dsh-generated/*.jsonl"))


# -- corpus lockstep ------------------------------------------------------------------------------
def test_corpus_lockstep_with_model_runtime(corpus):
    """Every corpus log, event by event: same append results; same state at each replace, refusal and the end."""
    logs = corpus_logs(corpus)
    assert len(logs) > 100
    replaces = 0
    for path in logs:
        events = read_log(path).events
        model, embedded = ModelRuntime(), EmbeddedRuntime()
        for event in events:
            request = {"event": wire(event)}
            expected, got = call(model, "append", request), call(embedded, "append", request)
            assert got == expected, f"{path.name}: append of seq {event.seq}"
            if isinstance(event.surface_op, dict) or "error" in expected:
                replaces += isinstance(event.surface_op, dict)
                assert state(embedded) == state(model), f"{path.name}: state after seq {event.seq}"
        assert state(embedded) == state(model), f"{path.name}: final state"
    assert replaces > 20  # the corpus exercises replacements, not only appends


def test_incremental_folds_match_replay(corpus):
    """The standalone meter and projection (benchmark variants) equal `model.replay` on every clean corpus log."""
    checked = 0
    for path in corpus_logs(corpus):
        events = read_log(path).events
        result = replay(events)
        if not result.ok:
            continue
        meter, projection = IncrementalMeter(), ShadowPriceProjection()
        for event in events:
            record = {k: v for k, v in event.to_json().items() if v is not ABSENT}
            meter.observe(record)
            projection.observe(record)
        assert meter.seqs == list(result.surface_nodes), path.name
        assert meter.prices == [tokens for _, tokens in result.measurement.nodes], path.name
        assert meter.total == result.measurement.total_tokens, path.name
        assert projection.total == result.projection_total, path.name
        assert projection.metered == result.fully_metered, path.name
        checked += 1
    assert checked > 100


# -- hand-built cases (expected values from the spec) -------------------------------------------
def user(text: str) -> dict:
    return {"type": "user/message", "surfaceOp": "append",
            "data": {"role": "user", "id": "u", "source": {"kind": "user"}, "content": [{"type": "text", "text": text}]}}


def checkpoint(text: str, start: int, end: int, sources: list[int]) -> dict:
    return {**user(text), "surfaceOp": {"op": "replace", "start": start, "end": end}, "sourceEventSeqs": sources}


def both(*requests) -> tuple[ModelRuntime, EmbeddedRuntime, list]:
    model, embedded, results = ModelRuntime(), EmbeddedRuntime(), []
    for op, args in requests:
        expected, got = call(model, op, args), call(embedded, op, args)
        assert got == expected, (op, args)
        results.append(got)
    assert state(embedded) == state(model)
    return model, embedded, results


def test_price_message_pins():
    """Spec 4.1 pinned values: an 'abcd' text message costs 9; empty content costs 4."""
    assert price_message({"content": [{"type": "text", "text": "abcd"}]}) == 9
    assert price_message({"content": []}) == 4
    assert price_message(None) == 0


def test_positional_replace_with_start_after_end_numerically():
    """Spec 2.1: replace {start: 3, end: 1} over nodes [3, 1] is legal (positions, not seq order)."""
    _, embedded, results = both(
        ("append", {"event": user("a")}), ("append", {"event": user("b")}),
        ("append", {"event": checkpoint("c", 0, 0, [0])}),  # seq 2 replaces 0 -> [2, 1]
        ("append", {"event": checkpoint("d", 2, 1, [2, 1])}),  # seq 3 over [2, 1]
        ("append", {"event": checkpoint("e", 1, 3, [1, 3])}),  # refused: 3 is not on the surface any more
    )
    assert embedded.call("surface", {}) == {"nodes": [3], "generation": 2}
    assert results[-1]["error"]["rule"] == "surface"
    assert "start seq 1 not found" in results[-1]["error"]["message"]


def test_refusals_leave_state_unchanged():
    """Spec 1.3-1.4: refused appends write nothing; the next append gets the same seq."""
    _, embedded, results = both(
        ("append", {"event": user("a")}),
        ("append", {"event": {"type": "user/message", "data": {"content": []}}}),  # no surfaceOp
        ("append", {"event": {"type": "turn/start", "data": {}, "surfaceOp": "append"}}),  # not eligible
        ("append", {"event": {"type": "request/header-delta", "data": {}}}),  # legacy
        ("append", {"event": {**user("x"), "sourceEventSeqs": [0, 0]}}),  # duplicates
        ("append", {"event": {**user("x"), "sourceEventSeqs": [5]}}),  # not earlier
        ("append", {"event": user("b")}),
    )
    assert [r.get("error", {}).get("rule") for r in results] == [None, "surface", "surface", "session-append",
                                                                   "surface", "surface", None]
    assert results[-1] == {"seq": 1, "generation": 0}


def test_projection_claim_consume_expire_unpriced_and_mismatch():
    """Spec 5.1: an adjacent claim is consumed; an intervening event expires it; a mismatched range is an error."""
    summary = lambda start, end, tokens: {"type": "compaction/summary", "data": {  # noqa: E731
        "shadowedRange": {"start": start, "end": end}, "shadowedTokenCount": tokens}}
    model, embedded, _ = both(
        ("append", {"event": user("abcd")}), ("append", {"event": user("abcd")}),  # 9 + 9
        ("append", {"event": summary(0, 0, 9)}), ("append", {"event": checkpoint("abcdabcd", 0, 0, [0])}),  # 10 - 9
    )
    assert embedded.call("projection", {}) == {"total": 19}
    assert embedded.call("measure", {})["prices"] == [10, 9]
    # an intervening log-only event expires the claim: the replace is unpriced (delta 0, spec §15 G1)
    both(("append", {"event": user("abcd")}), ("append", {"event": summary(0, 0, 9)}),
         ("append", {"event": {"type": "turn/start", "data": {}}}),
         ("append", {"event": checkpoint("abcdabcd", 0, 0, [0])}))
    # a claim for another range: the projection is stuck with shadow-claim-mismatch, the session goes on
    _, embedded, _ = both(("append", {"event": user("abcd")}), ("append", {"event": user("abcd")}),
                          ("append", {"event": summary(1, 1, 9)}),
                          ("append", {"event": checkpoint("abcdabcd", 0, 0, [0])}))
    result = embedded.call("projection", {})
    assert result["total"] is None and result["error"]["rule"] == "shadow-claim-mismatch"
    assert embedded.call("surface", {}) == {"nodes": [3, 1], "generation": 1}


def test_stuck_meter_refuses_measure_until_reset():
    """Spec 4.2: a failing event stays unread; every later measure fails with the same error."""
    step = lambda kind: {"type": kind, "data": {"turn": 1, "step": 1}}  # noqa: E731
    _, embedded, _ = both(("append", {"event": step("step/start")}), ("append", {"event": step("step/start")}),
                          ("append", {"event": user("a")}))
    first = embedded.call("measure", {})
    assert first["error"]["rule"] == "token-meter" and first["error"]["seq"] == 1
    assert embedded.call("measure", {}) == first
    embedded.call("reset", {})
    assert embedded.call("measure", {}) == {"total": 0, "prices": [], "surface_tokens": 0,
                                            "baseline": {"kind": "none", "tokens": 0}}


def assistant_calls(n: int) -> dict:
    content = [{"type": "tool-call", "id": f"c{i}", "name": "t", "arguments": "{}"} for i in range(n)]
    return {"type": "assistant/message", "surfaceOp": "append",
            "data": {"turn": 1, "step": 1, "message": {"role": "assistant", "id": "a", "content": content}}}


def tool_result(text: str = "ok") -> dict:
    return {"type": "tool/result", "surfaceOp": "append", "data": {"turn": 1, "step": 1, "message": {
        "role": "user", "id": "r", "source": {"kind": "tool", "callId": "c"},
        "content": [{"type": "tool-result", "toolCallId": "c", "content": [{"type": "text", "text": text}]}]}}}


def test_pairing_cache_extends_within_a_generation_and_rebuilds_after_replace():
    """Spec 3: appends fold only the new tail; a replace forces a rebuild from the head."""
    runtime = EmbeddedRuntime()
    for event in (user("a"), assistant_calls(2), tool_result(), tool_result()):
        runtime.call("append", {"event": event})
    assert runtime.call("cuts", {}) == {"balanced": [True, True, False, False, True], "reads": 5}
    folded = runtime.reader.ops
    assert runtime.call("cuts", {})["reads"] == 0  # unchanged: no event read
    runtime.call("append", {"event": user("b")})
    assert runtime.call("cuts", {}) == {"balanced": [True, True, False, False, True, True], "reads": 2}
    assert runtime.reader.ops == folded + 1  # extended by exactly the new node
    runtime.call("append", {"event": checkpoint("s", 0, 3, [0, 1, 2, 3])})  # replaces the whole tool round
    assert runtime.call("cuts", {}) == {"balanced": [True, True, True], "reads": 3}
    assert runtime.reader.ops == folded + 1 + 2 and runtime.reader.generation == 1  # rebuilt: 2 nodes


def test_corrupt_surface_refuses_cuts_identically():
    """Spec 3: a result with no open call is a corrupt surface; the cache stays put and retries fail alike."""
    _, embedded, _ = both(("append", {"event": user("a")}), ("append", {"event": tool_result()}))
    first = embedded.call("cuts", {})
    assert first["error"]["rule"] == "tool-pairing" and "surface seq 1" in first["error"]["message"]
    assert embedded.call("cuts", {}) == first


def test_projection_is_constant_work_per_event():
    """Spec 5 / seed §16: the projection touches O(1) state per event, whatever the surface size."""
    projection = ShadowPriceProjection()
    for seq in range(2000):
        before = projection.ops
        projection.observe({"seq": seq, **user("abcd")})
        assert projection.ops - before <= 2
    assert projection.total == 2000 * 9
    assert not hasattr(projection, "nodes")


def test_meter_replace_walks_only_its_span():
    """The per-node price table (spec 4.2) splices a replace in O(span), not O(surface)."""
    meter = IncrementalMeter()
    for seq in range(1000):
        meter.observe({"seq": seq, **user("abcd")})
    before = meter.ops
    meter.observe({"seq": 1000, **checkpoint("abcd", 500, 502, [500, 501, 502])})
    assert meter.ops - before == 6  # 3 nodes validated + 3 nodes unlinked
    assert len(meter) == 998 and meter.surface_tokens == 998 * 9
    assert meter.seqs[499:502] == [499, 1000, 503]


# -- Hypothesis lockstep over generated event sequences -----------------------------------------
TEXT = st.text(alphabet=st.sampled_from("ab c\n\u00e9\U0001F600"), max_size=24)


@st.composite
def event_for(draw, runtime: EmbeddedRuntime) -> dict:
    """One event request: valid most of the time, sometimes a refusal or a shape dsh cannot read."""
    nodes = runtime.session.surface.nodes
    prices = dict(zip(nodes, runtime.meter.prices)) if runtime.meter_error is None else {}
    kind = draw(st.sampled_from(["user", "user", "assistant", "result", "step", "header", "log", "checkpoint",
                                 "prune", "chunked", "user", "result", "assistant", "bad"]))
    if kind == "user":
        return user(draw(TEXT))
    open_step = runtime.meter.step is not None
    if kind == "assistant":
        event = assistant_calls(draw(st.integers(0, 2)))
        event["data"]["message"]["content"].insert(0, {"type": "text", "text": draw(TEXT)})
        if draw(st.booleans()):
            event["data"]["usage"] = {"inputTokens": draw(st.integers(0, 200)), "outputTokens": draw(st.integers(0, 9))}
        chunks = [seq for seq, e in enumerate(runtime.session.log) if e["type"] == "assistant/chunk"]
        if chunks and draw(st.booleans()):
            event["sourceEventSeqs"] = chunks[-2:]
        return event if open_step else [{"type": "step/start", "data": {"turn": 1, "step": 1}}, event]
    if kind == "result":
        return tool_result(draw(TEXT))
    if kind == "step":
        usual = "step/end" if open_step else "step/start"
        return {"type": draw(st.sampled_from([usual] * 5 + ["step/start", "step/end"])), "data": {"turn": 1, "step": 1}}
    if kind == "header":
        return {"type": "request/header", "data": {"reason": "initial", "header": {
            "config": {"provider": "p", "model": draw(st.sampled_from(["m", "n"]))}, "system": draw(TEXT)}}}
    if kind == "log":
        return {"type": "turn/start", "data": {"turn": 1}}
    if kind == "chunked":
        return {"type": "assistant/chunk", "data": {"turn": 1, "step": 1, "chunk": {
            "type": "text-delta", "index": 0, "text": draw(TEXT)}}}
    if kind == "bad" and draw(st.integers(0, 2)) == 0:
        return draw(st.sampled_from([
            {"type": "user/message", "data": {"nope": 1}, "surfaceOp": "append"},
            {"type": "user/message", "data": {}, "surfaceOp": {"op": "replace", "start": 0, "end": 99}},
            {**user("x"), "sourceEventSeqs": [0, 0]},
            {"type": "request/header-delta", "data": {}},
            {"type": "compaction/prune", "data": {}},
            {"type": "tool/result", "data": {"message": {"content": []}}, "surfaceOp": "append"},
        ]))
    if not nodes:
        return user(draw(TEXT))
    i = draw(st.integers(0, len(nodes) - 1))
    j = draw(st.integers(i, min(len(nodes) - 1, i + 3))) if kind == "checkpoint" else i
    start, end = nodes[i], nodes[j]
    shadow = sum(prices.get(seq, 0) for seq in nodes[i:j + 1]) + draw(st.sampled_from([0, 0, 0, 1]))
    metering = {"type": "compaction/summary" if kind == "checkpoint" else "compaction/prune",
                "data": {"shadowedRange": {"start": start, "end": end}, "shadowedTokenCount": shadow}}
    if kind == "checkpoint":
        replacement = checkpoint(draw(TEXT), start, end, list(nodes[i:j + 1]))
    else:
        original = runtime.session.event_at(start)
        replacement = user(draw(TEXT))
        if original["type"] == "tool/result" and original["data"].get("message", {}).get("content"):
            replacement["type"], replacement["data"] = "tool/result", {**original["data"], "message": {**original["data"]["message"], "content": [
                {**original["data"]["message"]["content"][0], "content": [{"type": "text", "text": draw(TEXT)}]}]}}
        replacement.update(surfaceOp={"op": "replace", "start": start, "end": end}, sourceEventSeqs=[start])
    return [metering, replacement] if draw(st.integers(0, 4)) else replacement


@settings(max_examples=60)
@given(st.data())
def test_generated_lockstep_with_model_runtime(data):
    """Random event sequences (with metered and unmetered replaces, refusals, bad shapes): identical results."""
    model, embedded = ModelRuntime(), EmbeddedRuntime()
    for _ in range(data.draw(st.integers(1, 30))):
        drawn = data.draw(event_for(embedded))
        for event in drawn if isinstance(drawn, list) else [drawn]:
            request = {"event": event}
            assert call(embedded, "append", request) == call(model, "append", request)
        assert state(embedded) == state(model)
