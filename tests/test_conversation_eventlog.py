"""The conversation bridge over dsh's event-log protocol: a compaction shows dsh's checkpoint as a summary and the
next request without what it shadowed; dsh's npm code and the embedded model answer one scripted session alike;
every registered dsh finding's witness breaks its promise on dsh and on the model and holds on the reference;
``check --runtime dsh`` leaves the contract out."""
from __future__ import annotations

import dataclasses

import pytest

from surfacecheck.contract import promises, registry
from surfacecheck.contract.npm_quotes import check_npm_quote
from surfacecheck.contract.replay import read_contract_trace, replay
from surfacecheck.runtime.conversation import eventlog_shapes
from surfacecheck.runtime.conversation.bridge import open_conversation, through_event_log
from surfacecheck.stages import not_applicable

FINDINGS = registry.load(None, tuple(p.id for p in promises.PROMISES))
DSH = registry.for_runtime(FINDINGS, "dsh")

SETTINGS = {"contextWindow": 1000, "thresholdRatio": 0.5, "retainTokens": 100}
HISTORY = [{"role": "user", "text": "find the bug"},
           {"role": "assistant", "text": "",
            "calls": [{"id": "c1", "name": "fetch", "args": {"size": 900, "tag": "t1"}}]},
           {"role": "tool", "call_id": "c1", "text": "t1 " + "x" * 900},
           {"role": "assistant", "text": "ok"}]
SESSION = [
    ("turn", {"user": "fix the test", "summaries": [{"text": "SUMMARY ONE"}],
              "replies": [{"calls": [{"id": "c2", "name": "fetch", "args": {"size": 1200, "tag": "t2"}}]},
                          {"text": "done it"}]}),
    ("compact", {"summaries": [{"fail": "unavailable"}]}),
    ("compact", {"summaries": [{"text": "MANUAL"}]}),
    ("turn", {"user": "more", "overflow_above": 300, "summaries": [{"text": "S2"}],
              "replies": [{"calls": [{"id": "c3", "name": "fetch", "args": {"size": 1200, "tag": "t3"}}]}]}),
    ("compact", {"summaries": [{"text": "S3"}], "summarizer_window": 60}),
]


def run_steps(spec: str, steps) -> list[dict]:
    """Every answer of ``steps`` (``open`` first) on ``spec``, through the bridge."""
    runtime = open_conversation(spec, 60)
    try:
        return [runtime.call(step.op, step.args) for step in steps]
    finally:
        runtime.close()


def run_session(spec: str) -> list[dict]:
    runtime = open_conversation(spec, 60)
    try:
        answers = [runtime.call("open", {"settings": SETTINGS, "system": "You are terse.", "history": HISTORY})]
        return answers + [runtime.call(op, args) for op, args in SESSION]
    finally:
        runtime.close()


@pytest.fixture(scope="module")
def embedded() -> list[dict]:
    return run_session("embedded")


def test_a_pressure_compaction_shows_the_checkpoint_as_a_summary_and_the_next_request_without_the_span(embedded):
    opened, turn = embedded[0], embedded[1]
    assert opened["trigger"] == {"kind": "tokens", "value": 500, "counter": "runtime", "reaches": True}
    kinds = [s["kind"] for s in turn["steps"]]
    assert kinds == ["request", "summarizer", "compaction", "request"]
    summarizer, compaction, after = turn["steps"][1:]
    assert "[tool c1] t1 xxx" in summarizer["prompt"] and summarizer["output"] == "SUMMARY ONE"
    assert compaction["cause"] == "size" and compaction["count_before"] >= 500 > compaction["count_after"]
    summary = compaction["after"][0]
    assert summary["summary"] is True and summary["role"] == "user" and "SUMMARY ONE" in summary["text"]
    assert after["messages"] == compaction["after"]
    assert not any(m.get("call_id") == "c1" or m.get("text") == "find the bug" for m in after["messages"])
    assert turn["history"][-1] == {"role": "assistant", "text": "done it"}


def test_compact_failures_and_overflow_are_dsh_s_own(embedded):
    failed, manual, overflow = embedded[2], embedded[3], embedded[4]
    assert [s["kind"] for s in failed["steps"]] == ["summarizer", "error"]
    assert failed["steps"][1]["type"] == "ManualCompactionError:summary" and failed["history"] == embedded[1]["history"]
    assert [s["kind"] for s in manual["steps"]] == ["summarizer", "compaction"]
    assert manual["steps"][1]["cause"] == "direct"
    last = overflow["steps"]
    assert any(s["kind"] == "request" and s["overflow"] for s in last)
    assert last[-1] == {"kind": "error", "type": "CONTEXT_WINDOW_EXCEEDED", "typed": True,
                        "message": "request too large for model context (scripted provider)"}


def test_a_summarizer_call_over_its_window_overflows_and_the_session_is_rebuilt_as_it_was(embedded):
    before, windowed = embedded[4], embedded[5]
    [summarizer, error] = windowed["steps"]
    assert summarizer["outcome"] == "overflow" and summarizer["tokens"] > 60 and summarizer["output"] is None
    assert error["type"] == "ManualCompactionError:summary"
    assert windowed["history"] == before["history"]


def test_dsh_and_the_model_answer_one_session_alike(embedded):
    assert run_session("dsh") == embedded


def on_reference(trace):
    """The witness with dsh's settings read as the reference's: its trigger at dsh's threshold (spec 9.1)."""
    settings = eventlog_shapes.effective(dict(trace.steps[0].args.get("settings") or {}))
    mapped = {"compaction": settings["compaction"], "trigger_tokens": eventlog_shapes.threshold(settings)}
    first = dataclasses.replace(trace.steps[0], args={**trace.steps[0].args, "settings": mapped})
    return dataclasses.replace(trace, steps=(first, *trace.steps[1:]))


@pytest.mark.parametrize("finding", DSH, ids=lambda f: f.id)
def test_each_dsh_witness_breaks_on_dsh_and_the_model_and_holds_on_the_reference(finding):
    trace = read_contract_trace(finding.trace_path)
    assert run_steps("dsh", trace.steps) == run_steps("embedded", trace.steps)
    for spec in ("dsh", "embedded"):
        outcome = replay(trace, spec, timeout=60)
        assert outcome.breach is not None and outcome.breach.promise == finding.promise, (spec, outcome.describe())
        assert registry.match(FINDINGS, spec, finding.promise) is not None
    held = replay(on_reference(trace), "reference", timeout=60)
    assert held.breach is None and held.steps_run == len(trace.steps), held.describe()
    for quote in (finding.evidence, *finding.evidence_also):
        checked = check_npm_quote(quote)
        assert checked.found is True, (finding.id, checked.why)


def test_the_contract_reaches_dsh_through_the_bridge_but_check_leaves_it_out():
    assert through_event_log("dsh") and through_event_log("embedded") and through_event_log("dsh:/somewhere")
    assert not through_event_log("langchain") and not through_event_log("reference")
    assert not_applicable("contract", "dsh") is not None and not_applicable("contract", "embedded") is not None
    assert len(DSH) >= 1
