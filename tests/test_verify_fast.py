"""verify's lockstep: the equal-answer shortcut, the pipelined state queries and the reused oracle answers
report each bent answer as the divergence from the model it is, and an injected runtime bug is still named."""
from __future__ import annotations

import copy
import sys

import pytest

from surfacecheck.core.protocol import ProtocolError, RuntimeUnavailable
from surfacecheck.runtime.embedded.runtime import copy_json
from surfacecheck.runtime.select import open_runtime
from surfacecheck.core.trace import Step
from surfacecheck.properties.stateful.lockstep import Lockstep
from surfacecheck.verify.runner import CI_SEED, run_level
from test_verify import USER, Skewed

SERVE = f"cmd:{sys.executable} -m surfacecheck.serve embedded"
TOOL_CALL = {"type": "assistant/message", "surfaceOp": "append", "data": {"turn": 1, "step": 1, "message": {
    "id": "a", "role": "assistant", "content": [{"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"}],
    "source": {"kind": "model", "provider": "prov", "model": "mod"}}}}
STEPS = [Step("reset", {}), Step("append", {"event": USER}), Step("append", {"event": TOOL_CALL}),
         Step("append", {"event": {**USER, "surfaceOp": {"op": "replace", "start": 0, "end": 0},
                                   "sourceEventSeqs": [0]}})]

BENDS = [  # one per comparison the lockstep makes after a step (spec 2.1, 3, 4.3, 5.1, 5.2, 1.1), with the
    # divergence from the model it must be reported as: (property, step, where the answers first differ)
    ("surface", lambda r: {**r, "nodes": r["nodes"][:-1]},
     ("lockstep-surface", 2, "state surface after the step differs from the model at .nodes (length 1 expected, 0 observed)")),
    ("surface", lambda r: {**r, "generation": r["generation"] + 1},
     ("lockstep-generation", 1, "state surface after the step differs from the model at .generation: expected 0, observed 1")),
    ("cuts", lambda r: {"balanced": r["balanced"][:-1] + [not r["balanced"][-1]]},
     ("lockstep-cuts", 1, "state cuts after the step differs from the model at .balanced[0]: expected True, observed False")),
    ("measure", lambda r: {**r, "prices": [p + 1 for p in r["prices"]]} if "prices" in r else r,
     ("lockstep-measure", 2, "state measure after the step differs from the model at .prices[0]: expected 9, observed 10")),
    ("projection", lambda r: {**r, "total": (r["total"] or 0) + 1},
     ("lockstep-projection", 1, "state projection after the step differs from the model at .total: expected 0, observed 1")),
    ("projection", lambda r: {**r, "usage": {**r["usage"], "outputTokens": 7}} if r.get("usage") else r,
     ("lockstep-usage", 1, ("state token usage after the step differs from the model at .usage.outputTokens: "
                            "expected 0, observed 7"))),
    ("append", lambda r: {**r, "generation": r.get("generation", 0) + 1},
     ("lockstep-result", 2, "append result differs from the model at .generation: expected 0, observed 1")),
    ("events", lambda r: {"events": [{**e, "time": e["time"] + 1} for e in r["events"]]},
     ("lockstep-log", 2, "the events the step wrote differs from the model at .events[0].time: expected 0, observed 1")),
    ("events", lambda r: {"events": r["events"][:-1]},
     ("lockstep-log", 2, "the events the step wrote differs from the model at .events (length 1 expected, 0 observed)")),
]


class Piped(Skewed):
    """The bent runtime answering like a pipe does: ``call_many``, every answer (or its exception) returned."""

    def __init__(self, op, bend):
        super().__init__(op, bend)
        self.batches = 0

    def call_many(self, requests):
        self.batches += 1
        out = []
        for op, args in requests:
            try:
                out.append(self.call(op, args))
            except (ProtocolError, RuntimeUnavailable) as exc:
                out.append(exc)
        return out


def _first(lockstep):
    for step in STEPS:
        _result, violation = lockstep.run(step)
        if violation is not None:
            return violation.to_json()
    return None


@pytest.mark.parametrize("op, bend, divergence", BENDS)
def test_the_shortcut_and_the_pipeline_report_the_divergence(op, bend, divergence):
    prop, step, where = divergence
    found = _first(Lockstep(Skewed(op, bend), open_runtime("model")))
    assert found is not None, "the bend is a bug the lockstep must see"
    assert (found["property"], found["step"], found["message"]) == (prop, step, f"step {step}: {where}")
    piped = Piped(op, bend)
    assert _first(Lockstep(piped, open_runtime("model"))) == found
    assert piped.batches >= 1


def test_equal_answers_leave_the_reference_answers_for_the_machine():
    lockstep = Lockstep(open_runtime("embedded"), open_runtime("model"))
    model = open_runtime("model")
    for step in STEPS:
        assert lockstep.run(step)[1] is None
        model.call(step.op, step.args)
        assert {op: lockstep.expected[op] for op in ("surface", "cuts", "measure", "projection")} == \
            {op: model.call(op, {}) for op in ("surface", "cuts", "measure", "projection")}


def test_call_many_over_a_pipe_answers_in_order_and_leaves_no_stale_line():
    runtime = open_runtime(SERVE)
    try:
        answers = runtime.call_many([("reset", {}), ("append", {"event": USER}), ("no-such-op", {}),
                                     ("surface", {}), ("events", {"from": 0})])
        assert answers[0] == {"generation": 0} and answers[1]["seq"] == 0
        assert isinstance(answers[2], ProtocolError) and answers[2].type == "unknown-op"
        assert answers[3]["nodes"] == [0] and [e["seq"] for e in answers[4]["events"]] == [0]
        assert runtime.call("surface", {}) == answers[3]  # the next single request reads its own answer
        unsent = runtime.call_many([("append", {"event": {"bad": {1, 2}}}), ("surface", {})])
        assert isinstance(unsent[0], ProtocolError) and unsent[0].type == "bad-args" and unsent[1] == answers[3]
    finally:
        runtime.close()


def test_a_pipelined_verify_finds_an_injected_bug_as_one_request_at_a_time_does():
    """A lost claim fold (spec 5.1) in the runtime under test: with and without ``call_many`` it is named, at the
    same step of the same trace."""
    def bend(r):
        return {**r, "total": (r["total"] or 0) + 1} if r.get("total") else r

    def run(runtime):
        return run_level(runtime, open_runtime("model"), "log", "smoke", CI_SEED, shrink=False)

    piped, single = run(Piped("projection", bend)), run(Skewed("projection", bend))
    assert piped.violation is not None and piped.violation.property == "lockstep-projection"
    assert "differs from the model at .total" in piped.violation.message
    assert piped.violation.to_json() == single.violation.to_json()
    assert [(s.op, s.args) for s in piped.trace_steps] == [(s.op, s.args) for s in single.trace_steps]


def test_copy_json_copies_a_logged_event_as_deepcopy_did():
    event = {**TOOL_CALL, "seq": 3, "time": 1, "sourceEventSeqs": [1, 2]}
    copied = copy_json(event)
    assert copied == copy.deepcopy(event)
    copied["data"]["message"]["content"][0]["id"] = "changed"
    copied["sourceEventSeqs"].append(9)
    assert event["data"]["message"]["content"][0]["id"] == "c1" and event["sourceEventSeqs"] == [1, 2]
