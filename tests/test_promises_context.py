"""Promises about runtime context, persistence, observability and projection liveness (spec §15 G2, G3,
G10, G15, G17, G18; ``properties/promises_context.py``): each witness breaks its promise on both
reference runtimes, and patching the responsible quirk out of the model makes the promise hold."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import quirk_patches
from surfacecheck.properties.monitors import lookup
from surfacecheck.properties.promises_context import PROMISES
from surfacecheck.findings.search import first_violation, scan_log
from surfacecheck.findings.witness_context import BUILDERS
from surfacecheck.core.protocol import ProtocolError
from surfacecheck.runtime.embedded.runtime import EmbeddedRuntime
from surfacecheck.runtime.model_runtime import ModelRuntime
from surfacecheck.core.trace import read_trace
from surfacecheck.verify.replay import replay_trace

FINDINGS_DIR = Path(__file__).resolve().parent.parent / "surfacecheck" / "properties" / "findings"
RECOVERY = "dsh-sessions/examples__headless-agent__tests__snapshots__compaction-recovery__session.jsonl"


def _witness(finding: str):
    return read_trace(FINDINGS_DIR / f"{finding}.jsonl")


def _model_holds(finding: str) -> bool:
    trace = _witness(finding)
    return first_violation(list(trace.steps), trace.property) is None


def test_every_promise_is_registered_with_its_sections():
    for name in PROMISES:
        spec = lookup(name)
        assert spec.name.startswith("promise-") and "§15 G" in spec.section and "seed §" in spec.section
    assert {BUILDERS[f]().property for f in BUILDERS} == set(PROMISES)


@pytest.mark.parametrize("runtime", ["model", "embedded"])
@pytest.mark.parametrize("finding", sorted(BUILDERS))
def test_witness_breaks_its_promise_on_both_runtimes(finding, runtime):
    trace = _witness(finding)
    assert trace.notes == {"finding": finding} and trace.property == BUILDERS[finding]().property
    outcome = replay_trace(trace, runtime)
    assert outcome.exit_code == 1 and outcome.same, outcome.describe()
    assert outcome.violation.property == trace.property and outcome.violation.step == len(trace.steps)


# -- the quirk patched out of the model: each witness then holds (patches: tests/quirk_patches.py) -----
PATCHED = [
    # G3: the constructor restores what the live rule would hold: the NEWEST owned snapshot, kept only while it is
    # still on the surface (never an older visible one)
    ("G3-resume-restores-older-snapshot", quirk_patches.resume_restores_the_newest_snapshot),
    # G2, the retry path (spec 10.3 "not re-done: runtime-context projection"): before a same-step retry the
    # runtime projects the current context again and enters the candidate
    ("G2-overflow-retries-widen-context-window", quirk_patches.retry_reprojects_runtime_context),
    # G18: live append applies the seed's message-shape check, so what it accepts reloads
    ("G18-live-log-fails-reload", quirk_patches.append_checks_message_shape),
    # G15: the warned set is keyed by target AND cause, so each configuration error is logged once
    ("G15-warn-once-key-collision", quirk_patches.warn_once_per_cause),
    # G10: `tokenUsage` also folds `compaction/summary.usage` (a separate bucket would do as well)
    ("G10-compaction-usage-unbilled", quirk_patches.usage_counts_compaction),
    # G17: a replace meeting a claim for another range expires the stale claim and folds as an unclaimed replace
    # instead of throwing inside the contained listener
    ("G17-dangling-prune-claim", quirk_patches.mismatched_claim_expires),
]


@pytest.mark.parametrize("finding, patch", PATCHED, ids=[finding for finding, _ in PATCHED])
def test_patched_quirk_makes_the_witness_hold(finding, patch):
    """Each fix above, patched into the model, makes its witness hold (it breaks the promise unpatched)."""
    assert not _model_holds(finding)
    with patch():
        assert _model_holds(finding)


BASE_WITNESSES = ("G1-unclaimed-replace-drift", "G2-one-request-context-window", "G4-uncompactable-envelope",
                  "G7-shrink-floor", "G8-overflow-prune-bypasses-lock", "G11-manual-cancellation-beats-success",
                  "G12-automatic-ignores-cancellation", "G16-partial-prune-progress")


def test_each_promise_fires_on_its_own_witness_only():
    """Specificity: over the base witnesses and these six, each promise here breaks on exactly one trace."""
    own = {BUILDERS[f]().property: f for f in BUILDERS}
    for finding in (*BASE_WITNESSES, *sorted(BUILDERS)):
        steps = list(_witness(finding).steps)
        fired = {name for name in PROMISES if first_violation(steps, name) is not None}
        assert fired == {name for name, f in own.items() if f == finding}, finding


# -- where the promises fire in real logs, and where they do not -------------------------------------
def test_usage_promise_fires_on_the_recovery_log_where_the_spec_says(corpus):
    """§15 G10 names the §10.4 log: its compaction/summary (seq 20) records 20/4 that tokenUsage never counts."""
    found = scan_log("dsh-sessions", corpus / RECOVERY, promises=PROMISES)
    assert [d.promise for d in found] == ["promise-compaction-usage-accounted"]
    assert found[0].steps[-1].args["event"]["type"] == "compaction/summary"
    assert found[0].violation.expected == ">= 24" and found[0].violation.observed == 0


def test_projection_usage_query_agrees_on_both_runtimes(corpus):
    """`projection {usage: true}`: §15 G10 says the §10.4 log's tokenUsage totals are 44/10."""
    events = [json.loads(line) for line in (corpus / RECOVERY).read_text(encoding="utf-8").splitlines()[1:]]
    runtimes = [ModelRuntime(), EmbeddedRuntime()]
    for event in events:
        body = {k: event[k] for k in ("type", "data", "time", "surfaceOp", "sourceEventSeqs") if k in event}
        answers = [rt.call("append", {"event": body}) for rt in runtimes]
        assert answers[0] == answers[1]
        usage = [rt.call("projection", {"usage": True}) for rt in runtimes]
        assert usage[0] == usage[1]
    assert usage[0]["usage"] == {"inputTokens": 44, "outputTokens": 10, "cacheReadTokens": 0, "cacheWriteTokens": 0}
    assert runtimes[1].call("projection", {}) == {"total": usage[1]["total"]}  # the plain answer is unchanged
    for rt in runtimes:
        with pytest.raises(ProtocolError):
            rt.call("projection", {"usage": "yes"})


def test_usage_query_agrees_over_the_corpus(corpus):
    """Differential check of the new read-only figure (lockstep does not ask for it): every corpus log,
    appended event by event up to its first refusal, leaves equal `tokenUsage` on both runtimes."""
    logs = sorted(corpus.glob("dsh-*/*.jsonl"))
    assert len(logs) > 100
    for path in logs:
        runtimes = [ModelRuntime(), EmbeddedRuntime()]
        for line in path.read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            if "seq" not in event:
                continue
            body = {k: event[k] for k in ("type", "data", "time", "surfaceOp", "sourceEventSeqs") if k in event}
            answers = [rt.call("append", {"event": body}) for rt in runtimes]
            if "error" in answers[0]:
                break
        usage = [rt.call("projection", {"usage": True})["usage"] for rt in runtimes]
        assert usage[0] == usage[1], path.name


def test_promises_hold_on_the_scenario_logs():
    """Negative control: fully metered generated logs (no summary usage recorded) break none of these."""
    from surfacecheck import scenarios

    for path in sorted(Path(scenarios.LOGS_DIR).glob("*.jsonl")):
        assert scan_log("scenarios", path, promises=PROMISES) == []


def test_weak_context_promise_holds_without_a_same_step_retry():
    """What the weak form allows: the documented one-request window (the base G2 witness) is ONE request;
    it is the same-step retry that widens it (delete the overflow step and the promise holds)."""
    base = read_trace(FINDINGS_DIR / "G2-one-request-context-window.jsonl")
    assert first_violation(list(base.steps), "promise-runtime-context-one-request") is None
    ours = list(_witness("G2-overflow-retries-widen-context-window").steps)
    assert ours[-1].op == "request_error" and first_violation(ours[:-1], "promise-runtime-context-one-request") is None


def test_projection_liveness_ignores_unreadable_retired_shapes(corpus):
    """A retired assistant/message shape sticks the fold with rule message-shape: G18's business, not G17's."""
    log = corpus / "dsh-sessions" / "apps__web__tests__snapshots__code-mode-round__session.jsonl"
    assert scan_log("dsh-sessions", log, promises=("promise-projection-keeps-accepting",)) == []


def test_resume_promise_judges_only_the_first_pre_step_after_reload():
    """Without the reload (the live agent itself) the same story holds: the monitor is no tautology."""
    steps = [s for s in _witness("G3-resume-restores-older-snapshot").steps if s.op != "reload"]
    assert first_violation(steps, "promise-context-resume-equals-live") is None
    steps = list(_witness("G3-resume-restores-older-snapshot").steps)
    cleared = steps[:-1] + [replace(steps[-1], args={"context": []})]
    assert first_violation(cleared, "promise-context-resume-equals-live") is None  # both enter "none"


# -- independent reproduction on the real dsh runtime (the installed SDK; issue 8's runner) -------------
def _real_script(name: str, config: dict, replies: list[dict]) -> dict:
    return {"format": "surfacecheck-e2e-script/1", "name": name, "usage": "fixed",
            "description": "the approval policy is a runtime-context section (snapshot entered at step 1)",
            "config": {"contextWindow": 16000, "retainTokens": 1000, "maxTokens": 1024, "compactionRetries": 1,
                       "requestMaxTokens": 1024, "pruner": None, "runtimeContext": True, **config},
            "turns": [{"prompt": "collect the reports", "compact": False, "replies": replies}],
            "summaries": [{"outcome": "text", "text": "The user asked to collect the reports; two bash calls printed "
                                                      "long outputs. Continue with the reports."},
                          {"outcome": "text", "text": "Collect the reports."}]}


REAL_G2 = {
    # dsh's default budget, the model witness's story: pre-step 3's pressure compaction shadows the snapshot
    # (request 3 lacks it: the documented window), the request overflows, the same-step retry lacks it too
    "pressure-then-overflow": (_real_script("h9a-g2-pressure-overflow", {"thresholdRatio": 0.5, "maxOverflowRetries": 1},
                                            [{"tool": {"output_chars": 20000}}, {"tool": {"output_chars": 20000}},
                                             {"overflow": True}, {"text": "done"}]), [True, True, False, False]),
    # overflow only: step 3's request carries it; the overflow compaction shadows it; both retries lack it
    "two-overflows": (_real_script("h9a-g2-two-overflows", {"thresholdRatio": 0.9, "maxOverflowRetries": 2},
                                   [{"tool": {"output_chars": 3000}}, {"tool": {"output_chars": 3000}},
                                    {"overflow": True}, {"overflow": True}, {"text": "done"}]),
                      [True, True, True, False, False]),
}


@pytest.mark.parametrize("story", sorted(REAL_G2))
def test_g2_overflow_window_reproduces_on_real_dsh(story):
    """§15 G2 overflow variant on the installed dsh (not the model): with `@deepseek-ai/dsh-user-approval`
    contributing a runtime-context section (script config `runtimeContext: true`), the two last conversation
    requests both lack the snapshot."""
    pytest.importorskip("deepseek_harness")
    runner = pytest.importorskip("surfacecheck.e2e.runner")

    script, expected = REAL_G2[story]
    try:
        run = runner.run_script(script, timeout=120)
    except runner.RuntimeNotInstalled as exc:
        pytest.skip(str(exc))
    snapshots = [e["data"]["content"][0]["text"] for e in run.events if e.get("type") == "user/message"
                 and (e["data"].get("source") or {}).get("plugin") == "@deepseek-ai/dsh-system-prompt"]
    assert len(snapshots) == 1 and snapshots[0].startswith("Current runtime context.")
    quoted = json.dumps(snapshots[0])[1:-1]
    carries = [quoted in json.dumps(r["body"]) for r in run.requests if not r.get("compact")]
    assert carries == expected
    assert sum(1 for e in run.events if e.get("type") == "compaction/summary") == 2
