"""The Strands adapter (``surfacecheck/runtime/conversation/strands_peer.py``) through the suite's own client: one
peer for the module, each test opening its own session."""
from __future__ import annotations

import pytest

from surfacecheck.core.protocol import ProtocolError
from surfacecheck.runtime.registry import open_spec

SYSTEM = "You are terse."


@pytest.fixture(scope="module")
def rt():
    runtime = open_spec("strands", 60)
    yield runtime
    runtime.close()


def user(text):
    return {"role": "user", "text": text}


def assistant(text, calls=None):
    return {"role": "assistant", "text": text, **({"calls": calls} if calls else {})}


def call(cid, size=10):
    return {"id": cid, "name": "fetch", "args": {"size": size, "tag": cid}}


def alternating(n):
    return [user(f"q{i // 2}") if i % 2 == 0 else assistant(f"a{i // 2}") for i in range(n)]


def kinds(answer):
    return [step["kind"] for step in answer["steps"]]


def plain(messages):
    return [(m["role"], m.get("text", ""), [c["id"] for c in m.get("calls") or []], m.get("summary", False))
            for m in messages]


def test_hello_announces_the_conversation_level_and_the_installed_version(rt):
    hello = rt.hello()
    assert hello["levels"] == ["conversation"]
    assert hello["runtime"] == {"name": "strands", "version": "1.62.0"}
    assert "bench" in hello["ops"]


def test_open_echoes_strands_own_defaults_and_the_reactive_trigger(rt):
    opened = rt.call("open", {"settings": {}, "system": SYSTEM})
    assert opened["settings"]["summary_ratio"] == 0.3
    assert opened["settings"]["preserve_recent_messages"] == 10
    assert opened["settings"]["compaction"] is True
    assert opened["trigger"] == {"kind": "overflow", "value": None, "counter": "runtime"}
    sliding = rt.call("open", {"settings": {"manager": "sliding_window"}})
    assert sliding["settings"]["window_size"] == 40
    assert sliding["trigger"] == {"kind": "messages", "value": 40, "counter": "runtime"}
    proactive = rt.call("open", {"settings": {"proactive_compression": True, "context_window_limit": 1000}})
    assert proactive["trigger"] == {"kind": "tokens", "value": 700, "counter": "runtime", "reaches": True}
    assert rt.call("open", {"settings": {"compaction": False}})["trigger"] is None


def test_an_unknown_setting_is_bad_args_naming_the_key(rt):
    with pytest.raises(ProtocolError) as caught:
        rt.call("open", {"settings": {"window_size": 3}})  # a sliding-window key on the summarizing manager
    assert caught.value.type == "bad-args"
    assert "window_size" in str(caught.value)
    with pytest.raises(ProtocolError) as caught:
        rt.call("open", {"settings": {"summary_ratio": 0.3, "bogus": 1}})
    assert caught.value.type == "bad-args" and "'bogus'" in str(caught.value)


def test_a_turn_without_compaction_records_every_request_and_the_final_history(rt):
    rt.call("open", {"settings": {}, "system": SYSTEM, "history": [user("hi"), assistant("hello")]})
    answer = rt.call("turn", {"user": "fetch two", "replies": [
        {"text": "on it", "calls": [call("c1"), call("c2", 5)]}, {"text": "got them"}]})
    assert kinds(answer) == ["request", "request"]
    first, second = answer["steps"]
    assert first["system"] == SYSTEM and first["overflow"] is False and isinstance(first["tokens"], int)
    assert plain(first["messages"]) == plain([user("hi"), assistant("hello"), user("fetch two")])
    results = second["messages"][-2:]
    assert [(m["role"], m["call_id"]) for m in results] == [("tool", "c1"), ("tool", "c2")]
    assert results[0]["packed"] == results[1]["packed"] == 4  # both in Strands' fifth message
    assert results[0]["text"] == "c1 " + "lorem ipsu"
    assert plain(second["messages"][3:4]) == [("assistant", "on it", ["c1", "c2"], False)]
    assert plain(answer["history"]) == plain(second["messages"]) + [("assistant", "got them", [], False)]


def test_an_overflowing_request_is_summarized_and_the_retry_carries_the_summary(rt):
    rt.call("open", {"settings": {}, "system": SYSTEM, "history": alternating(12)})
    answer = rt.call("turn", {"user": "now", "overflow_above": 70, "summaries": [{"text": "the gist"}]})
    assert kinds(answer) == ["request", "summarizer", "compaction", "request"]
    overflowing, summarizer, compaction, retry = answer["steps"]
    assert overflowing["overflow"] is True and retry["overflow"] is False
    assert summarizer["outcome"] == "text" and summarizer["output"] == "the gist"
    assert "[user] q0" in summarizer["prompt"] and "Please summarize this conversation." in summarizer["prompt"]
    assert compaction["cause"] == "overflow"
    assert plain(compaction["before"]) == plain(overflowing["messages"])
    assert compaction["after"][0] == {"role": "user", "text": "the gist", "summary": True}
    assert plain(retry["messages"]) == plain(compaction["after"])
    assert answer["history"][0]["summary"] is True


def test_a_failing_summarizer_is_an_error_step(rt):
    rt.call("open", {"settings": {}, "history": alternating(12)})
    answer = rt.call("turn", {"user": "now", "overflow_above": 60, "summaries": [{"fail": "summarizer down"}]})
    assert kinds(answer) == ["request", "summarizer", "error"]
    assert answer["steps"][1]["outcome"] == "fail"
    assert answer["steps"][2]["message"] == "summarizer down" and answer["steps"][2]["typed"] is False


def test_compaction_off_lets_the_overflow_through_as_a_typed_error(rt):
    rt.call("open", {"settings": {"compaction": False}, "history": alternating(12)})
    answer = rt.call("turn", {"user": "now", "overflow_above": 60})
    assert kinds(answer) == ["request", "error"]
    assert answer["steps"][1]["type"] == "ContextWindowOverflowException" and answer["steps"][1]["typed"] is True
    assert plain(answer["history"]) == plain(alternating(12) + [user("now")])


def test_compact_calls_reduce_context_directly(rt):
    rt.call("open", {"settings": {"summary_ratio": 0.5, "preserve_recent_messages": 2}, "history": alternating(8)})
    answer = rt.call("compact", {"summaries": [{"text": "older half"}]})
    assert kinds(answer) == ["summarizer", "compaction"]
    compaction = answer["steps"][1]
    assert compaction["cause"] == "direct" and compaction["count_after"] < compaction["count_before"]
    assert plain(answer["history"]) == [("user", "older half", [], True)] + plain(alternating(8)[4:])


def test_the_sliding_window_trims_after_the_invocation(rt):
    rt.call("open", {"settings": {"manager": "sliding_window", "window_size": 4}, "history": alternating(6)})
    answer = rt.call("turn", {"user": "q3", "replies": [{"text": "a3"}]})
    assert kinds(answer) == ["request", "compaction"]
    compaction = answer["steps"][1]
    assert compaction["cause"] == "size"
    assert plain(answer["history"]) == plain(alternating(8)[4:])


def test_a_retry_without_progress_stops_at_the_bound(rt):
    # 11 messages, preserve_recent_messages 10: every reduce_context re-summarizes the summary alone, the request
    # never shrinks and Agent._execute_event_loop_cycle retries without end (docs/findings-strands.md, S1)
    rt.call("open", {"settings": {}, "history": alternating(10)})
    answer = rt.call("turn", {"user": "now", "overflow_above": 40})
    assert answer["steps"][-1]["type"] == "loop-bound"
    requests = [step for step in answer["steps"] if step["kind"] == "request"]
    assert len(requests) == 8 and all(step["overflow"] for step in requests)
    assert len({len(step["messages"]) for step in requests}) == 1


def test_bench_returns_seconds_per_append_for_each_size(rt):
    rt.call("open", {"settings": {"manager": "sliding_window", "window_size": 40}})
    result = rt.call("bench", {"sizes": [10, 100, 1000], "repeats": 3})
    assert [p["messages"] for p in result["points"]] == [10, 100, 1000]
    assert all(isinstance(p["seconds_per_append"], float) and p["seconds_per_append"] > 0 for p in result["points"])
