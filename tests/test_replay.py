"""replay: traces from verify, prove and explore re-run against a runtime; exit 1 / 0 / 2 / 3."""
from __future__ import annotations

import json
import runpy
import sys

import pytest

from surfacecheck.cli import main
from surfacecheck.runtime.select import open_runtime, register_variant
from surfacecheck.core.trace import Step, Trace, Violation, write_trace
from surfacecheck.verify.replay import replay_trace
from surfacecheck.verify.reproducer import write_reproducer

USER = {"type": "user/message", "surfaceOp": "append",
        "data": {"id": "u1", "role": "user", "content": [{"type": "text", "text": "abcdefgh"}],
                 "source": {"kind": "user"}}}
STEPS = (Step("reset", {}, "a new session"), Step("append", {"event": USER}, "a prompt"),
         Step("append", {"event": {**USER, "data": {**USER["data"], "id": "u2"}}}, "another prompt"))


class DriftingProjection:
    """The model with its O(1) projection one token high once the surface has two nodes."""

    name = "model:drifting-projection"

    def __init__(self):
        self.inner = open_runtime("model")

    def hello(self):
        return self.inner.hello()

    def call(self, op, args):
        result = self.inner.call(op, args)
        if op == "projection" and len(self.inner.call("surface", {})["nodes"]) >= 2:
            result = {**result, "total": result["total"] + 1}
        return result

    def close(self):
        pass


register_variant("model:drifting-projection", DriftingProjection)


def _bug_trace(tmp_path, runtime="embedded:generation-bumped-on-append"):
    trace = Trace("verify", "log", "lockstep-result", STEPS[:2],
                  Violation("lockstep-result", "append result differs", 2, {"generation": 0}, {"generation": 1}),
                  runtime, 1)
    return write_trace(tmp_path / "bug.jsonl", trace), trace


def test_replay_exits_1_while_failing_and_0_once_fixed(tmp_path, capsys):
    path, _trace = _bug_trace(tmp_path)
    assert main(["replay", str(path)]) == 1
    assert "still fails at step 2" in capsys.readouterr().out
    assert main(["replay", str(path), "--runtime", "embedded", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "fixed" and doc["steps_run"] == 2


def test_a_prove_trace_replays_its_own_property_through_the_monitor(tmp_path):
    trace = Trace("prove", "log", "projection-equals-recount", STEPS, None, "model:drifting-projection")
    outcome = replay_trace(trace)
    assert outcome.exit_code == 1 and outcome.same and outcome.violation.step == 3
    assert replay_trace(trace, "model").exit_code == 0
    assert replay_trace(trace, "embedded").exit_code == 0


def test_unreadable_trace_or_unknown_property_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "surfacecheck-trace/1"}\n', encoding="utf-8")
    assert main(["replay", str(bad)]) == 2
    assert f"{bad}:1:" in capsys.readouterr().err
    odd = write_trace(tmp_path / "odd.jsonl", Trace("explore", "log", "no-such-property", STEPS, None, "model"))
    assert main(["replay", str(odd), "--json"]) == 2
    assert "no-such-property" in json.loads(capsys.readouterr().out)["error"]


def test_replay_against_a_dead_runtime_is_inconclusive(tmp_path, capsys):
    path, _trace = _bug_trace(tmp_path)
    script = tmp_path / "dies.py"
    script.write_text("import sys\nsys.stderr.write('cannot start\\n')\nsys.exit(4)\n", encoding="utf-8")
    assert main(["replay", str(path), "--runtime", f"cmd:{sys.executable} {script}", "--timeout", "2"]) == 3
    assert "inconclusive" in capsys.readouterr().out


def test_replay_over_the_protocol_matches_in_process(tmp_path):
    path, trace = _bug_trace(tmp_path)
    outcome = replay_trace(trace, "cmd:python -m surfacecheck.serve embedded")
    assert outcome.exit_code == 0, outcome.describe()


def test_the_reproducer_is_standalone_and_fails_until_fixed(tmp_path):
    path, trace = _bug_trace(tmp_path)
    failing = runpy.run_path(str(write_reproducer(path, trace)))
    test = next(v for k, v in failing.items() if k.startswith("test_"))
    with pytest.raises(AssertionError, match="still fails"):
        test()
    fixed_path, fixed_trace = _bug_trace(tmp_path / "fixed", runtime="embedded")
    fixed = runpy.run_path(str(write_reproducer(fixed_path, fixed_trace)))
    next(v for k, v in fixed.items() if k.startswith("test_"))()
