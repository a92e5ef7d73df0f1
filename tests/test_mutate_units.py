"""The gate's shortcuts change the cost of a unit, never its verdict (issue 16; docs/mutate.md).

- verify's examples, recorded once on the model at the gate's seed, are exactly the examples verify's machines
  run against dsh (and the embedded runtime): same steps, in order.
- a log replayed in one ``replay`` round trip gives ``compare_log``'s verdict: none on dsh's pristine tree, the
  same first divergence (seq and op) on a tree with a regression.
- a unit's pristine recording passes it on a runtime that answers the same, and on any other sends it down its
  full path: it never passes a unit the full run fails.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from surfacecheck.mutate import units
from surfacecheck.runtime import dsh
from surfacecheck.runtime.embedded.stage import compare_log, log_paths
from surfacecheck.runtime.select import open_runtime
from surfacecheck.runtime.stage import _tools_template_divergence
from surfacecheck.verify.replay import ensure_variants
from surfacecheck.verify.runner import run_level

needs_dsh = pytest.mark.skipif(dsh.spec_problem("dsh") is not None, reason=str(dsh.spec_problem("dsh")))


def examples_run_against(spec: str, level: str, profile: str) -> list:
    ensure_variants()
    runtime, reference, steps = open_runtime(spec), open_runtime("model"), []
    try:
        result = run_level(runtime, reference, level, profile, units.SEED, shrink=False, record=steps)
    finally:
        runtime.close()
        reference.close()
    assert result.status == "ok", result.to_json()
    return steps


@needs_dsh
@pytest.mark.parametrize("level", ["log", "compaction", "policy"])
def test_recorded_examples_are_the_examples_verify_runs_on_dsh(level):
    recorded = units.recorded_examples("smoke")[level]
    assert recorded and sum(len(s) for s in recorded) > 100
    assert examples_run_against("dsh", level, "smoke") == recorded


def test_recorded_examples_are_the_examples_verify_runs_on_embedded_at_the_ci_profile():
    assert examples_run_against("embedded", "log", "ci") == units.recorded_examples("ci")["log"]


@pytest.fixture(scope="module")
def broken_tree(tmp_path_factory) -> Path:
    if dsh.spec_problem("dsh"):
        pytest.skip(str(dsh.spec_problem("dsh")))
    root = tmp_path_factory.mktemp("broken") / "node_modules"
    shutil.copytree(dsh.ensure_installed(), root, symlinks=False)
    bundle = root / "@deepseek-ai" / "dsh-token-meter" / "lib" / "index.js"
    text = bundle.read_text(encoding="utf-8")
    bundle.write_text(text.replace("deltaTokens: tokens - claim.tokens,", "deltaTokens: tokens,"), encoding="utf-8")
    return root


@needs_dsh
@pytest.mark.parametrize("tree", ["pristine", "broken"])
def test_one_round_trip_replay_gives_compare_logs_verdict(tree, broken_tree, monkeypatch):
    monkeypatch.setenv("SURFACECHECK_MUTATE", "1")  # the adapter's replay op
    spec = "dsh" if tree == "pristine" else f"dsh:{broken_tree}"
    corpus = Path(__file__).resolve().parents[2] / "shared" / "corpus"
    paths = [p for _, p in log_paths(corpus if corpus.is_dir() else None)][::6]
    runtime = open_runtime(spec)
    try:
        def fresh():
            runtime.call("reset", {})
            return runtime
        verdicts = [(path, compare_log(path, fresh), units.replay_divergence(path, runtime)) for path in paths]
        one_by_one = [units.replay_divergence(path, runtime, batched=False) for path in paths]
    finally:
        runtime.close()
    key = (lambda d: None if d is None else (d.get("seq"), d["op"]))
    assert [key(a) for _, a, _ in verdicts] == [key(b) for _, _, b in verdicts] == [key(c) for c in one_by_one]
    unexplained = [path for path, a, _ in verdicts if a is not None and not _tools_template_divergence(
        {"source": path.parent.name, "log": path.name, **a}, path.parents[1])]
    assert not unexplained if tree == "pristine" else unexplained


@needs_dsh
def test_a_pristine_recording_passes_only_what_the_full_run_passes(broken_tree, monkeypatch):
    from surfacecheck.mutate.gate import Worker
    from surfacecheck.mutate.pristine import shortcut

    monkeypatch.setenv("SURFACECHECK_MUTATE", "1")
    chosen = [u for u in units.gate_units(units.STAGES, None) if not u.id.startswith("log:")]
    args = {"timeout": 10.0, "corpus": None, "verify_profile": "smoke"}
    worker = Worker(chosen, {"spec": "dsh", **args})
    try:
        prepared = worker.prepare()
        assert prepared["recorded"] == len(chosen), prepared["not_recorded"]  # every witness, protocol and verify
        recordings = worker.recordings
    finally:
        worker.close()
    for spec in ("dsh", f"dsh:{broken_tree}"):
        shared = units.Shared(spec=spec, collect=False, **args)
        try:
            verdicts = [(shortcut(recordings[u.id], shared), u.run(shared).status) for u in chosen]
        finally:
            shared.close()
        if spec == "dsh":  # another process, the same answers: every unit passes in one round trip
            assert all(fast is not None and fast.status == units.PASSED for fast, _ in verdicts)
        else:
            assert all(full == units.PASSED for fast, full in verdicts if fast is not None)
            assert any(fast is None and full == units.FAILED for fast, full in verdicts)
