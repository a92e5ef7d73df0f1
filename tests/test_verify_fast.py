"""verify's faster lockstep (issue 4 part 2): the equal-answer shortcut, the pipelined state queries and the
reused oracle answers report exactly what the old path reported, and an injected runtime bug is still named."""
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

BENDS = [  # one per comparison the lockstep makes after a step (spec 2.1, 3, 4.3, 5.1, 5.2, 1.1)
    ("surface", lambda r: {**r, "nodes": r["nodes"][:-1]}),
    ("surface", lambda r: {**r, "generation": r["generation"] + 1}),
    ("cuts", lambda r: {"balanced": r["balanced"][:-1] + [not r["balanced"][-1]]}),
    ("measure", lambda r: {**r, "prices": [p + 1 for p in r["prices"]]} if "prices" in r else r),
    ("projection", lambda r: {**r, "total": (r["total"] or 0) + 1}),
    ("projection", lambda r: {**r, "usage": {**r["usage"], "outputTokens": 7}} if r.get("usage") else r),
    ("append", lambda r: {**r, "generation": r.get("generation", 0) + 1}),
    ("events", lambda r: {"events": [{**e, "time": e["time"] + 1} for e in r["events"]]}),
    ("events", lambda r: {"events": r["events"][:-1]}),
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


@pytest.mark.parametrize("op, bend", BENDS)
def test_the_shortcut_and_the_pipeline_report_the_old_divergence(op, bend):
    old = _first(Lockstep(Skewed(op, bend), open_runtime("model"), fast=False))
    assert old is not None and old["property"].startswith("lockstep-"), old  # the bend is a bug the lockstep sees
    assert _first(Lockstep(Skewed(op, bend), open_runtime("model"))) == old
    piped = Piped(op, bend)
    assert _first(Lockstep(piped, open_runtime("model"))) == old
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


def test_a_pipelined_verify_finds_an_injected_bug_as_the_old_path_does():
    """A lost claim fold (spec 5.1) in the runtime under test: both paths name it, at the same step."""
    def run(fast):
        bent = Piped("projection", lambda r: {**r, "total": (r["total"] or 0) + 1} if r.get("total") else r)
        return run_level(bent, open_runtime("model"), "log", "smoke", CI_SEED, shrink=False, fast=fast)

    old, new = run(False), run(True)
    assert old.violation is not None and old.violation.property == "lockstep-projection"
    assert new.violation.to_json() == old.violation.to_json()
    assert [(s.op, s.args) for s in new.trace_steps] == [(s.op, s.args) for s in old.trace_steps]


def test_copy_json_copies_a_logged_event_as_deepcopy_did():
    event = {**TOOL_CALL, "seq": 3, "time": 1, "sourceEventSeqs": [1, 2]}
    copied = copy_json(event)
    assert copied == copy.deepcopy(event)
    copied["data"]["message"]["content"][0]["id"] = "changed"
    copied["sourceEventSeqs"].append(9)
    assert event["data"]["message"]["content"][0]["id"] == "c1" and event["sourceEventSeqs"] == [1, 2]
