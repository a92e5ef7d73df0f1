"""The model's prediction of a run and its comparison with the runtime's decisions (issue 8 (b)).

Judges: the ten logs the real dsh runtime wrote (`dsh-generated`, each under its `policies/*.json`)
and the model agent's own scenario logs must give zero differences; perturbed logs (a changed
range, a missing compaction, a different shadow price, a changed /compact result, a different
retry budget) must give the right difference kind at the right seq. When the real runtime is
installed, every seed script is run for real and must agree with the model.
"""
from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from surfacecheck.model.config import RuntimePolicy
from surfacecheck.model.event import ABSENT, Event
from surfacecheck.model.jsonl import dumps_log, read_log
from surfacecheck.scenarios.generate import SCENARIOS, run as run_scenario
from surfacecheck.e2e.compare import compare
from surfacecheck.e2e.paths import paths_exercised
from surfacecheck.e2e.predict import predict, predict_events
from surfacecheck.e2e.script import seed_dir, seed_scripts

LOGS = ["01-prune", "02-pressure-summary", "03-second-generation", "04-prune-then-summary", "05-failed-bracket",
        "06-manual-compact", "07-overflow-recovery", "08-parallel-tool-calls", "09-runtime-context",
        "10-long-session"]


def load(corpus: Path, name: str) -> tuple[list[Event], dict]:
    base = Path(corpus) / "dsh-generated"
    return list(read_log(base / f"{name}.jsonl").events), json.loads((base / "policies" / f"{name}.json").read_text())


def diffs(events, policy: dict):
    return compare(predict_events(events, RuntimePolicy.from_json(policy)), events)


def with_data(events, seq, **changes):
    e = events[seq]
    return events[:seq] + [Event(e.type, e.seq, e.time, {**e.data, **changes}, e.surface_op, e.source_event_seqs)] \
        + events[seq + 1:]


def drop(events, seqs):
    """Delete events and renumber the rest (seq references in surfaceOp, sourceEventSeqs and data follow)."""
    kept = [e for e in events if e.seq not in seqs]
    new = {e.seq: i for i, e in enumerate(kept)}

    def ref(value):
        return new[value]

    out = []
    for i, e in enumerate(kept):
        op = e.surface_op
        if isinstance(op, dict) and op.get("op") == "replace":
            op = {**op, "start": ref(op["start"]), "end": ref(op["end"])}
        sources = [ref(s) for s in e.source_event_seqs] if isinstance(e.source_event_seqs, list) else e.source_event_seqs
        data = e.data
        if isinstance(data, dict) and "shadowedSeqs" in data:
            data = {**data, "shadowedSeqs": [ref(s) for s in data["shadowedSeqs"]],
                    "shadowedRange": {k: ref(v) for k, v in data["shadowedRange"].items()}}
        if isinstance(data, dict) and "sourceEventSeq" in data:
            data = {**data, "sourceEventSeq": ref(data["sourceEventSeq"])}
        out.append(Event(e.type, i, e.time, data, op, sources if sources is not None else ABSENT))
    return out


# -- judges: logs the real runtime wrote --------------------------------------------------------------
@pytest.mark.parametrize("name", LOGS)
def test_real_runtime_logs_agree_with_the_prediction(corpus, name):
    events, policy = load(corpus, name)
    prediction = predict_events(events, RuntimePolicy.from_json(policy), name)
    assert prediction.decisions and prediction.complete and not prediction.problems
    assert compare(prediction, events) == []
    # the model's stream is the runtime's log (ids and times aside) when it never parts
    from surfacecheck.e2e.actions import comparable
    assert [comparable(e) for e in prediction.events] == [comparable(e) for e in events]


def test_paths_on_the_real_runtime_logs(corpus):
    got = {name: paths_exercised(load(corpus, name)[0]) for name in LOGS}
    assert got["01-prune"]["pressure-prune"] == [23]
    assert got["02-pressure-summary"]["pressure-summary"] == [57]
    assert got["03-second-generation"]["second-generation"]
    assert got["05-failed-bracket"]["summary-failed"]
    assert got["06-manual-compact"]["manual-compact"] == [68]
    assert got["07-overflow-recovery"]["overflow-retry"]
    assert not any(got["01-prune"][p] for p in ("pressure-summary", "overflow-retry", "manual-compact"))


# -- model-written logs ---------------------------------------------------------------------------------
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_model_agent_logs_agree(scenario):
    agent = run_scenario(scenario)
    policy = RuntimePolicy.from_json(scenario.policy)
    # a run as the runner hands it over: raw records (packed chunk rows included)
    records = [json.loads(line) for line in dumps_log({"type": "session", "version": 0, "id": "x"},
                                                      agent.session.log).splitlines()]
    run = SimpleNamespace(log_path=None, events=records)
    events = list(agent.session.log)
    prediction = predict_events(events, policy, scenario.name)
    found = compare(prediction, run)
    assert found == [] and prediction.complete


# -- perturbed logs: the right difference at the right seq ---------------------------------------------------
def test_other_retain_budget_changes_the_range(corpus):
    events, policy = load(corpus, "02-pressure-summary")
    found = diffs(events, {**policy, "retainTokens": 300})
    assert [(d.kind, d.seq, d.expected, d.observed) for d in found][:1] == [("range", 58, [4, 21], [4, 38])]
    assert any(d.kind == "shadow-price" and (d.expected, d.observed) == (394, 680) for d in found)


def test_changed_checkpoint_range_in_the_log(corpus):
    events, policy = load(corpus, "02-pressure-summary")
    summary, checkpoint = events[58], events[59]
    cut = [4, 19, 21]
    price = 680 - 262 - 24 + 0  # logged nodes 36 (24 tok) and 38 (262 tok) stay out of the range
    changed = with_data(events, 58, shadowedRange={"start": 4, "end": 21}, shadowedSeqs=cut, shadowedTokenCount=price)
    changed[59] = Event(checkpoint.type, checkpoint.seq, checkpoint.time, checkpoint.data,
                        {"op": "replace", "start": 4, "end": 21}, [57, 58, *cut])
    found = diffs(changed, policy)
    assert found and found[0].kind == "range" and found[0].seq == summary.seq
    assert (found[0].expected, found[0].observed) == ([4, 38], [4, 21])


def test_missing_prune_is_a_pressure_decision_difference(corpus):
    events, policy = load(corpus, "01-prune")
    assert events[23].type == "compaction/prune"
    found = diffs(drop(events, {23, 24}), policy)
    assert [(d.kind, d.seq) for d in found] == [("pressure-decision", 23)]
    assert found[0].expected[0].startswith("prune 21-21") and found[0].observed == ["nothing"]


def test_different_shadow_price(corpus):
    events, policy = load(corpus, "01-prune")
    found = diffs(with_data(events, 23, shadowedTokenCount=817), policy)
    assert [(d.kind, d.seq, d.expected, d.observed) for d in found] == [("shadow-price", 23, 812, 817)]


def test_missing_overflow_compaction_and_retry(corpus):
    events, policy = load(corpus, "07-overflow-recovery")
    assert diffs(events, policy) == []
    found = diffs(events, {**policy, "maxOverflowRetries": 0})  # the model may not recover: no bracket, no retry
    assert found and found[0].kind == "overflow-compaction"
    overflow = next(e for e in events if e.type == "assistant/chunk" and e.data["chunk"].get("type") == "finish"
                    and e.data["chunk"]["reason"]["kind"] == "error")
    assert found[0].seq == overflow.seq + 1


def test_changed_manual_result(corpus):
    events, policy = load(corpus, "06-manual-compact")
    done = next(e for e in events if e.type == "command/done")
    found = diffs(with_data(events, done.seq, text="Compacted 6 history items (~728 tokens)."), policy)
    assert [(d.kind, d.seq) for d in found] == [("manual-result", done.seq)]
    assert found[0].expected == ["success", "Compacted 7 history items (~728 tokens)."]


def test_failed_bracket_reported_as_end_status(corpus):
    events, policy = load(corpus, "02-pressure-summary")
    found = diffs(events, {**policy, "retainTokens": 600})  # the span is too small for the logged summary
    assert [(d.kind, d.seq, d.expected, d.observed) for d in found] == [("end-status", 58, "error", "ok")]


def test_predict_takes_a_script_and_a_run(corpus, tmp_path):
    events, policy = load(corpus, "01-prune")
    script = seed_scripts()[0]
    config = replace(script.config, context_window=policy["contextWindow"], threshold_ratio=policy["thresholdRatio"],
                     retain_tokens=policy["retainTokens"], max_tokens=policy["maxTokens"],
                     compaction_retries=policy["compactionRetries"], max_overflow_retries=policy["maxOverflowRetries"],
                     pruner=type(script.config.pruner)(1200, 300, 200))
    log = Path(corpus) / "dsh-generated" / "01-prune.jsonl"
    run = SimpleNamespace(log_path=log, events=[])
    prediction = predict(replace(script, config=config), run)
    assert compare(prediction, run) == []
    wrong = replace(script, config=replace(config, context_window=100000))
    assert [d.kind for d in compare(predict(wrong, run), run)] == ["pressure-decision"]


def test_changed_end_error(corpus):
    events, policy = load(corpus, "05-failed-bracket")
    end = next(e for e in events if e.type == "compaction/end" and "error" in e.data)
    found = diffs(with_data(events, end.seq, error="summary is not smaller than the shadowed content (1 estimated "
                                                   "framed tokens >= 2)"), policy)
    assert [(d.kind, d.seq) for d in found] == [("end-error", end.seq)]


def test_summaries_from_the_server_record_are_judged_by_the_model(corpus):
    """An empty text, a `length` finish and an HTTP 500 from the server: the model refuses each itself (spec 8.5)."""
    events, policy = load(corpus, "02-pressure-summary")
    record = [{"compact": False, "status": 200, "reply": {"text": "x"}}]
    for reply, status, message in [({"text": "  ", "finish_reason": "stop"}, 200,
                                    "summarization produced no text summary content"),
                                   ({"text": "fine", "finish_reason": "length"}, 200,
                                    "summarization truncated at the token cap (incomplete checkpoint)"),
                                   ({"error": "boom"}, 500, "summarizer request failed (scripted)")]:
        requests = record + [{"compact": True, "status": status, "reply": reply}]
        prediction = predict_events(events, RuntimePolicy.from_json(policy), "02", requests)
        assert prediction.approach.endswith("server record")
        (decision,) = [d for d in prediction.decisions if d.events]
        assert [e.type for e in decision.events] == ["compaction/start", "compaction/end"]
        assert decision.events[-1].data["error"] == message
        found = compare(prediction, events)
        assert [(d.kind, d.seq, d.expected, d.observed) for d in found] == [("end-status", 58, "error", "ok")]
    # a record that does not answer one request per bracket is not used: the log's summaries are
    assert predict_events(events, RuntimePolicy.from_json(policy), "02", record).approach.endswith("the log")


# -- the real runtime ------------------------------------------------------------------------------------------
def _sdk_missing() -> bool:
    return importlib.util.find_spec("deepseek_harness") is None


real_runtime = pytest.mark.skipif(_sdk_missing() and not os.environ.get("CI"),
                                  reason="deepseek-harness-sdk not installed: pip install -e '.[dsh]'")
_RUNS: dict = {}


def real_run(name):
    """One real run per seed script per test session (about 1-2 s each here)."""
    from surfacecheck.e2e.runner import run_script
    from surfacecheck.e2e.script import load_script

    if name not in _RUNS:
        script = load_script(seed_dir() / f"{name}.json")
        _RUNS[name] = (script, run_script(script, timeout=120))
    return _RUNS[name]


@real_runtime
@pytest.mark.parametrize("name", sorted(p.stem for p in seed_dir().glob("*.json")))
def test_seed_script_on_the_real_runtime_agrees(name):
    script, run = real_run(name)
    assert run.server_errors == [], run.server_errors
    prediction = predict(script, run)
    assert prediction.approach.endswith("server record")
    differences = compare(prediction, run)
    assert differences == [], [d.message for d in differences]
    assert prediction.complete
    fired = {path: bool(seqs) for path, seqs in paths_exercised(run.events).items()}
    assert {p: fired[p] for p in script.expected_paths} == script.expected_paths


@real_runtime
def test_a_wrong_policy_disagrees_with_the_real_runtime():
    """Negative control on a real run: the model under another retain budget or window must part from it."""
    script, run = real_run("prune-insufficient-summary")
    retain = replace(script, config=replace(script.config, retain_tokens=3000))
    found = compare(predict(retain, run), run)
    assert found and found[0].kind == "range"
    assert found[0].seq == paths_exercised(run.events)["pressure-summary"][0] + 1  # the compaction/summary
    roomy = replace(script, config=replace(script.config, context_window=40000))
    found = compare(predict(roomy, run), run)
    assert [d.kind for d in found] == ["pressure-decision"]
    assert found[0].seq == paths_exercised(run.events)["pressure-prune"][0]


def test_prediction_json_names_the_overflow_recovery(corpus):
    events, policy = load(corpus, "07-overflow-recovery")
    doc = json.loads(json.dumps(predict_events(events, RuntimePolicy.from_json(policy), "07").to_json()))
    (overflow,) = [d for d in doc["decisions"] if d["point"].startswith("overflow")]
    assert overflow["retry"] is True and overflow["generation"] == 1
    assert [a["kind"] for a in overflow["actions"]] == ["summary"] and overflow["actions"][0]["status"] == "ok"


@pytest.mark.parametrize("name, kind", [("02-pressure-summary", "pressure-decision"),
                                        ("07-overflow-recovery", "overflow-compaction")])
def test_auto_false_installs_no_automatic_listener(corpus, name, kind):
    """Spec 9.3: with `auto: false` neither the pressure nor the overflow listener runs; the logs show both."""
    events, policy = load(corpus, name)
    found = diffs(events, {**policy, "auto": False})
    assert found and found[0].kind == kind and found[0].expected == ["nothing"]
