"""Findings about dsh (spec §15): promise monitors, the registry's witnesses, discovery, the verdicts."""
from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pytest

from surfacecheck.properties.monitors import all_monitors, lookup
from surfacecheck.verify.runner import monitors_for
from surfacecheck.properties.promises import PROMISES
from surfacecheck.findings import cli, registry
from surfacecheck.findings.run import run_findings
from surfacecheck.findings.search import first_violation, promise_names, scan_log, scan_logs
from surfacecheck.findings.witness import BUILDERS, minimal
from surfacecheck.runtime.model_runtime import ModelRuntime
from surfacecheck.core.trace import read_trace, write_trace
from surfacecheck.properties.stateful.lockstep import Lockstep
from surfacecheck.verify.replay import replay_trace

FINDINGS = registry.load()
ACP_LOG = "dsh-sessions/examples__acp-agent__tests__snapshots__agent-instructions__session.jsonl"


def _run_cli(*argv: str, capsys, stream: str = "out") -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="surfacecheck")
    cli.register(parser.add_subparsers())
    args = parser.parse_args(["findings", *argv, *(() if "--explore-bounds" in argv else ("--explore-bounds", "off"))])
    code = args.func(args)
    return code, getattr(capsys.readouterr(), stream)


def _registry_without(tmp_path: Path, drop: str | None = None, extra: dict | None = None) -> Path:
    document = json.loads(registry.DEFAULT_PATH.read_text(encoding="utf-8"))
    entries = [e for e in document["findings"] if e["id"] != drop]
    for entry in entries:  # absolute witness paths: the registry moves, its traces stay
        entry["trace"] = str(registry.DEFAULT_PATH.parent / entry["trace"])
    if extra:
        entries.append(extra)
    path = tmp_path / "findings.json"
    path.write_text(json.dumps({"findings": entries}), encoding="utf-8")
    return path


def test_registry_covers_every_promise_with_a_gap_and_class():
    assert set(PROMISES) <= {f.promise for f in FINDINGS} <= set(promise_names())
    assert {f.klass for f in FINDINGS} == set(registry.CLASSES)
    assert all(name in all_monitors() and name.startswith("promise-") for name in PROMISES)
    assert all(f.gap in f.reason and "spec" in f.reason for f in FINDINGS)


def test_every_entry_names_its_dsh_source_and_explains_itself():
    """Issue 9 point 2: the responsible dsh function (a file under packages/ or apps/) and a paragraph."""
    for f in FINDINGS:
        assert "(" in f.source and ".ts" in f.source, f.id
        assert len(f.explanation) > 200 and f.explanation != f.reason, f.id
        assert f.seed is None or "§" in f.seed, f.id


@pytest.mark.parametrize("field", ["source", "explanation"])
def test_registry_requires_source_and_explanation(tmp_path, field):
    document = json.loads(registry.DEFAULT_PATH.read_text(encoding="utf-8"))
    entry = dict(document["findings"][0], trace=str(FINDINGS[0].trace_path))
    entry.pop(field)
    path = tmp_path / "findings.json"
    path.write_text(json.dumps({"findings": [entry]}), encoding="utf-8")
    with pytest.raises(registry.RegistryError, match=rf"findings\[0\] \({entry['id']}\): missing or empty {field}"):
        registry.load(path)
    entry[field], entry["seed"] = "x", ""
    path.write_text(json.dumps({"findings": [entry]}), encoding="utf-8")
    with pytest.raises(registry.RegistryError, match="seed, when present"):
        registry.load(path)


@pytest.mark.parametrize("runtime", ["model", "embedded"])
@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.id)
def test_witness_reproduces(finding, runtime):
    trace = read_trace(finding.trace_path)
    assert trace.property == finding.promise and trace.notes == {"finding": finding.id}
    outcome = replay_trace(trace, runtime)
    assert outcome.exit_code == 1 and outcome.same, outcome.describe()
    assert outcome.violation.step == trace.violation.step == len(trace.steps)


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.id)
def test_witness_is_one_minimal_and_matches_its_builder(finding):
    """Deleting any one step (after the reset) makes the promise hold: nothing in the witness is idle."""
    steps = list(read_trace(finding.trace_path).steps)
    assert [s.to_json(i) for i, s in enumerate(minimal(finding.id).steps, 1)] == \
        [s.to_json(i) for i, s in enumerate(steps, 1)]
    for i in range(1, len(steps)):
        assert first_violation(steps[:i] + steps[i + 1:], finding.promise) is None, f"step {i + 1} is idle"


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.id)
def test_standard_invariants_hold_on_every_witness(finding):
    """The witnesses are dsh's real behaviour: the invariants that encode it keep holding."""
    trace = read_trace(finding.trace_path)
    monitors = [lookup(n).factory() for n in monitors_for("policy")]
    lockstep = Lockstep(ModelRuntime(), None, monitors=monitors)
    for step in trace.steps:
        _, violation = lockstep.run(step)
        assert violation is None, violation


def test_promises_hold_on_the_scenario_logs():
    """Negative control: the generated scenario logs are fully metered; no promise fires on them."""
    from surfacecheck import scenarios

    paths = [("scenarios", p) for p in sorted(Path(scenarios.LOGS_DIR).glob("*.jsonl"))]
    found, logs = scan_logs(paths)
    assert logs == len(paths) >= 8 and found == []


def test_projection_promise_fires_where_the_spec_says(corpus):
    """§15 G1 names the acp-agent snapshot log, seq 17: the drift starts exactly there."""
    found = scan_log("dsh-sessions", corpus / ACP_LOG)
    assert [d.promise for d in found] == ["promise-projection-exact"]
    assert found[0].steps[-1].args["event"]["surfaceOp"]["op"] == "replace"
    assert found[0].violation.step == 17 + 2  # reset is step 1, seq 0 is step 2


def test_known_only_exits_0_and_strict_exits_1(capsys):
    code, out = _run_cli("--no-logs", "--search-seconds", "0", capsys=capsys)
    assert code == 0 and f"{len(FINDINGS)} known, 0 new, 0 stale" in out
    code, out = _run_cli("--no-logs", "--search-seconds", "0", "--strict", capsys=capsys)
    assert code == 1 and "(strict)" in out


def test_unregistered_finding_is_new_with_a_replayable_trace(tmp_path, corpus, capsys):
    path = _registry_without(tmp_path, drop="G1-unclaimed-replace-drift")
    report = run_findings(registry_path=path, trace_dir=tmp_path / "traces", search_seconds=0, explore_bounds=None,
                          logs=[("dsh-sessions", corpus / ACP_LOG)])
    assert report.exit_code == 1 and len(report.known) == len(FINDINGS) - 1 and not report.stale
    [new] = report.new
    assert new["promise"] == "promise-projection-exact" and new["where"] == ACP_LOG
    assert replay_trace(read_trace(new["trace"]), "model").same
    full = run_findings(trace_dir=None, search_seconds=0, explore_bounds=None,
                        logs=[("dsh-sessions", corpus / ACP_LOG)])
    assert full.exit_code == 0 and full.known[0]["found_by"] == [ACP_LOG]


def test_stale_entry_is_reported(tmp_path, capsys):
    witness = read_trace(FINDINGS[0].trace_path)
    harmless = write_trace(tmp_path / "harmless.jsonl", replace(witness, steps=witness.steps[:2], violation=None))
    argued = {k: v for k, v in FINDINGS[0].to_json().items() if k in ("class", "evidence", "evidence_also",
                                                                      "design_source", "searched", "reachability")}
    entry = {**argued, "id": "G1-stale", "gap": "G1", "promise": "promise-projection-exact",
             "reason": "spec 5.1 §15 G1 (test)", "trace": str(harmless), "source": "foldSurfaceProjection (test)",
             "explanation": "a stale entry (test)"}
    entry = {k: v for k, v in entry.items() if v is not None}
    code, out = _run_cli("--registry", str(_registry_without(tmp_path, extra=entry)), "--no-logs",
                         "--search-seconds", "0", "--json", capsys=capsys)
    document = json.loads(out)
    assert code == 1 and document["verdict"] == "violation"
    assert [s["id"] for s in document["stale"]] == ["G1-stale"] and "no longer breaks" in document["stale"][0]["why"]


def test_json_shape(capsys):
    code, out = _run_cli("--no-logs", "--search-seconds", "0", "--json", "--runtime", "embedded", capsys=capsys)
    document = json.loads(out)
    assert code == 0 and document["exit_code"] == 0 and document["runtime"] == "embedded"
    assert set(document) >= {"verdict", "known", "new", "stale", "runtime_differs", "discovery", "seconds"}
    assert {k["id"] for k in document["known"]} == {f.id for f in FINDINGS}
    assert all(k["runtime_reproduces"] is True and k["steps"] >= 3 for k in document["known"])
    assert document["runtime_differs"] == []


def test_search_rediscovers_known_findings_reproducibly():
    from surfacecheck.findings.search import hypothesis_search

    others = [p for p in promise_names() if p not in ("promise-projection-exact", "promise-compaction-progress")]
    first, _ = hypothesis_search(60, 7, exclude=others, examples_per_run=30)
    again, _ = hypothesis_search(60, 7, exclude=others, examples_per_run=30)
    assert [d.promise for d in first] == [d.promise for d in again] and first
    assert all(d.promise in PROMISES and registry.match(FINDINGS, d.promise) for d in first)


def test_bad_registry_is_a_usage_error(tmp_path, capsys):
    path = _registry_without(tmp_path, extra={"id": "x", "gap": "G0", "class": "bug", "promise": "promise-x",
                                              "reason": "r", "trace": "t", "source": "s", "explanation": "e"})
    code, err = _run_cli("--registry", str(path), "--no-logs", "--search-seconds", "0", capsys=capsys, stream="err")
    assert code == 2 and "class must be one of" in err


def test_stage_reports_known_findings(tmp_path, monkeypatch):
    import io

    from surfacecheck.findings import stage as findings_stage
    from surfacecheck.core.stage import CheckContext

    monkeypatch.setattr(findings_stage, "SEARCH_SECONDS", 0)
    monkeypatch.setattr(findings_stage, "EXPLORE_BOUNDS", None)
    ctx = CheckContext(runtime="model", corpus=None, strict=False, report_dir=tmp_path, err=io.StringIO())
    result = findings_stage.stage(ctx)
    assert result.status == "ok" and len(result.summary["known"]) == len(FINDINGS)
    known = [c for c in result.cases if c.name.startswith("known ")]
    assert result.summary["discovery"]["logs"] >= 8 and len(known) == len(FINDINGS)
    assert (tmp_path / "findings.md").is_file() and result.summary["report"] == str(tmp_path / "findings.md")
    strict = findings_stage.stage(replace_ctx(ctx, strict=True))
    assert strict.status == "violation"
    assert all(c.failure is not None for c in strict.cases if c.name.startswith("known "))


def replace_ctx(ctx, **changes):
    from dataclasses import replace as dc_replace

    return dc_replace(ctx, **changes)


def test_builders_cover_the_registry():
    assert set(BUILDERS) == {f.id for f in FINDINGS}


def test_a_runtime_that_differs_from_dsh_is_told_which_findings_it_lacks(capsys):
    """The seeded bug prices an unclaimed replace like an append: it diverges from dsh on the G1 witness
    (and on the witnesses of G1's family, which need the unclaimed replace to fold with delta 0)."""
    code, out = _run_cli("--runtime", "embedded:unpriced-replace-counted", "--no-logs", "--search-seconds", "0",
                         "--json", capsys=capsys)
    document = json.loads(out)
    differs = document["runtime_differs"]
    assert code == 0 and "G1-unclaimed-replace-drift" in differs and all(d.startswith("G1") for d in differs)
    reproduced = {k["id"]: k["runtime_reproduces"] for k in document["known"]}
    assert all(reproduced.pop(d) is False for d in differs) and all(reproduced.values())
