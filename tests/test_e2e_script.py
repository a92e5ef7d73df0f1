"""Conversation scripts (`surfacecheck-e2e-script/1`): schema, dsh's config rules, seed scripts, round trip."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from surfacecheck.e2e.script import (FORMAT, PATHS, SCHEMA, Reply, Script, ScriptError, from_json, load_script, loads,
                                     schema_text, seed_dir, seed_scripts)

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ("below-threshold-nothing", "manual-compact", "overflow-same-step-retry", "overflow-summarizes-prompt",
         "prune-insufficient-summary", "prune-only", "runtime-context-window", "second-generation-checkpoint",
         "summarizer-fails")


def doc(**over) -> dict:
    base = {"format": FORMAT, "name": "t", "config": {"contextWindow": 10000, "thresholdRatio": 0.5, "retainTokens": 1000},
            "turns": [{"prompt": "go", "replies": [{"tool": {"output_chars": 10}}, {"text": "done"}]}]}
    base.update(over)
    return base


def test_schema_file_is_current():
    assert (ROOT / "docs" / "schemas" / "e2e-script.schema.json").read_text(encoding="utf-8") == schema_text()


def test_seed_scripts_are_the_issue_scenarios_and_valid():
    scripts = seed_scripts()
    assert sorted(s.name for s in scripts) == sorted(SEEDS)
    assert sorted(p.stem for p in seed_dir().glob("*.json")) == sorted(SEEDS)
    for script in scripts:
        assert script.config.retain_tokens < script.config.threshold_tokens
        assert script.expected_paths, script.name
        assert set(script.expected_paths) <= set(PATHS)
    # both usage modes are exercised (spec 4.2: baseline heuristic and usage anchor)
    assert {s.usage for s in scripts} == {"fixed", "realistic"}
    # every path the issue names is something a seed script is written to exercise
    wanted = {name for s in scripts for name, on in s.expected_paths.items() if on}
    assert wanted == set(PATHS)


@pytest.mark.parametrize("name", SEEDS)
def test_round_trip(name):
    script = load_script(seed_dir() / f"{name}.json")
    again = from_json(json.loads(json.dumps(script.to_json())))
    assert again == script
    assert loads(script.dumps()) == script
    # the file on disk is exactly the canonical dump
    assert (seed_dir() / f"{name}.json").read_text(encoding="utf-8") == script.dumps()


def test_policy_is_the_models_runtime_policy():
    script = from_json(doc(config={"contextWindow": 10000, "thresholdRatio": 0.5, "retainTokens": 1000,
                                   "maxTokens": 256, "compactionRetries": 2, "maxOverflowRetries": 0,
                                   "pruner": {"thresholdChars": 2000, "headChars": 200, "tailChars": 200}}))
    policy = script.policy()
    assert policy.context_window == 10000
    assert policy.compaction.threshold_ratio == 0.5 and policy.compaction.retention == ("retainTokens", 1000)
    assert policy.compaction.max_tokens == 256 and policy.compaction.compaction_retries == 2
    assert policy.compaction.max_overflow_retries == 0
    assert (policy.pruner.threshold_chars, policy.pruner.head_chars, policy.pruner.tail_chars) == (2000, 200, 200)
    assert script.config.threshold_tokens == 5000
    assert script.config.policy_json()["toolResultPruner"] == {"thresholdChars": 2000, "headChars": 200, "tailChars": 200}


def test_replies_and_summaries_parse():
    script = from_json(doc(turns=[{"prompt": "p", "replies": [
        {"tools": [{"output_chars": 3}, {"output_chars": 4}], "usage": [100, 5]}, {"overflow": True}, {"text": "x"}],
        "compact": True}], summaries=[{"outcome": "failure"}, {"outcome": "text", "ratio": 0.2}], usage="realistic"))
    (turn,) = script.turns
    assert turn.compact
    assert turn.replies[0] == Reply("tool", outputs=(3, 4), usage=(100, 5))
    assert [r.kind for r in turn.replies] == ["tool", "overflow", "text"]
    assert script.summary(0).outcome == "failure" and script.summary(1).ratio == 0.2
    assert script.summary(7).outcome == "text" and script.summary(7).ratio == 0.1  # the default once it runs out


@pytest.mark.parametrize("mutate, reason", [
    (lambda d: d.pop("turns"), "(document): 'turns' is a required property"),
    (lambda d: d.update(format="other/1"), "format:"),
    (lambda d: d["config"].update(contextWindow=0), "config.contextWindow:"),
    (lambda d: d["config"].update(headroomTokens=5), "config: Additional properties"),
    (lambda d: d["config"].update(runtimeContext="yes"), "config.runtimeContext: 'yes' is not of type 'boolean'"),
    (lambda d: d["turns"][0]["replies"].__setitem__(0, {"tool": {"output_chars": -1}}), "turns[0].replies[0]"),
    (lambda d: d.update(usage="huge"), "usage:"),
    (lambda d: d["config"].update(retainTokens=5000),
     "config: BasicCompactionConfig: deepseek-official/surfacecheck-scripted retainTokens (5000) must be less than threshold tokens 5000"),
    (lambda d: d["config"].update(pruner={"thresholdChars": 100, "headChars": 100, "tailChars": 100}),
     "config: ToolResultPruneConfig: headChars + marker + tailChars"),
    (lambda d: d["turns"][0]["replies"].insert(0, {"text": "early"}), "turns[0].replies[0]: a text reply ends the turn"),
    (lambda d: d["turns"][0]["replies"].pop(), "turns[0].replies[0]: the last reply is a tool call"),
])
def test_bad_scripts_say_path_and_reason(mutate, reason):
    d = doc()
    mutate(d)
    with pytest.raises(ScriptError) as info:
        from_json(d, "bad.json")
    message = str(info.value)
    assert message.startswith("bad.json: ") and reason in message, message


def test_runtime_context_option_round_trips_and_composes_the_contributor():
    """`config.runtimeContext` (default false): written only when set, and it adds exactly one cordis row."""
    from surfacecheck.e2e.config import APPROVAL_ROW, cordis_rows, policy_json

    plain = from_json(doc())
    assert plain.config.runtime_context is False and "runtimeContext" not in plain.to_json()["config"]
    assert from_json(doc(config={**doc()["config"], "runtimeContext": False})) == plain
    with_context = from_json(doc(config={**doc()["config"], "runtimeContext": True}))
    assert with_context.config.runtime_context is True
    assert with_context.to_json()["config"]["runtimeContext"] is True
    assert from_json(json.loads(with_context.dumps())) == with_context
    assert with_context.policy() == plain.policy()  # not a compaction key: the model's policy is the same
    assert policy_json(with_context.config.to_json()) == policy_json(plain.config.to_json())
    kw = {"session_root": "/s", "workspace": "/w"}
    rows, base = cordis_rows(with_context.config.to_json(), **kw), cordis_rows(plain.config.to_json(), **kw)
    assert rows[2] == APPROVAL_ROW == {"id": "approval", "name": "@deepseek-ai/dsh-user-approval",
                                       "config": {"policy": "never"}}
    assert rows[:2] + rows[3:] == base and not any(r["id"] == "approval" for r in base)


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(ScriptError, match=r"missing\.json: no such file"):
        load_script(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"format":\n  oops}', encoding="utf-8")
    with pytest.raises(ScriptError, match=r"broken\.json:2: not JSON"):
        load_script(broken)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(doc()), encoding="utf-8")
    assert isinstance(load_script(good), Script)


def test_schema_accepts_what_the_loader_accepts():
    import jsonschema

    for script in seed_scripts():
        jsonschema.validate(script.to_json(), SCHEMA)


def test_route_is_the_one_the_runner_configures():
    """The retain-below-threshold message names the target the run routes to (spec 9.1 `<p>/<m>`)."""
    from surfacecheck.e2e.config import PROVIDER
    from surfacecheck.e2e.script import ROUTE
    from surfacecheck.e2e.server import MODEL_ID

    assert ROUTE == (PROVIDER, MODEL_ID)
