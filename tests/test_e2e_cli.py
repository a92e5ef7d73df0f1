"""`surfacecheck e2e dsh` (issue 8): CLI usage and exit codes, generation, shrinking, bundles, the stage.

Everything but the last test replaces the runner, the judge and the audit with small fakes
(`surfacecheck.e2e.run.execute/judge/exercised/audit_run`), so it runs in seconds without dsh; the
last test runs one seed script through the CLI on the real runtime (skipped only when the SDK is
missing and CI is unset).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from surfacecheck.e2e import run as run_mod
from surfacecheck.e2e.generate import draw_scripts, identity, shrink_script
from surfacecheck.e2e.script import from_json
from surfacecheck.core.stage import CheckContext
from surfacecheck.core.trace import read_trace


def main(argv: list[str]) -> int:
    """The `surfacecheck` parser with just the commands under test (e2e, and replay for bundles, which the CLI
    hands to the engine that wrote the trace)."""
    from surfacecheck.cli import run_replay
    from surfacecheck.e2e.cli import register
    from surfacecheck.verify.cli import register as register_verify

    parser = argparse.ArgumentParser(prog="surfacecheck")
    commands = parser.add_subparsers(dest="command", required=True)
    register(commands)
    register_verify(commands)
    commands.choices["replay"].set_defaults(func=run_replay)
    args = parser.parse_args(argv)
    return args.func(args)


# -- fakes -----------------------------------------------------------------------------------------
def big_pair(script) -> bool:
    """The fake runtime's bug: a turn with two tool outputs of at least 6000 characters."""
    return any(sum(1 for r in t.replies if r.kind == "tool" and r.output_chars >= 6000) >= 2 for t in script.turns)


class RuntimeFailed(Exception):
    pass


class RuntimeNotInstalled(Exception):
    pass


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """A fake runtime: records every script it runs; ``mode`` = agree / bug / crash / missing."""
    state = SimpleNamespace(mode="bug", calls=[])
    events = [{"type": "user/message", "seq": 0, "time": 1, "data": {"content": "x"}, "surfaceOp": "append"},
              {"type": "compaction/start", "seq": 1, "time": 2, "data": {"reason": "pressure"}}]

    def execute(script, *, runtime, keep_dir, timeout, **_network):
        state.calls.append(script.to_json())
        if state.mode == "crash":
            raise RuntimeFailed("runtime timed out after 1 s (server stopped answering)")
        if state.mode == "missing":
            raise RuntimeNotInstalled("pip install -e '.[dsh]'")
        keep_dir.mkdir(parents=True, exist_ok=True)
        log = keep_dir / "session.jsonl"
        log.write_text("".join(json.dumps(e) + "\n" for e in events))
        return SimpleNamespace(log_path=log, events=events, requests=[{"index": 0, "path": "/chat/completions"}],
                               version="0.1.1rc1", stderr_tail="", seconds=0.01, run_dir=keep_dir)

    def judge(script, run):
        if state.mode == "bug" and big_pair(script):
            return [{"kind": "pressure-decision", "seq": 1, "expected": "prune", "observed": "summary",
                     "message": "model prunes, runtime summarised"}]
        return []

    monkeypatch.setattr(run_mod, "execute", execute)
    monkeypatch.setattr(run_mod, "judge", judge)
    monkeypatch.setattr(run_mod, "exercised", lambda ev: {"pressure-prune": [1], "pressure-summary": []})
    monkeypatch.setattr(run_mod, "audit_run", lambda script, run: {"errors": 0, "warnings": 1, "findings": []})
    monkeypatch.chdir(tmp_path)
    return state


def write_script(folder: Path, obj: dict) -> Path:
    path = folder / f"{obj['name']}.json"
    path.write_text(json.dumps(obj))
    return path


BUGGY = {"format": "surfacecheck-e2e-script/1", "name": "two-big-outputs",
         "config": {"contextWindow": 16000, "thresholdRatio": 0.5, "retainTokens": 2000,
                    "pruner": {"thresholdChars": 2000, "headChars": 200, "tailChars": 200}},
         "usage": "fixed",
         "turns": [{"prompt": "go", "replies": [{"tool": {"output_chars": 6000}}, {"tool": {"output_chars": 7000}},
                                                {"text": "done"}], "compact": False}]}
QUIET = dict(BUGGY, name="one-small-output",
             turns=[{"prompt": "go", "replies": [{"tool": {"output_chars": 100}}, {"text": "done"}]}])


# -- usage and exit codes --------------------------------------------------------------------------
def test_help_explains_exit_codes(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["e2e", "dsh", "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    for words in ("--generate", "--script", "--keep", "exit codes", "inconclusive", "bundle"):
        assert words in out


def test_bad_script_is_exit_2_with_path(fake, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(dict(BUGGY, config={"contextWindow": 16000, "thresholdRatio": 0.5, "retainTokens": 9000})))
    assert main(["e2e", "dsh", "--script", str(bad), "--json"]) == 2
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    located = re.compile(rf"{re.escape(str(bad))}:\d+: ")  # PATH:LINE: reason
    assert doc["exit_code"] == 2 and located.match(doc["error"]), doc["error"]
    assert located.search(captured.err) and "Traceback" not in captured.err
    assert fake.calls == []  # nothing ran
    missing = tmp_path / "missing.json"
    assert main(["e2e", "dsh", "--script", str(missing)]) == 2
    assert f"{missing}: no such file" in capsys.readouterr().err


def test_bad_usage_is_exit_2(fake, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["e2e", "dsh", "--script", "x.json", "--generate", "3"])
    assert exc.value.code == 2
    assert main(["e2e", "dsh", "--generate", "0"]) == 2


def test_agreement_is_exit_0_and_one_json_document(fake, tmp_path, capsys):
    fake.mode = "agree"
    path = write_script(tmp_path, BUGGY)
    assert main(["e2e", "dsh", "--script", str(path), "--script", str(write_script(tmp_path, QUIET)), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "held" and doc["totals"]["agreed"] == 2
    first = doc["scripts"][0]
    assert first["name"] == "two-big-outputs" and first["paths"]["pressure-prune"] == [1]
    assert first["audit"] == {"errors": 0, "warnings": 1, "findings": []} and first["bundle"] is None
    assert doc["coverage"]["paths"]["pressure-prune"] == 2 and doc["coverage"]["tool_calls"] == 3


def test_difference_is_exit_1_with_a_bundle(fake, tmp_path, capsys):
    path = write_script(tmp_path, BUGGY)
    assert main(["e2e", "dsh", "--script", str(path), "--bundle-dir", str(tmp_path / "b")]) == 1
    out = capsys.readouterr().out
    assert "differed" in out and "seq 1: pressure-decision" in out
    (folder,) = (tmp_path / "b").iterdir()
    assert {p.name for p in folder.iterdir()} == {"script.json", "session.jsonl", "requests.jsonl",
                                                  "differences.json", "audit.json", "trace.jsonl", "README.txt"}
    trace = read_trace(folder / "trace.jsonl")
    assert trace.source == "e2e" and trace.notes["script"] == "script.json"
    assert trace.violation.step == 2 and trace.violation.expected == "prune"  # seq 1 is the 2nd append
    assert [s.op for s in trace.steps] == ["append", "append"]


@pytest.mark.parametrize("mode, words", [("crash", "timed out"), ("missing", "deepseek-harness-sdk not installed")])
def test_runtime_that_cannot_run_is_exit_3(fake, tmp_path, capsys, mode, words):
    fake.mode = mode
    path = write_script(tmp_path, QUIET)
    assert main(["e2e", "dsh", "--script", str(path), "--json"]) == 3
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["verdict"] == "inconclusive" and doc["scripts"][0]["verdict"] == "inconclusive"
    assert words in captured.out + captured.err


def test_difference_beats_inconclusive(fake, tmp_path):
    report = run_mod.E2EReport(mode="script", runtime="0.1.1rc1",
                               scripts=[run_mod.ScriptOutcome("a", verdict="inconclusive"),
                                        run_mod.ScriptOutcome("b", verdict="differed")])
    assert report.exit_code == 1


# -- generation and shrinking ----------------------------------------------------------------------
def test_generation_is_reproducible_and_valid():
    first, again, other = draw_scripts(12, 5), draw_scripts(12, 5), draw_scripts(12, 6)
    assert first == again and first != other
    assert len({identity(s) for s in first}) == 12
    for obj in first:
        script = from_json(obj, obj["name"])  # the schema and dsh's config rules accept every one
        assert 1 <= len(script.turns) <= 4


def test_shrinking_a_failing_fake_gives_a_short_script():
    runs = []

    def fails(obj):
        runs.append(obj)
        return "two big outputs" if big_pair(from_json(obj)) else None

    drawn = draw_scripts(30, 1)
    assert any(big_pair(from_json(s)) for s in drawn), "seed 1 must draw a failing script"
    shrunk = shrink_script(fails, seed_value=1, n=30, budget=200)
    assert shrunk is not None and shrunk.detail == "two big outputs"
    script = from_json(shrunk.script)
    assert big_pair(script) and len(script.turns) == 1
    assert [r.kind for r in script.turns[0].replies] == ["tool", "tool", "text"]
    assert [r.output_chars for r in script.turns[0].replies[:2]] == [6000, 6000]


def test_generate_command_shrinks_the_first_failure(fake, tmp_path, capsys):
    assert main(["e2e", "dsh", "--generate", "30", "--seed", "1", "--json", "--bundle-dir", str(tmp_path / "b"),
                 "--shrink-budget", "200"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["seed"] == 1 and doc["totals"]["scripts"] == 30 and doc["totals"]["differed"] >= 1
    shrunk = doc["shrunk"]
    assert shrunk["verdict"] == "differed" and shrunk["turns"] == 1 and shrunk["tool_calls"] == 2
    assert Path(shrunk["bundle"], "script.json").is_file()
    assert doc["coverage"]["scripts_run"] == 30 and doc["coverage"]["turns"] >= 30


# -- what the drawn scripts aim at (no runtime: the kinds and the spec's pricing, issue 8 item 3) -------
def _tools(script: dict) -> list[int]:
    return [r["tool"]["output_chars"] for t in script["turns"] for r in t["replies"] if "tool" in r]


def _aims(script: dict) -> set[str]:
    """The paths a drawn script is built to reach, checked against its kind's pricing (spec 4.1, 6, 9.1)."""
    from surfacecheck.e2e.generate import (OVERFLOW_SPAN_CHARS, after_summary, estimated_totals, kind_of, step_tokens,
                                           threshold_of)

    kind, config, limit = kind_of(script), script["config"], (script["config"]["pruner"] or {}).get("thresholdChars")
    threshold, totals, pruned = threshold_of(config), estimated_totals(script), estimated_totals(script, pruned=True)
    crossing = next((i for i, total in enumerate(totals) if total >= threshold), None)
    compacts = sum(t["compact"] for t in script["turns"])
    aims = {"manual-compact"} if compacts else set()
    if compacts and max(estimated_totals(script, pruned=True)) >= threshold:
        aims.add("second-generation")  # /compact after the last turn re-summarises a pressure checkpoint
    if kind == "quiet":
        assert crossing is None and max(totals) < 0.85 * threshold and not compacts, script
        assert not any("overflow" in r for t in script["turns"] for r in t["replies"]), script
    if kind == "prune":  # every output prunable; pruning alone brings the first crossing back under the threshold
        assert crossing is not None and pruned[crossing] < threshold and min(_tools(script)) > limit, script
        aims.add("pressure-prune")
    if kind in ("summary", "generations", "failing"):  # even with every output pruned it crosses: a summary is needed
        crossing = next((i for i, total in enumerate(pruned) if total >= threshold), None)
        assert crossing is not None, script
        aims.add("pressure-summary")
        if limit is not None and max(_tools(script)) > limit:
            aims.add("pressure-prune")
    if kind == "summary":
        assert limit is not None and _tools(script)[0] > limit, script  # summary after prune
    if kind == "generations":  # room for a second crossing on top of the first checkpoint and retained tail
        post = after_summary(pruned[crossing], config["retainTokens"], max(map(step_tokens, _tools(script))), 0.2)
        assert pruned[-1] - pruned[crossing] >= threshold - post - max(map(step_tokens, _tools(script))), script
        aims.add("second-generation")
    if kind == "failing":
        assert script["summaries"][0]["outcome"] in ("failure", "too-big"), script
        aims.add("summary-failed")
    if kind in ("prune", "summary", "generations") and any("overflow" in r for r in script["turns"][-1]["replies"]):
        assert len(script["turns"]) > 1 and "overflow" in script["turns"][-1]["replies"][0], script
        earlier = estimated_totals(dict(script, turns=script["turns"][:-1]), pruned=kind != "prune")
        assert config["maxOverflowRetries"] >= 1 and earlier[-1] >= threshold, script  # after the planned crossing
        aims.add("overflow-retry")
    if kind == "manual":
        assert compacts >= 1, script
        if compacts >= 2:
            aims.add("second-generation")
        if any(s["outcome"] != "text" for s in script["summaries"][:compacts]):
            aims.add("summary-failed")
    if kind == "overflow":  # each overflow follows enough unsummarised output, and a retry is allowed
        assert config["maxOverflowRetries"] >= 1, script
        since = []
        for reply in (r for t in script["turns"] for r in t["replies"]):
            if "overflow" in reply:
                assert sum(since[:-1]) >= OVERFLOW_SPAN_CHARS or not since, script  # not since: a double overflow
                since = []
            elif "tool" in reply:
                since.append(reply["tool"]["output_chars"])
        aims.add("overflow-retry")
        if sum("overflow" in r for t in script["turns"] for r in t["replies"]) >= 2:
            aims.add("second-generation")  # the second retain-0 summary shadows the first one's checkpoint
    return aims


@pytest.mark.parametrize("seed_value", [0, 1, 2])
def test_drawn_scripts_span_every_kind_and_aim_at_every_path(seed_value):
    """20 drawn scripts: every kind, each built (by the spec's pricing) for its path; every path aimed
    at by at least 4 scripts, and 3 quiet ones; bounded (4 turns, MAX_STEPS tool calls)."""
    from collections import Counter

    from surfacecheck.e2e.generate import DEAL, MAX_STEPS, kind_of
    from surfacecheck.e2e.run import PATHS

    drawn = draw_scripts(20, seed_value)
    kinds = Counter(kind_of(s) for s in drawn)
    assert set(kinds) == set(DEAL) and kinds["overflow"] >= 4 and kinds["quiet"] >= 3, kinds
    aimed = Counter(path for s in drawn for path in _aims(s))
    assert all(aimed[path] >= 4 for path in PATHS), aimed
    for script in drawn:
        from_json(script, script["name"])
        assert len(script["turns"]) <= 4 and len(_tools(script)) <= MAX_STEPS


def test_the_first_seven_drawn_scripts_hold_every_kind():
    from surfacecheck.e2e.generate import DEAL, kind_of

    assert {kind_of(s) for s in draw_scripts(7, 3)} == set(DEAL)


def test_a_failing_overflow_shrinks_to_one_short_turn():
    """A fake failure on any overflow reply shrinks to one turn with one overflow after a few outputs."""
    def fails(obj):
        return "overflow" if any("overflow" in r for t in obj["turns"] for r in t["replies"]) else None

    shrunk = shrink_script(fails, seed_value=2, n=20, budget=300)
    assert shrunk is not None and shrunk.detail == "overflow"
    (turn,) = shrunk.script["turns"]
    kinds = ["overflow" if "overflow" in r else "tool" if "tool" in r else "text" for r in turn["replies"]]
    assert kinds.count("overflow") == 1 and kinds[-1] == "text" and len(kinds) <= 5, kinds


# -- bundles: replay re-runs the same script -------------------------------------------------------
@pytest.mark.parametrize("which", ["folder", "trace", "script"])
def test_bundle_replays_the_same_script(fake, tmp_path, capsys, which):
    path = write_script(tmp_path, BUGGY)
    assert main(["e2e", "dsh", "--script", str(path), "--bundle-dir", str(tmp_path / "b")]) == 1
    (folder,) = (tmp_path / "b").iterdir()
    original = fake.calls[-1]
    fake.calls.clear()
    if which == "script":
        code = main(["e2e", "dsh", "--script", str(folder)])
    else:
        code = main(["replay", str(folder if which == "folder" else folder / "trace.jsonl"), "--json"])
    assert code == 1 and fake.calls == [original]
    fake.mode = "agree"
    assert main(["replay", str(folder)]) == 0  # fixed: the difference is gone


# -- the check stage --------------------------------------------------------------------------------
def _ctx(tmp_path) -> CheckContext:
    return CheckContext(runtime="embedded", corpus=None, strict=False, report_dir=tmp_path, err=io.StringIO())


def test_stage_skips_without_the_sdk(monkeypatch, tmp_path):
    from surfacecheck.e2e import stage as stage_mod

    monkeypatch.setattr(stage_mod, "sdk_installed", lambda: False)
    result = stage_mod.stage(_ctx(tmp_path))
    assert result.status == "skipped" and "pip install -e '.[dsh]'" in result.summary["skipped"]


def test_stage_folds_script_verdicts(fake, monkeypatch, tmp_path):
    from surfacecheck.e2e import stage as stage_mod

    monkeypatch.setattr(stage_mod, "sdk_installed", lambda: True)
    monkeypatch.setattr("surfacecheck.e2e.cli.load_scripts",
                        lambda targets: [(from_json(BUGGY), "a"), (from_json(QUIET), "b")])
    result = stage_mod.stage(_ctx(tmp_path))
    assert result.status == "violation" and [c.failure is not None for c in result.cases] == [True, False]
    fake.mode = "crash"
    assert stage_mod.stage(_ctx(tmp_path)).status == "inconclusive"


# -- one real end-to-end run -------------------------------------------------------------------------
def test_real_runtime_one_seed_script(tmp_path, capsys):
    from surfacecheck.e2e.script import seed_dir
    from surfacecheck.e2e.stage import sdk_installed

    if not sdk_installed() and not os.environ.get("CI"):
        pytest.skip("deepseek-harness-sdk not installed: pip install -e '.[dsh]'")
    seeds = sorted(seed_dir().glob("*.json"))
    chosen = next((p for p in seeds if "prune-only" in p.name), seeds[0] if seeds else None)
    assert chosen is not None, "no seed scripts in scenarios/e2e"
    code = main(["e2e", "dsh", "--script", str(chosen), "--json", "--bundle-dir", str(tmp_path / "b")])
    doc = json.loads(capsys.readouterr().out)
    (outcome,) = doc["scripts"]
    assert outcome["verdict"] != "inconclusive", outcome["message"]
    assert outcome["audit"]["errors"] == 0, outcome["audit"]
    assert outcome["differences"] == [], outcome["differences"]
    assert code == 0 and any(outcome["paths"].values())


# -- another release: drift findings ---------------------------------------------------------------------
def test_other_release_reports_drift_findings(fake, monkeypatch, tmp_path, capsys):
    from surfacecheck.e2e import drift as drift_mod

    seen = {}

    def execute_other(script, *, python, keep_dir, timeout):
        seen["python"] = python
        if fake.mode == "missing":
            raise RuntimeNotInstalled("deepseek-harness-sdk 0.2.x is not installed")
        return SimpleNamespace(version="0.2.1rc2", events=[], requests=[], log_path=None)

    finding = drift_mod.DriftFinding("log-header-version", "session log header version", 0, 4, "line 1")
    monkeypatch.setattr(run_mod, "execute_other", execute_other)
    monkeypatch.setattr(drift_mod, "drift", lambda a, b: [finding] if b.version != a.version else [])
    monkeypatch.setattr(drift_mod, "audit_drift", lambda run, config: [])
    path = write_script(tmp_path, QUIET)
    argv = ["e2e", "dsh", "--script", str(path), "--runtime-version", "0.2.1rc2", "--python", "/venv/bin/python", "--json"]
    assert main(argv) == 1
    doc = json.loads(capsys.readouterr().out)
    (difference,) = doc["scripts"][0]["differences"]
    assert difference["kind"] == "drift:log-header-version" and (difference["expected"], difference["observed"]) == (0, 4)
    assert seen["python"] == "/venv/bin/python" and len(fake.calls) == 1  # 0.1.1rc1 ran as the reference
    fake.mode = "missing"
    assert main(argv) == 3


def test_real_runtime_killed_mid_run_is_exit_3(monkeypatch, tmp_path, capsys):
    """The CLI's verdict when the real runtime executable is killed after its third model request."""
    from e2e_helpers import kill_runtime_after
    from surfacecheck.e2e.runner import run_script
    from surfacecheck.e2e.script import seed_dir
    from surfacecheck.e2e.server import ScriptedServer
    from surfacecheck.e2e.stage import sdk_installed

    if not sdk_installed() and not os.environ.get("CI"):
        pytest.skip("deepseek-harness-sdk not installed: pip install -e '.[dsh]'")

    def execute(script, *, runtime, keep_dir, timeout, **_network):
        server = ScriptedServer(script)
        server.start()
        try:
            return run_script(script, keep_dir=keep_dir, timeout=60, server=server,
                              on_spawn=kill_runtime_after(server, 3))
        finally:
            server.stop()

    monkeypatch.setattr(run_mod, "execute", execute)
    script = seed_dir() / "prune-only.json"
    assert main(["e2e", "dsh", "--script", str(script), "--json", "--bundle-dir", str(tmp_path / "b")]) == 3
    (outcome,) = json.loads(capsys.readouterr().out)["scripts"]
    assert outcome["verdict"] == "inconclusive" and "killed by signal 9" in outcome["message"]


def test_real_runtime_negative_control_keeps_a_replayable_bundle(monkeypatch, tmp_path, capsys):
    """A model judging with the wrong thresholdRatio (0.9) must disagree with the real runtime on
    prune-only; the bundle's trace points at the first seq where they part, and replaying the bundle
    runs the same script again: exit 1 while the wrong judge stays, 0 with the honest one."""
    import dataclasses

    from surfacecheck.e2e.script import load_script, seed_dir
    from surfacecheck.e2e.stage import sdk_installed

    if not sdk_installed() and not os.environ.get("CI"):
        pytest.skip("deepseek-harness-sdk not installed: pip install -e '.[dsh]'")
    honest, real_execute, ran = run_mod.judge, run_mod.execute, []

    def wrong(script, run):
        return honest(dataclasses.replace(script, config=dataclasses.replace(script.config, threshold_ratio=0.9)), run)

    def execute(script, **kw):
        ran.append(script.to_json())
        return real_execute(script, **kw)

    monkeypatch.setattr(run_mod, "judge", wrong)
    monkeypatch.setattr(run_mod, "execute", execute)
    monkeypatch.chdir(tmp_path)  # replay keeps its own bundle under ./reports/out/e2e
    script = seed_dir() / "prune-only.json"
    assert main(["e2e", "dsh", "--script", str(script), "--json", "--bundle-dir", str(tmp_path / "b")]) == 1
    (outcome,) = json.loads(capsys.readouterr().out)["scripts"]
    first = outcome["differences"][0]
    assert first["kind"] == "pressure-decision" and outcome["paths"]["pressure-prune"][0] == first["seq"]
    trace = read_trace(Path(outcome["bundle"]) / "trace.jsonl")
    assert trace.steps[trace.violation.step - 1].args["event"]["type"]  # the violation names a logged event
    assert json.loads((Path(outcome["bundle"]) / "script.json").read_text()) == load_script(script).to_json()
    assert main(["replay", outcome["bundle"]]) == 1 and ran[-1] == ran[0]
    monkeypatch.setattr(run_mod, "judge", honest)
    assert main(["replay", outcome["bundle"]]) == 0 and len(ran) == 3


def test_a_judge_that_crashes_is_inconclusive_not_a_traceback(fake, monkeypatch, tmp_path, capsys):
    def broken(script, run):
        raise KeyError("compaction/end")

    monkeypatch.setattr(run_mod, "judge", broken)
    assert main(["e2e", "dsh", "--script", str(write_script(tmp_path, QUIET))]) == 3
    assert "the suite could not judge this run: KeyError" in capsys.readouterr().out
