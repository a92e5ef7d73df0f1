"""Two design promises judged on the wire (``surfacecheck/e2e/wire.py``): the provider requests the real
runtime sent, as the scripted server recorded them.

The unit tests hand-make request records; the last tests run the real dsh 0.1.1rc1: the e2e composition
keeps every prompt (the newest node survives overflow recovery), and the same composition plus one runtime-
context contributor (script config ``runtimeContext: true``: ``@deepseek-ai/dsh-user-approval``) reproduces §15 G2b
on the wire; that run is the seed ``scenarios/e2e/overflow-summarizes-prompt.json``.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from surfacecheck.e2e import promises as e2e_promises
from surfacecheck.e2e import run as run_mod
from surfacecheck.e2e.wire import (CONTEXT_LOST, CONTEXT_WINDOW, PAIRING, PROMPT, context_violations, unanswered_prompts,
                                   unpaired, wire_checks)

G2B = "G2b-prompt-summarized-before-seen"
S7 = "S7-pairing-counts-not-ids"
SYSTEM = {"role": "system", "content": "You are an AI agent powered by DeepSeek Harness."}


def user(text):
    return {"role": "user", "content": text}


def call(*ids):
    return {"role": "assistant", "content": "",
            "tool_calls": [{"id": i, "type": "function", "function": {"name": "bash", "arguments": "{}"}} for i in ids]}


def result(cid):
    return {"role": "tool", "tool_call_id": cid, "content": "xxxx"}


def request(index, messages, *, turn=0, status=200, compact=False):
    return {"index": index, "path": "/chat/completions", "headers": {}, "body": {"messages": [SYSTEM, *messages]},
            "compact": compact, "turn": turn, "reply": {}, "status": status}


def script(*prompts):
    return {"turns": [{"prompt": p, "replies": [{"text": "ok"}]} for p in prompts]}


# -- pairing by id -----------------------------------------------------------------------------------
def test_clean_records_pass():
    requests = [request(0, [user("go")]),
                request(1, [user("go"), call("a"), result("a")]),
                request(2, [user("go"), call("a"), result("a"), call("b", "c"), result("c"), result("b")]),
                request(3, [user("go"), {"role": "assistant", "content": "done"}, user("more")], turn=1),
                request(4, [user("summarize this")], compact=True, turn=1)]
    assert wire_checks(script("go", "more"), requests) == []


def test_a_split_pair_is_caught_by_id_when_the_counts_balance():
    """S7's shape: a-X, r-Y, a-Y, r-X with [a-X, r-Y] summarized: the provider gets a-Y, r-X. One call and one
    result, so a count balances; by id, Y is unanswered and X answers nothing."""
    split = [user("go"), {"role": "user", "content": "checkpoint"}, call("Y"), result("X")]
    (v,) = wire_checks(script("go"), [request(0, split)])
    assert v["promise"] == PAIRING and v["request"] == 0 and v["turn"] == 0
    assert v["observed"]["unanswered"] == ["Y"] and [o["id"] for o in v["observed"]["orphans"]] == ["X"]
    assert "the counts balance" in v["message"] and v["expected"] == {"unanswered": [], "orphans": []}


def test_a_result_before_its_call_and_a_reused_answer_are_orphans():
    assert unpaired([result("a"), call("a")]) == (["a"], [{"position": 0, "id": "a"}])
    assert unpaired([call("a"), result("a"), result("a")]) == ([], [{"position": 2, "id": "a"}])
    assert unpaired([call("a")]) == (["a"], [])


def test_compact_requests_are_not_judged_for_pairing():
    assert wire_checks(script("go"), [request(0, [user("go")]), request(1, [call("a"), user("instr")], compact=True)]) == []


# -- prompt verbatim ---------------------------------------------------------------------------------
def test_a_prompt_present_only_in_a_compact_request_is_caught():
    requests = [request(0, [user("go")]),
                request(1, [user("go"), {"role": "assistant", "content": "ok"}, user("BIG PROMPT")], turn=1, status=400),
                request(2, [user("go"), {"role": "assistant", "content": "ok"}, user("BIG PROMPT"), user("instr")],
                        turn=1, compact=True),
                request(3, [user("checkpoint text"), user("Current runtime context. ...")], turn=1)]
    (v,) = wire_checks(script("go", "BIG PROMPT"), requests)
    assert v["promise"] == PROMPT and v["turn"] == 1 and v["request"] == 3
    assert v["observed"] == {"compact": [2], "failed": [{"request": 1, "status": 400}], "answered_without_it": [3]}


def test_a_prompt_in_an_errored_request_only_is_caught():
    requests = [request(0, [user("go")], status=400), request(1, [user("checkpoint")])]
    (v,) = wire_checks(script("go"), requests)
    assert v["promise"] == PROMPT and v["observed"]["failed"] == [{"request": 0, "status": 400}]
    assert v["observed"]["compact"] == [] and "only in requests that failed" in v["message"]


def test_a_prompt_only_in_a_compact_request_with_nothing_failed_is_caught():
    requests = [request(0, [user("go"), user("instr")], compact=True), request(1, [user("checkpoint")])]
    (v,) = wire_checks(script("go"), requests)
    assert "only by the summarizer" in v["message"]


def test_text_parts_count_as_verbatim_but_a_paraphrase_does_not():
    parts = {"role": "user", "content": [{"type": "text", "text": "go"}]}
    assert wire_checks(script("go"), [request(0, [parts])]) == []
    assert [v["promise"] for v in wire_checks(script("go"), [request(0, [user("go now")])])] == [PROMPT]


def test_a_prompt_no_request_answered_after_is_noted_not_judged():
    """summarizer-fails' last turn: the overflow's recovery fails and the turn ends; the model answered nothing
    after the prompt, so nothing replaced it (not G2b)."""
    requests = [request(0, [user("go")]), request(1, [user("go"), user("late")], turn=1, status=400),
                request(2, [user("go"), user("late"), user("instr")], turn=1, compact=True, status=500)]
    assert wire_checks(script("go", "late"), requests) == []
    assert unanswered_prompts(script("go", "late"), requests) == [1]


# -- the runtime context ----------------------------------------------------------------------------
CONTEXT = user("Current runtime context. This snapshot supersedes earlier runtime-context snapshots.\n\nsandbox")


def test_a_request_without_the_runtime_context_is_caught_and_two_in_a_row_widen_the_window():
    before = [request(0, [user("go")]), request(1, [user("go"), CONTEXT]),
              request(2, [user("summarize")], compact=True)]
    assert context_violations(before + [request(3, [user("go"), CONTEXT])]) == []  # compact requests not judged
    one = context_violations(before + [request(3, [user("[checkpoint]")]), request(4, [user("go"), CONTEXT])])
    assert [(v["promise"], v["request"]) for v in one] == [(CONTEXT_LOST, 3)]
    two = context_violations(before + [request(3, [user("[checkpoint]")], status=400), request(5, [user("[ck]")])])
    assert [(v["promise"], v["request"]) for v in two] == [(CONTEXT_LOST, 3), (CONTEXT_WINDOW, 5)]
    assert two[1]["observed"] == {"without_context": [3, 5]}


def test_no_runtime_context_ever_sent_is_not_judged():
    assert context_violations([request(0, [user("go")]), request(1, [user("go"), user("more")])]) == []


def test_violations_are_classed_by_the_registry():
    rows = wire_checks(script("go"), [request(0, [call("Y"), result("X")], status=400), request(1, [user("c")])])
    classed = e2e_promises.classify_wire(rows)
    assert [(r["promise"], r["id"], r["status"]) for r in classed] == [(PAIRING, S7, "known"), (PROMPT, G2B, "known")]


def test_an_unregistered_wire_violation_is_new_and_exits_1(tmp_path):
    import json

    from surfacecheck.findings import registry

    document = json.loads(registry.DEFAULT_PATH.read_text())
    document["findings"] = [dict(f, trace=str(registry.DEFAULT_PATH.parent / f["trace"]))
                            for f in document["findings"] if f["promise"] != PROMPT]
    fabricated = tmp_path / "findings-without-g2b.json"
    fabricated.write_text(json.dumps(document))
    rows = e2e_promises.classify_wire(wire_checks(script("go"), [request(0, [user("c")])]), fabricated)
    assert [(r["id"], r["class"], r["status"]) for r in rows] == [(None, "new", "new")]
    report = run_mod.E2EReport(mode="script", runtime="0.1.1rc1",
                               scripts=[run_mod.ScriptOutcome(name="s", verdict=run_mod.AGREED, wire=rows)])
    assert report.verdict == "violated" and report.exit_code == 1
    assert report.to_json()["wire"]["new"][0]["promise"] == PROMPT
    known = run_mod.E2EReport(mode="script", runtime="0.1.1rc1", scripts=[run_mod.ScriptOutcome(
        name="s", verdict=run_mod.AGREED, wire=e2e_promises.classify_wire(rows))])
    assert known.exit_code == 0 and known.wire_summary()["reproduced"] == {G2B: ["s"]}


# -- the real runtime --------------------------------------------------------------------------------
def _real():
    from surfacecheck.e2e.stage import sdk_installed

    if not sdk_installed() and not os.environ.get("CI"):
        pytest.skip("deepseek-harness-sdk not installed: pip install -e '.[dsh]'")


LARGE_PROMPT = "please review this design note carefully before answering: " + (
    "the parser keeps a cursor into the buffer and must never read past its end. " * 30)
G2B_SHAPE = {"format": "surfacecheck-e2e-script/1", "name": "overflow-summarizes-prompt",
             "config": {"contextWindow": 16000, "thresholdRatio": 0.8, "retainTokens": 2000,
                        "pruner": {"thresholdChars": 2000, "headChars": 200, "tailChars": 200}},
             "usage": "fixed", "turns": [{"prompt": LARGE_PROMPT, "replies": [{"overflow": True}, {"text": "done"}]}]}


def g2b_shape(*, context: bool) -> dict:
    """G2B_SHAPE, with (``runtimeContext: true``: the e2e composition plus the approval:policy contributor) or
    without a runtime-context contributor."""
    return {**G2B_SHAPE, "config": {**G2B_SHAPE["config"], "runtimeContext": context}}


def test_the_g2b_seed_is_the_shape_with_a_runtime_context():
    from surfacecheck.e2e.config import cordis_rows
    from surfacecheck.e2e.script import from_json, load_script, seed_dir

    seed = load_script(seed_dir() / "overflow-summarizes-prompt.json")
    shape = from_json(g2b_shape(context=True))
    assert (seed.config, seed.turns, seed.summaries, seed.usage) == (shape.config, shape.turns, shape.summaries,
                                                                      shape.usage)
    assert seed.config.runtime_context and seed.expected_paths["overflow-retry"]
    rows = cordis_rows(seed.config.to_json(), session_root="/s", workspace="/w")
    assert rows[2] == {"id": "approval", "name": "@deepseek-ai/dsh-user-approval", "config": {"policy": "never"}}
    assert [r["id"] for r in rows[:2] + rows[3:]] == [
        r["id"] for r in cordis_rows(g2b_shape(context=False)["config"], session_root="/s", workspace="/w")]


def _run_g2b_shape(tmp_path, *, context: bool):
    from surfacecheck.e2e.script import from_json

    return run_mod.run_one(from_json(g2b_shape(context=context)), run_mod.Options(bundle_dir=tmp_path / "b"))


def test_real_runtime_keeps_the_prompt_without_a_runtime_context(tmp_path):
    """The e2e composition enters no runtime-context snapshot, so the prompt is the newest node when its
    first request overflows: retain 0 keeps it, nothing is compactable, the turn ends; nothing answered
    went without the prompt (noted, not judged)."""
    _real()
    outcome, run = _run_g2b_shape(tmp_path, context=False)
    assert outcome.verdict == "agreed", outcome.to_json()
    assert [r["status"] for r in run.requests] == [400]
    assert outcome.wire == [] and "not judged" in outcome.wire_note


def test_real_runtime_summarizes_the_prompt_it_just_entered_g2b_on_the_wire(tmp_path):
    """§15 G2b on dsh 0.1.1rc1: step 1 enters [prompt, runtime-context snapshot]; the request overflows; retain 0
    keeps only the snapshot, so the prompt goes to the summarizer and the retry, answered 200, sends
    [checkpoint, snapshot]: the model never sees the prompt. The model predicts the same run (0 differences);
    the log scan does not see it (a log holds no request_error/retry op), the wire does."""
    _real()
    outcome, run = _run_g2b_shape(tmp_path, context=True)
    assert outcome.verdict == "agreed" and outcome.differences == [], outcome.to_json()
    assert outcome.paths["overflow-retry"]
    assert [(r["compact"], r["status"]) for r in run.requests] == [(False, 400), (True, 200), (False, 200)]
    (v,) = outcome.wire
    assert (v["promise"], v["id"], v["status"], v["request"], v["turn"]) == (PROMPT, G2B, "known", 2, 0)
    assert v["observed"]["compact"] == [1] and v["observed"]["failed"] == [{"request": 0, "status": 400}]
    retry = [m["role"] for m in run.requests[2]["body"]["messages"]]
    assert retry == ["system", "user", "user"]  # [checkpoint, snapshot]
    assert run.requests[2]["body"]["messages"][2]["content"].startswith("Current runtime context.")
    assert not any(f["promise"] == PROMPT for f in outcome.findings or ())


def test_seed_scripts_hold_both_promises_on_the_wire(tmp_path):
    """The seed set on the real runtime: pairing holds on every request; every prompt judged reached the model
    except in overflow-summarizes-prompt, written to reproduce G2b, and the runtime context reached every
    request except in runtime-context-window, written to reproduce G2 and its overflow variant (known
    findings: exit 0)."""
    _real()
    from surfacecheck.e2e.script import seed_scripts

    report = run_mod.run_scripts([(s, "seed") for s in seed_scripts()], run_mod.Options(bundle_dir=tmp_path / "b"),
                                 mode="seeds")
    assert report.exit_code == 0, report.to_json()["totals"]
    assert report.wire_summary() == {"checked": len(report.scripts),
                                     "reproduced": {G2B: ["overflow-summarizes-prompt"],
                                                    "G2-one-request-context-window": ["runtime-context-window"],
                                                    "G2-overflow-retries-widen-context-window":
                                                        ["runtime-context-window"]}, "new": []}
    assert Path(tmp_path / "b").exists() is False or not any((tmp_path / "b").iterdir())
