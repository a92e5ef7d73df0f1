"""ModelRuntime: the reference model behind the protocol agrees with the model's own folds.

Log level: every corpus log appended event by event gives the surface, generation, projection and
measure that :func:`model.replay.replay` computes (spec 2, 4, 5). Refusals carry the model's rule
and seq and leave the session unchanged (spec 1.3-1.4). Compaction and policy ops agree with the
model transitions run directly (spec 6-11).
"""
from __future__ import annotations

import json

import pytest

from surfacecheck.model.event import ABSENT
from surfacecheck.model.jsonl import read_log
from surfacecheck.model.meter import measure
from surfacecheck.model.policy import PRESSURE, Environment, compact_if_needed
from surfacecheck.model.config import RuntimePolicy
from surfacecheck.model.region import select_compactable_range
from surfacecheck.model.replay import replay
from surfacecheck.core.protocol import ProtocolError
from surfacecheck.runtime.model_runtime import ModelRuntime
from surfacecheck.runtime.sample import POLICY, sample_requests

from builders import Log


def event_json(event) -> dict:
    out = {"type": event.type, "data": event.data, "time": event.time}
    if event.surface_op is not ABSENT:
        out["surfaceOp"] = event.surface_op
    if event.source_event_seqs is not ABSENT:
        out["sourceEventSeqs"] = event.source_event_seqs
    return out


def load(runtime: ModelRuntime, session) -> None:
    for event in session.log:
        assert "error" not in runtime.call("append", {"event": event_json(event)})


def corpus_logs(corpus):
    return sorted(corpus.glob("dsh-*/*.jsonl"))


def test_corpus_logs_replay_event_by_event_like_model_replay(corpus):
    compared = 0
    for path in corpus_logs(corpus):
        log = read_log(path)
        if any(event.seq != index for index, event in enumerate(log.events)):
            continue  # a non-contiguous log: the runtime assigns seqs itself, replay refuses (spec 1.3)
        expected = replay(log.events)
        runtime = ModelRuntime()
        replacements = iter(expected.replacements)
        stop = expected.error.seq if expected.error is not None else None
        for event in log.events:
            result = runtime.call("append", {"event": event_json(event)})
            assert result == {"seq": event.seq, "generation": result["generation"]}, (path.name, result)
            if event.replace is not None and (stop is None or event.seq < stop):
                assert result["generation"] == next(replacements).generation_after, (path.name, event.seq)
            if stop is not None and event.seq == stop:
                break
        if expected.error is None:
            assert runtime.call("surface", {}) == {"nodes": list(expected.surface_nodes),
                                                  "generation": expected.generation}, path.name
            assert runtime.call("projection", {}) == {"total": expected.projection_total}, path.name
            measured = runtime.call("measure", {})
            assert measured["total"] == expected.measurement.total_tokens, path.name
            assert measured["prices"] == [tokens for _, tokens in expected.measurement.nodes], path.name
            assert sum(measured["prices"]) == expected.recount_total == measured["surface_tokens"]
        else:
            # live appends skip shape checks (spec 1.3, §15 G18): a fold, not the append, reports the rule
            refusals = [runtime.call("measure", {}).get("error"), runtime.call("projection", {}).get("error")]
            assert {"rule": expected.error.rule, "seq": stop} in [
                {"rule": r["rule"], "seq": r["seq"]} for r in refusals if r], (path.name, refusals)
        compared += 1
    assert compared >= 150


def test_refused_append_leaves_the_session_unchanged():
    runtime = ModelRuntime()
    log = Log()
    log.header()
    log.user("hello")
    load(runtime, log.session)
    before = (runtime.call("surface", {}), runtime.call("measure", {}), runtime.call("projection", {}))
    legacy = runtime.call("append", {"event": {"type": "request/header", "data": {"header": {}, "reason": "fallback"}}})
    assert legacy["error"]["rule"] == "session-append" and legacy["error"]["seq"] == 2
    missing = runtime.call("append", {"event": {"type": "user/message", "data": {},
                                                "surfaceOp": {"op": "replace", "start": 7, "end": 7}}})
    assert missing["error"]["rule"] == "surface" and "7" in missing["error"]["message"]
    no_data = runtime.call("append", {"event": {"type": "note"}})
    assert no_data["error"]["rule"] == "session-append"
    assert (runtime.call("surface", {}), runtime.call("measure", {}), runtime.call("projection", {})) == before
    assert runtime.call("append", {"event": {"type": "note", "data": {}}}) == {"seq": 2, "generation": 0}


def test_meter_error_sticks_and_projection_null_after_claim_mismatch():
    runtime = ModelRuntime()
    log = Log()
    first, second = log.user("a" * 40), log.user("b" * 40)
    load(runtime, log.session)
    assert runtime.call("append", {"event": {"type": "step/end", "data": {"turn": 1, "step": 1}}})["seq"] == 2
    stuck = runtime.call("measure", {})
    assert stuck["error"]["rule"] == "token-meter" and stuck["error"]["seq"] == 2
    assert runtime.call("projection", {}) == {"total": 2 * (10 + 8)}
    runtime.call("append", {"event": {"type": "compaction/prune", "data": {
        "shadowedRange": {"start": first, "end": first}, "shadowedSeqs": [first], "shadowedTokenCount": 18}}})
    replaced = runtime.call("append", {"event": {"type": "user/message", "data": {
        "id": "x", "role": "user", "source": {"kind": "user"}, "content": []},
        "surfaceOp": {"op": "replace", "start": second, "end": second}, "sourceEventSeqs": [second]}})
    assert replaced == {"seq": 4, "generation": 1}  # the session accepts it; the projection cannot price it
    projection = runtime.call("projection", {})
    assert projection["total"] is None and projection["error"]["rule"] == "shadow-claim-mismatch"
    assert runtime.call("measure", {}) == stuck


def test_cuts_follow_tool_pairing_and_refuse_a_corrupt_surface():
    runtime = ModelRuntime()
    log = Log()
    log.step_start(1, 1)
    log.assistant(1, 1, "x", calls=("c1", "c2"))
    log.result(1, 1, "c1")
    log.user("interjection")
    log.result(1, 1, "c2")
    load(runtime, log.session)
    assert runtime.call("cuts", {}) == {"balanced": [True, False, False, False, True], "reads": 5}  # log + 4 nodes
    assert runtime.call("cuts", {})["reads"] == 0  # reused without reading events (spec 3)
    assert runtime.call("cuts", {"seqs": [3]}) == {"before": [False], "after": [False], "reads": 0}
    missing = runtime.call("cuts", {"seqs": [3, 99]})["error"]
    assert missing["rule"] == "tool-pairing" and missing["message"] == "tool-pairing balance: surface seq 99 not found"
    log2 = Log()
    log2.result(1, 1, "orphan")
    runtime.call("reset", {})
    load(runtime, log2.session)
    assert runtime.call("cuts", {})["error"]["rule"] == "tool-pairing"


@pytest.mark.parametrize("op,args,kind", [
    ("nope", {}, "unknown-op"),
    ("append", {}, "bad-args"),
    ("append", {"event": {"type": "x", "data": {}, "seq": 3}}, "bad-args"),
    ("select_range", {"retain_tokens": "10"}, "bad-args"),
    ("compact", {"start": 1}, "bad-args"),
    ("compact", {"start": 1, "end": 1, "summary": {"outcome": "maybe"}}, "bad-args"),
    ("request_error", {}, "bad-args"),
])
def test_malformed_requests_raise_protocol_errors(op, args, kind):
    with pytest.raises(ProtocolError) as raised:
        ModelRuntime().call(op, args)
    assert raised.value.type == kind


def pressure_session() -> Log:
    log = Log()
    log.turn_start(1)
    log.header()
    log.user("please look " * 60)
    log.step_start(1, 1)
    log.assistant(1, 1, "looking " * 40, calls=("c1",))
    log.result(1, 1, "c1", "line\n" * 900)
    log.step_end(1, 1)
    log.step_start(1, 2)
    log.assistant(1, 2, "done " * 30)
    log.step_end(1, 2)
    return log


def test_select_range_and_pre_step_agree_with_the_model_transitions():
    log = pressure_session()
    runtime = ModelRuntime()
    load(runtime, log.session)
    for retain in (0, 50, 400, 10_000):
        span = select_compactable_range(log.session, measure(log.session), retain)
        expected = None if span is None else {"start": span.start, "end": span.end}
        assert runtime.call("select_range", {"retain_tokens": retain}) == {"range": expected}


@pytest.mark.parametrize("policy,window,kind", [
    (POLICY, 600, "warned"),  # pruned, compacted twice, still above threshold (spec 9.2 step 12)
    (POLICY, 1000, "pruned"),  # pruning sufficed (spec 9.2 step 10)
    ({"thresholdRatio": 0.5, "retainTokens": 20}, 2000, "compacted"),
    (POLICY, 5000, "noop"),
])
def test_pre_step_agrees_with_compact_if_needed(policy, window, kind):
    log = pressure_session()
    runtime = ModelRuntime()
    load(runtime, log.session)
    assert runtime.call("configure", {"policy": policy, "context_window": window})["configured"] is True
    outcome = compact_if_needed(log.session, PRESSURE, Environment(policy=RuntimePolicy.from_json(
        {**policy, "contextWindow": window})))
    result = runtime.call("pre_step", {})
    assert result["kind"] == kind
    assert result["generation"] == outcome.session.generation
    assert result["appended"] == [e.type for e in outcome.session.log[len(log.session.log):]]
    assert (result["failure"] or {}).get("message") == (outcome.error.message if outcome.error else None)
    if outcome.value is not None:
        assert result["result"]["shadowedSeqs"] == list(outcome.value.shadowed_seqs)
    assert runtime.call("surface", {})["nodes"] == list(outcome.session.nodes)
    assert runtime.call("measure", {})["total"] == measure(outcome.session).total_tokens


def test_summaries_are_consumed_in_order_per_compaction_start():
    log = pressure_session()
    runtime = ModelRuntime()
    load(runtime, log.session)
    runtime.call("configure", {"policy": {}, "summaries": [{"outcome": "failure"}, {"outcome": "text", "text": "S"}]})
    first = runtime.call("compact", {"start": 2, "end": 6})
    assert (first["kind"], first["appended"]) == ("failed", ["compaction/start", "compaction/end"])
    assert first["failure"]["rule"] == "summarizer"
    second = runtime.call("compact", {"start": 2, "end": 6})
    assert second["kind"] == "success" and second["generation"] == 1
    summary_seq = second["result"]["summarySeq"]
    own = runtime.call("compact", {"start": summary_seq + 1, "end": summary_seq + 1,
                                   "summaries": [{"outcome": "text", "ratio": 5.0}]})
    assert own["kind"] == "failed" and "not smaller" in own["failure"]["message"]


def test_overflow_retry_only_after_progress_and_within_budget():
    log = pressure_session()
    runtime = ModelRuntime()
    load(runtime, log.session)
    runtime.call("configure", {"policy": {"maxOverflowRetries": 1}, "context_window": 100_000})
    assert runtime.call("request_error", {"code": "OTHER"})["kind"] == "next"
    first = runtime.call("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED"})
    assert (first["kind"], first["retries"], first["generation"]) == ("retry", 1, 1)
    exhausted = runtime.call("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED"})
    assert (exhausted["kind"], exhausted["appended"]) == ("next", [])
    runtime.call("append", {"event": {"type": "agent/status", "data": {"status": "idle"}}})
    again = runtime.call("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED"})
    assert again["retries"] in (0, 1) and again["kind"] == ("retry" if again["generation"] > 1 else "next")


def test_pressure_warns_once_per_target_key():
    log = pressure_session()
    runtime = ModelRuntime()
    load(runtime, log.session)
    runtime.call("configure", {"policy": {}, "context_window": None})
    assert runtime.call("pre_step", {})["kind"] == "warned"
    assert runtime.call("pre_step", {})["kind"] == "silent"
    runtime.call("configure", {"policy": {"auto": False}})
    assert runtime.call("pre_step", {})["kind"] == "disabled"


def test_manual_compact_result_codes_and_reload():
    log = pressure_session()
    log.turn_end(1)
    runtime = ModelRuntime()
    load(runtime, log.session)
    assert runtime.call("manual_compact", {"args": "x"})["code"] == "usage"
    assert runtime.call("manual_compact", {"agent_idle": False})["code"] == "busy"
    assert runtime.call("manual_compact", {"summary": {"outcome": "agent-cancel"}})["code"] == "cancelled"
    assert runtime.call("manual_compact", {"faults": {"flush_fails": True}})["code"] == "persistence"
    done = runtime.call("manual_compact", {})
    assert done["kind"] == "success" and done["appended"][-1] == "command/done"
    surface = runtime.call("surface", {})
    reloaded = runtime.call("reload", {})
    assert reloaded["appended"] == ["session/end-seed"] and runtime.call("surface", {}) == surface
    assert runtime.call("reload", {})["appended"] == []  # idempotent reopen (spec 1.5)


def test_reload_refuses_a_log_a_live_append_accepted():
    runtime = ModelRuntime()
    runtime.call("append", {"event": {"type": "user/message", "data": {"content": []}, "surfaceOp": "append"}})
    refused = runtime.call("reload", {})
    assert refused["error"]["rule"] == "seed"
    assert runtime.call("surface", {})["nodes"] == [0]


def test_sample_script_reaches_every_op():
    runtime = ModelRuntime()
    results, labels = [], []
    for op, args in sample_requests():
        results.append((op, runtime.call(op, args)))
        labels += list(runtime.last_labels)
    ops = {op for op, _ in results}
    assert ops == {"reset", "append", "surface", "cuts", "measure", "projection", "events", "meter_replay", "select_range",
                   "prune", "compact",
                   "configure", "pre_step", "request_error", "manual_compact", "reload", "closers", "rows", "decode"}
    kinds = {(op, r.get("kind")) for op, r in results}
    assert {("pre_step", "pruned"), ("compact", "failed"), ("compact", "success"), ("request_error", "retry"),
            ("request_error", "next")} <= kinds
    assert json.loads(json.dumps(results)) == [list(item) for item in results]
    assert any(label.startswith("compaction/start at seq") for label in labels)  # trace story
    last_pre_step = [result for op, result in results if op == "pre_step"][-1]
    assert ("pre_step", "noop") in kinds and last_pre_step["appended"] == ["step/start", "user/message", "user/message"]
    runtime.call("surface", {})
    assert runtime.last_labels == ()


# -- meter_replay: the meter handed a log (spec 4.2-4.3) --------------------------------------------------------
HANDED = {
    "as logged": {"total": 1203, "baseline": {"kind": "estimated", "tokens": 1091}},
    "the logged header": {"total": 1203, "baseline": {"kind": "estimated", "tokens": 1091}},
    "another header": {"total": 1207, "baseline": {"kind": "estimated", "tokens": 1207}},
    "replace off the surface": (17, "token surface: replace at seq 17 has invalid current range 16-11"),
    "replace ending off the surface": (17, "token surface: replace at seq 17 has invalid current range 2-16"),
    "reversed replace": (17, "token surface: replace at seq 17 has invalid current range 11-2"),
    "cites itself": (9, "token meter: assistant/message at seq 9 source seq 9 is not earlier"),
    "cites a later seq": (21, "token meter: assistant/message at seq 21 source seq 22 is not earlier"),
    "cites a chunk twice": (21, "token meter: assistant/message at seq 21 repeats source seq 19"),
    "cites a non-chunk": (21, "token meter: assistant/message at seq 21 source seq 18 is not assistant/chunk"),
    "cites another step's chunk": (21, "token meter: assistant/message at seq 21 source seq 20 belongs to another step"),
    "cites another turn's chunk": (22, "token meter: assistant/message at seq 22 source seq 21 belongs to another step"),
}
"""What dsh's meter answers for each handed log (:mod:`properties.stateful.meter_logs`) over the sample's first turn:
the measurement, or the seq and dsh's words it fails loud with."""


def handed_requests(runtime) -> list[tuple[str, dict]]:
    """The sample's first turn appended to ``runtime``; then each kind's ``meter_replay`` request."""
    from surfacecheck.properties.stateful import meter_logs

    for op, args in [r for r in sample_requests() if r[0] in ("reset", "append")][:20]:
        runtime.call(op, args)
    events, nodes = runtime.call("events", {})["events"], runtime.call("surface", {})["nodes"]
    requests = []
    for kind in meter_logs.KINDS:
        log, header, _ = meter_logs.handed(events, nodes, kind)
        requests.append((kind, {"events": log, **({} if header is None else {"header": header})}))
    return requests


def check_handed(kind: str, answer: dict) -> None:
    expected = HANDED[kind]
    if isinstance(expected, tuple):
        assert answer == {"error": {"type": "TokenMeterError", "rule": "token-meter", "seq": expected[0],
                                    "message": expected[1]}}, kind
    else:
        assert {"total": answer["total"], "baseline": answer["baseline"]} == expected, kind


def test_the_meter_handed_a_log_fails_loud_in_dsh_words_in_the_model_and_the_embedded_runtime():
    from surfacecheck.runtime.embedded import EmbeddedRuntime

    model, embedded = ModelRuntime(), EmbeddedRuntime()
    cases, live = handed_requests(model), handed_requests(embedded)
    assert cases == live
    before = (model.call("surface", {}), model.call("measure", {}), model.call("events", {}))
    for kind, args in cases:
        answer = model.call("meter_replay", args)
        check_handed(kind, answer)
        assert embedded.call("meter_replay", args) == answer, kind
    assert (model.call("surface", {}), model.call("measure", {}), model.call("events", {})) == before  # read-only
    unchanged = dict(cases)["as logged"]
    assert model.call("meter_replay", unchanged) == model.call("measure", {})
    for header in (None, unchanged["events"][1]["data"]["header"], {"config": {"provider": "p", "model": "m"}}):
        assert model.call("measure", {"header": header}) == embedded.call("measure", {"header": header})


@pytest.mark.parametrize("args", [
    {}, {"events": {}}, {"events": [{"type": "x", "seq": 1, "data": {}}]}, {"events": [{"type": "x", "seq": 0}]},
    {"events": [{"type": "user/message", "seq": 0, "data": {}}]},
    {"events": [{"type": "user/message", "seq": 0, "data": {}, "surfaceOp": {"op": "replace", "start": -1, "end": 0}}]},
    {"events": [{"type": "x", "seq": 0, "data": {}, "sourceEventSeqs": [-1]}]},
    {"events": [{"type": "x", "seq": 0, "data": {}, "extra": 1}]},
    {"events": [], "header": {"system": "s"}}, {"events": [], "header": {"config": {}, "system": 3}},
])
def test_meter_replay_refuses_what_is_not_a_log_the_meter_reads_as_bad_args(args):
    with pytest.raises(ProtocolError) as caught:
        ModelRuntime().call("meter_replay", args)
    assert caught.value.type == "bad-args"
