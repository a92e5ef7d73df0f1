"""The command line and `surfacecheck check`'s outputs (exit codes, JSON report, JUnit XML)."""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest

from surfacecheck import check as check_mod
from surfacecheck.core import corpus as corpus_mod
from surfacecheck.check import Runtime, run_check
from surfacecheck.cli import main

REPO_ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "surfacecheck", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )


# -- help and usage ------------------------------------------------------------------------------


def test_top_level_help_lists_check_and_exit_codes():
    proc = run_cli("--help")
    assert proc.returncode == 0, proc.stderr
    assert "check" in proc.stdout
    for code in ("0  every check held", "1  a violation was found", "2  bad input or usage", "3  inconclusive"):
        assert code in proc.stdout


def test_check_help_explains_options_runtimes_and_exit_codes():
    proc = run_cli("check", "--help")
    assert proc.returncode == 0, proc.stderr
    for text in ("--runtime", "--json", "--report-dir", "--corpus", "SURFACECHECK_CORPUS", "cmd:COMMAND", "(default: embedded)",
                 "exit codes"):
        assert text in " ".join(proc.stdout.split())


def test_no_command_is_a_usage_error():
    proc = run_cli()
    assert proc.returncode == 2
    assert "usage:" in proc.stderr


@pytest.mark.parametrize(
    ("runtime", "message"),
    [
        ("bogus", "unknown runtime 'bogus'"),
        ("nodel", "unknown runtime 'nodel'"),
        ("cmd:", "needs a command"),
    ],
)
def test_unavailable_runtime_exits_2_with_a_message(tmp_path, runtime, message):
    proc = run_cli("check", "--runtime", runtime, "--report-dir", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert message in proc.stderr
    assert proc.stdout == ""
    assert not (tmp_path / "out").exists()


def test_run_check_rejects_a_bad_runtime_directly():
    out, err = io.StringIO(), io.StringIO()
    assert run_check("bogus", json_out=True, out=out, err=err) == 2
    assert json.loads(out.getvalue())["verdict"] == "error"
    assert "unknown runtime 'bogus'" in err.getvalue()


def test_missing_corpus_directory_exits_2(tmp_path):
    proc = run_cli("check", "--corpus", str(tmp_path / "nowhere"), "--report-dir", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "does not exist" in proc.stderr


def test_bad_env_corpus_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SURFACECHECK_CORPUS", str(tmp_path / "nowhere"))
    with pytest.raises(corpus_mod.CorpusError, match="SURFACECHECK_CORPUS"):
        corpus_mod.corpus_root()


def test_no_scenario_logs_exits_2(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    code = run_check("model", tmp_path / "out", True, _tiny_corpus(tmp_path), scenario_dir=tmp_path / "empty", out=out, err=err)
    assert code == 2
    assert "no scenario logs" in err.getvalue()
    assert json.loads(out.getvalue())["exit_code"] == 2


# -- a tiny input through a fake runtime (no dependency on model/) -------------------------------


def _write_log(path: Path, events: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [{"type": "session", "version": 0, "id": path.stem, "createdAt": 0}, *events]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _message(seq: int, kind: str = "user/message") -> dict:
    return {"type": kind, "seq": seq, "time": 0, "data": {}, "surfaceOp": "append"}


def _tiny_corpus(tmp_path: Path, expected_surface: list[int] | None = None) -> Path:
    root = tmp_path / "corpus"
    _write_log(root / "dsh-sessions" / "a__session.jsonl", [_message(0), _message(1, "assistant/message")])
    _write_log(root / "dsh-generated" / "01-tiny.jsonl", [_message(0), _message(1, "assistant/message")])
    expected = [{"file": "01-tiny.jsonl", "surface_nodes": expected_surface or [0, 1], "generation": 0, "replacements": []}]
    (root / "dsh-generated" / "expected.json").write_text(json.dumps(expected), encoding="utf-8")
    return root


class FakeModelError(Exception):
    def __init__(self, message, seq=None, rule="fake"):
        super().__init__(message)
        self.message, self.seq, self.rule = message, seq, rule


def _fake_read_log(path):
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return SimpleNamespace(path=str(path), header=json.loads(lines[0]), events=tuple(json.loads(x) for x in lines[1:]), torn_tail=False)


def _fake_replay(events):
    error = None
    if any(e["type"] == "boom" for e in events):
        error = FakeModelError("boom event", seq=next(e["seq"] for e in events if e["type"] == "boom"), rule="surface")
    return SimpleNamespace(
        events=len(events),
        surface_nodes=tuple(e["seq"] for e in events if e.get("surfaceOp") == "append"),
        generation=0,
        replacements=(),
        projection_total=10 * len(events),
        recount_total=10 * len(events),
        fully_metered=True,
        error=error,
    )


@pytest.fixture
def fake_runtime(monkeypatch):
    monkeypatch.setattr(check_mod, "load_runtime", lambda name: Runtime(_fake_read_log, _fake_replay, FakeModelError))


def test_check_writes_json_and_junit_on_a_tiny_input(tmp_path, fake_runtime):
    scenario_dir = tmp_path / "scenarios"
    _write_log(scenario_dir / "s1.jsonl", [_message(0)])
    out, err = io.StringIO(), io.StringIO()
    code = run_check("model", tmp_path / "out", True, _tiny_corpus(tmp_path), scenario_dir=scenario_dir, stages=(), out=out, err=err)
    assert code == 0, out.getvalue()
    report = json.loads(out.getvalue())  # exactly one JSON document on stdout
    assert report["verdict"] == "held" and report["exit_code"] == 0
    assert report["summary"]["total"]["logs"] == 3
    assert [log["name"] for log in report["logs"]] == [
        "scenarios/s1.jsonl", "dsh-sessions/a__session.jsonl", "dsh-generated/01-tiny.jsonl",
    ]
    generated = report["logs"][2]
    assert generated["expected_checked"] and generated["projection_matches"] and generated["surface_size"] == 2
    assert json.loads((tmp_path / "out" / "report.json").read_text()) == report
    suite = ET.parse(tmp_path / "out" / "junit.xml").getroot().find("testsuite")
    assert suite.get("tests") == "4" and suite.get("failures") == "0"  # the logs and the sometimes-witnesses
    assert [case.get("name") for case in suite.iter("testcase")] == [log["name"] for log in report["logs"]] + [
        "sometimes-witnesses"]
    assert "[3/3]" in err.getvalue()  # progress on stderr


def test_check_reports_violations_with_exit_1(tmp_path, fake_runtime):
    scenario_dir = tmp_path / "scenarios"
    _write_log(scenario_dir / "bad.jsonl", [_message(0), {"type": "boom", "seq": 1, "time": 0, "data": {}}])
    out, err = io.StringIO(), io.StringIO()
    corpus = _tiny_corpus(tmp_path, expected_surface=[1, 0])
    code = run_check("model", tmp_path / "out", False, corpus, scenario_dir=scenario_dir, stages=(), out=out, err=err)
    assert code == 1
    text = out.getvalue()
    assert "VIOLATED" in text and "(exit 1)" in text
    assert "scenarios/bad.jsonl seq 1 [surface] boom event" in text
    assert "[expected-surface]" in text
    cases = {c.get("name"): c for c in ET.parse(tmp_path / "out" / "junit.xml").getroot().iter("testcase")}
    assert cases["scenarios/bad.jsonl"].find("failure").get("type") == "surface"
    assert cases["dsh-generated/01-tiny.jsonl"].find("failure") is not None
    assert cases["dsh-sessions/a__session.jsonl"].find("failure") is None


def test_check_cli_main_uses_run_check(tmp_path, fake_runtime, monkeypatch, capsys):
    scenario_dir = tmp_path / "scenarios"
    _write_log(scenario_dir / "s1.jsonl", [_message(0)])
    monkeypatch.setattr(check_mod.scenarios, "LOGS_DIR", scenario_dir)
    code = main(["check", "--only", "logs", "--json", "--report-dir", str(tmp_path / "out"), "--corpus", str(_tiny_corpus(tmp_path))])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["runtime"] == "embedded"  # the default


# -- corpus helpers ------------------------------------------------------------------------------


def test_corpus_helpers_on_a_tiny_corpus(tmp_path):
    root = _tiny_corpus(tmp_path)
    (root / "dsh-generated" / "policies").mkdir()
    (root / "dsh-generated" / "policies" / "01-tiny.json").write_text('{"retainTokens": 7}')
    assert [p.name for p in corpus_mod.session_logs(root)] == ["a__session.jsonl"]
    assert [p.name for p in corpus_mod.generated_logs(root)] == ["01-tiny.jsonl"]
    assert set(corpus_mod.generated_expected(root)) == {"01-tiny.jsonl"}
    for name in ("01-tiny", "01-tiny.jsonl", "01-tiny.json"):
        assert corpus_mod.generated_policy(name, root) == {"retainTokens": 7}
    with pytest.raises(corpus_mod.CorpusError):
        corpus_mod.generated_policy("02-missing", root)


def test_shared_corpus_is_complete(corpus):
    assert len(corpus_mod.session_logs(corpus)) == 159
    generated = corpus_mod.generated_logs(corpus)
    assert len(generated) == 10
    expected = corpus_mod.generated_expected(corpus)
    assert sorted(expected) == [p.name for p in generated]
    assert corpus_mod.generated_policy("01-prune.jsonl", corpus)["contextWindow"] > 0


# -- the real model on a tiny input --------------------------------------------------------------


def test_check_with_the_model_on_one_generated_log(tmp_path, corpus):
    pytest.importorskip("surfacecheck.model.replay")
    scenario_dir = tmp_path / "scenarios"
    scenario_dir.mkdir()
    shutil.copy(corpus / "dsh-generated" / "01-prune.jsonl", scenario_dir / "01-prune.jsonl")
    small = tmp_path / "corpus" / "dsh-generated"
    small.mkdir(parents=True)
    shutil.copy(corpus / "dsh-generated" / "01-prune.jsonl", small / "01-prune.jsonl")
    entry = corpus_mod.generated_expected(corpus)["01-prune.jsonl"]
    (small / "expected.json").write_text(json.dumps([entry]), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = run_check("model", tmp_path / "out", True, tmp_path / "corpus", scenario_dir=scenario_dir, stages=(), out=out, err=err)
    report = json.loads(out.getvalue())
    assert code == report["exit_code"]
    assert [log["name"] for log in report["logs"]] == ["scenarios/01-prune.jsonl", "dsh-generated/01-prune.jsonl"]
    assert report["logs"][1]["expected_checked"] or report["logs"][1]["violations"]
    suite = ET.parse(tmp_path / "out" / "junit.xml").getroot().find("testsuite")
    assert suite.get("tests") == "3"  # two logs and the sometimes-witnesses
