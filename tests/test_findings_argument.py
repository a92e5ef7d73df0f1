"""Issue 15: every finding's class argued from dsh's own text (quoted, found in the installed npm package) and
its reachability proved (a corpus log that shows it, a trace that replays on dsh's library, an e2e script that
reproduces it on the shipped binary, or the guard that blocks it, quoted)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from surfacecheck.findings import reachability, registry
from surfacecheck.findings.argument import argue, order
from surfacecheck.findings.dsh_text import check_quote, find_line, installed_modules, spec_path
from surfacecheck.findings.run import run_findings

FINDINGS = registry.load()
ROOT = Path(__file__).resolve().parent.parent


def _modules() -> Path:
    modules = installed_modules()
    if modules is None:
        if os.environ.get("CI"):
            pytest.fail("dsh's packages are not installed (.ci/run runs python -m surfacecheck.runtime.dsh)")
        pytest.skip("dsh's packages are not installed: python -m surfacecheck.runtime.dsh")
    return modules


def _quotes(finding) -> list[tuple[str, dict]]:
    quotes = [("evidence", finding.evidence)] + [(f"evidence_also[{i}]", q) for i, q in enumerate(finding.evidence_also)]
    if finding.reachability["kind"] == "not-reachable":
        quotes.append(("guard", finding.reachability["guard"]))
    return quotes


def _registry_with(tmp_path: Path, change) -> Path:
    """A copy of the registry (witness paths absolute) with ``change(entries)`` applied."""
    document = json.loads(registry.DEFAULT_PATH.read_text(encoding="utf-8"))
    for entry in document["findings"]:
        entry["trace"] = str(registry.DEFAULT_PATH.parent / entry["trace"])
        if entry["reachability"].get("trace"):
            entry["reachability"]["trace"] = str(registry.DEFAULT_PATH.parent / entry["reachability"]["trace"])
    change(document["findings"])
    path = tmp_path / "findings.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


# -- the quote matcher -----------------------------------------------------------------------------------
JSDOC = """/**
 * Fold one event into the claim.
 * An unclaimed replacement folds with delta 0; this
 * preserves replay at the cost of possible drift.
 */
export function fold() {}
"""


def test_a_wrapped_jsdoc_sentence_is_found_at_its_first_line():
    assert find_line(JSDOC, "An unclaimed replacement folds with delta 0; this preserves replay at the cost of "
                            "possible drift.") == 3
    assert find_line(JSDOC, "Fold one event") == 2


def test_a_misquote_is_not_found():
    assert find_line(JSDOC, "preserves replay at no cost") is None
    assert find_line(JSDOC, "") is None


# -- the registry's argument -----------------------------------------------------------------------------
def test_every_finding_has_a_class_evidence_and_reachability():
    for f in FINDINGS:
        assert f.klass in ("defect", "tradeoff", "design-question"), f.id
        assert f.evidence["kind"] == registry.EVIDENCE_KIND[f.klass], f.id
        assert f.evidence["quote"].strip() and (f.evidence.get("source") == "spec-14.3" or f.evidence["version"]), f.id
        assert f.reachability["kind"] in reachability.KINDS and f.reachability["how"].strip(), f.id
        if f.klass == "defect":
            assert f.searched, f.id
        if f.klass == "design-question":
            assert f.design_source, f.id


def test_every_quote_is_in_dsh_as_the_registry_says():
    """The words are dsh's: each quote found in the named file of the installed package, at its line."""
    modules, spec = _modules(), spec_path()
    for f in FINDINGS:
        for role, quote in _quotes(f):
            result = check_quote(quote, modules, spec)
            assert result.found is True, f"{f.id} {role}: {result.where}: {result.why}"


def test_a_misquoted_registry_entry_is_stale(tmp_path):
    """Negative control: change one word of a quote and `findings` reports the entry STALE (exit 1)."""
    _modules()

    def misquote(entries):
        entries[0]["evidence"]["quote"] = entries[0]["evidence"]["quote"].replace(" ", " never ", 1)

    path = _registry_with(tmp_path, misquote)
    report = run_findings(registry_path=path, search_seconds=0, explore_bounds=None, scan=False)
    stale = [s for s in report.stale if "quote not found" in s["why"]]
    assert report.exit_code == 1 and len(stale) == 1, report.stale


@pytest.mark.parametrize("change, message", [
    (lambda e: e.update({"evidence": {**e["evidence"], "kind": "intent" if e["class"] != "tradeoff" else "promise"}}),
     "quotes dsh text of kind"),
    (lambda e: e.pop("reachability"), "reachability: expected an object"),
    (lambda e: e.update({"reachability": {"kind": "shipped-runtime", "how": "x", "e2e": "no-such-script"}}),
     "e2e must name a seed script"),
    (lambda e: e.update({"reachability": {"kind": "foreign-producer", "how": "x"}}), "names the producer or a corpus"),
    (lambda e: e.update({"reachability": {"kind": "not-reachable", "how": "x"}}), "guard: expected an object"),
    (lambda e: e.update({"class": "design-question", "evidence": {**e["evidence"], "kind": "silent"},
                         "design_source": None}), "design_source is required"),
])
def test_an_unargued_entry_is_refused(tmp_path, change, message):
    path = _registry_with(tmp_path, lambda entries: change(entries[0]))
    with pytest.raises(registry.RegistryError, match=message):
        registry.load(path)


def test_the_corpus_logs_named_show_the_finding(corpus):
    """Foreign-producer claims: the model's scan of each named corpus log breaks the promise there."""
    claims = [f for f in FINDINGS if f.reachability["kind"] == "foreign-producer" and f.reachability.get("corpus")]
    for f in claims:
        rows = reachability.corpus_proof(f.promise, f.reachability, corpus)
        assert rows and all(r["shows"] is True for r in rows), (f.id, rows)


def test_a_corpus_log_that_does_not_show_it_is_stale(corpus):
    """Negative control: a claim naming a corpus log that does not break the promise makes the entry stale."""
    target = next(f for f in FINDINGS if f.promise == "promise-projection-exact")
    logs = sorted(f"dsh-sessions/{p.name}" for p in (corpus / "dsh-sessions").glob("*.jsonl"))
    quiet = next(name for name in logs
                 if reachability.corpus_proof(target.promise, {"corpus": [name]}, corpus)[0]["shows"] is False)
    claim = {"kind": "foreign-producer", "how": "a test claim", "corpus": [quiet]}
    argument = argue(replace(target, reachability=claim), corpus)
    assert any(quiet in p and "does not show it" in p for p in argument["problems"]), argument["problems"]


def test_reachability_traces_replay_exit_1_on_dsh():
    """Each public-API claim's trace (and each shipped-runtime claim's library trace) replays exit 1 on dsh's
    own library (`surfacecheck replay --runtime dsh`)."""
    from surfacecheck.runtime.dsh import spec_problem

    problem = spec_problem("dsh")
    if problem:
        if os.environ.get("CI"):
            pytest.fail(problem)
        pytest.skip(problem)
    claims = [f for f in FINDINGS if reachability.library_trace(f.reachability, f.trace_path) is not None]
    assert {f.id for f in FINDINGS if f.reachability["kind"] == "public-api"} < {f.id for f in claims}
    for f in claims:
        trace = reachability.library_trace(f.reachability, f.trace_path)
        done = subprocess.run([sys.executable, "-m", "surfacecheck", "replay", str(trace), "--runtime", "dsh"],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert done.returncode == 1 and "still fails" in done.stdout, (f.id, done.stdout, done.stderr[-500:])


def test_shipped_runtime_claims_reproduce_on_the_binary(tmp_path, capsys):
    """Each shipped-runtime claim's e2e script shows the finding on the shipped dsh binary."""
    from surfacecheck.cli import main
    from surfacecheck.e2e.stage import sdk_installed

    if not sdk_installed():
        if os.environ.get("CI"):
            pytest.fail("deepseek-harness-sdk not installed")
        pytest.skip("deepseek-harness-sdk not installed: pip install -e '.[dsh]'")
    claims = [f for f in FINDINGS if f.reachability["kind"] == "shipped-runtime"]
    assert claims
    for script in sorted({f.reachability["e2e"] for f in claims}):
        code = main(["e2e", "dsh", "--script", str(ROOT / "surfacecheck" / "scenarios" / "e2e" / f"{script}.json"),
                     "--bundle-dir", str(tmp_path / script), "--json"])
        document = json.loads(capsys.readouterr().out)
        reproduced = {**document["findings"]["reproduced"], **document["wire"]["reproduced"]}
        for f in (f for f in claims if f.reachability["e2e"] == script):
            assert script in reproduced.get(f.id, []), (f.id, script, reproduced, code)


def test_the_e2e_stage_fails_a_shipped_claim_its_script_did_not_reproduce():
    """Negative control of the e2e stage's check: a claimed script that ran without showing the finding."""
    from surfacecheck.e2e.stage import shipped_claims

    claims = {f.id: f.reachability["e2e"] for f in FINDINGS if f.reachability["kind"] == "shipped-runtime"}
    nothing = {"findings": {"reproduced": {}}, "wire": {"reproduced": {}}}
    rows = shipped_claims(nothing, set(claims.values()))
    assert {r["id"] for r in rows} == set(claims) and not any(r["shows"] for r in rows)
    shown = {"findings": {"reproduced": {i: [s] for i, s in claims.items()}}, "wire": {"reproduced": {}}}
    assert all(r["shows"] for r in shipped_claims(shown, set(claims.values())))
    assert shipped_claims(nothing, set()) == []  # a script that did not run proves nothing either way


def test_the_dsh_stage_marks_a_public_api_claim_that_does_not_replay(monkeypatch):
    """Negative control of the dsh stage's check: the library no longer reproducing a claim's trace."""
    from surfacecheck.dsh import stage as dsh_stage
    from surfacecheck.findings import run as run_mod

    monkeypatch.setattr(run_mod, "reproduces", lambda trace, spec: False)
    rows = dsh_stage.witness_reproduction("dsh")
    claims = [r for r in rows if "reachability_reproduces" in r]
    assert len(claims) == sum(reachability.library_trace(f.reachability, f.trace_path) is not None for f in FINDINGS)
    assert all(r["reachability_reproduces"] is False for r in claims)


# -- the report ------------------------------------------------------------------------------------------
def test_json_carries_the_argument_sorted_reachable_defects_first(capsys):
    from surfacecheck.cli import main

    code = main(["findings", "--no-logs", "--search-seconds", "0", "--explore-bounds", "off", "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == 0, document["stale"]
    findings = document["findings"]
    assert len(findings) == len(FINDINGS)
    for f in findings:
        assert f["class"] in ("defect", "tradeoff", "design-question")
        assert {"quote", "kind"} <= set(f["evidence"]) and "check" in f["evidence"]
        assert f["evidence"].get("source") == "spec-14.3" or {"package", "file", "version"} <= set(f["evidence"])
        assert f["reachability"]["kind"] in reachability.KINDS and f["reproduced_on"][0] == "model"
    assert findings == sorted(findings, key=order)
    classes = [f["class"] for f in findings]
    assert classes == sorted(classes, key=("defect", "design-question", "tradeoff").index)
    first = findings[0]
    assert first["class"] == "defect" and first["reachability"]["kind"] in ("shipped-runtime", "public-api")


def test_strict_still_fails_on_every_known_finding(capsys):
    from surfacecheck.cli import main

    code = main(["findings", "--no-logs", "--search-seconds", "0", "--explore-bounds", "off", "--strict", "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == 1 and len(document["known"]) == len(FINDINGS)


def test_the_reachability_traces_are_what_their_builders_write():
    """properties/findings/reachability/*.jsonl: each dsh-order story as its builder tells it now, breaking its
    finding's promise on the model, and named by that finding's reachability claim."""
    from surfacecheck.findings.reach_traces import BUILDERS
    from surfacecheck.core.trace import read_trace

    by_id = {f.id: f for f in FINDINGS}
    folder = registry.DEFAULT_PATH.parent / "findings" / "reachability"
    assert sorted(p.stem for p in folder.glob("*.jsonl")) == sorted(BUILDERS)
    for finding, build in BUILDERS.items():
        built, committed = build(), read_trace(folder / f"{finding}.jsonl")
        assert built.violation is not None and built.property == by_id[finding].promise, finding
        assert [(s.op, s.args) for s in built.steps] == [(s.op, s.args) for s in committed.steps], finding
        assert reachability.library_trace(by_id[finding].reachability, by_id[finding].trace_path) == \
            (folder / f"{finding}.jsonl").resolve(), finding
