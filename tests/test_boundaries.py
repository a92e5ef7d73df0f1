"""Boundaries drawn on purpose (``properties/stateful/boundaries.py``): the policy machine lands the pressure total
on the threshold (spec 9.2), a tool result's code points on the pruner's `thresholdChars` (6), the tail's prices on
`retainTokens` (7), a summary's framed price on the span's (8.2 step 10), the overflow count on its budget
(10.2), `retainTokens` on the threshold tokens and the context window on zero (9.1); the log machine lands a provider's usage on the meter's anchor estimate (4.2); one below, on and one above.

Random generation almost never lands a quantity exactly on its limit, so a comparison moved by one changes
behaviour in no example it draws. Here, per boundary: the three cases are reached at the ``ci`` profile, the
correct runtime passes, the embedded runtime with that comparison moved (a seeded bug,
``tests/seeded_bugs/policy_bugs.py``) is caught, and so is a copy of dsh's tree with that one line moved.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from surfacecheck.properties.stateful import events as ev
from surfacecheck.properties.stateful.boundaries import OFFSETS as BOUNDARY_OFFSETS
from surfacecheck.properties.stateful.boundaries import code_point_text, framed_price, shrink_text
from seeded_bugs import BUGS
from surfacecheck.runtime.embedded import EmbeddedRuntime
from surfacecheck.runtime.model_runtime import ModelRuntime
from surfacecheck.verify.runner import CI_SEED, run_level


@given(st.integers(0, 3000))
def test_a_prompt_is_priced_exactly_as_asked(tokens):
    text = ev.priced_user_text(tokens)
    if tokens < ev.least_prompt_price():
        assert text is None
    else:
        assert ev.prompt_price(text) == tokens


BOUNDARIES = {
    # name: (the seeded bug that moves its comparison by one, a label its trace has); level policy unless named
    "meter anchor": ("anchor-strict", "the anchor's estimate +0"),
    "overflow budget": ("overflow-budget-exclusive", None),  # also met by the plain overflow rule
    "pressure threshold": ("threshold-inclusive", "threshold +0"),
    "prune threshold": ("prune-threshold-exclusive", "threshold -1, +0, +1 chars"),
    "retention budget": ("retention-budget-exclusive", ("priced +0", "retainTokens at the threshold")),
    "shrink rule": ("shrink-rule-inclusive", ("shadowed price +0", "/compact meeting its")),
    # the model's resolveCompactSpec is the embedded runtime's too (no seam to seed): the patched dsh below
    "retention threshold": (None, None),
    "context window": (None, None),
}


LOG_LEVEL = {"meter anchor"}
"""Boundaries the log machine draws (every level inherits them); the others are the policy machine's."""


def level_of(boundary: str) -> str:
    return "log" if boundary in LOG_LEVEL else "policy"


@pytest.fixture(scope="module")
def ci_runs():
    runs = {level: run_level(EmbeddedRuntime(), ModelRuntime(), level, "ci", CI_SEED) for level in ("log", "policy")}
    assert all(r.violation is None and r.unavailable is None for r in runs.values())
    return runs


@pytest.mark.parametrize("boundary", sorted(BOUNDARIES))
def test_each_boundary_is_reached_one_below_on_and_one_above_at_the_ci_profile(ci_runs, boundary):
    operations = ci_runs[level_of(boundary)].operations
    for offset in BOUNDARY_OFFSETS if boundary != "overflow budget" else (0,):  # a count is landed on, not near
        assert operations.get(f"boundary {boundary} {offset:+d}", 0) >= 1, operations


@pytest.mark.parametrize("boundary", sorted(b for b, (bug, _) in BOUNDARIES.items() if bug))
def test_a_comparison_moved_by_one_is_caught_at_the_ci_profile(boundary):
    bug, ends_on = BOUNDARIES[boundary]
    result = run_level(BUGS[bug].runtime(), ModelRuntime(), level_of(boundary), "ci", CI_SEED)
    assert result.violation is not None and result.violation.property.startswith("lockstep-"), bug
    labels = [step.label for step in result.trace_steps]
    ends_on = (ends_on,) if isinstance(ends_on, str) else ends_on or ()
    assert not ends_on or any(end in label for label in labels for end in ends_on), labels


def test_a_text_is_measured_in_code_points_not_utf16_units():
    for points in (0, 1, 7, 200, 201):
        text = code_point_text(points)
        assert len(text) == points and len(text.encode("utf-16-le")) // 2 > points or points < 4


@given(st.integers(0, 3000), st.sampled_from(BOUNDARY_OFFSETS))
def test_a_summary_is_framed_exactly_at_the_price_asked(shadowed, offset):
    text = shrink_text(shadowed, offset)
    assert text is None or framed_price(text) == shadowed + offset


PATCHES = {
    # boundary: (bundle, dsh's line, the same line moved by one)
    "pressure threshold": ("@deepseek-ai/dsh-compaction-basic/lib/index.js",
                           "\t\tif (measurement.totalTokens < spec.thresholdTokens) return null;\n\t\tif (prune !== void 0)",
                           " < ", " <= "),
    "prune threshold": ("@deepseek-ai/dsh-compaction-tool-result-pruner/lib/index.js",
                        "if (totalChars <= this.config.thresholdChars) return null;", " <= ", " < "),
    "retention budget": ("@deepseek-ai/dsh-compaction-basic/lib/index.js",
                         "if (accumulated >= retainTokens) break;", " >= ", " > "),
    "meter anchor": ("@deepseek-ai/dsh-token-meter/lib/index.js",
                     "baseline: providerTokens >= estimatedAnchorTokens ? {", " >= ", " > "),
    "overflow budget": ("@deepseek-ai/dsh-compaction-basic/lib/index.js",
                        "if (retries >= policy.maxOverflowRetries) return next();", " >= ", " > "),
    "shrink rule": ("@deepseek-ai/dsh-compaction-basic/lib/index.js",
                    "if (framedSummaryTokenCount >= prepared.shadowedTokenCount) throw", " >= ", " > "),
    "retention threshold": ("@deepseek-ai/dsh-compaction-basic/lib/index.js",
                            "if (retainTokens >= thresholdTokens) throw", " >= ", " > "),
    "context window": ("@deepseek-ai/dsh-compaction-basic/lib/index.js",
                       "|| contextWindow <= 0) throw new TargetPressureConfigError", " <= ", " < "),
}


@pytest.fixture(scope="module")
def dsh_copy(tmp_path_factory) -> Path:
    """One copy of dsh's pinned node_modules (the installed cache is untouched); each test patches one line of it
    and puts it back."""
    from surfacecheck.runtime import dsh

    root = tmp_path_factory.mktemp("dsh-boundaries") / "node_modules"
    shutil.copytree(dsh.ensure_installed(), root, symlinks=False)
    return root


def _verify_level(spec: str, level: str, tmp_path: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "surfacecheck", "verify", "--runtime", spec, "--level", level,
                           "--profile", "ci", "--json", "--no-save", "--trace-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.skipif(shutil.which("node") is None, reason="dsh's code runs in Node")
@pytest.mark.parametrize("boundary", sorted(PATCHES))
def test_dsh_with_one_comparison_moved_by_one_is_caught(dsh_copy, boundary, tmp_path):
    bundle, line, old, new = PATCHES[boundary]
    target = dsh_copy / bundle
    text = target.read_text()
    assert text.count(line) == 1, f"dsh's {bundle} no longer has {line!r}"
    target.write_text(text.replace(line, line.replace(old, new, 1)))
    try:
        report = _verify_level(f"dsh:{dsh_copy}", level_of(boundary), tmp_path)
    finally:
        target.write_text(text)
    (level,) = report["levels"]
    assert report["exit_code"] == 1 and level["violation"]["property"].startswith("lockstep-"), report
