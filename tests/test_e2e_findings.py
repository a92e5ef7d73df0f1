"""``surfacecheck e2e dsh`` scans each run's session log with the promise monitors (the log scan of
``surfacecheck findings``) and classes every violation against ``properties/findings.json``: a
registered promise is a known finding, named by its id (informational, exit unchanged); any other
is NEW (exit 1). ``--no-findings`` skips the scan.

The first tests stand a model-written log in for a run (no runtime): the G10 witness replayed on the
model and written out as a session log. The last runs one seed script on the real dsh runtime.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from surfacecheck.cli import main
from surfacecheck.e2e import promises as e2e_promises
from surfacecheck.e2e import run as run_mod
from surfacecheck.findings import registry

G10 = "G10-compaction-usage-unbilled"
G10_PROMISE = "promise-compaction-usage-accounted"

SCRIPT = {"format": "surfacecheck-e2e-script/1", "name": "stand-in",
          "config": {"contextWindow": 16000, "thresholdRatio": 0.5, "retainTokens": 2000,
                     "pruner": {"thresholdChars": 2000, "headChars": 200, "tailChars": 200}},
          "usage": "fixed", "turns": [{"prompt": "go", "replies": [{"text": "done"}]}]}


def model_log(path: Path, finding_id: str = G10) -> Path:
    """The registered witness of ``finding_id`` run on the model, its session written as a dsh log."""
    from surfacecheck.model.jsonl import write_log
    from surfacecheck.runtime.model_runtime import ModelRuntime
    from surfacecheck.core.trace import read_trace

    entry = next(f for f in registry.load() if f.id == finding_id)
    runtime = ModelRuntime()
    for step in read_trace(entry.trace_path).steps:
        runtime.call(step.op, step.args)
    write_log(path, {"type": "session", "version": 0, "id": "stand-in", "createdAt": 1_800_000_000_000},
              runtime.session.log)
    return path


@pytest.fixture
def stand_in(monkeypatch, tmp_path):
    """The runtime replaced by a model-written log (the G10 witness); judge/audit/paths trivial."""
    log = model_log(tmp_path / "g10.jsonl")

    def execute(script, *, runtime, keep_dir, timeout, **_network):
        keep_dir.mkdir(parents=True, exist_ok=True)
        copy = keep_dir / "session.jsonl"
        copy.write_bytes(log.read_bytes())
        return SimpleNamespace(log_path=copy, events=[], requests=[], version="0.1.1rc1", stderr_tail="",
                               seconds=0.01, run_dir=keep_dir)

    monkeypatch.setattr(run_mod, "execute", execute)
    monkeypatch.setattr(run_mod, "judge", lambda script, run: [])
    monkeypatch.setattr(run_mod, "exercised", lambda events: {})
    monkeypatch.setattr(run_mod, "audit_run", lambda script, run: {"errors": 0, "warnings": 0, "findings": []})
    script = tmp_path / "stand-in.json"
    script.write_text(json.dumps(SCRIPT))
    monkeypatch.chdir(tmp_path)
    return SimpleNamespace(log=log, script=script, tmp=tmp_path)


def _run(capsys, *args) -> tuple[int, dict]:
    code = main(["e2e", "dsh", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_scan_names_the_known_finding_with_its_id(tmp_path):
    rows = e2e_promises.scan_findings(model_log(tmp_path / "g10.jsonl"))
    (row,) = [r for r in rows if r["promise"] == G10_PROMISE]
    assert row["id"] == G10 and row["status"] == "known" and row["class"] == "defect"
    assert isinstance(row["seq"], int) and row["step"] == row["seq"] + 2  # step 1 is the reset; seqs from 0
    assert "tokenUsage grew by 0" in row["message"]


def test_a_known_finding_is_informational(stand_in, capsys):
    code, doc = _run(capsys, "--script", str(stand_in.script))
    (outcome,) = doc["scripts"]
    assert [f["id"] for f in outcome["findings"]] == [G10]
    assert doc["findings"]["reproduced"] == {G10: ["stand-in"]} and doc["findings"]["new"] == []
    assert code == 0 and doc["verdict"] == "held"
    code = main(["e2e", "dsh", "--script", str(stand_in.script)])
    text = capsys.readouterr().out
    assert f"findings reproduced on the real dsh: {G10} (scripts stand-in)" in text
    assert f"finding {G10} (defect) {G10_PROMISE} seq" in text and code == 0


def test_an_unregistered_violation_is_new_and_exits_1(stand_in, monkeypatch, capsys):
    """A registry without G10: the same violation is of an unregistered kind, so NEW (exit 1)."""
    document = json.loads(registry.DEFAULT_PATH.read_text())
    document["findings"] = [dict(f, trace=str(registry.DEFAULT_PATH.parent / f["trace"]))
                            for f in document["findings"] if f["promise"] != G10_PROMISE]
    fabricated = stand_in.tmp / "findings-without-g10.json"
    fabricated.write_text(json.dumps(document))
    monkeypatch.setattr(registry, "DEFAULT_PATH", fabricated)
    code, doc = _run(capsys, "--script", str(stand_in.script))
    (outcome,) = doc["scripts"]
    (row,) = outcome["findings"]
    assert row["id"] is None and row["class"] == "new" and row["promise"] == G10_PROMISE
    assert doc["findings"]["new"][0]["script"] == "stand-in" and doc["findings"]["reproduced"] == {}
    assert code == 1 and doc["verdict"] == "violated" and outcome["verdict"] == "agreed"
    code = main(["e2e", "dsh", "--script", str(stand_in.script)])
    assert f"NEW finding on the real dsh: {G10_PROMISE} in stand-in at seq {row['seq']}" in capsys.readouterr().out
    assert code == 1
    code, doc = _run(capsys, "--script", str(stand_in.script), "--no-findings")
    assert code == 0 and doc["scripts"][0]["findings"] is None and doc["findings"]["scanned"] == 0


def test_an_unreadable_log_is_noted_not_scanned(stand_in, capsys):
    stand_in.log.write_text('{"type": "user/message", "seq": 0}\n')
    code, doc = _run(capsys, "--script", str(stand_in.script))
    (outcome,) = doc["scripts"]
    assert outcome["findings"] is None and "not scanned" in outcome["findings_note"]
    assert code == 0 and doc["findings"]["not_scanned"] == 1


def test_real_runtime_seed_script_reproduces_known_findings(tmp_path, capsys):
    """overflow-same-step-retry on the real dsh: G9a (realistic usage), G10 (the overflow summary)."""
    from surfacecheck.e2e.script import seed_dir
    from surfacecheck.e2e.stage import sdk_installed

    if not sdk_installed() and not os.environ.get("CI"):
        pytest.skip("deepseek-harness-sdk not installed: pip install -e '.[dsh]'")
    chosen = seed_dir() / "overflow-same-step-retry.json"
    code, doc = _run(capsys, "--script", str(chosen), "--bundle-dir", str(tmp_path / "b"))
    (outcome,) = doc["scripts"]
    assert outcome["verdict"] == "agreed", outcome
    ids = {f["id"] for f in outcome["findings"]}
    assert {"G9a-anchor-double-count", G10} <= ids, outcome["findings"]
    assert all(f["status"] == "known" for f in outcome["findings"]) and doc["findings"]["new"] == []
    assert code == 0
