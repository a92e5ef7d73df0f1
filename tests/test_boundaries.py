"""Boundaries drawn on purpose: the policy machine puts the pressure total one below, on and one above the
threshold (spec 9.2: below is ``total < threshold``) before the pressure listener runs.

Random prompts almost never land a total exactly on the threshold, so a comparison moved by one (``<=`` for
``<``) changes behaviour in no example the generators drew: measured on this machine, the ``ci`` policy level
passes such a runtime without the boundary rule. Here: the three cases are reached at the ``ci`` profile, the
correct runtime passes, and the runtime with the comparison flipped (the seeded bug ``threshold-inclusive``,
``tests/seeded_bugs/policy_bugs.py``) is caught with a short trace.
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
from surfacecheck.properties.stateful.policy import BOUNDARY_OFFSETS
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


def test_the_threshold_is_reached_one_below_on_and_one_above_at_the_ci_profile():
    result = run_level(EmbeddedRuntime(), ModelRuntime(), "policy", "ci", CI_SEED)
    assert result.violation is None and result.unavailable is None
    for offset in BOUNDARY_OFFSETS:
        assert result.operations.get(f"boundary pressure threshold {offset:+d}", 0) >= 1, result.operations


def test_a_threshold_comparison_moved_by_one_is_caught_at_the_ci_profile():
    result = run_level(BUGS["threshold-inclusive"].runtime(), ModelRuntime(), "policy", "ci", CI_SEED)
    assert result.violation is not None and result.violation.property == "lockstep-result"
    labels = [step.label for step in result.trace_steps]
    assert any("threshold +0" in label for label in labels), labels


PRESSURE_FILE = "@deepseek-ai/dsh-compaction-basic/lib/index.js"
PRESSURE_LINE = "\t\tif (measurement.totalTokens < spec.thresholdTokens) return null;\n\t\tif (prune !== void 0)"


@pytest.fixture(scope="module")
def threshold_inclusive_dsh(tmp_path_factory) -> Path:
    """A copy of dsh's pinned node_modules whose pressure listener treats a total on the threshold as below it
    (the first of its `totalTokens < thresholdTokens` checks made `<=`; the installed cache is untouched)."""
    from surfacecheck.runtime import dsh

    root = tmp_path_factory.mktemp("dsh-threshold") / "node_modules"
    shutil.copytree(dsh.ensure_installed(), root, symlinks=False)
    target = root / PRESSURE_FILE
    text = target.read_text()
    assert text.count(PRESSURE_LINE) == 1
    target.write_text(text.replace(PRESSURE_LINE, PRESSURE_LINE.replace(" < ", " <= ")))
    return root


def _verify_policy(spec: str, tmp_path: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "surfacecheck", "verify", "--runtime", spec, "--level", "policy",
                           "--profile", "ci", "--json", "--no-save", "--trace-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.skipif(shutil.which("node") is None, reason="dsh's code runs in Node")
def test_dsh_with_its_threshold_comparison_moved_by_one_is_caught(threshold_inclusive_dsh, tmp_path):
    report = _verify_policy(f"dsh:{threshold_inclusive_dsh}", tmp_path)
    (level,) = report["levels"]
    assert report["exit_code"] == 1 and level["violation"]["property"] == "lockstep-result", report
    assert "threshold +0" in level["violation"]["message"] or any(
        "threshold +0" in line for line in Path(report["traces"][0]).read_text().splitlines()[-3:])
