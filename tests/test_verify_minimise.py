"""Step deletion cuts a verify trace to a 1-minimal one that still fails the same way."""
from __future__ import annotations

from dataclasses import replace

from surfacecheck.runtime.select import open_runtime
from surfacecheck.core.trace import Step, Trace, Violation
from surfacecheck.verify.minimise import minimise_trace
from surfacecheck.verify.replay import replay_trace

import seeded_bugs  # noqa: F401 - registers the embedded:<bug> runtimes


def _user(text: str) -> Step:
    event = {"type": "user/message", "data": {"id": f"u-{text}", "role": "user", "source": {"kind": "user"},
                                              "content": [{"type": "text", "text": text}]},
             "surfaceOp": "append"}
    return Step("append", {"event": event}, f"user/message {text}")


def test_padding_is_deleted_and_the_same_failure_remains():
    bug = "embedded:generation-bumped-on-append"
    padded = (Step("reset", {}, "a new empty session"),) + tuple(_user(str(i)) for i in range(6)) + (Step("surface", {}),)
    trace = Trace("verify", "log", "lockstep-result", padded, Violation("lockstep-result", "x", 2), runtime=bug)
    assert replay_trace(trace, bug).same
    cut = minimise_trace(trace, open_runtime(bug))
    assert len(cut.steps) < len(trace.steps)
    assert cut.steps[0].op == "reset"
    assert replay_trace(cut, bug).same  # still the same failure ...
    for i in range(1, len(cut.steps)):  # ... and no single step can go
        assert not replay_trace(replace(cut, steps=cut.steps[:i] + cut.steps[i + 1:]), bug).same
    assert replay_trace(cut, "embedded").violation is None  # and the correct runtime passes it
