"""The Google ADK adapter (``surfacecheck/runtime/conversation/adk_peer.py``) through the suite's own client: one
peer for the module, each test opening its own session; then every registered ADK witness replays broken on ADK
and held on the reference runtime."""
from __future__ import annotations

from dataclasses import replace

import pytest

from surfacecheck.contract import registry
from surfacecheck.contract.driver import Driver
from surfacecheck.contract.replay import judge_for, read_contract_trace
from surfacecheck.core.protocol import ProtocolError
from surfacecheck.runtime.conversation.reference import ReferenceRuntime
from surfacecheck.runtime.registry import open_spec

SYSTEM = "You are terse."
TOKENS = {"token_threshold": 100, "event_retention_size": 1, "compaction_interval": None, "overlap_size": None}


@pytest.fixture(scope="module")
def rt():
    runtime = open_spec("adk", 60)
    yield runtime
    runtime.close()


def user(text):
    return {"role": "user", "text": text}


def assistant(text, calls=None):
    return {"role": "assistant", "text": text, **({"calls": calls} if calls else {})}


def call(cid, size=10):
    return {"id": cid, "name": "fetch", "args": {"size": size, "tag": cid}}


def kinds(answer):
    return [step["kind"] for step in answer["steps"]]


def plain(messages):
    return [(m["role"], m.get("text", ""), [c["id"] for c in m.get("calls") or []], m.get("summary", False))
            for m in messages]


def test_hello_and_open_echo_adk_own_names_and_the_token_trigger(rt):
    hello = rt.hello()
    assert hello["levels"] == ["conversation"] and hello["runtime"] == {"name": "adk", "version": "2.13.0"}
    assert "bench" in hello["ops"]
    opened = rt.call("open", {"settings": {}})
    assert opened["settings"]["compaction_interval"] == 3 and opened["settings"]["overlap_size"] == 1
    assert opened["trigger"] is None  # the sliding window counts invocations: no size trigger
    tokens = rt.call("open", {"settings": TOKENS})
    assert tokens["trigger"] == {"kind": "tokens", "value": 100, "counter": "runtime", "reaches": True}


def test_unknown_or_unpaired_settings_and_compact_are_bad_args(rt):
    with pytest.raises(ProtocolError) as caught:
        rt.call("open", {"settings": {"bogus": 1}})
    assert caught.value.type == "bad-args" and "'bogus'" in str(caught.value)
    with pytest.raises(ProtocolError) as caught:
        rt.call("open", {"settings": {"token_threshold": 100}})  # ADK: the pair must be set together
    assert caught.value.type == "bad-args" and "event_retention_size" in str(caught.value)
    rt.call("open", {"settings": {}})
    with pytest.raises(ProtocolError) as caught:
        rt.call("compact", {})
    assert caught.value.type == "bad-args" and "no public compaction entry" in str(caught.value)


def test_a_round_trip_without_compaction_records_requests_and_history(rt):
    rt.call("open", {"settings": {"compaction": False}, "system": SYSTEM,
                     "history": [user("hi"), assistant("hello")]})
    answer = rt.call("turn", {"user": "fetch two", "replies": [
        {"text": "on it", "calls": [call("c1"), call("c2", 5)]}, {"text": "got them"}]})
    assert kinds(answer) == ["request", "request"]
    first, second = answer["steps"]
    assert first["system"].startswith(SYSTEM) and first["tokens"] > 0
    assert plain(first["messages"]) == plain([user("hi"), assistant("hello"), user("fetch two")])
    results = second["messages"][-2:]
    assert [(m["role"], m["call_id"], m["packed"]) for m in results] == [("tool", "c1", 4), ("tool", "c2", 4)]
    assert results[0]["text"] == "c1 " + "lorem ipsu"
    assert plain(answer["history"]) == plain(second["messages"]) + [("assistant", "got them", [], False)]


def test_the_token_threshold_compacts_after_the_invocation_with_the_summary_marked(rt):
    rt.call("open", {"settings": TOKENS, "system": SYSTEM, "history": [user("q0"), assistant("a0")]})
    answer = rt.call("turn", {"user": "fetch", "summaries": [{"text": "the gist"}],
                              "replies": [{"calls": [call("c1", 300)]}, {"text": "ok"}]})
    assert kinds(answer) == ["request", "request", "summarizer", "compaction"]
    summarizer, compaction = answer["steps"][2:]
    assert "user: q0" in summarizer["prompt"] and "fetch" in summarizer["prompt"]
    assert compaction["cause"] == "size" and compaction["count_before"] >= 100
    assert plain(compaction["after"]) == [("assistant", "the gist", [], True), ("assistant", "ok", [], False)]
    assert plain(answer["history"]) == plain(compaction["after"])
    later = rt.call("turn", {"user": "next"})
    assert later["steps"][0]["messages"][0] == {"role": "assistant", "text": "the gist", "summary": True}


def test_a_failing_summarizer_leaves_the_history_whole(rt):
    rt.call("open", {"settings": TOKENS, "history": [user("q0"), assistant("a0")]})
    answer = rt.call("turn", {"user": "fetch", "summaries": [{"fail": "down"}],
                              "replies": [{"calls": [call("c1", 300)]}, {"text": "ok"}]})
    assert kinds(answer) == ["request", "request", "summarizer"]
    assert answer["steps"][2]["outcome"] == "fail"
    assert len(answer["history"]) == 6


def test_bench_times_the_check_before_each_model_call(rt):
    result = rt.call("bench", {"sizes": [10, 100], "repeats": 2})
    assert [p["messages"] for p in result["points"]] == [10, 100]
    assert all(p["seconds_per_append"] > 0 for p in result["points"])


ADK_FINDINGS = registry.for_runtime(registry.load(), "adk")


def on_reference(trace):
    """The witness with ADK's settings replaced by the reference's defaults (``compaction`` kept): the reference
    refuses ADK's keys; its trigger is its own."""
    first = trace.steps[0]
    settings = {k: v for k, v in (first.args.get("settings") or {}).items() if k == "compaction"}
    steps = (replace(first, args={**first.args, "settings": settings}), *trace.steps[1:])
    return replace(trace, steps=steps, provider="gemini")


def breaches(runtime, spec, trace):
    """The witness's promise judged on a session of ``trace`` driven on an open ``runtime``."""
    driver = Driver(runtime, spec, trace.provider or "gemini")
    driver.open(trace.steps[0].args)
    for step in trace.steps[1:]:
        driver.run(step.op, step.args)
        assert driver.halted is None, driver.halted
    return list(judge_for(trace.property)(driver.session))


@pytest.mark.parametrize("finding", ADK_FINDINGS, ids=[f.id for f in ADK_FINDINGS])
def test_each_registered_witness_breaks_on_adk_and_holds_on_the_reference(rt, finding):
    trace = read_contract_trace(finding.trace_path)
    assert trace.property == finding.promise
    assert any(b.promise == finding.promise for b in breaches(rt, "adk", trace))
    reference = ReferenceRuntime()
    assert not [b for b in breaches(reference, "reference", on_reference(trace)) if b.promise == finding.promise]
