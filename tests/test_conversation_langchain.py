"""The LangChain conversation peer, driven through the suite's own client (one peer process for the module)."""
from __future__ import annotations

import pytest

from surfacecheck.core.protocol import ProtocolError
from surfacecheck.runtime.registry import open_spec


def call(i: str, size: int, tag: str) -> dict:
    return {"calls": [{"id": i, "name": "fetch", "args": {"size": size, "tag": tag}}]}


@pytest.fixture(scope="module")
def rt():
    runtime = open_spec("langchain", 60)
    yield runtime
    runtime.close()


def kinds(answer: dict) -> list[str]:
    return [step["kind"] for step in answer["steps"]]


def test_hello_announces_the_conversation_level_and_the_installed_version(rt):
    hello = rt.hello()
    assert hello["levels"] == ["conversation"]
    assert hello["runtime"] == {"name": "langchain", "version": "1.5.0"}
    assert {"open", "turn", "compact", "bench"} <= set(hello["ops"])


def test_unknown_setting_is_bad_args_naming_the_key(rt):
    with pytest.raises(ProtocolError) as caught:
        rt.call("open", {"settings": {"keep_last": 3}})
    assert caught.value.type == "bad-args"
    assert "keep_last" in str(caught.value)


def test_open_echoes_the_package_defaults_and_the_trigger(rt):
    opened = rt.call("open", {"settings": {"trigger": [["messages", 50], ["tokens", 4000]]}})
    assert opened["settings"]["keep"] == ["messages", 20]
    assert opened["settings"]["trim_tokens_to_summarize"] == 4000
    assert opened["settings"]["compaction"] is True
    assert opened["trigger"] == {"kind": "messages", "value": 50, "counter": "runtime", "reaches": True}
    assert rt.call("open", {"settings": {}})["trigger"] is None  # the package's default trigger: never
    assert rt.call("open", {"settings": {"compaction": False, "trigger": ["tokens", 10]}})["trigger"] is None
    fraction = rt.call("open", {"settings": {"trigger": ["fraction", 0.5], "max_input_tokens": 1000}})
    assert fraction["trigger"] == {"kind": "tokens", "value": 500, "counter": "runtime", "reaches": True}


def test_fraction_without_a_profile_is_refused(rt):
    with pytest.raises(ProtocolError) as caught:
        rt.call("open", {"settings": {"trigger": ["fraction", 0.5]}})
    assert caught.value.type == "bad-args"


def test_turn_without_compaction_records_every_request_and_the_final_history(rt):
    rt.call("open", {"settings": {"compaction": False}, "system": "Be terse.",
                     "history": [{"role": "user", "text": "hi"}, {"role": "assistant", "text": "hello"}]})
    answer = rt.call("turn", {"user": "find it", "replies": [call("c1", 40, "t1"), {"text": "found"}]})
    assert kinds(answer) == ["request", "request"]
    first, second = answer["steps"]
    assert first["system"] == "Be terse."
    assert [m["text"] for m in first["messages"]] == ["hi", "hello", "find it"]
    assert second["messages"][-2]["calls"] == [{"id": "c1", "name": "fetch", "args": {"size": 40, "tag": "t1"}}]
    assert second["messages"][-1]["role"] == "tool" and second["messages"][-1]["call_id"] == "c1"
    assert second["messages"][-1]["text"].startswith("t1 ") and len(second["messages"][-1]["text"]) == 43
    assert answer["history"] == second["messages"] + [{"role": "assistant", "text": "found"}]
    assert all(step["tokens"] > 0 for step in answer["steps"])


def test_a_turn_across_a_tokens_trigger_summarizes_and_the_summary_is_sent(rt):
    rt.call("open", {"settings": {"trigger": ["tokens", 300], "keep": ["messages", 2]}, "system": "S"})
    answer = rt.call("turn", {"user": "go", "replies": [call("c1", 900, "t1"), call("c2", 100, "t2")],
                              "summaries": [{"text": "SUMMARY-ONE"}]})
    assert kinds(answer) == ["request", "request", "summarizer", "compaction", "request"]
    summarizer, compaction, after = answer["steps"][2:]
    assert "t1 lorem" in summarizer["prompt"] and summarizer["output"] == "SUMMARY-ONE"
    assert compaction["cause"] == "size" and compaction["count_before"] >= 300
    assert compaction["count_after"] < compaction["count_before"]
    assert compaction["after"][0]["summary"] is True and "SUMMARY-ONE" in compaction["after"][0]["text"]
    assert after["messages"][0] == compaction["after"][0]
    assert answer["history"][0]["summary"] is True


def test_overflow_above_raises_the_typed_overflow_error(rt):
    rt.call("open", {"settings": {"compaction": False}})
    answer = rt.call("turn", {"user": "go", "replies": [call("c1", 2000, "t1")], "overflow_above": 200})
    assert kinds(answer) == ["request", "request", "error"]
    assert answer["steps"][1]["overflow"] is True
    assert answer["steps"][2]["type"] == "ContextOverflowError" and answer["steps"][2]["typed"] is True
    assert [m["role"] for m in answer["history"]] == ["user", "assistant", "tool"]  # the last checkpoint


def test_a_failing_summarizer_is_recorded_and_retried_by_langchain(rt):
    rt.call("open", {"settings": {"trigger": ["messages", 3], "keep": ["messages", 1]}})
    answer = rt.call("turn", {"user": "go", "replies": [call("c1", 10, "t1")],
                              "summaries": [{"fail": "boom"}, {"text": "second try"}]})
    summarizers = [s for s in answer["steps"] if s["kind"] == "summarizer"]
    assert [s["outcome"] for s in summarizers] == ["fail", "text"]  # with_retry: up to 3 attempts
    assert "second try" in answer["history"][0]["text"]


def test_summarizer_overflow_is_typed_when_the_retry_overflows_too(rt):
    rt.call("open", {"settings": {"trigger": ["messages", 3], "keep": ["messages", 1]}})
    answer = rt.call("turn", {"user": "go", "replies": [call("c1", 4000, "t1")], "summarizer_window": 100})
    outcomes = [s["outcome"] for s in answer["steps"] if s["kind"] == "summarizer"]
    assert outcomes == ["overflow", "overflow"]  # one retry with the middle cut out, then it propagates
    assert answer["steps"][-1]["kind"] == "error" and answer["steps"][-1]["typed"] is True


def test_compact_calls_before_model_directly(rt):
    history = [{"role": "user", "text": f"q{i}"} if i % 2 == 0 else {"role": "assistant", "text": f"a{i}"}
               for i in range(6)]
    rt.call("open", {"settings": {"trigger": ["messages", 4], "keep": ["messages", 2]}, "history": history})
    answer = rt.call("compact", {"summaries": [{"text": "S"}]})
    assert kinds(answer) == ["summarizer", "compaction"]
    assert answer["steps"][1]["cause"] == "direct"
    assert answer["history"] == [{"role": "user", "text": "Here is a summary of the conversation to date:\n\nS",
                                  "summary": True}] + history[-2:]
    assert kinds(rt.call("compact", {})) == []  # 3 messages: under the trigger


def test_compact_with_compaction_off_does_nothing(rt):
    rt.call("open", {"settings": {"compaction": False}, "history": [{"role": "user", "text": "x"}] * 3})
    answer = rt.call("compact", {})
    assert answer["steps"] == [] and len(answer["history"]) == 3


def test_bench_grows_with_the_history(rt):
    rt.call("open", {"settings": {"trigger": ["tokens", 10 ** 9]}})
    points = rt.call("bench", {"sizes": [100, 1000, 10000], "repeats": 3})["points"]
    assert [p["messages"] for p in points] == [100, 1000, 10000]
    seconds = [p["seconds_per_append"] for p in points]
    assert all(s > 0 for s in seconds) and seconds[2] > seconds[0]
