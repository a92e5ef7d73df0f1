"""dsh's whole input space is generated at the ``ci`` profile (``properties/stateful/inputs.py``).

The space is read from dsh's own packages (``surfacecheck/runtime/dsh_vocabulary.json``, :mod:`surfacecheck.runtime.dsh_vocabulary`):
every event type its read path knows, every content-block kind its meter prices apart, every field of its config
schemas in each form its type has, every refusal of its config resolvers and the ``/compact`` grammar. A form a run
never generates is listed by schema; here none may be missing, and the committed vocabulary must be the installed dsh's.
"""
from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import replace

import pytest

from surfacecheck.properties.stateful.inputs import form_of_value, forms_of, report, space
from surfacecheck.runtime.dsh_vocabulary import main as vocabulary_main
from surfacecheck.runtime.dsh_vocabulary import vocabulary
from surfacecheck.runtime.embedded import EmbeddedRuntime
from surfacecheck.runtime.model_runtime import ModelRuntime
from surfacecheck.verify.runner import CI_SEED, run_level


@pytest.fixture(scope="module")
def ci_operations() -> Counter:
    total: Counter = Counter()
    for level in ("log", "compaction", "policy"):
        result = run_level(EmbeddedRuntime(), ModelRuntime(), level, "ci", CI_SEED)
        assert result.violation is None and result.unavailable is None
        total.update(result.operations)
    return total


def test_every_kind_and_form_dsh_accepts_is_generated_at_the_ci_profile(ci_operations):
    inputs = report(ci_operations)
    assert set(inputs) == {"events", "blocks", "config compaction-basic", "config tool-result-pruner",
                           "config checks", "/compact", "agent options"}
    assert {schema: entry["missing"] for schema, entry in inputs.items() if entry["missing"]} == {}
    assert sum(entry["forms"] for entry in inputs.values()) >= 180  # 48 event types, 112 field forms, 20 checks...


def test_a_kind_dsh_gains_is_reported_missing_until_generated(ci_operations):
    voc = vocabulary()
    grown = replace(voc, events=(*voc.events, "plugin/new-thing"),
                    config={**voc.config, "compaction-basic": {**voc.config["compaction-basic"],
                                                               "newKnob": {"type": "boolean"}}})
    inputs = report(ci_operations, grown)
    assert inputs["events"]["missing"] == ["plugin/new-thing"]
    assert inputs["config compaction-basic"]["missing"] == [
        "newKnob: absent", "newKnob: true", "newKnob: false", "newKnob: not a boolean"]


def test_forms_follow_json_types():
    count = {"type": "number", "step": 1, "min": 0}
    assert [form_of_value(count, v) for v in (0, 1, -1, 0.5, True, "1")] == [
        "at the minimum", "above the minimum", "below the minimum", "not an integer", "not a number", "not a number"]
    assert form_of_value({"type": "boolean"}, 1) == "not a boolean"
    assert form_of_value(count, None, present=False) == "absent"


def test_one_step_names_its_forms():
    step = forms_of("configure", {"policy": {"modelPolicies": [{"provider": "p", "model": 7}],
                                             "toolResultPruner": {"headChars": -1}}},
                    {"error": {"message": "BasicCompactionConfig.modelPolicies[0].model must be a non-empty string"}})
    found = set(step)
    assert ("config compaction-basic", "modelPolicies[].model: not a string") in found
    assert ("config compaction-basic", "thresholdRatio: absent") in found
    assert ("config tool-result-pruner", "headChars: below the minimum") in found
    assert any(schema == "config checks" and "non-empty string" in form for schema, form in found)
    assert set(forms_of("manual_compact", {"args": "  "}, {"appended": ["command/run"]})) == {
        ("/compact", "blank"), ("events", "command/run")}
    assert len(space()["config checks"]) == len(vocabulary().checks)


@pytest.mark.skipif(shutil.which("node") is None, reason="dsh's packages are read in Node")
def test_the_committed_vocabulary_is_the_installed_dshs(capsys):
    assert vocabulary_main([]) == 0, capsys.readouterr().out
