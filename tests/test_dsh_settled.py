"""Settled dsh divergences (``runtimes/dsh/DIVERGENCES.md``): each trace replays clean on dsh's own code and on
both reference runtimes, so the settled behaviour is pinned where it was found.

D5: a `/compact` whose caller cancels the summary. dsh-commands' executor stops awaiting the handler the moment the
caller's signal aborts (`withAbort`) and writes `command/done`; compactNow's task goes on and writes its error
`compaction/end` after it. The adapter waits for the handler to settle; the model writes the same order.

D7: a `/compact` on a log whose token meter is stuck (spec 4.2). The handler throws inside compactNow's task;
command-compact rethrows it, the executor writes `command/done {kind: 'error', text: <message>}` and rejects. The
model used to refuse the whole op (nothing written); it now writes what dsh writes.

D8: a `/compact` whose summary the user cancels through the agent (`agent-cancel`: ReactLoopAgent.cancel aborts the
maintenance signal): `cancelled`, the close before `command/done`. The adapter used to abort the caller's signal.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from surfacecheck.runtime import dsh

TRACES = Path(__file__).resolve().parents[1] / "runtimes" / "dsh" / "traces"
D5 = TRACES / "d5-manual-compact-cancel-no-close.jsonl"
D7 = TRACES / "d7-manual-compact-stuck-meter.jsonl"
D8 = TRACES / "d8-manual-compact-agent-cancel.jsonl"
D9 = TRACES / "d9-pressure-listener-stuck-meter.jsonl"
D10 = TRACES / "d10-overflow-listener-stuck-meter.jsonl"
D11 = TRACES / "d11-compaction-meter-failure-class.jsonl"
D12 = TRACES / "d12-auto-false-overflow-count.jsonl"
D13 = TRACES / "d13-unrouted-summary-target.jsonl"
needs_dsh = pytest.mark.skipif(dsh.spec_problem("dsh") is not None, reason=str(dsh.spec_problem("dsh")))


def replay(trace: Path, runtime: str) -> tuple[int, dict]:
    done = subprocess.run([sys.executable, "-m", "surfacecheck", "replay", str(trace), "--runtime", runtime, "--json"],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ), check=False)
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}


def variant(tmp_path: Path, outcome: str) -> Path:
    """The D5 trace with another summary outcome at its `/compact` (and no recorded violation)."""
    lines = [json.loads(line) for line in D5.read_text().splitlines() if line.strip()]
    kept = [line for line in lines if "violation" not in line]
    kept[-1]["args"]["summary"] = {"outcome": outcome}
    path = tmp_path / f"d5-{outcome}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in kept))
    return path


def recorded_expectation() -> list[str]:
    lines = [json.loads(line) for line in D5.read_text().splitlines() if line.strip()]
    return next(line["violation"] for line in lines if "violation" in line)["observed"]["appended"]


def test_d5_trace_records_what_the_adapter_used_to_report():
    """The trace keeps the unsettled observation: the adapter stopped recording when the executor rejected."""
    assert recorded_expectation() == ["command/run", "compaction/start", "command/done"]


@pytest.mark.parametrize("trace", [D5, D7, D8, D9, D10, D11, D12, D13],
                         ids=["D5", "D7", "D8", "D9", "D10", "D11", "D12", "D13"])
@pytest.mark.parametrize("runtime", ["model", "embedded", pytest.param("dsh", marks=needs_dsh)])
def test_settled_traces_replay_clean(trace, runtime):
    code, report = replay(trace, runtime)
    assert code == 0, report


@needs_dsh
def test_d5_dsh_closes_after_command_done(tmp_path):
    """On dsh the late cancel (the summarizer answers after the abort) also writes `command/done` first; the
    bracket is closed in the same op, so no lock is left behind."""
    from surfacecheck.runtime.select import open_runtime

    runtime = open_runtime("dsh")
    try:
        runtime.hello()
        lines = [json.loads(line) for line in D5.read_text().splitlines() if line.strip()]
        steps = [line for line in lines if "op" in line]
        for step in steps[:-1]:
            runtime.call(step["op"], step["args"])
        for outcome in ("cancel", "late-cancel"):
            result = runtime.call("manual_compact", {"summary": {"outcome": outcome}})
            assert result["appended"] == ["command/run", "compaction/start", "command/done", "compaction/end"]
            assert result["code"] == "aborted"
        events = runtime.call("events", {})["events"]
    finally:
        runtime.close()
    closes = [event for event in events if event["type"] == "compaction/end"]
    assert len(closes) == 2 and all("error" in event["data"] for event in closes)  # error closes, lock released
    assert closes[0]["data"]["error"] == "This operation was aborted"


@pytest.mark.parametrize("runtime", ["model", pytest.param("dsh", marks=needs_dsh)])
def test_d5_late_cancel_variant_replays_clean(runtime, tmp_path):
    code, report = replay(variant(tmp_path, "late-cancel"), runtime)
    assert code == 0, report


def test_d7_the_model_writes_the_executors_error_settlement():
    from surfacecheck.runtime.model_runtime import ModelRuntime

    runtime = ModelRuntime()
    steps = [json.loads(line) for line in D7.read_text().splitlines() if line.strip() and '"op"' in line]
    for step in steps[:-1]:
        runtime.call(step["op"], step["args"])
    result = runtime.call(steps[-1]["op"], steps[-1]["args"])
    assert result["appended"] == ["command/run", "command/done"]
    assert (result["kind"], result["code"]) == ("error", "aborted")  # the executor rejected: the protocol's `aborted`
    done = runtime.call("events", {"from": 1})["events"][-1]
    assert done["data"]["text"] == result["text"] == "token meter: step/end at seq 0 has no matching step/start event"
