"""Issue 9 "must show": remove a quirk from the model and its finding disappears, and CI notices.

For each registered finding about dsh (spec §15, ``properties/findings.json``) one test patches the
responsible rule OUT of the reference model (the smallest faithful fix, applied where the model looks
the function up) and checks three things:

* control: on the unpatched model the witness still breaks its promise (before and after the patch);
* (a) replayed on the patched model (``surfacecheck replay``'s machinery) the witness breaks nothing, and
  the patched model refuses none of its steps (a fix removes the rule, not the witness's path);
* (b) ``run_findings`` (discovery off) reports the entry STALE with exit 1: the registry would lie, so
  ``surfacecheck findings`` and the ``findings`` stage of ``surfacecheck check`` fail; and exactly the
  declared entries go STALE with it (``ALSO_REMOVES``: same gap; ``WITNESS_ONLY``: shown to survive).

The patches live in ``tests/quirk_patches.py`` (``PATCHES``, shared with the promise tests). ``FIXES`` says
each patch in words (one sentence per finding, for the registry's readers).
"""
from __future__ import annotations

import dataclasses
import inspect
import re

import pytest

from surfacecheck.model.seams import REAL
from quirk_patches import (PATCHES, automatic_checks_the_signal, command_reports_success, context_after_pressure,
                           envelope_is_a_config_error, lock_before_overflow_pruning, seams_replacing,
                           price_unclaimed_replace, retry_only_when_it_fits, skip_the_shrink_floor,
                           transaction_success_wins)
from surfacecheck.findings import registry
from surfacecheck.findings.run import run_findings
from surfacecheck.runtime.model_runtime import ModelRuntime
from surfacecheck.core.trace import read_trace
from surfacecheck.verify.replay import replay_trace

FINDINGS = {f.id: f for f in registry.load()}

FIXES = {
    "G1-unclaimed-replace-drift":
        "Fold a replacement that has no armed claim as if it were claimed with the meter's recount of the nodes it "
        "shadows, so its delta is the replacement's price minus the shadowed price instead of 0 (spec 5.1).",
    "G2-one-request-context-window":
        "Project the runtime-context candidate after the agent/pre-step pressure listener, so a snapshot shadowed "
        "by this pre-step's compaction is entered again in the same step (spec 12, 13 steps 4-7, D9).",
    "G4-uncompactable-envelope":
        "Before summarizing on pressure, if the request envelope (system + tools, which no compaction can shrink) "
        "alone reaches the threshold, report it once per target as a configuration error and summarize nothing "
        "(spec 9.2, 9.3, 4.3).",
    "G7-shrink-floor":
        "Range selection returns null for a span priced at or under the shrink floor (98 tokens of framing + the "
        "5-token smallest summary block = 103), so no compaction starts that can never land (spec 7, 8.2 step 10).",
    "G8-overflow-prune-bypasses-lock":
        "compactIfNeeded('context-overflow') checks the durable lock (assertNoActiveCompaction) before it prunes, "
        "as the pressure path already does (spec 10.2, 8.1 step 4).",
    "G11-manual-cancellation-beats-success":
        "Once the checkpoint is committed and the bracket closed, success beats a late abort: compactSurfaceRegion "
        "skips its final signal check after a clean close, and /compact reports the result it got (spec 8.2 "
        "step 11, 8.3, 11.1-11.2).",
    "G12-automatic-ignores-cancellation":
        "compactSurfaceRegion re-checks the signal before committing for automatic compactions too (owner "
        "'current-turn'), so a summarizer that returns after the turn was aborted commits nothing (spec 8.2 step 11).",
    "G16-partial-prune-progress":
        "The overflow listener authorizes a retry only when the remeasured request fits the route's context window; "
        "prune-only progress that still overflows leaves the request error standing (spec 10.2, 6).",
    "G3-resume-restores-older-snapshot":
        "The RuntimeContextProjection constructor restores what its live rule holds after the same log: the newest "
        "owned snapshot, only while it is still on the surface, never an older visible one (spec 12).",
    "G2-overflow-retries-widen-context-window":
        "Before a same-step overflow retry the runtime projects the current runtime context again and enters the "
        "candidate when the retained snapshot was shadowed, so no retry goes out without it (spec 10.3, 12, 13).",
    "G18-live-log-fails-reload":
        "Session.append applies the seed's message-shape check (assertCurrentLlmShape: identity, role, source, "
        "tool-result shape) to live appends, so a log accepted live always reloads (spec 1.3, 1.5 step 3).",
    "G15-warn-once-key-collision":
        "The pressure listener's warned set is keyed by target AND cause, so each distinct TargetPressureConfigError "
        "of a route is logged once instead of only the first (spec 9.3).",
    "G10-compaction-usage-unbilled":
        "tokenUsage also folds compaction/summary.usage (a separate compaction bucket would do as well), so the "
        "summarizer's calls recorded in the log are billed (spec 5.2, 8.2).",
    "G17-dangling-prune-claim":
        "A replacement that meets a claim for another range expires the stale claim and folds as an unclaimed "
        "replacement instead of throwing inside the contained listener, so the projection keeps accepting "
        "(spec 5.1, 6).",
    "G1b-projection-goes-negative":
        "An unclaimed replacement is priced from the meter's per-node prices of the nodes it shadows (as if "
        "claimed), so a later claimed compaction subtracts what the projection holds and messageTokens stays "
        ">= 0 (spec 5.1, 5.2, 8.2).",
    "G13-entering-batch-blind-spot":
        "The pre-step enters step/start and its claimed batch before the pressure listener measures (the "
        "runtime-context snapshot still last, D9), so pressure decides on the request it lets out (spec 9.2, 13; "
        "seed S4.b).",
    "G9a-anchor-double-count":
        "stepStart.surfaceTokens is rebased at the assistant/message to the surface the request carried, so the "
        "provider's inputTokens are not added on top of the entered prompt they already count (spec 4.2, 4.3).",
    "G9b-stale-step-start":
        "The same rebase: after an in-step overflow compaction the usage anchor is taken against the surface the "
        "retried request carried, not the stale pre-compaction step/start surface (spec 4.2, 10.3).",
    "G2b-prompt-summarized-before-seen":
        "Overflow recovery's retain-0 range stops before the open step's entered batch (what the pre-step entered "
        "after step/start, before the step's first answer), so a just-entered prompt is never summarized before "
        "the model saw it (spec 10.2, 7, 13).",
    "G5-indivisible-tool-unit":
        "With retain 0, a balanced whole surface priced above the shrink floor is a compactable range (the newest "
        "node is not forced to stay), so overflow recovery can summarize a lone tool unit (spec 7 steps 3-4, 10.2).",
    "S7-pairing-counts-not-ids":
        "A cut is balanced only when, besides the counts, no call/result pair matched by id straddles it, so range "
        "selection never separates a result from its call (spec 3; seed S7.b).",
}

ALSO_REMOVES = {
    "G1-unclaimed-replace-drift": {"G1b-projection-goes-negative": "the same delta-0 rule under-counts the node "
                                                                   "the later claimed compaction subtracts"},
    "G1b-projection-goes-negative": {"G1-unclaimed-replace-drift": "the same rule: a priced replace no longer "
                                                                   "drifts from measure()"},
    "G2-one-request-context-window": {"G2-overflow-retries-widen-context-window":
                                      "its witness's window opens at the pre-step's pressure compaction, which "
                                      "this fix closes before the request (and so before the retry)"},
    "G9a-anchor-double-count": {"G9b-stale-step-start": "one rule: the anchor's stepStart surface"},
    "G9b-stale-step-start": {"G9a-anchor-double-count": "one rule: the anchor's stepStart surface"},
}
"""Entries of the SAME §15 gap that one fix legitimately removes too (checked exactly: a fix removing
anything else fails its test)."""

WITNESS_ONLY = {
    "G13-entering-batch-blind-spot": {"G2-one-request-context-window":
                                      "its minimised witness leaves step 1 open (no step/end); measured after "
                                      "step/start, the meter refuses that pre-step (spec 4.2): the G2 rule "
                                      "itself survives (test_G13_...)"},
}
"""Another gap's minimised witness that stops reaching its quirk under this fix; the quirk itself is shown
to survive on the witness completed as dsh writes it."""

REFUSED_AFTER_FIX = {"G18-live-log-fails-reload": [(2, "session-append")]}
"""The patched model accepts every witness step (a fix removes the quirk, not the witness's path), except
where refusing IS the fix: G18's live append refuses the message the reload refused."""


# -- the three checks -----------------------------------------------------------------------------
def _findings(runtime: str = "model", **kwargs):
    """``run_findings`` with discovery off (no log scan, no Hypothesis search, no explorer pass where
    the command has one): only the registry's witnesses are replayed, which is what a fix must change."""
    kwargs.update(scan=False, search_seconds=0)
    if "explore_bounds" in inspect.signature(run_findings).parameters:
        kwargs["explore_bounds"] = None
    return run_findings(runtime, **kwargs)


def _witness_outcome(finding_id: str):
    finding = FINDINGS[finding_id]
    return replay_trace(read_trace(finding.trace_path), "model")


def _gap(finding_id: str) -> str:
    """The §15 gap an entry documents, by number (``G2b`` belongs to ``G2``)."""
    gap = FINDINGS[finding_id].gap
    number = re.match(r"[A-Z]+\d+", gap)
    return number.group() if number else gap


def _assert_reproduced(finding_id: str) -> set[str]:
    """Control: the unpatched model still breaks the promise at the witness's last step, and the entry is
    known. Returns the entries already STALE (none, unless another entry's witness is broken)."""
    outcome = _witness_outcome(finding_id)
    assert outcome.exit_code == 1 and outcome.same, outcome.describe()
    report = _findings()
    assert finding_id in {k["id"] for k in report.known}
    return {s["id"] for s in report.stale}


def _refusals(finding_id: str) -> list[tuple[int, str]]:
    """The witness's steps the model refuses (step number, spec rule), run step by step."""
    runtime, refused = ModelRuntime(), []
    for number, step in enumerate(read_trace(FINDINGS[finding_id].trace_path).steps, 1):
        result = runtime.call(step.op, step.args)
        if isinstance(result, dict) and isinstance(result.get("error"), dict):
            refused.append((number, result["error"].get("rule")))
    return refused


def _assert_removed(finding_id: str, stale_before: set[str]) -> None:
    """(a) the witness breaks nothing on the patched model, which refuses none of its steps (but for
    ``REFUSED_AFTER_FIX``); (b) ``run_findings`` calls the entry STALE, exit 1; and the fix newly removes
    exactly this entry plus the declared ones of its own gap (``ALSO_REMOVES``) or ``WITNESS_ONLY``."""
    finding = FINDINGS[finding_id]
    outcome = _witness_outcome(finding_id)
    assert outcome.violation is None and outcome.exit_code == 0, outcome.describe()
    assert outcome.steps_run == outcome.steps_total
    assert _refusals(finding_id) == REFUSED_AFTER_FIX.get(finding_id, [])
    report = _findings()
    stale = {s["id"]: s["why"] for s in report.stale}
    assert finding_id in stale and f"no longer breaks {finding.promise}" in stale[finding_id], stale
    assert report.verdict == "violation" and report.exit_code == 1
    assert finding_id not in {k["id"] for k in report.known}
    removed = set(stale) - stale_before
    assert removed == {finding_id, *ALSO_REMOVES.get(finding_id, ()), *WITNESS_ONLY.get(finding_id, ())}, \
        f"the {finding.gap} fix removed {sorted(removed)}"
    assert {_gap(i) for i in removed - set(WITNESS_ONLY.get(finding_id, ()))} == {_gap(finding_id)}, \
        f"the {finding.gap} fix also removed findings of other gaps: {sorted(removed)}"


def _check(finding_id: str, fix) -> None:
    stale_before = _assert_reproduced(finding_id)
    with fix():
        _assert_removed(finding_id, stale_before)
    _assert_reproduced(finding_id)


# -- the tests ------------------------------------------------------------------------------------
def test_every_registered_finding_has_a_fix():
    """All of the registry is covered: a new entry fails here until its fix is written (issue 9)."""
    assert set(FIXES) == set(FINDINGS) == set(PATCHES)
    assert all(i.startswith(_gap(i)) for i in FIXES)
    for declared in (ALSO_REMOVES, WITNESS_ONLY, REFUSED_AFTER_FIX):
        assert set(declared) <= set(FIXES)


def test_G1_pricing_an_unclaimed_replace_removes_the_drift():
    """Rule removed: "a replace with no claim is unpriced (delta 0)" of foldSurfaceProjection (spec 5.1, 5.2;
    §15 G1). The fold is O(1) and holds no per-node prices, so the fix arms the missing claim from the token
    meter's recount of the shadowed nodes (spec 4.2) just before the fold; the fold itself is unchanged."""
    _check("G1-unclaimed-replace-drift", price_unclaimed_replace)


def test_G2_projecting_the_context_after_pressure_removes_the_window():
    """Rule removed: the runtime-context candidate is projected BEFORE the agent/pre-step pressure listener
    (spec 13 steps 4-7, 12; D9; §15 G2). Moved after it, the snapshot the pre-step's own compaction shadowed
    (retained -> null, spec 12 live rule) is entered again in the same step."""
    _check("G2-one-request-context-window", context_after_pressure)


def test_G4_treating_an_over_threshold_envelope_as_a_config_error_removes_the_waste():
    """Rule removed: pressure qualifies on measure().totalTokens including the request header (spec 4.3, 9.2
    steps 8-11; §15 G4, G14) and then summarizes although no compaction can bring it under the threshold. Fixed:
    an envelope that alone reaches the threshold is a TargetPressureConfigError (warned once, spec 9.3)."""
    _check("G4-uncompactable-envelope", envelope_is_a_config_error)


def test_G7_skipping_spans_under_the_shrink_floor_removes_the_futile_compaction():
    """Rule removed: selectCompactableRange selects any head-anchored balanced span (spec 7), even one priced
    <= 103 tokens that the shrink rule (spec 8.2 steps 9-10; §15 G7) always rejects. Fixed: such a span
    selects nothing (null), at every caller (overflow, pressure, /compact, the select_range op)."""
    _check("G7-shrink-floor", skip_the_shrink_floor)


def test_G8_checking_the_lock_before_overflow_pruning_removes_the_bypass():
    """Rule removed: compactIfNeeded('context-overflow') prunes first and leaves the durable-lock check to
    compactRegion (spec 10.2, 8.1 step 4; §15 G8). Fixed: assertNoActiveCompaction runs before pruning."""
    _check("G8-overflow-prune-bypasses-lock", lock_before_overflow_pruning)


def test_G11_success_beating_a_late_abort_removes_the_false_cancellation():
    """Rule removed: "cancellation wins" after close and flush (spec 8.2 step 11, 8.3, 11.1-11.2; §15 G11):
    compactSurfaceRegion re-checks the caller's signal after a clean close, and the /compact executor reports
    the abort over the settled result. Both layers are patched: with the transaction alone the command would
    still print "Compaction cancelled." for the committed checkpoint."""
    finding_id = "G11-manual-cancellation-beats-success"
    stale_before = _assert_reproduced(finding_id)
    with transaction_success_wins():
        _assert_reproduced(finding_id)  # the executor still lets the abort win over the settled success
        with command_reports_success():
            _assert_removed(finding_id, stale_before)
    _assert_reproduced(finding_id)


def test_G12_checking_the_signal_before_an_automatic_commit_removes_the_commit():
    """Rule removed: only manual compactions (owner null) re-check the signal before committing (spec 8.2
    step 11; §15 G12). Fixed: owner 'current-turn' checks it too, so the late-cancelled overflow compaction
    error-closes its bracket and commits no checkpoint (spec 8.3)."""
    _check("G12-automatic-ignores-cancellation", automatic_checks_the_signal)


def test_G16_retrying_only_when_the_request_fits_removes_the_futile_retry():
    """Rule removed: any generation advance authorizes the overflow retry, prune-only included (spec 10.2, 6;
    §15 G16). Fixed: the retry is authorized only when the remeasured request fits the context window."""
    _check("G16-partial-prune-progress", retry_only_when_it_fits)


RULES_REMOVED = {
    "G3-resume-restores-older-snapshot":
        "the constructor's restore scan takes the newest snapshot still VISIBLE, while the live rule clears the "
        "retained snapshot once it is shadowed (spec 12; §15 G3)",
    "G2-overflow-retries-widen-context-window":
        "a same-step overflow retry re-does buildRequest but not the runtime-context projection (spec 10.3; "
        "§15 G2 overflow variant)",
    "G15-warn-once-key-collision":
        "warnedPressureConfigTargets is keyed by provider/model only, so a second cause is never warned "
        "(spec 9.3; §15 G15)",
    "G10-compaction-usage-unbilled":
        "tokenUsage folds assistant usage only, never compaction/summary.usage (spec 5.2; §15 G10)",
    "G17-dangling-prune-claim":
        "a replace meeting a claim for another range throws inside the contained listener and sticks the "
        "projection (spec 5.1, 6; §15 G17)",
    "G1b-projection-goes-negative":
        "an unclaimed replacement folds with delta 0, so a later claimed compaction subtracts more than the "
        "projection holds (spec 5.1, 5.2; §15 G1)",
    "G9a-anchor-double-count":
        "the anchor is stepStart.surfaceTokens + the provider's answer, stepStart taken before the entered batch "
        "(spec 4.2, 4.3; §15 G9a)",
    "G9b-stale-step-start":
        "stepStart is not re-taken after an in-step overflow compaction (spec 4.2, 10.3; §15 G9b)",
    "G2b-prompt-summarized-before-seen":
        "overflow recovery's retain-0 walk keeps only the newest node, so the just-entered prompt is "
        "summarized (spec 10.2, 7; §15 G2b)",
    "G5-indivisible-tool-unit":
        "the retention walk always keeps the newest node, so a lone tool unit has no compactable range "
        "(spec 7 steps 3-4; §15 G5)",
    "S7-pairing-counts-not-ids":
        "the tool-pairing fold counts calls and results and never matches ids (spec 3; seed S7.b)",
}
"""The rule each parametrized fix below removes (G13 and G18 have their own tests)."""


@pytest.mark.parametrize("finding_id", sorted(RULES_REMOVED))
def test_patching_the_rule_out_makes_the_entry_stale(finding_id):
    """The newer findings (promises_context / promises_measure): ``RULES_REMOVED`` names the rule, ``FIXES``
    the fix, ``quirk_patches.PATCHES`` applies it; control, witness holds, STALE + exit 1, exact side effects."""
    _check(finding_id, PATCHES[finding_id])


def test_G18_checking_message_shape_on_live_append_removes_the_unreloadable_log():
    """Rule removed: Session.append does not check message identity/role/source/tool-result shape, which the
    seed and persistence load do (spec 1.3 'Not checked on live append', 1.5 step 3; §15 G18). The fix moves
    the refusal: the reload (step 3, rule seed) no longer fails because the live append (step 2) refuses."""
    finding_id = "G18-live-log-fails-reload"
    assert _refusals(finding_id) == [(3, "seed")]
    _check(finding_id, PATCHES[finding_id])


def test_G13_entering_the_batch_before_pressure_removes_the_blind_spot():
    """Rule removed: the pressure listener runs in the agent/pre-step waterfall before step/start and the
    entered batch, so it measures without the claimed prompt (spec 9.2, 13; seed S4.b; §15 G13). Side effect
    (``WITNESS_ONLY``): G2's minimised witness never closes step 1, and measured after step/start its pre-step
    meets a stuck meter (spec 4.2), which the listener warns (spec 9.3, DIVERGENCES D9); closed by step/end as dsh
    writes it, it still loses the snapshot."""
    from surfacecheck.findings.search import first_violation
    from surfacecheck.core.trace import Step

    finding_id, g2 = "G13-entering-batch-blind-spot", FINDINGS["G2-one-request-context-window"]
    _check(finding_id, PATCHES[finding_id])
    steps = list(read_trace(g2.trace_path).steps)
    assert [s.op for s in steps[5:8]] == ["pre_step", "append", "pre_step"]
    closed = steps[:7] + [Step("append", {"event": {"type": "step/end", "data": {"turn": 1, "step": 1}}})] + steps[7:]
    with PATCHES[finding_id]():
        assert _refusals(g2.id) == []
        runtime = ModelRuntime()
        answers = [runtime.call(step.op, step.args) for step in steps[:8]]
        assert answers[7]["kind"] == "warned" and answers[7]["failure"]["rule"] == "token-meter", answers[7]
        survived = first_violation(closed, g2.promise)
    assert survived is not None and survived.step == len(closed), "the G13 fix also fixed G2's rule"
    assert first_violation(closed, g2.promise).step == len(closed)  # the completed witness, unpatched


def test_a_fix_that_refuses_the_witness_is_not_accepted(monkeypatch):
    """Negative control for the refusal check: a "fix" of G10 that refuses the compaction (the witness's path)
    instead of billing its usage silences the promise and turns the entry STALE, yet leaves the rule (spec 5.2)
    in place; ``_assert_removed`` rejects it."""
    finding_id = "G10-compaction-usage-unbilled"
    stale_before = _assert_reproduced(finding_id)
    call = ModelRuntime.call

    def refusing(self, op, args=None):
        if op == "compact":
            return {"error": {"type": "ModelError", "rule": "refused-by-test", "seq": None, "message": "refused"}}
        return call(self, op, args)

    with monkeypatch.context() as patched:
        patched.setattr(ModelRuntime, "call", refusing)
        assert _witness_outcome(finding_id).violation is None
        assert finding_id in {s["id"] for s in _findings().stale}
        with pytest.raises(AssertionError, match="refused-by-test"):
            _assert_removed(finding_id, stale_before)
    _assert_reproduced(finding_id)


def test_an_undeclared_side_effect_fails_the_check(monkeypatch):
    """Negative control for the exact side-effect check: without its ``ALSO_REMOVES`` declaration, the G9a
    fix's removal of G9b (one rule, spec 4.2) is reported, not passed over."""
    monkeypatch.delitem(ALSO_REMOVES, "G9a-anchor-double-count")
    with pytest.raises(AssertionError, match="G9b-stale-step-start"):
        _check("G9a-anchor-double-count", PATCHES["G9a-anchor-double-count"])


def _one_pressure_attempt():
    """Not a fix of G4: compactionRetries 0 (spec 9.4) still summarizes once and warns."""
    original = REAL.compact_if_needed

    def compact_if_needed(session, mode, env, signal_aborted=False):
        compaction = dataclasses.replace(env.policy.compaction, compaction_retries=0)
        return original(session, mode, dataclasses.replace(
            env, policy=dataclasses.replace(env.policy, compaction=compaction)), signal_aborted)

    return seams_replacing(compact_if_needed=compact_if_needed)


def _surface_only_pressure():
    """Not a fix of G4: qualify on the surface alone (measure minus header). The threshold (100) is under the
    smallest checkpoint (103) plus the retained tail, so both attempts still run and fail to relieve it."""
    original = REAL.measure

    def measure(session, request_header=None):
        measurement = original(session, request_header)
        return dataclasses.replace(measurement, total_tokens=measurement.surface_tokens)

    return seams_replacing(measure=measure)


@pytest.mark.parametrize("non_fix", [_one_pressure_attempt, _surface_only_pressure], ids=lambda f: f.__name__[1:])
def test_a_patch_that_does_not_remove_the_quirk_leaves_the_finding_known(non_fix):
    """Negative control for the machinery (spec 9.2-9.4, §15 G4/G14): a plausible non-fix leaves the pre-step
    burning summaries and warning "still above threshold", so the witness keeps breaking its promise and
    run_findings reports it known, not STALE: the tests above pass only because their patch removes the rule."""
    finding_id = "G4-uncompactable-envelope"
    stale_before = _assert_reproduced(finding_id)
    with non_fix():
        outcome = _witness_outcome(finding_id)
        assert outcome.same and "still above threshold" in outcome.violation.message, outcome.describe()
        assert _assert_reproduced(finding_id) == stale_before


def test_ci_notices_through_the_cli_and_the_check_stage(monkeypatch, capsys, tmp_path):
    """The STALE verdict reaches the entry points CI runs: `surfacecheck findings` exits 1 and the `findings`
    stage of `surfacecheck check` is a violation with a failing JUnit case (G8 fix, spec 10.2)."""
    import argparse
    import io

    from surfacecheck.findings import cli
    from surfacecheck.findings import run as findings_run
    from surfacecheck.findings import stage as findings_stage
    from surfacecheck.core.stage import VIOLATION, CheckContext

    monkeypatch.setattr(findings_run, "run_findings", _findings)  # both entry points, discovery off
    monkeypatch.setattr(findings_stage, "run_findings", _findings)
    parser = argparse.ArgumentParser(prog="surfacecheck")
    cli.register(parser.add_subparsers())
    args = parser.parse_args(["findings", "--trace-dir", str(tmp_path)])
    with lock_before_overflow_pruning():
        assert args.func(args) == 1 and "STALE G8-overflow-prune-bypasses-lock" in capsys.readouterr().out
    ctx = CheckContext(runtime="model", corpus=None, strict=False, report_dir=tmp_path, err=io.StringIO())
    with lock_before_overflow_pruning():
        result = findings_stage.stage(ctx)
    assert result.status == VIOLATION
    assert "stale G8-overflow-prune-bypasses-lock" in [c.name for c in result.cases if c.failure is not None]
