"""Negative controls: each seeded bug yields its shortest counterexample, which replays through the model.

The known minimal traces below were derived by hand from the world's sizes (window 1000,
threshold 800; V = 483, S = 612 (pruned 97), cX = 37, header 62 tokens) and are what the BFS must
return: a shorter action sequence cannot reach the bug (see docs/explore.md, "Negative controls").
"""
from __future__ import annotations

import pytest

from surfacecheck.properties.monitors import lookup
from surfacecheck.explore.run import run_explore
from surfacecheck.explore.stage import CONTROL_BOUNDS
from surfacecheck.explore.variants import VARIANTS
from surfacecheck.explore.world import Bounds
from surfacecheck.runtime.select import open_runtime
from surfacecheck.core.trace import read_trace
from surfacecheck.verify.replay import replay_trace

KNOWN_MINIMAL = {
    # overflow at 62+483+17+483 = 1045 >= 1000; the failed summary is retried forever
    "retry-without-progress": (["prompt:V", "step:good", "reply:A", "prompt:V", "step:good", "overflow:big"],
                               ["overflow:big"]),
    # snapshot entered, shadowed by /compact between turns, next step does not re-emit it
    "never-reemit-runtime-context": (["ctx:X", "prompt:V", "step:good", "reply:A", "manual:concurrent"],
                                     ["prompt:U", "step:good"]),
    # 62+483+18+612 = 1175 >= 800 at the second pre-step, which does nothing
    "pressure-skipped": (["prompt:V", "step:good", "reply:T1", "result:S"], ["step:good"]),
    # after pruning 808 >= 800: the range [cX, V] is stretched over the open T2 pair
    "unbalanced-cut": (["ctx:X", "prompt:V", "step:good", "reply:T2", "result:S", "result:S", "step:good"], []),
    # /compact of [U] with a summary bigger than U is committed
    "no-shrink-rule": (["prompt:U", "step:good", "reply:A", "manual:big"], []),
}


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    out = {}
    for name, bounds in CONTROL_BOUNDS.items():
        trace_dir = tmp_path_factory.mktemp(name)
        report = run_explore(bounds, variant=VARIANTS[name], trace_dir=trace_dir)
        out[name] = {v["property"]: v for v in report["violations"]}
    return out


@pytest.mark.parametrize("name", sorted(KNOWN_MINIMAL))
def test_control_yields_the_known_shortest_trace(found, name):
    v = VARIANTS[name]
    assert v.breaks in found[name], found[name].keys()
    finding = found[name][v.breaks]
    actions, loop = KNOWN_MINIMAL[name]
    assert (finding["actions"], finding["loop"]) == (actions, loop)
    assert finding["length"] == len(actions) + len(loop)
    assert finding["simulation_ok"] is True


def test_correct_model_at_control_bounds_is_clean():
    for bounds in set(CONTROL_BOUNDS.values()) - {Bounds(4, 2, 1)}:  # (4, 2, 1): tests/test_explore.py
        assert run_explore(bounds)["violations"] == []


@pytest.mark.parametrize("name", sorted(KNOWN_MINIMAL))
def test_control_trace_replays(found, name):
    finding = found[name][VARIANTS[name].breaks]
    trace = read_trace(finding["trace"])
    assert trace.source == "explore" and trace.level == "policy" and trace.runtime == f"model:{name}"
    assert trace.notes["actions"][: finding["length"]] == finding["actions"] + finding["loop"]
    assert replay_trace(trace).exit_code == 1  # the bug is still there
    assert replay_trace(trace, "model").exit_code == 0  # the fix: every bug lives in the runtime
    assert replay_trace(trace, "embedded").exit_code == 0  # and the independent runtime agrees
    steps = list(trace.steps)
    claims = [s for s in steps if s.op == "pre_step" and s.args.get("claimed")]
    assert not any(s.op == "append" and (s.args["event"].get("data") or {}).get("source") == {"kind": "user"}
                   for s in steps)  # queued prompts are claimed by pre_step (D9), never appended after it
    assert claims or "prompt" not in " ".join(trace.notes["actions"])


@pytest.mark.parametrize("name", ["retry-without-progress", "pressure-skipped", "never-reemit-runtime-context"])
def test_progress_monitor_sees_the_witness(found, name):
    """Fed the trace's requests and the variant runtime's results, the property's own monitor fires
    (on the correct model it does not)."""
    prop = VARIANTS[name].breaks
    trace = read_trace(found[name][prop]["trace"])
    for spec, expect in ((f"model:{name}", True), ("model", False)):
        runtime = open_runtime(spec)
        monitor = lookup(prop).factory()
        fired = None
        for number, step in enumerate(trace.steps, 1):
            result = runtime.call(step.op, step.args)
            fired = monitor.observe(number, step, result, runtime.call)
            if fired:
                break
        assert (fired is not None) == expect, (spec, fired)
        if fired:
            assert fired.property == prop


def test_runtime_context_trace_leaves_the_snapshot_to_the_runtime(found):
    """The runtime-context counterexample asks the RUNTIME to project its snapshot (``pre_step {context,
    step}``, spec 12/13 steps 4-7) and never appends one itself, so the trace fails on the variant runtime
    only: exit 1 there, 0 on ``model`` and on the independent ``embedded`` runtime."""
    name = "never-reemit-runtime-context"
    trace = read_trace(found[name][VARIANTS[name].breaks]["trace"])
    pre_steps = [step for step in trace.steps if step.op == "pre_step"]
    assert pre_steps and all(isinstance(step.args.get("context"), list) and set(step.args["step"]) == {"turn", "step"}
                             for step in pre_steps)
    appended = [step.args["event"] for step in trace.steps if step.op == "append"]
    assert not any(event["type"] == "step/start" for event in appended)
    assert not any((event["data"].get("source") or {}).get("kind") == "plugin" for event in appended)
    bug = replay_trace(trace)
    assert bug.exit_code == 1 and bug.violation.property == VARIANTS[name].breaks
    assert [replay_trace(trace, spec).exit_code for spec in ("model", "embedded")] == [0, 0]
