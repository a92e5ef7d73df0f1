"""`surfacecheck audit` on the command line: exit codes, `PATH:LINE: reason`, the JSON contract."""
from __future__ import annotations

import json
import shutil

import pytest

from surfacecheck.audit.rules import RULES
from surfacecheck.cli import main

PRUNE = "dsh-generated/01-prune.jsonl"


def run(capsys, *argv):
    code = main(["audit", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name, content, line, reason", [
    ("empty.jsonl", b"", 1, "empty file"),
    ("binary.jsonl", bytes(range(256)) * 4 + b"\n", 1, "not valid JSON"),
    ("no-header.jsonl", b'{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}\n', 1, "session header"),
    ("torn-header.jsonl", b'{"type":"sess', 1, "torn header"),
    ("truncated.jsonl", b'{"type":"session","version":0}\n{"type":"turn/start","seq":0,"ti', 2, "truncated JSON"),
    ("bad-line.jsonl", b'{"type":"session","version":0}\n{"type":"turn/start",}\n', 2, "not valid JSON"),
    ("bad-envelope.jsonl", b'{"type":"session","version":0}\n{"type":"turn/start","seq":-1,"time":0,"data":{}}\n', 2,
     "seq must be"),
])
def test_non_log_input_exits_2_with_path_and_line(capsys, tmp_path, name, content, line, reason):
    path = tmp_path / name
    path.write_bytes(content)
    code, out, err = run(capsys, path)
    assert code == 2
    assert f"{path}:{line}: " in err and reason in err
    assert "Traceback" not in err + out


def test_folder_with_no_logs_and_missing_path_exit_2(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    code, _, err = run(capsys, tmp_path)
    assert code == 2 and f"{tmp_path}: folder holds no *.jsonl logs" in err
    code, _, err = run(capsys, tmp_path / "missing.jsonl")
    assert code == 2 and "missing.jsonl: not a file" in err


def test_non_log_input_json_mode_prints_one_document(capsys, tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    code, out, _ = run(capsys, path, "--json")
    doc = json.loads(out)
    assert code == 2 and doc["unreadable"] == [{"path": str(path), "line": 1, "reason": "empty file (no session header)"}]


def test_json_contract_on_a_real_log(capsys, corpus):
    code, out, _ = run(capsys, corpus / PRUNE, "--json", "--policy", corpus / "dsh-generated/policies/01-prune.json")
    doc = json.loads(out)
    assert code == 0
    assert doc["summary"] == {"logs": 1, "errors": 0, "errors_set_aside": 0, "warnings": 0, "known": 0}
    (log,) = doc["logs"]
    assert set(log) == {"path", "events", "surface_nodes", "generation", "replacements", "findings", "policy"}
    assert (log["events"], log["surface_nodes"], log["generation"]) == (37, [4, 19, 24, 34], 1)
    (rep,) = log["replacements"]
    assert rep == {"seq": 24, "kind": "prune", "range": [21, 21], "shadowed_seqs": [21], "logged_shadow_tokens": 812,
                   "recomputed_shadow_tokens": 812, "replacement_tokens": 147, "generation_after": 1}


def test_error_finding_exits_1_and_names_rule_and_seq(capsys, corpus, tmp_path):
    lines = (corpus / PRUNE).read_text().splitlines()
    lines = [line.replace('"shadowedTokenCount":812', '"shadowedTokenCount":900') for line in lines]
    path = tmp_path / "01-prune.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code, out, _ = run(capsys, path)
    assert code == 1
    assert "error" in out and "seq     23  shadow-price-wrong" in out and "expected 812" in out and "observed 900" in out
    code, out, _ = run(capsys, path, "--json")
    findings = json.loads(out)["logs"][0]["findings"]
    assert code == 1 and {"rule": "shadow-price-wrong", "severity": "error", "seq": 23} == {
        k: findings[0][k] for k in ("rule", "severity", "seq")}


def test_sibling_policy_is_used_without_policy_flag(capsys, corpus):
    code, out, _ = run(capsys, corpus / "dsh-generated", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["summary"]["logs"] == 10 and doc["summary"]["errors"] == 0
    assert all(log["policy"].endswith(f"policies/{log['path'].rsplit('/', 1)[1][:-1]}") for log in doc["logs"])


def test_folder_is_searched_and_each_log_reported(capsys, corpus, tmp_path):
    for name in ("01-prune.jsonl", "06-manual-compact.jsonl"):
        shutil.copy(corpus / "dsh-generated" / name, tmp_path / name)
    code, out, _ = run(capsys, tmp_path, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["summary"]["logs"] == 2
    assert sorted(log["path"].rsplit("/", 1)[1] for log in doc["logs"]) == ["01-prune.jsonl", "06-manual-compact.jsonl"]


@pytest.mark.parametrize("content, reason", [
    ("{not json", ":1: policy is not valid JSON"),
    ('{"retainRatio": 0.5, "retainTokens": 10}', "mutually exclusive"),
    ('{"thresholdRatio": 2}', "must be a number in (0, 1]"),
    ("[1]", ":1: policy must be a JSON object"),
])
def test_bad_policy_exits_2(capsys, corpus, tmp_path, content, reason):
    policy = tmp_path / "policy.json"
    policy.write_text(content)
    code, _, err = run(capsys, corpus / PRUNE, "--policy", policy)
    assert code == 2 and reason in err and str(policy) in err


def test_help_lists_every_rule(capsys):
    with pytest.raises(SystemExit):
        main(["audit", "--help"])
    out = capsys.readouterr().out
    assert all(rule_id in out for rule_id in RULES)
