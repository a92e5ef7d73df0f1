"""verify: the lockstep driver, the standard invariants (with negative controls), and the command."""
from __future__ import annotations

import json
import sys
import textwrap

import pytest

from surfacecheck.properties.monitors import lookup
from surfacecheck.properties.policy_invariants import bracket_problem
from surfacecheck.cli import main
from surfacecheck.core.protocol import ProtocolError
from surfacecheck.runtime.select import open_runtime
from surfacecheck.core.trace import Step, read_trace
from surfacecheck.properties.stateful.lockstep import Lockstep, normalize, worded
from surfacecheck.verify.run import verify

USER = {"type": "user/message", "surfaceOp": "append",
        "data": {"id": "u", "role": "user", "content": [{"type": "text", "text": "abcd"}], "source": {"kind": "user"}}}


class Skewed:
    """A runtime double: the embedded runtime with one answer bent (a negative control)."""

    name = "skewed"

    def __init__(self, op, bend):
        self.inner, self.op, self.bend = open_runtime("embedded"), op, bend

    def hello(self):
        return self.inner.hello()

    def call(self, op, args):
        result = self.inner.call(op, args)
        return self.bend(result) if op == self.op else result

    def close(self):
        pass


@pytest.mark.parametrize("op, bend, prop", [
    ("surface", lambda r: {**r, "nodes": r["nodes"][:-1]}, "lockstep-surface"),
    ("surface", lambda r: {**r, "generation": r["generation"] + 1}, "lockstep-generation"),
    ("cuts", lambda r: {"balanced": r["balanced"] + [True]}, "lockstep-cuts"),
    ("measure", lambda r: {**r, "total": r["total"] + 1}, "lockstep-measure"),
    ("projection", lambda r: {"total": r["total"] + 1}, "lockstep-projection"),
    ("append", lambda r: {**r, "seq": r["seq"] + 1}, "lockstep-result"),
    ("projection", lambda r: {**r, "usage": None} if "usage" in r else r, "lockstep-usage"),
    ("projection", lambda r: {**r, "breakdown": {**r["breakdown"], "systemTokens": 1}} if r.get("breakdown") else r,
     "lockstep-breakdown"),
    ("projection", lambda r: {**r, "pressure": {**r["pressure"], "contextWindow": 7}} if "pressure" in r else r,
     "lockstep-pressure"),
])
def test_lockstep_names_the_first_divergence(op, bend, prop):
    lockstep = Lockstep(Skewed(op, bend), open_runtime("model"))
    first = lockstep.run(Step("reset", {}))[1] or lockstep.run(Step("append", {"event": USER}))[1]
    assert first is not None and first.property == prop and first.step in (1, 2)
    clean = Lockstep(open_runtime("embedded"), open_runtime("model"))
    assert clean.run(Step("reset", {}))[1] is None and clean.run(Step("append", {"event": USER}))[1] is None


def test_lockstep_agrees_on_refusals_but_not_their_wording_unless_the_runtime_words_them_as_dsh():
    one, other = ({"error": {"type": "T", "rule": "r", "seq": 1, "message": m}} for m in "ab")
    assert normalize(one) == normalize(other)
    assert normalize(one, messages=True) != normalize(other, messages=True)
    assert worded(open_runtime("embedded")) and worded(open_runtime("model"))
    assert not worded(type("Cmd", (), {"name": "cmd:python peer.py"})())
    lockstep = Lockstep(open_runtime("embedded"), open_runtime("model"))
    lockstep.run(Step("reset", {}))
    _result, violation = lockstep.run(Step("append", {"event": {**USER, "surfaceOp": {"op": "replace", "start": 9,
                                                                                     "end": 9}}}))
    assert violation is None


def test_a_worded_runtime_that_words_a_refusal_otherwise_diverges():
    bent = Skewed("append", lambda r: {**r, "error": {**r["error"], "message": "something else"}} if "error" in r
                  else r)
    bent.name = "embedded"
    lockstep = Lockstep(bent, open_runtime("model"))
    lockstep.run(Step("reset", {}))
    _result, violation = lockstep.run(Step("append", {"event": {**USER, "surfaceOp": {"op": "replace", "start": 9,
                                                                                     "end": 9}}}))
    assert violation is not None and violation.property == "lockstep-result"


def test_a_configuration_refusal_is_compared_by_its_message_too():
    """Every check of `resolveConfig` refuses under one rule (spec 9.1): the message tells which check fired."""
    for rule in ("compaction-config", "pruner-config"):
        assert normalize({"error": {"type": "T", "rule": rule, "seq": None, "message": "retainTokens must be"}}) != \
            normalize({"error": {"type": "T", "rule": rule, "seq": None, "message": "maxTokens must be"}})
    lockstep = Lockstep(open_runtime("embedded"), open_runtime("model"))
    lockstep.run(Step("reset", {"level": "policy"}))
    _result, violation = lockstep.run(Step("configure", {"policy": {"thresholdRatio": 1.5, "retainTokens": -1},
                                                         "context_window": 800}))
    assert violation is None


def test_an_in_process_crash_is_a_violation_and_a_protocol_error_is_compared():
    class Crashing(Skewed):
        def call(self, op, args):
            if op == "append":
                raise KeyError("boom")
            if op == "cuts":
                raise ProtocolError("unknown-op", "no cuts here")
            return self.inner.call(op, args)

    lockstep = Lockstep(Crashing("x", None), open_runtime("model"))
    assert lockstep.run(Step("reset", {}))[1].property == "lockstep-cuts"
    lockstep = Lockstep(Crashing("x", None), None)
    lockstep.run(Step("reset", {}))
    assert lockstep.run(Step("append", {"event": USER}))[1].property == "runtime-exception"


def _query(answers):
    return lambda op, args=None: answers[op]


def _feed(name, runs):
    monitor = lookup(name).factory()
    found = None
    for number, (op, args, result, answers) in enumerate(runs, 1):
        found = found or monitor.observe(number, Step(op, args), result, _query(answers))
    return found


def _state(nodes, gen, cuts, prices, total=None):
    return {"surface": {"nodes": nodes, "generation": gen}, "cuts": {"balanced": cuts},
            "measure": {"total": sum(prices), "prices": prices},
            "projection": {"total": sum(prices) if total is None else total}}


S0 = _state([1, 2, 3], 0, [True, False, True, True], [50, 50, 10])


def test_generation_monitor_counts_replaces():
    append = ("append", {"event": USER}, {"seq": 4, "generation": 0}, _state([1, 2, 3, 4], 0, [True] * 5, [1] * 4))
    bumped = ("append", {"event": USER}, {"seq": 4, "generation": 1}, _state([1, 2, 3, 4], 1, [True] * 5, [1] * 4))
    assert _feed("generation-counts-replaces", [("reset", {}, {}, S0 | {"surface": {"nodes": [], "generation": 0}}),
                                                append]) is None
    found = _feed("generation-counts-replaces", [("reset", {}, {}, S0 | {"surface": {"nodes": [], "generation": 0}}),
                                                 bumped])
    assert found and found.property == "generation-counts-replaces"


def test_pairing_and_shrink_monitors_on_a_runtime_checkpoint():
    good = _state([9, 3], 1, [True, True, True], [40, 10])
    unbalanced = _state([9, 3], 1, [True, False, True], [40, 10])
    costly = _state([9, 3], 1, [True, True, True], [120, 10])
    for name in ("pairing-balanced-at-replacement-edges", "summaries-smaller"):
        assert _feed(name, [("reset", {}, {}, S0), ("compact", {}, {"kind": "success"}, good)]) is None
    assert _feed("pairing-balanced-at-replacement-edges",
                 [("reset", {}, {}, S0), ("compact", {}, {}, unbalanced)]).property.startswith("pairing")
    assert _feed("summaries-smaller", [("reset", {}, {}, S0), ("compact", {}, {}, costly)]).property == \
        "summaries-smaller"
    # the same splice written by an append (not the runtime's compaction) is not the runtime's claim
    assert _feed("summaries-smaller", [("reset", {}, {}, S0), ("append", {"event": USER}, {}, costly)]) is None


def test_projection_monitor_only_judges_metered_histories():
    drifted = _state([1, 2, 3], 0, [True] * 4, [50, 50, 10], total=111)
    assert _feed("projection-equals-recount", [("reset", {}, {}, S0), ("surface", {}, {}, drifted)]).property == \
        "projection-equals-recount"
    unpriced = {**USER, "surfaceOp": {"op": "replace", "start": 1, "end": 1}, "sourceEventSeqs": [1]}
    assert _feed("projection-equals-recount", [("reset", {}, {}, S0), ("append", {"event": unpriced}, {"seq": 4},
                                                                        drifted)]) is None


@pytest.mark.parametrize("types, ok", [
    (["compaction/start", "compaction/summary", "user/message", "compaction/end"], True),
    (["compaction/start", "user/message", "compaction/summary", "user/message", "compaction/end"], True),
    (["compaction/start", "compaction/end"], True),
    (["compaction/prune", "tool/result", "compaction/prune", "tool/result"], True),
    (["compaction/start", "compaction/summary", "user/message"], False),
    (["compaction/summary", "user/message"], False),
    (["compaction/prune", "agent/status", "tool/result"], False),
    (["compaction/start", "compaction/summary", "user/message", "agent/status", "compaction/end"], False),
])
def test_bracket_order(types, ok):
    assert (bracket_problem(types) is None) is ok


def test_policy_monitors_fire_on_retry_without_progress_and_over_budget():
    still = _state([1], 0, [True, True], [5])
    moved = _state([7], 1, [True, True], [5])
    assert _feed("overflow-retry-after-progress",
                 [("reset", {}, {}, still), ("request_error", {}, {"kind": "retry"}, still)]).step == 2
    assert _feed("overflow-retry-after-progress",
                 [("reset", {}, {}, still), ("request_error", {}, {"kind": "retry"}, moved)]) is None
    budget = ("configure", {"policy": {"maxOverflowRetries": 1}}, {}, still)
    retry = ("request_error", {}, {"kind": "retry", "appended": ["compaction/start", "compaction/end"]}, moved)
    assert _feed("retries-within-budget", [budget, retry, retry]).property == "retries-within-budget"
    idle = ("append", {"event": {"type": "agent/status", "data": {"status": "idle"}}}, {}, moved)
    assert _feed("retries-within-budget", [budget, retry, idle, retry]) is None


def test_verify_passes_on_the_embedded_runtime_at_every_level(tmp_path):
    report = verify("embedded", profile="smoke", seed=11, trace_dir=tmp_path, regressions=None)
    assert report.exit_code == 0, report.text()
    assert [lv.level for lv in report.levels] == ["log", "compaction", "policy"]
    assert all(lv.steps > lv.examples > 0 for lv in report.levels)


def test_verify_json_is_one_document_and_seeded_runs_repeat(tmp_path, capsys):
    argv = ["verify", "--runtime", "model", "--level", "log", "--profile", "smoke", "--seed", "3", "--json",
            "--trace-dir", str(tmp_path), "--regressions", str(tmp_path / "none")]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    second = json.loads(capsys.readouterr().out)
    assert first["verdict"] == "ok" and first["seed"] == 3
    assert (first["examples"], first["steps"]) == (second["examples"], second["steps"])


def test_verify_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["verify", "--runtime", "nonsense"])
    assert info.value.code == 2
    assert main(["verify", "--runtime", "embedded:no-such-bug", "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["exit_code"] == 2


FLAKY_SERVER = textwrap.dedent('''
    import json, sys, time
    from surfacecheck.runtime.select import open_runtime
    from surfacecheck.serve import handle
    runtime = open_runtime("embedded")
    for n, line in enumerate(sys.stdin):
        if n == LIMIT:
            sys.stderr.write("flaky runtime: giving up at request %d\\n" % n)
            sys.stderr.flush()
            if MODE == "hang":
                time.sleep(60)
            sys.exit(7)
        print(json.dumps(handle(runtime, "embedded", json.loads(line))), flush=True)
''')


@pytest.mark.parametrize("mode", ["hang", "exit"])
def test_a_runtime_that_hangs_or_exits_mid_run_is_inconclusive(tmp_path, capsys, mode):
    script = tmp_path / "flaky.py"
    script.write_text(FLAKY_SERVER.replace("LIMIT", "40").replace("MODE", repr(mode)), encoding="utf-8")
    code = main(["verify", "--runtime", f"cmd:{sys.executable} {script}", "--level", "log", "--profile", "smoke",
                 "--seed", "1", "--timeout", "1", "--json", "--trace-dir", str(tmp_path / "t"),
                 "--regressions", str(tmp_path / "r")])
    report = json.loads(capsys.readouterr().out)
    assert code == 3 and report["verdict"] == "inconclusive"
    unavailable = report["levels"][0]["unavailable"]
    assert unavailable.startswith("timeout" if mode == "hang" else "exited"), unavailable
    assert not list((tmp_path / "t").glob("*.jsonl"))


def test_a_violation_writes_trace_reproducer_and_regression(tmp_path):
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    report = verify("embedded:generation-bumped-on-append", level="log", profile="smoke", seed=2,
                    trace_dir=tmp_path / "traces", regressions=tmp_path / "reg", shrink=False)
    assert report.exit_code == 1
    (trace_path,) = report.traces
    trace = read_trace(trace_path)
    assert trace.violation.property == "lockstep-result" and trace.runtime == "embedded:generation-bumped-on-append"
    assert trace.steps[0].op == "reset"
    assert list((tmp_path / "traces").glob("test_*.py"))
    assert len(list((tmp_path / "reg").glob("*.jsonl"))) == 1
    again = verify("embedded:generation-bumped-on-append", level="log", profile="smoke", seed=2,
                   trace_dir=tmp_path / "traces", regressions=tmp_path / "reg", shrink=False)
    assert again.regressions and again.regressions[0]["verdict"] == "failing"
    assert len(list((tmp_path / "reg").glob("*.jsonl"))) == 1  # kept once
    fixed = verify("embedded", level="log", profile="smoke", seed=2, trace_dir=tmp_path / "traces",
                   regressions=tmp_path / "reg")
    assert fixed.exit_code == 0 and fixed.regressions[0]["verdict"] == "fixed"


def test_the_check_stage_reports_levels_as_junit_cases(tmp_path, monkeypatch):
    import io

    from surfacecheck.core.stage import CheckContext
    from surfacecheck.verify import stage as verify_stage

    monkeypatch.setattr(verify_stage, "PROFILE", "smoke")
    ctx = CheckContext("embedded:generation-bumped-on-append", None, False, tmp_path, io.StringIO())
    result = verify_stage.stage(ctx)
    assert result.status == "violation" and result.exit_code == 1
    failed = [case for case in result.cases if case.failure is not None]
    assert any(case.name == "level log" for case in failed)
    assert list((tmp_path / "traces").glob("verify-log-*.jsonl"))


def test_runtime_context_snapshot_must_be_back_by_the_next_request():
    snap = {"type": "user/message", "surfaceOp": "append",
            "data": {"id": "c", "role": "user", "content": [{"type": "text", "text": "ctx"}],
                     "source": {"kind": "plugin", "plugin": "@deepseek-ai/dsh-system-prompt"}}}
    shown, hidden, back = (_state(nodes, 0, [True] * (len(nodes) + 1), [1] * len(nodes))
                           for nodes in ([5], [9], [9, 12]))
    start = ("append", {"event": {"type": "step/start", "data": {"turn": 1, "step": 2}}}, {"seq": 11}, hidden)
    reply = ("append", {"event": {"type": "assistant/message", "data": {}}}, {"seq": 13}, hidden)
    base = [("append", {"event": snap}, {"seq": 5}, shown), ("compact", {}, {}, hidden), ("pre_step", {}, {}, hidden),
            start]
    assert _feed("runtime-context-reemitted", base + [reply]).property == "runtime-context-reemitted"
    again = ("append", {"event": snap}, {"seq": 12}, back)
    assert _feed("runtime-context-reemitted", base + [again, reply[:3] + (back,)]) is None
