"""Runtime context judged on the runtime itself (spec 12, 13 steps 4-7; seed §14): ``pre_step {context, step}``
makes the runtime project its candidate before the pressure listener and enter `step/start` + the snapshot;
the ``runtime-context-reemitted`` monitor judges what the runtime wrote, with the one-request window."""
from __future__ import annotations

import pytest

import seeded_bugs  # noqa: F401 - registers embedded:<bug>
from surfacecheck.properties.monitors import lookup
from surfacecheck.core.protocol import ProtocolError
from surfacecheck.runtime.select import open_runtime
from surfacecheck.core.trace import Step
from surfacecheck.properties.stateful.lockstep import Lockstep
from surfacecheck.model.runtime_context import CLEARED, CONTEXT_HEADER, NEVER, RUNTIME_CONTEXT_SOURCE, project_sections

RUNTIMES = ("model", "embedded")
SANDBOX = [{"name": "sandbox", "text": "sandbox: read-only"}]
HEADER = {"type": "request/header", "data": {"header": {"config": {"provider": "prov", "model": "mod"}},
                                             "reason": "initial"}}


def _prompt(i: int, words: int = 15) -> Step:
    data = {"id": f"u{i}", "role": "user", "source": {"kind": "user"},
            "content": [{"type": "text", "text": "tool result node " * words}]}
    return Step("append", {"event": {"type": "user/message", "surfaceOp": "append", "data": data}})


def _event(type_: str, **data) -> Step:
    return Step("append", {"event": {"type": type_, "data": data}})


def _pre_step(step: int, context=SANDBOX) -> Step:
    return Step("pre_step", {"context": context, "step": {"turn": 1, "step": step}})


def window_steps() -> list[Step]:
    """Step 1 enters the snapshot; step 2's pressure compaction shadows it (its candidate was already None:
    the one-request window); step 3 must re-emit it."""
    return ([Step("reset", {}),
             Step("configure", {"policy": {"thresholdRatio": 0.5, "retainTokens": 40, "maxTokens": 64},
                                "context_window": 400}),
             Step("append", {"event": HEADER}), _event("turn/start", turn=1), _pre_step(1)]
            + [_prompt(i) for i in range(4)]
            + [_event("step/end", turn=1, step=1), _pre_step(2), _event("step/end", turn=1, step=2), _pre_step(3)])


def _run(spec: str, steps: list[Step], monitors=()) -> tuple[list[dict], object]:
    lockstep = Lockstep(open_runtime(spec), None, monitors=[lookup(name).factory() for name in monitors])
    results, violation = [], None
    for step in steps:
        result, seen = lockstep.run(step)
        results.append(result)
        violation = violation or seen
    return results, violation


@pytest.mark.parametrize("spec", RUNTIMES)
def test_the_runtime_enters_step_start_then_the_snapshot_and_only_when_the_text_changes(spec):
    rt = open_runtime(spec)
    rt.call("reset", {})
    rt.call("append", {"event": {"type": "turn/start", "data": {"turn": 1}}})
    first = rt.call("pre_step", {"context": SANDBOX, "step": {"turn": 1, "step": 1}})
    assert first["appended"][-2:] == ["step/start", "user/message"] and first["snapshot"] == 2
    same = rt.call("pre_step", {"context": SANDBOX})
    assert same["snapshot"] is None and same["appended"] == []
    cleared = rt.call("pre_step", {"context": []})
    assert cleared["snapshot"] == 3 and cleared["appended"] == ["user/message"]
    plain = rt.call("pre_step", {})
    assert "snapshot" not in plain and plain["appended"] == []
    assert rt.call("surface", {})["nodes"] == [2, 3]


def test_both_runtimes_write_the_same_snapshot_events():
    """The entered message is `createUserMessage`'s shape with the protocol's deterministic id (spec 12)."""
    seen = []
    for spec in RUNTIMES:
        rt = open_runtime(spec)
        rt.call("reset", {})
        rt.call("pre_step", {"context": SANDBOX})
        rt.call("pre_step", {"context": []})
        seen.append((rt.call("measure", {}), rt.call("surface", {})))
    assert seen[0] == seen[1]
    data = project_sections(NEVER, SANDBOX, id="runtime-context-0")
    assert data["content"][0]["text"] == CONTEXT_HEADER + "sandbox: read-only"
    assert data["source"] == {"kind": "plugin", "plugin": RUNTIME_CONTEXT_SOURCE, "form": "snapshot",
                              "sections": SANDBOX}
    assert CLEARED.startswith("Current runtime context: none")


@pytest.mark.parametrize("spec", RUNTIMES)
def test_a_snapshot_shadowed_by_the_pre_steps_own_compaction_comes_back_at_the_next_pre_step(spec):
    results, violation = _run(spec, window_steps(), ["runtime-context-reemitted"])
    first, second, third = results[4], results[10], results[12]
    assert first["snapshot"] == 3
    assert "compaction/start" in second["appended"] and second["snapshot"] is None  # the one-request window
    assert third["snapshot"] is not None and third["appended"][-1] == "user/message"
    assert violation is None


def test_the_monitor_alone_flags_a_runtime_that_never_re_emits():
    results, violation = _run("embedded:runtime-context-not-reemitted", window_steps(), ["runtime-context-reemitted"])
    assert results[12]["snapshot"] is None
    assert violation is not None and violation.property == "runtime-context-reemitted" and violation.step == 13


def test_a_first_pre_step_with_context_and_no_snapshot_is_a_violation():
    """Sections active from the first step must be entered there; nothing was ever shown, so it is due."""
    steps = [Step("reset", {}), _pre_step(1)]
    monitor = lookup("runtime-context-reemitted").factory()
    assert monitor.observe(2, steps[1], {"kind": "noop", "appended": ["step/start"], "snapshot": None},
                           lambda op, args: {"nodes": [], "generation": 0}) is not None


@pytest.mark.parametrize("spec", RUNTIMES)
def test_reload_restores_the_newest_visible_snapshot_so_nothing_is_re_sent(spec):
    rt = open_runtime(spec)
    rt.call("reset", {})
    rt.call("pre_step", {"context": SANDBOX})
    assert rt.call("reload", {})["appended"] == ["session/end-seed"]
    assert rt.call("pre_step", {"context": SANDBOX})["snapshot"] is None
    assert rt.call("pre_step", {"context": []})["snapshot"] is not None


@pytest.mark.parametrize("spec", RUNTIMES)
@pytest.mark.parametrize("args", [{"context": "sandbox"}, {"context": [{"name": "a"}]},
                                  {"context": [{"name": 1, "text": "t"}]}, {"step": {"turn": 1}},
                                  {"step": {"turn": True, "step": 1}}])
def test_malformed_context_or_step_is_a_protocol_error(spec, args):
    rt = open_runtime(spec)
    with pytest.raises(ProtocolError) as caught:
        rt.call("pre_step", args)
    assert caught.value.type == "bad-args"


def test_the_committed_regression_is_flagged_by_the_monitor_alone_on_the_bug_only():
    """The shrunk verify trace (overflow recovery shadows the snapshot, §15 G2) judged without the model."""
    from surfacecheck.core.trace import read_trace
    from surfacecheck.verify.run import REGRESSIONS

    (path,) = REGRESSIONS.glob("policy-embedded-runtime-context-not-reemitted-*.jsonl")
    steps = list(read_trace(path).steps)
    _, violation = _run("embedded:runtime-context-not-reemitted", steps, ["runtime-context-reemitted"])
    assert violation is not None and violation.property == "runtime-context-reemitted"
    for spec in RUNTIMES:
        assert _run(spec, steps, ["runtime-context-reemitted"])[1] is None
