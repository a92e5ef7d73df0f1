"""The seeded-bug hooks of the embedded runtime (issue 4 point 6 support; ``surfacecheck.runtime.embedded.bugs``).

Each example bug overrides one protected method; the test shows that the lockstep comparison with
the model catches it on a short scenario, that the correct runtime passes the same scenario (the
negative control), and that a registered bug opens by name through ``open_runtime``.
"""
from __future__ import annotations

import pytest

from surfacecheck.runtime.embedded import EmbeddedRuntime
from surfacecheck.runtime.embedded.bugs import BUGS, override, seeded_bug, variant
from surfacecheck.runtime.embedded.meter import IncrementalMeter
from surfacecheck.runtime.embedded.pairing import PairingCache
from surfacecheck.runtime.embedded.policy import Engine
from surfacecheck.runtime.embedded.projection import ShadowPriceProjection
from surfacecheck.runtime.embedded.surface import SurfaceManager
from surfacecheck.runtime.embedded.transaction import Transaction
from surfacecheck.runtime.model_runtime import ModelRuntime
from surfacecheck.runtime.select import open_runtime
from test_embedded_levels import text_of
from test_embedded_log import assistant_calls, call, checkpoint, state, tool_result, user

STATE_OPS = ("surface", "cuts", "measure", "projection")
METERED = [("append", {"event": user("abcd")}), ("append", {"event": user("abcd")}),
           ("append", {"event": {"type": "compaction/summary", "data": {
               "shadowedRange": {"start": 0, "end": 0}, "shadowedTokenCount": 9}}}),
           ("append", {"event": checkpoint("abcdabcd", 0, 0, [0])})]
TOOL_ROUND = [("append", {"event": user("a")}), ("append", {"event": assistant_calls(1)}),
              ("append", {"event": tool_result()}), ("cuts", {}),
              ("append", {"event": checkpoint("s", 0, 2, [0, 1, 2])}), ("append", {"event": assistant_calls(1)})]
CLAIM_EXPIRY = [("append", {"event": user("abcd")}), ("append", {"event": {"type": "compaction/summary", "data": {
    "shadowedRange": {"start": 0, "end": 0}, "shadowedTokenCount": 9}}}),
    ("append", {"event": {"type": "turn/start", "data": {}}}), ("append", {"event": checkpoint("abcdabcd", 0, 0, [0])})]
big = {"type": "user/message", "surfaceOp": "append", "data": {"role": "user", "id": "u", "source": {"kind": "user"},
                                                               "content": [{"type": "text", "text": text_of(300)}]}}
OVERFLOW = [("configure", {"policy": {"maxOverflowRetries": 1}, "context_window": 2000}),
            ("append", {"event": {"type": "request/header", "data": {"header": {"config": {"provider": "p",
                                                                                             "model": "m"}}}}}),
            ("append", {"event": {"type": "turn/start", "data": {"turn": 1}}}),
            ("append", {"event": big}), ("append", {"event": big}),
            ("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED", "summary": {"outcome": "failure"}})]
SHRINK = [("append", {"event": {"type": "turn/start", "data": {"turn": 1}}}), ("append", {"event": big}),
          ("append", {"event": user("tail")}), ("compact", {"start": 1, "end": 1, "summary": {"outcome": "text",
                                                                                              "ratio": 5.0}})]

EXAMPLES = {
    "generation-bumped-on-append": (dict(surface=override(SurfaceManager, apply=lambda self, plan: (
        SurfaceManager.apply(self, plan), plan[0] == "append" and SurfaceManager._bump_generation(self)))), METERED),
    "cache-not-rebuilt": (dict(pairing=override(PairingCache, _needs_rebuild=lambda self, nodes, gen: False)),
                          TOOL_ROUND),
    "cut-off-by-one": (dict(pairing=override(PairingCache, _cut_balanced=staticmethod(lambda running: running <= 1))),
                       TOOL_ROUND),
    "claim-not-expired": (dict(projection=override(ShadowPriceProjection, _expire_claim=lambda self: None)),
                          CLAIM_EXPIRY),
    "replace-not-repriced": (dict(meter=override(IncrementalMeter, _replace_span=lambda self, seq, tokens, span: (
        IncrementalMeter._replace_span(self, seq, tokens, (span[0], span[1], 0))))), METERED),
    "retry-without-progress": (dict(engine=override(Engine, retry_allowed=staticmethod(
        lambda advanced, aborted, error: not aborted))), OVERFLOW),
    "shrink-rule-ignored": (dict(transaction=override(Transaction, shrink_rule=staticmethod(lambda f, s: None))),
                            SHRINK),
}


def diverges(runtime, requests) -> bool:
    model = ModelRuntime()
    for op, args in requests:
        if call(runtime, op, args) != call(model, op, args) or state(runtime) != state(model):
            return True
    return False


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_bug_is_caught_and_correct_runtime_is_not(name):
    parts, scenario = EXAMPLES[name]
    assert not diverges(EmbeddedRuntime(), scenario)  # negative control: the correct runtime agrees
    assert diverges(variant(name, **parts)(), scenario)


def test_seeded_bug_registers_an_openable_runtime():
    bug = seeded_bug("test-claim-not-expired", section="spec 5.1", idea="an intervening event does not expire the claim",
                     projection=override(ShadowPriceProjection, _expire_claim=lambda self: None))
    runtime = open_runtime("embedded:test-claim-not-expired")
    assert runtime.name == bug.spec == "embedded:test-claim-not-expired" and BUGS[bug.name] is bug
    assert runtime.hello()["name"] == "embedded:test-claim-not-expired"
    assert diverges(runtime, CLAIM_EXPIRY)
    assert type(EmbeddedRuntime().projection) is ShadowPriceProjection  # the correct runtime is untouched


def test_unknown_component_is_refused():
    with pytest.raises(TypeError, match="unknown component"):
        variant("x", planner=object)
