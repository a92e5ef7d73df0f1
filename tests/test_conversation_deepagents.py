"""The deepagents adapter (``surfacecheck/runtime/conversation/deepagents_peer.py``) through the suite's own client:
one peer for the module, each test opening its own session (one checkpointed thread per session)."""
from __future__ import annotations

import pytest

from surfacecheck.contract import registry as findings_registry
from surfacecheck.contract.promises import PROMISES, judge
from surfacecheck.contract.record import record
from surfacecheck.contract.replay import read_contract_trace
from surfacecheck.core.protocol import ProtocolError
from surfacecheck.runtime.registry import open_spec

SYSTEM = "You are terse."


@pytest.fixture(scope="module")
def rt():
    runtime = open_spec("deepagents", 60)
    yield runtime
    runtime.close()


def call(cid, size=200):
    return {"calls": [{"id": cid, "name": "fetch", "args": {"size": size, "tag": cid}}]}


def kinds(answer):
    return [step["kind"] for step in answer["steps"]]


def plain(messages):
    return [(m["role"], m.get("text", "")[:40], [c["id"] for c in m.get("calls") or []], m.get("summary", False))
            for m in messages]


def test_hello_announces_the_conversation_level_and_the_installed_version(rt):
    hello = rt.hello()
    assert hello["levels"] == ["conversation"]
    assert hello["runtime"] == {"name": "deepagents", "version": "0.7.32"}
    assert "bench" in hello["ops"]


def test_open_echoes_the_constructor_defaults_and_the_trigger(rt):
    opened = rt.call("open", {"settings": {}})
    assert opened["settings"]["keep"] == ["messages", 20]
    assert opened["settings"]["trim_tokens_to_summarize"] == 4000
    # SummarizationMiddleware's own trigger default is None: it summarizes only on a context-overflow error
    assert opened["trigger"] == {"kind": "overflow", "value": None, "counter": "runtime"}
    tokens = rt.call("open", {"settings": {"trigger": ["tokens", 3000]}})
    assert tokens["trigger"] == {"kind": "tokens", "value": 3000, "counter": "runtime", "reaches": True}
    assert rt.call("open", {"settings": {"compaction": False}})["trigger"] is None


def test_an_unknown_setting_is_bad_args_naming_the_key(rt):
    with pytest.raises(ProtocolError) as caught:
        rt.call("open", {"settings": {"keep": ["messages", 2], "bogus": 1}})
    assert caught.value.type == "bad-args" and "'bogus'" in str(caught.value)


def test_a_turn_summarizes_and_the_history_is_what_the_next_call_sees(rt):
    rt.call("open", {"settings": {"trigger": ["messages", 6], "keep": ["messages", 2]}, "system": SYSTEM})
    answer = rt.call("turn", {"user": "go", "replies": [call("c1"), call("c2"), call("c3"), {"text": "ok"}],
                              "summaries": [{"text": "the gist"}]})
    assert kinds(answer) == ["request", "request", "request", "summarizer", "compaction", "request"]
    first, compaction, after = answer["steps"][0], answer["steps"][4], answer["steps"][5]
    assert first["system"] == SYSTEM and first["tokens"] > 1000  # deepagents counts its tool schemas too
    assert compaction["cause"] == "size" and compaction["count_after"] < compaction["count_before"]
    summary = compaction["after"][0]
    assert summary["summary"] is True and "<summary>\nthe gist\n</summary>" in summary["text"]
    assert "/conversation_history/session_" in summary["text"]  # offloaded to the StateBackend
    assert plain(after["messages"]) == plain(compaction["after"])
    assert plain(answer["history"]) == plain(compaction["after"]) + [("assistant", "ok", [], False)]


def test_summaries_chain_across_turns_on_one_thread(rt):
    rt.call("open", {"settings": {"trigger": ["messages", 6], "keep": ["messages", 2]}})
    first = rt.call("turn", {"user": "one", "replies": [call("c1"), call("c2"), call("c3"), {"text": "ok1"}],
                             "summaries": [{"text": "first gist"}]})
    assert "first gist" in first["history"][0]["text"]
    second = rt.call("turn", {"user": "two", "replies": [call("c4"), call("c5"), {"text": "ok2"}],
                              "summaries": [{"text": "second gist"}]})
    assert kinds(second).count("compaction") == 1
    summarizer = next(step for step in second["steps"] if step["kind"] == "summarizer")
    assert "first gist" in summarizer["prompt"]  # the second summary covers the first
    history = second["history"]
    assert history[0]["summary"] is True and "second gist" in history[0]["text"]
    assert "first gist" not in history[0]["text"]
    assert sum(1 for m in history if m.get("summary")) == 1
    assert plain(history[-1:]) == [("assistant", "ok2", [], False)]


def test_compact_is_bad_args_deepagents_has_no_direct_entry(rt):
    rt.call("open", {"settings": {"trigger": ["messages", 4], "keep": ["messages", 2]}})
    rt.call("turn", {"user": "one", "replies": [{"text": "a1"}]})
    with pytest.raises(ProtocolError) as caught:
        rt.call("compact", {"summaries": [{"text": "by hand"}]})
    assert caught.value.type == "bad-args" and "compact_conversation" in str(caught.value)


def test_bench_returns_seconds_per_append_for_each_size(rt):
    rt.call("open", {"settings": {"trigger": ["tokens", 4000]}})
    result = rt.call("bench", {"sizes": [10, 100], "repeats": 2})
    assert [p["messages"] for p in result["points"]] == [10, 100]
    assert all(p["seconds_per_append"] > 0 for p in result["points"])


DEEPAGENTS_FINDINGS = findings_registry.for_runtime(
    findings_registry.load(promises=tuple(p.id for p in PROMISES)), "deepagents")


@pytest.mark.parametrize("finding", DEEPAGENTS_FINDINGS, ids=lambda f: f.id)
def test_each_registered_witness_breaks_on_deepagents_and_holds_on_reference(rt, finding):
    """The witness's script (open's history, every turn with its scripted replies, summaries and windows) breaks
    its promise on deepagents (the module's peer, as ``surfacecheck replay`` drives it) and keeps it on the
    reference runtime under the reference's own settings."""
    trace = read_contract_trace(finding.trace_path)
    script = [(step.op, step.args) for step in trace.steps[1:]]
    provider = trace.provider or "anthropic"
    broken = [b.promise for b in judge(record(rt, trace.steps[0].args, script, provider))]
    assert finding.promise in broken
    reference = open_spec("reference", 30)
    try:
        session = record(reference, {**trace.steps[0].args, "settings": {}}, script, provider)
    finally:
        reference.close()
    assert [b for b in judge(session) if b.promise == finding.promise] == []


def test_compaction_off_takes_the_default_summarization_slot_and_lets_the_overflow_through(rt):
    history = [{"role": "user", "text": "q1"}, {"role": "assistant", "text": "a1 " + "x" * 400}]
    rt.call("open", {"settings": {"compaction": False}, "history": history})
    answer = rt.call("turn", {"user": "now", "overflow_above": 60})
    assert kinds(answer) == ["request", "error"]
    assert answer["steps"][1]["type"] == "ContextOverflowError" and answer["steps"][1]["typed"] is True
    assert plain(answer["history"]) == plain(history + [{"role": "user", "text": "now"}])
