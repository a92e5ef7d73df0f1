"""The audit over the whole corpus (issue 3 "must show") and the known-findings registry.

* dsh-sessions: 159 logs, zero (counted) errors, and only registered, spec-explained warnings;
* dsh-generated under their policies: every replacement equals what dsh computed (expected.json);
* the registry equals exactly what the audit finds, so it can neither hide nor go stale;
* the `check` stage is ok, and a violation under --strict (the two logs dsh cannot load).
"""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from surfacecheck.scenarios.generate import LOG_DIR, SCENARIOS
from surfacecheck.model.config import RuntimePolicy
from surfacecheck.audit.rules import ERROR, WARNING
from surfacecheck.audit.run import audit_log, audit_paths, load_known, load_policy, log_key
from surfacecheck.audit.stage import stage
from surfacecheck.core.corpus import generated_expected
from surfacecheck.core.stage import OK, VIOLATION, CheckContext


@pytest.fixture(scope="module")
def sessions(corpus):
    return audit_paths([corpus / "dsh-sessions"])


@pytest.fixture(scope="module")
def generated(corpus):
    logs = {}
    for path in sorted((corpus / "dsh-generated").glob("*.jsonl")):
        logs[path.name] = audit_log(path, load_policy(corpus / "dsh-generated/policies" / f"{path.stem}.json"))
    return logs


def test_sessions_have_no_errors_and_only_known_warnings(sessions):
    counts = sessions.counts()
    assert counts["logs"] == 159 and counts["errors"] == 0
    assert not sessions.unreadable
    warnings = [f for log in sessions.logs for f in log.findings if f.severity == WARNING]
    assert len(warnings) == counts["warnings"] > 0
    assert all(f.known for f in warnings), [f for f in warnings if not f.known]
    assert sessions.exit_code == 0


def test_strict_counts_the_logs_dsh_cannot_load(corpus):
    strict = audit_paths([corpus / "dsh-sessions"], strict=True)
    errors = {(Path(log.path).name, f.rule, f.seq) for log in strict.logs for f in log.findings if f.severity == ERROR}
    assert errors == {
        ("apps__web__tests__snapshots__cordis-tool-round__session.jsonl", "seq-contiguity", 87),
        ("packages__test-support__acp-snapshot__tests__fixtures__suite__authored-error__session.jsonl",
         "seq-contiguity", 1),
    }
    assert strict.exit_code == 1


def test_registry_is_exactly_what_the_audit_finds(corpus, sessions, generated):
    found = {(log_key(Path(log.path)), f.rule, f.seq) for log in sessions.logs for f in log.findings}
    found |= {(f"dsh-generated/{name}", f.rule, f.seq) for name, log in generated.items() for f in log.findings}
    for scenario in SCENARIOS:
        log = audit_log(Path(LOG_DIR) / f"{scenario.name}.jsonl", RuntimePolicy.from_json(scenario.policy))
        found |= {(log_key(Path(log.path)), f.rule, f.seq) for f in log.findings}
    assert found == set(load_known())


def test_generated_replacements_match_what_dsh_computed(corpus, generated):
    expected = generated_expected(corpus)
    for name, log in generated.items():
        want = expected[name]
        assert list(log.surface_nodes) == want["surface_nodes"] and log.generation == want["generation"], name
        got = [(r.seq, r.kind, r.start, r.end, list(r.shadowed_seqs), r.logged_shadow_tokens,
                r.recomputed_shadow_tokens, r.replacement_tokens) for r in log.replacements]
        assert got == [(r["seq"], {"checkpoint": "summary"}.get(r["kind"], r["kind"]), r["start"], r["end"],
                        r["shadowed_seqs"], r["logged_shadow_tokens"], r["details"]["meter_shadow_tokens"],
                        r["replacement_tokens"]) for r in want["replacements"]], name
        assert not [f for f in log.findings if f.severity == ERROR], name


def test_generated_logs_under_default_policy_show_selection_mismatch(corpus):
    """Negative control: audited under dsh's defaults (threshold 0.8, retainRatio 0.16) instead of
    the policy it ran under, the pressure compaction neither qualifies nor selects the same range."""
    log = audit_log(corpus / "dsh-generated/02-pressure-summary.jsonl")
    assert [(f.rule, f.seq) for f in log.findings] == [("pressure-below-threshold", 57), ("selection-mismatch", 58)]
    assert "expected range 4-21, observed range 4-38" in log.findings[1].message
    assert "expected measure() at least the threshold 1600, observed 1072 tokens" in log.findings[0].message


def test_check_stage(corpus, tmp_path):
    ctx = CheckContext("model", corpus, False, tmp_path, io.StringIO())
    result = stage(ctx)
    assert result.status == OK and result.summary["errors"] == 0
    assert result.summary["logs"] == 159 + 10 + len(SCENARIOS)
    assert len(result.cases) == result.summary["logs"] and not any(c.failure for c in result.cases)
    strict = stage(CheckContext("model", corpus, True, tmp_path, io.StringIO()))
    assert strict.status == VIOLATION and strict.summary["errors"] == 2
    assert sum(1 for c in strict.cases if c.failure) == 2


def test_check_stage_without_corpus_audits_scenarios(tmp_path):
    result = stage(CheckContext("model", None, False, tmp_path, io.StringIO()))
    assert result.status == OK and result.summary["logs"] == len(SCENARIOS)
