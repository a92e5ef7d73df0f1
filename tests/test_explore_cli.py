"""`surfacecheck explore` on the command line and as a `check` stage."""
from __future__ import annotations

import io
import json
from pathlib import Path

from surfacecheck.cli import main
from surfacecheck.explore.stage import stage
from surfacecheck.core.stage import CheckContext
from surfacecheck.core.trace import read_trace


def _run(capsys, *argv):
    code = main(["explore", *argv])
    out = capsys.readouterr().out
    return code, out


def test_json_report_of_a_clean_run(capsys):
    code, out = _run(capsys, "--events", "3", "--tool-pairs", "1", "--compactions", "1", "--json")
    report = json.loads(out)
    assert code == 0 and report["verdict"] == "ok" and report["exit_code"] == 0
    for key in ("states", "edges", "depth", "states_per_second", "seconds", "invariants", "progress", "violations"):
        assert key in report
    assert report["states"] > 100 and report["depth"] > 5
    assert report["bounds"] == {"events": 3, "tool_pairs": 1, "compactions": 1, "max_seq": None}


def test_human_report_prints_the_shortest_trace_and_writes_it(capsys, tmp_path):
    code, out = _run(capsys, "--events", "2", "--tool-pairs", "0", "--compactions", "1",
                     "--variant", "no-shrink-rule", "--trace-dir", str(tmp_path))
    assert code == 1
    assert "VIOLATION summaries-smaller" in out and "prompt:U step:good reply:A manual:big" in out
    trace = read_trace(tmp_path / "explore-no-shrink-rule-summaries-smaller.jsonl")
    assert trace.property == "summaries-smaller" and trace.violation is not None
    assert [s.op for s in trace.steps][:2] == ["reset", "configure"] and trace.steps[-1].op == "manual_compact"


def test_usage_errors_exit_2(capsys):
    assert main(["explore", "--variant", "no-such-bug"]) == 2
    assert main(["explore", "--no-symmetry", "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["exit_code"] == 2 and "--max-seq" in doc["error"]


def test_list_variants(capsys):
    code, out = _run(capsys, "--list-variants", "--json")
    names = {row["name"] for row in json.loads(out)}
    assert code == 0 and {"retry-without-progress", "never-reemit-runtime-context"} <= names


def test_check_stage_holds_and_catches_every_control(tmp_path, monkeypatch):
    import surfacecheck.explore.stage as module
    from surfacecheck.explore.world import Bounds

    monkeypatch.setattr(module, "STAGE_BOUNDS", Bounds(3, 1, 1))  # the real stage runs (4, 2, 1)
    result = stage(CheckContext("model", None, False, Path(tmp_path), io.StringIO()))
    assert result.status == "ok", result.text
    assert result.summary["model"]["verdict"] == "ok"
    assert all(c["caught"] for c in result.summary["controls"].values())
    assert len(result.cases) == 1 + len(result.summary["controls"])
