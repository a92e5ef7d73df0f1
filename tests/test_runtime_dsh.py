"""``--runtime dsh``: dsh's own npm code behind the protocol (issue 14).

These tests need Node.js and the pinned packages (installed into the cache on first use by
``surfacecheck.runtime.dsh.ensure_installed``); they are skipped, with the reason, where Node is missing.
The gate is shown able to fail: a copy of dsh's tree with one function broken is caught with a shrunk
trace that replays exit 1 on it and 0 on the pristine tree.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from surfacecheck.runtime import dsh
from surfacecheck.runtime.select import open_runtime, runtime_problem

pytestmark = pytest.mark.skipif(dsh.spec_problem("dsh") is not None, reason=str(dsh.spec_problem("dsh")))

BROKEN_FILE = Path("@deepseek-ai") / "dsh-token-meter" / "lib" / "index.js"
PRISTINE_LINE = "deltaTokens: tokens - claim.tokens,"  # foldSurfaceProjection consumes the shadow price (spec 5.1)
BROKEN_LINE = "deltaTokens: tokens,"  # ... a regression that forgets to subtract it


def run_cli(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "surfacecheck", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def pristine() -> Path:
    return dsh.ensure_installed()


@pytest.fixture(scope="module")
def broken_tree(pristine: Path, tmp_path_factory) -> Path:
    """A copy of the pinned node_modules with foldSurfaceProjection broken (the installed cache is untouched)."""
    root = tmp_path_factory.mktemp("dsh-broken") / "node_modules"
    shutil.copytree(pristine, root, symlinks=False)
    target = root / BROKEN_FILE
    text = target.read_text()
    assert text.count(PRISTINE_LINE) == 1
    target.write_text(text.replace(PRISTINE_LINE, BROKEN_LINE))
    return root


def test_hello_names_the_real_packages(pristine):
    runtime = open_runtime("dsh")
    try:
        hello = runtime.hello()
    finally:
        runtime.close()
    assert hello["protocol"] == "surfacecheck-runtime/1"
    assert "log" in hello["levels"]
    assert hello["modules"] == str(pristine)
    assert hello["versions"]["@deepseek-ai/dsh-session"] == "0.1.0-rc.8"
    assert hello["versions"]["@deepseek-ai/dsh-token-meter"] == "0.1.0-rc.8"


def test_modules_env_and_spelling_choose_the_tree(broken_tree, monkeypatch):
    """SURFACECHECK_DSH_MODULES=DIR and dsh:DIR both run the adapter against DIR (hello reports it)."""
    runtime = open_runtime(f"dsh:{broken_tree}")
    try:
        assert runtime.hello()["modules"] == str(broken_tree)
    finally:
        runtime.close()
    monkeypatch.setenv(dsh.MODULES_ENV, str(broken_tree))
    runtime = open_runtime("dsh")
    try:
        assert runtime.hello()["modules"] == str(broken_tree)
    finally:
        runtime.close()


def test_log_level_agrees_with_the_model(tmp_path):
    """The lockstep at level log against dsh's own code holds (smoke profile; the check stage runs ci)."""
    done = run_cli("verify", "--runtime", "dsh", "--level", "log", "--profile", "smoke", "--seed", "3", "--json",
                   "--no-save", "--trace-dir", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["levels"][0]["steps"] > 100


def test_a_broken_tree_is_caught_with_a_replayable_trace(broken_tree, tmp_path):
    """The gate a dsh engineer relies on: one broken function in surface-projection is found, shrunk, and the
    trace replays exit 1 on the broken tree and exit 0 on the pristine one."""
    env = {dsh.MODULES_ENV: str(broken_tree)}
    done = run_cli("verify", "--runtime", "dsh", "--level", "log", "--profile", "smoke", "--seed", "1", "--json",
                   "--no-save", "--regressions", str(tmp_path / "no-regressions"), "--trace-dir", str(tmp_path),
                   env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    level = report["levels"][0]
    assert level["violation"]["property"] == "lockstep-projection"
    traces = sorted(tmp_path.glob("verify-log-*.jsonl"))
    assert traces, report
    steps = [json.loads(line) for line in traces[0].read_text().splitlines()[1:]]
    assert len(steps) <= 12  # shrunk: reset, a few appends, the claimed replacement
    assert run_cli("replay", str(traces[0]), "--runtime", f"dsh:{broken_tree}").returncode == 1
    assert run_cli("replay", str(traces[0]), "--runtime", "dsh").returncode == 0


def test_bad_modules_folder_is_a_usage_error(tmp_path):
    (tmp_path / "@deepseek-ai").mkdir()
    problem = runtime_problem(f"dsh:{tmp_path}")
    assert problem and "lacks @deepseek-ai/dsh-session" in problem and str(tmp_path) in problem
    done = run_cli("verify", "--runtime", f"dsh:{tmp_path}", "--profile", "smoke")
    assert done.returncode == 2 and "lacks @deepseek-ai/dsh-session" in done.stderr
    assert "Traceback" not in done.stderr
    missing = run_cli("verify", "--runtime", "dsh:/nonexistent/node_modules", "--profile", "smoke")
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_no_node_is_a_usage_error_with_the_install_hint():
    done = run_cli("verify", "--runtime", "dsh", "--profile", "smoke", env={dsh.NODE_ENV: "/nonexistent/node"})
    assert done.returncode == 2, done.stderr
    assert "Node.js" in done.stderr and "Traceback" not in done.stderr


def test_refusals_come_from_dsh(pristine):
    """A spec refusal is dsh's own error: its message text, in the model's family and seq."""
    runtime = open_runtime("dsh")
    try:
        runtime.call("reset", {})
        refused = runtime.call("append", {"event": {"type": "tool/result", "data": {"x": 1},
                                                    "surfaceOp": {"op": "replace", "start": 5, "end": 6}}})
        assert refused["error"]["rule"] == "surface" and refused["error"]["seq"] == 0
        assert refused["error"]["message"] == "surface replace: start seq 5 not found in surface"
        legacy = runtime.call("append", {"event": {"type": "request/header-delta", "data": {}}})
        assert legacy["error"]["rule"] == "session-append"
    finally:
        runtime.close()


def test_the_meter_handed_a_log_answers_as_the_model(pristine):
    """`TokenMeter.measure({events}, header?)` over each handed log (spec 4.2-4.3): dsh fails loud where the model
    does, in the same words, and measures the live session under a header as the model does."""
    from test_model_runtime import check_handed, handed_requests

    from surfacecheck.core.protocol import ProtocolError
    from surfacecheck.runtime.model_runtime import ModelRuntime

    model, runtime = ModelRuntime(), open_runtime("dsh")
    try:
        cases = handed_requests(runtime)
        assert cases == handed_requests(model)
        for kind, args in cases:
            answer = runtime.call("meter_replay", args)
            check_handed(kind, answer)
            assert answer == model.call("meter_replay", args), kind
        for header in (None, dict(cases)["the logged header"].get("header"), {"config": {"provider": "p", "model": "m"}}):
            assert runtime.call("measure", {"header": header}) == model.call("measure", {"header": header})
        with pytest.raises(ProtocolError) as caught:
            runtime.call("meter_replay", {"events": [{"type": "user/message", "seq": 0, "data": {}}]})
        assert caught.value.type == "bad-args"
    finally:
        runtime.close()


def _ctx(tmp_path, runtime="embedded"):
    import io

    from surfacecheck.core.stage import CheckContext

    return CheckContext(runtime=runtime, corpus=None, strict=False, report_dir=tmp_path, err=io.StringIO())


def test_dsh_stage_skips_without_node(tmp_path, monkeypatch):
    from surfacecheck.dsh.stage import stage

    monkeypatch.setenv(dsh.NODE_ENV, "/nonexistent/node")
    result = stage(_ctx(tmp_path))
    assert result.status == "skipped" and "Node.js" in result.text
    assert result.cases[0].skipped is not None


def test_dsh_stage_is_redundant_when_dsh_is_tested(tmp_path):
    from surfacecheck.dsh.stage import stage

    assert stage(_ctx(tmp_path, "dsh")).status == "skipped"


@pytest.mark.slow
def test_dsh_stage_runs_the_lockstep_and_the_witnesses(tmp_path):
    """`check`'s dsh stage: verify at ci profile on every level the adapter serves, then each witness."""
    from surfacecheck.dsh.stage import stage
    from surfacecheck.findings import registry

    result = stage(_ctx(tmp_path))
    assert result.status == "ok", result.text
    levels = [level["level"] for level in result.summary["verify"]["levels"]]
    assert levels[0] == "log" and all(level["steps"] > 0 for level in result.summary["verify"]["levels"])
    rows = result.summary["witnesses"]
    assert {r["id"] for r in rows} == {f.id for f in registry.load()}
    shown = {f.id: (f.shown_on or {}).get("dsh_library") for f in registry.load()}
    assert {r["id"]: r["reproduces"] for r in rows} == shown  # the registry says where each finding is shown


@pytest.mark.slow
def test_drift_dsh_session_0_1_1_rc_2_at_the_log_level(tmp_path):
    """Issue 14 point 6: the log-level lockstep with dsh-session 0.1.1-rc.2 in the pinned tree. Its bundle
    is byte-identical to 0.1.0-rc.8's (only README, package.json peer ranges differ), so the lockstep holds."""
    from surfacecheck.runtime.dsh_drift import drift_tree

    tree = drift_tree("dsh-session@0.1.1-rc.2")
    manifest = json.loads((tree / "@deepseek-ai" / "dsh-session" / "package.json").read_text())
    assert manifest["version"] == "0.1.1-rc.2"
    pinned = dsh.ensure_installed() / "@deepseek-ai" / "dsh-session" / "lib" / "index.js"
    assert (tree / "@deepseek-ai" / "dsh-session" / "lib" / "index.js").read_bytes() == pinned.read_bytes()
    done = run_cli("verify", "--runtime", f"dsh:{tree}", "--level", "log", "--profile", "smoke", "--seed", "5",
                   "--json", "--no-save", "--trace-dir", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
