"""``check`` on a conversation-level runtime: the stages that apply (contract, findings, bench) run, every other stage
and the logs say why not; a run where nothing applicable ran is inconclusive, never a pass. The bench's growth
reading tells a constant meter from a linear recount. The minimizer makes a witness smaller and keeps its promise."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from surfacecheck.contract import bench_stage
from surfacecheck.contract.minimize import minimize, replay, size
from surfacecheck.contract import promises
from surfacecheck.core.trace import Step
from surfacecheck.runtime.registry import open_spec, serves_conversation
from surfacecheck.stages import CONVERSATION_STAGES, not_applicable


def surfacecheck(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "surfacecheck", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_the_conversation_runtimes_are_told_apart_from_the_log_runtimes():
    assert serves_conversation("langchain") and serves_conversation("strands") and serves_conversation("reference")
    assert serves_conversation("reference:orphan-cut") or serves_conversation("reference:anything")
    assert not serves_conversation("embedded") and not serves_conversation("dsh")


@pytest.mark.parametrize("stage", ["logs", "runtime", "audit", "verify", "dsh", "prove", "explore", "e2e", "mutate"])
def test_a_log_stage_says_why_it_does_not_apply_to_langchain(stage):
    why = not_applicable(stage, "langchain")
    assert why and why.startswith("not applicable:") and "conversation level" in why


def test_the_contract_stage_says_why_it_does_not_apply_to_embedded():
    assert "not applicable" in not_applicable("contract", "embedded")
    assert all(not_applicable(name, "strands") is None for name in CONVERSATION_STAGES)


def test_nothing_applicable_ran_is_inconclusive(tmp_path):
    done = surfacecheck("check", "--runtime", "reference", "--only", "audit,prove", "--json", "--report-dir",
                        str(tmp_path))
    report = json.loads(done.stdout)
    assert done.returncode == 3 and report["verdict"] == "inconclusive", done.stderr[-1500:]
    assert {row["status"] for row in report["stages"].values()} == {"skipped"}
    assert "not applicable" in report["stages"]["audit"]["summary"]["skipped"]


def test_check_on_the_reference_runs_the_contract_findings_and_bench_and_holds(tmp_path):
    done = surfacecheck("check", "--runtime", "reference", "--only", "contract,findings,bench,audit", "--json",
                        "--report-dir", str(tmp_path))
    report = json.loads(done.stdout)
    stages = report["stages"]
    assert stages["contract"]["status"] == "ok", done.stderr[-2000:]
    rows = stages["contract"]["summary"]["promises"]
    assert len(rows) == 13 and all(r["verdict"] == "held" for r in rows)
    assert stages["audit"]["status"] == "skipped"
    assert report["logs_not_applicable"]
    assert "The compaction contract on reference" in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_check_on_a_broken_variant_fails_with_a_new_finding_drawn_in_the_report(tmp_path):
    done = surfacecheck("check", "--runtime", "reference:orphan-cut", "--only", "contract", "--json",
                        "--report-dir", str(tmp_path))
    report = json.loads(done.stdout)
    contract = report["stages"]["contract"]["summary"]
    assert done.returncode == 1 and "contract-no-orphan-created" in contract["new"], done.stderr[-2000:]
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "<b>NEW</b>" in html and 'class="conversation"' in html


def test_the_growth_reading_tells_constant_from_linear():
    sizes = (100, 1000, 10000)
    assert bench_stage.growth([(n, 1e-6) for n in sizes]) == "constant"
    assert bench_stage.growth([(n, n * 1e-8) for n in sizes]) == "linear"
    assert bench_stage.growth([(n, n * n * 1e-12) for n in sizes]) == "superlinear"


def test_minimize_cuts_a_long_witness_to_the_messages_its_promise_needs():
    runtime = open_spec("reference:orphan-cut", 10)
    try:
        history = []
        for i in range(8):
            history += [{"role": "user", "text": f"question {i}"}, {"role": "assistant", "text": f"answer {i}"}]
        steps = [Step("open", {"settings": {"trigger_tokens": 200, "keep_tokens": 60}, "history": history}),
                 Step("turn", {"user": "go", "replies": [
                     {"calls": [{"id": "c1", "name": "fetch", "args": {"size": 600, "tag": "t1"}}]},
                     {"calls": [{"id": "c2", "name": "fetch", "args": {"size": 600, "tag": "t2"}}]}]})]
        witness = replay(runtime, "reference:orphan-cut", "anthropic", steps, "contract-no-orphan-created",
                         promises.judge)
        assert witness is not None
        smaller, runs = minimize(runtime, "reference:orphan-cut", "anthropic", witness, promises.judge)
    finally:
        runtime.close()
    assert size(smaller) < size(witness) and smaller.messages < witness.messages and runs > 0
    assert smaller.breach.promise == "contract-no-orphan-created"
    again = open_spec("reference:orphan-cut", 10)
    try:
        assert replay(again, "reference:orphan-cut", "anthropic", smaller.steps, "contract-no-orphan-created",
                      promises.judge) is not None
    finally:
        again.close()
