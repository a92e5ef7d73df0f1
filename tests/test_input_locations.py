"""Every JSON document the suite reads (an e2e script, a policy, the findings registry) is refused at the line of
the field that is wrong: ``PATH:LINE: reason``, exit 2, never a verdict. :func:`line_of` finds the line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import jsonschema
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from surfacecheck.cli import main
from surfacecheck.core.json_where import line_of
from surfacecheck.e2e.script import SCHEMA
from surfacecheck.findings import registry

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = json.loads((ROOT / "surfacecheck" / "scenarios" / "e2e" / "prune-only.json").read_text(encoding="utf-8"))
LOG = ROOT / "surfacecheck" / "scenarios" / "logs" / "prune.jsonl"


def test_line_of_follows_keys_and_indexes_and_stops_where_the_path_leaves():
    text = json.dumps({"a": 1, "b": {"c": [1, {"d": 2}]}, "a2": [3]}, indent=1)
    lines = text.splitlines()
    assert lines[line_of(text, ["b", "c", 1, "d"]) - 1].strip() == '"d": 2'
    assert lines[line_of(text, ["a2", 0]) - 1].strip() == "3"
    assert line_of(text, []) == 1
    assert line_of(text, ["b", "nope"]) == line_of(text, ["b"])
    assert line_of('{"k": 1,\n "k": 2}', ["k"]) == 2  # json.loads keeps the last of a repeated key


def _script_file(tmp_path, doc) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return path


PLACES = [["config", "contextWindow"], ["config", "thresholdRatio"], ["turns", 0, "prompt"], ["usage"],
          ["turns", 0, "replies", 0]]


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(place=st.sampled_from(PLACES), value=st.sampled_from([-1, "x", [], None, {"junk": 1}, 1.5]))
def test_a_script_field_of_the_wrong_type_is_refused_at_its_line(tmp_path_factory, capsys, place, value):
    doc = json.loads(json.dumps(SCRIPT))
    target = doc
    for key in place[:-1]:
        target = target[key]
    target[place[-1]] = value
    assume(not jsonschema.Draft202012Validator(SCHEMA).is_valid(doc))  # wrong for the schema, so wrong here
    path = _script_file(tmp_path_factory.mktemp("script"), doc)
    code = main(["e2e", "dsh", "--script", str(path)])
    err = capsys.readouterr().err
    text = path.read_text(encoding="utf-8")
    assert code == 2 and "Traceback" not in err
    assert f"{path}:{line_of(text, place)}: " in err, err


def test_a_policy_with_a_bad_field_is_refused_at_its_line(tmp_path, capsys):
    policy = tmp_path / "policy.json"
    policy.write_text('{\n "thresholdRatio": 0.8,\n "contextWindow": "x"\n}\n', encoding="utf-8")
    assert main(["audit", str(LOG), "--policy", str(policy)]) == 2
    assert f"{policy}:3: invalid policy: contextWindow" in capsys.readouterr().err
    policy.write_text('{\n "thresholdRatio": 0.8,\n "retainTokens": -5\n}\n', encoding="utf-8")
    assert main(["audit", str(LOG), "--policy", str(policy)]) == 2
    assert f"{policy}:3: invalid policy: " in capsys.readouterr().err


@pytest.mark.parametrize("field, value, reason", [
    ("class", "nonsense", "class must be one of"),
    ("promise", "promise-nope", "is not a registered promise- monitor"),
    ("seed", "", "seed, when present"),
])
def test_a_registry_entry_is_refused_at_the_line_of_its_field(tmp_path, field, value, reason):
    document = json.loads(registry.DEFAULT_PATH.read_text(encoding="utf-8"))
    document["findings"][1][field] = value
    path = tmp_path / "findings.json"
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    with pytest.raises(registry.RegistryError) as info:
        registry.load(path)
    line = line_of(path.read_text(encoding="utf-8"), ["findings", 1, field])
    assert str(info.value).startswith(f"{path}:{line}: findings[1]") and reason in str(info.value)


def test_a_registry_that_is_not_json_names_its_line(tmp_path):
    path = tmp_path / "findings.json"
    path.write_text('{\n "findings": [\n  {oops}\n ]\n}\n', encoding="utf-8")
    with pytest.raises(registry.RegistryError, match=rf"^{path}:3: not JSON"):
        registry.load(path)
