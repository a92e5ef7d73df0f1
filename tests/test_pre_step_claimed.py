"""``pre_step {claimed}`` (spec 13 steps 4-7, D9): the claimed inbox batch is entered after `step/start` and
before the runtime-context snapshot, which stays the last member of the entered batch; the pressure listener
runs first and cannot see the batch. Both runtimes write the same events (the embedded one has no model folds)."""
from __future__ import annotations

import jsonschema
import pytest

from surfacecheck.explore.oracle import Settings
from surfacecheck.explore.tracegen import concretise
from surfacecheck.core.protocol import ProtocolError
from surfacecheck.runtime.schemas import documents
from surfacecheck.runtime.select import open_runtime

RUNTIMES = ("model", "embedded")
SANDBOX = [{"name": "sandbox", "text": "sandbox: read-only"}]
HEADER = {"type": "request/header", "data": {"header": {"config": {"provider": "prov", "model": "mod"}},
                                             "reason": "initial"}}


def prompt(mid: str, words: int = 3) -> dict:
    return {"id": mid, "role": "user", "source": {"kind": "user"},
            "content": [{"type": "text", "text": "queued prompt " * words}]}


def log_of(rt) -> list[tuple]:
    """(seq, type, data, surfaceOp) of every event, the same shape for both runtimes."""
    out = []
    for event in rt.session.log:
        if isinstance(event, dict):
            out.append((event["seq"], event["type"], event["data"], event.get("surfaceOp")))
        else:
            doc = event.to_json()
            out.append((doc["seq"], doc["type"], doc["data"], doc.get("surfaceOp")))
    return out


@pytest.mark.parametrize("spec", RUNTIMES)
def test_claimed_messages_land_between_step_start_and_the_snapshot(spec):
    rt = open_runtime(spec)
    rt.call("reset", {})
    rt.call("append", {"event": {"type": "turn/start", "data": {"turn": 1}}})
    claimed = [prompt("p1"), prompt("p2")]
    result = rt.call("pre_step", {"context": SANDBOX, "step": {"turn": 1, "step": 1}, "claimed": claimed})
    assert result["appended"] == ["step/start", "user/message", "user/message", "user/message"]
    assert result["snapshot"] == 4  # last of the entered batch (D9)
    log = log_of(rt)
    assert [(seq, type_) for seq, type_, _, _ in log] == [
        (0, "turn/start"), (1, "step/start"), (2, "user/message"), (3, "user/message"), (4, "user/message")]
    assert [log[2][2], log[3][2]] == claimed and log[2][3] == log[3][3] == "append"
    assert log[4][2]["source"]["plugin"] == "@deepseek-ai/dsh-system-prompt"
    assert rt.call("surface", {})["nodes"] == [2, 3, 4]


@pytest.mark.parametrize("spec", RUNTIMES)
def test_without_context_the_claimed_batch_is_entered_alone(spec):
    rt = open_runtime(spec)
    rt.call("reset", {})
    result = rt.call("pre_step", {"step": {"turn": 1, "step": 1}, "claimed": [prompt("p")]})
    assert result["appended"] == ["step/start", "user/message"] and "snapshot" not in result
    assert rt.call("pre_step", {"claimed": []})["appended"] == []


def _pressure_steps() -> list[tuple[str, dict]]:
    """Pressure compacts at step 2; the claimed prompt comes after the compaction and step/start (spec 9.2)."""
    big = [("append", {"event": {"type": "user/message", "surfaceOp": "append", "data": prompt(f"u{i}", 15)}})
           for i in range(4)]
    return ([("reset", {}),
             ("configure", {"policy": {"thresholdRatio": 0.5, "retainTokens": 40, "maxTokens": 64},
                            "context_window": 400}),
             ("append", {"event": HEADER}), ("append", {"event": {"type": "turn/start", "data": {"turn": 1}}}),
             ("pre_step", {"context": SANDBOX, "step": {"turn": 1, "step": 1}, "claimed": [prompt("first")]})]
            + big + [("append", {"event": {"type": "step/end", "data": {"turn": 1, "step": 1}}}),
                     ("pre_step", {"context": SANDBOX, "step": {"turn": 1, "step": 2},
                                   "claimed": [prompt("second"), prompt("third")]}),
                     ("append", {"event": {"type": "step/end", "data": {"turn": 1, "step": 2}}}),
                     ("pre_step", {"context": SANDBOX, "step": {"turn": 1, "step": 3},
                                   "claimed": [prompt("fourth")]})])


def test_both_runtimes_agree_in_lockstep_and_pressure_cannot_see_the_batch():
    model, embedded = open_runtime("model"), open_runtime("embedded")
    results = []
    for op, args in _pressure_steps():
        results.append(model.call(op, args))
        assert embedded.call(op, args) == results[-1], (op, args)
    assert log_of(embedded) == log_of(model)
    assert embedded.call("surface", {}) == model.call("surface", {})
    assert embedded.call("measure", {}) == model.call("measure", {})
    second, third = results[-3], results[-1]
    # step 2: the listener compacts before the batch is entered; the shadowed snapshot waits (spec 12 window)
    assert second["appended"][-3:] == ["step/start", "user/message", "user/message"]
    assert "compaction/start" in second["appended"] and second["snapshot"] is None
    # step 3: the claimed prompt, then the re-entered snapshot last (D9)
    assert third["appended"][-3:] == ["step/start", "user/message", "user/message"] and third["snapshot"] is not None
    log = log_of(model)
    assert [data["id"] for _, _, data, _ in log[-2:]] == ["fourth", f"runtime-context-{third['snapshot']}"]
    assert log[-1][0] == third["snapshot"]
    assert model.call("surface", {})["nodes"][-2:] == [log[-2][0], log[-1][0]]


@pytest.mark.parametrize("spec", RUNTIMES)
@pytest.mark.parametrize("bad", ["x", [1], [None], [{"n": float("nan")}], {"id": "p"}])
def test_a_bad_claimed_batch_is_a_protocol_error_that_writes_nothing(spec, bad):
    rt = open_runtime(spec)
    rt.call("reset", {})
    with pytest.raises(ProtocolError):
        rt.call("pre_step", {"context": SANDBOX, "step": {"turn": 1, "step": 1}, "claimed": bad})
    assert rt.call("surface", {})["nodes"] == [] and len(rt.session.log) == 0


def test_the_schema_accepts_and_rejects_claimed():
    validator = jsonschema.Draft202012Validator(documents()["pre_step.args.json"])
    for good in ({"claimed": [prompt("p")]}, {"claimed": []}, {"claimed": None},
                 {"context": [], "step": {"turn": 1, "step": 1}, "claimed": [prompt("a"), prompt("b")]}):
        validator.validate(good)
    for bad in ({"claimed": "p"}, {"claimed": [1]}, {"claimed": [[]]}, {"claimed": {"id": "p"}}):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate(bad)


def test_explore_traces_send_the_queued_prompt_as_claimed():
    """The explorer's step action claims the queued prompt in ``pre_step`` (dsh order: prompt, then snapshot)."""
    driver, states = concretise(["ctx:X", "prompt:V", "step:good"], Settings())
    pre = [step for step in driver.steps if step.op == "pre_step"][-1]
    assert len(pre.args["claimed"]) == 1 and pre.args["claimed"][0]["source"] == {"kind": "user"}
    assert not any(step.op == "append" and step.args["event"]["type"] == "user/message" for step in driver.steps)
    log = driver.session.log
    assert [e.type for e in log[-3:]] == ["step/start", "user/message", "user/message"]
    assert log[-2].data["source"] == {"kind": "user"} and log[-1].data["source"]["kind"] == "plugin"
    assert states[-1][2][-2:] == ("V", "cX")  # α: the world's surface ends prompt, snapshot
