"""The contract's findings: the registry's entries are well formed and argued from quotes found in the installed
packages; each witness still breaks its promise on LangChain and Strands; an empty registry turns the search's
breaches into NEW findings with small witnesses that replay; a registry that misquotes a runtime is STALE."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from surfacecheck.contract import promises, registry
from surfacecheck.contract.findings_run import environment, run_findings

PROMISE_IDS = tuple(p.id for p in promises.PROMISES)
FINDINGS = registry.load(None, PROMISE_IDS)
QUIET = lambda line: None  # noqa: E731


def surfacecheck(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "surfacecheck", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_every_registered_finding_names_a_promise_a_class_and_an_existing_witness():
    assert {f.runtime for f in FINDINGS} == {"langchain", "strands", "openhands"}
    for f in FINDINGS:
        assert f.promise in PROMISE_IDS and f.klass in registry.CLASSES
        assert f.trace_path.is_file(), f.id
        assert f.evidence["kind"] == registry.EVIDENCE_KIND[f.klass]
        assert f.reachability["kind"] == "public-api"


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.id)
def test_each_quote_stands_in_the_installed_package_at_its_line(finding):
    for quote in (finding.evidence, *finding.evidence_also):
        checked = registry.check_quote(quote, environment(finding.runtime))
        assert checked.found is True, (finding.id, checked.why)


@pytest.mark.parametrize("runtime", ["langchain", "strands"])
def test_every_registered_witness_still_breaks_its_promise(runtime, tmp_path):
    report = run_findings(runtime, trace_dir=tmp_path, search=False, progress=QUIET)
    assert not report.stale and not report.inconclusive, report.text()
    assert len(report.known) == len(registry.for_runtime(FINDINGS, runtime)) > 0
    assert report.exit_code == 0
    assert all(k["replay"] == "failing" for k in report.known)


def test_strict_fails_on_known_findings(tmp_path):
    assert run_findings("strands", strict=True, trace_dir=tmp_path, search=False, progress=QUIET).exit_code == 1


def _registry_copy(tmp_path: Path, change) -> Path:
    document = json.loads(registry.DEFAULT_PATH.read_text(encoding="utf-8"))
    for entry in document["findings"]:
        entry["trace"] = str(registry.DEFAULT_PATH.parent / entry["trace"])
    change(document["findings"])
    path = tmp_path / "findings.json"
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")
    return path


def test_a_misquote_makes_its_finding_stale(tmp_path):
    def misquote(entries):
        entries[:] = [e for e in entries if e["runtime"] == "strands"][:1]
        entries[0]["evidence"]["quote"] = "The implementation may keep every message it likes."
        entries[0]["evidence"].pop("line", None)
    report = run_findings("strands", registry_path=_registry_copy(tmp_path, misquote), trace_dir=tmp_path,
                          search=False, progress=QUIET)
    assert report.exit_code == 1 and report.stale and "quote is not in the file" in report.stale[0]["why"]


@pytest.mark.parametrize("change, words", [
    (lambda es: es[0].pop("reason"), "missing or empty reason"),
    (lambda es: es[0].update({"class": "bug"}), "class must be one of"),
    (lambda es: es[0].update({"promise": "contract-nonsense"}), "is not a contract promise"),
    (lambda es: es[0]["evidence"].update({"kind": "silent"}), "quotes text of kind"),
    (lambda es: es[0].update({"issue": "github.com/x"}), "https address"),
])
def test_a_malformed_registry_is_refused_naming_its_line(tmp_path, change, words):
    path = _registry_copy(tmp_path, change)
    with pytest.raises(registry.RegistryError) as raised:
        registry.load(path, PROMISE_IDS)
    assert words in str(raised.value) and str(path) in str(raised.value)
    assert str(raised.value).split(":")[1].isdigit()


def test_an_empty_registry_reports_a_variants_broken_promise_as_new_with_a_small_replayable_witness(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text('{"findings": []}', encoding="utf-8")
    done = surfacecheck("findings", "--runtime", "reference:constant-summary", "--registry", str(empty), "--json",
                        "--seed", "3", "--search-seconds", "60", "--trace-dir", str(tmp_path / "traces"))
    assert done.returncode == 1, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert "contract-summarizer-used" in {n["promise"] for n in report["new"]}
    for new in report["new"]:
        assert new["messages"] <= 12
        replayed = surfacecheck("replay", new["trace"])
        assert replayed.returncode == 1, replayed.stdout + replayed.stderr


def test_the_reference_has_no_finding_under_an_empty_registry(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text('{"findings": []}', encoding="utf-8")
    done = surfacecheck("findings", "--runtime", "reference", "--registry", str(empty), "--json", "--seed", "3",
                        "--search-seconds", "40", "--trace-dir", str(tmp_path / "traces"))
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["new"] == [] and report["search"]["examples"] > 100, done.stderr[-2000:]
