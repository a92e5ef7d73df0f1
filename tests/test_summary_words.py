"""check's, audit's and verify's summaries say what happened: one word for a skipped stage, no "every stage"
when one was skipped, unreached witnesses and a missing corpus under CI said out loud, counted nouns in the right
number, the step numbers of the trace written, known errors set aside, no absolute path of a machine committed."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from surfacecheck import scenarios
from surfacecheck.audit.findings import AuditIssue
from surfacecheck.audit.format import human
from surfacecheck.audit.run import AuditReport, LogAudit
from surfacecheck.check import format_human
from surfacecheck.cli import main
from surfacecheck.core.stage import CheckContext
from surfacecheck.core.words import count
from surfacecheck.reports.stage_lines import stage_line
from surfacecheck.stages import CAPABILITY_STAGES, verdict_line

ROOT = Path(__file__).resolve().parents[1]


def test_a_skipped_stage_says_skipped_once_and_why():
    from surfacecheck.mutate.stage import stage

    result = stage(CheckContext(runtime="embedded", corpus=None, strict=False, report_dir=Path("."), err=None))
    line = stage_line("mutate", {"status": result.status, "summary": result.summary})
    assert line.startswith("(opt-in: run with --only mutate") and "skipped" not in line


def _report(statuses: dict[str, str], verdict: str = "held") -> dict:
    return {"verdict": verdict, "exit_code": 0 if verdict == "held" else 1, "logs_verdict": "held",
            "stages": {name: {"status": status, "seconds": 0.0, "summary": {}} for name, status in statuses.items()}}


def test_all_held_names_every_stage_only_when_every_stage_ran():
    every = _report({name: "ok" for name in CAPABILITY_STAGES})
    assert verdict_line(every) == "ALL HELD: logs and every stage (exit 0)"
    some = _report({**{name: "ok" for name in CAPABILITY_STAGES[:-1]}, "mutate": "skipped"})
    line = verdict_line(some)
    assert "every stage" not in line and line.endswith("; skipped: mutate (exit 0)")
    assert f"{len(CAPABILITY_STAGES)} stages ran (logs, runtime," in line
    chosen = verdict_line(_report({"audit": "ok"}))
    assert chosen.startswith("ALL HELD: 2 stages ran (logs, audit); not selected: runtime, verify")
    failed = verdict_line(_report({"audit": "violation", "mutate": "skipped"}, "violated"))
    assert failed.startswith("VIOLATED (audit); skipped: mutate")


def _summary(**extra) -> str:
    report = {"version": "0", "runtime": "embedded", "corpus": None, "verdict": "held", "exit_code": 0,
              "summary": {"total": {"logs": 1, "violations": 0, "violated": 0, "inconclusive": 0}},
              "violations": [], **extra}
    return format_human(report, [], [], verbose=False)


def test_the_summary_counts_in_the_right_number_and_names_unreached_witnesses():
    text = _summary(coverage={"sometimes_unreached": ["overflow-retry"]})
    assert "ALL HELD: 1 log, no violation" in text
    assert "coverage: 1 sometimes-witness never reached: overflow-retry" in text
    assert count(1, "warning") == "1 warning" and count(2, "warning") == "2 warnings"
    assert count(2, "sometimes-witness", "sometimes-witnesses") == "2 sometimes-witnesses"


def _one_scenario(tmp_path: Path) -> Path:
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(sorted(scenarios.LOGS_DIR.glob("*.jsonl"))[0], folder)
    return folder


@pytest.mark.parametrize("ci", ["1", ""])
def test_no_corpus_under_ci_is_a_warning_line(ci, tmp_path, monkeypatch, capsys):
    from surfacecheck import check

    monkeypatch.setattr(check, "corpus_root", lambda: None)
    monkeypatch.setattr(check.scenarios, "LOGS_DIR", _one_scenario(tmp_path))
    monkeypatch.setenv("CI", ci)
    code = main(["check", "--only", "logs", "--no-coverage", "--report-dir", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert code == 0 and "corpus=(none found)" in out
    assert ("WARNING: CI is set but no corpus was found" in out) is bool(ci)
    assert ("warning: no corpus found" in err) is bool(ci)


def test_audit_says_when_known_errors_were_set_aside():
    issue = AuditIssue("seq-contiguity", 3, "a seq repeated", known="a fixture dsh cannot load either")
    log = LogAudit("dsh-sessions/x.jsonl", 5, (1, 2), 0, [], [issue, issue])
    text = human(AuditReport(logs=[log]))
    assert "audit: 1 log, 0 errors (2 known set aside), 0 warnings" in text
    assert "--strict counts them" in text
    assert "audit: 1 log, 2 errors, 0 warnings" in human(AuditReport(logs=[log], strict=True))


def test_verify_names_the_steps_of_the_trace_it_wrote(tmp_path, capsys):
    from surfacecheck.core.trace import read_trace

    code = main(["verify", "--runtime", "embedded:off-by-one-cut", "--level", "log", "--profile", "smoke",
                 "--no-save", "--seed", "1", "--trace-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1, out
    step, of = map(int, re.search(r"at step (\d+) of (\d+)", out).groups())
    written = read_trace(next(tmp_path.glob("verify-log-*.jsonl")))
    assert of == len(written.steps) and 1 <= step <= of


def test_no_committed_file_outside_tests_names_an_absolute_path_of_a_machine():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not files:
        pytest.skip("not a git checkout")
    pattern = re.compile(r"(?<![\w.])/(?:work|root|tmp|home/\w+)/")
    found = [name for name in files if not name.startswith("tests/") and (ROOT / name).is_file()
             and pattern.search((ROOT / name).read_text(encoding="utf-8", errors="ignore"))]
    assert found == []
