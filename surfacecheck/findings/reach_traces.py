"""Public-API reachability traces (issue 15 point 2): a defect's story told in the order dsh's own agent loop
writes events, for findings whose minimal witness takes a protocol shortcut (a prompt appended outside a
step, a header logged before the turn).

The loop's order (spec 13): ``turn/start``; the pre-step (the pressure listener, then ``step/start``, the
claimed inbox batch and the runtime-context snapshot, D9); ``request/header`` when ``buildRequest`` logs the
route; the model's ``assistant/message``; ``step/end``. Each trace must break its promise on the model and
replay exit 1 on ``--runtime dsh`` (tests/test_findings_argument.py);
``python -m surfacecheck.findings.reach_traces properties/findings/reachability`` writes them.
"""
from __future__ import annotations

import sys
from pathlib import Path

from surfacecheck.trace import Trace, write_trace

from .witness import Story

SANDBOX = [{"name": "sandbox", "text": "sandbox: read-only"}]


def _prompt(uid: str, text: str) -> dict:
    return {"id": uid, "role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": "user"}}


def _reply(s: Story, turn: int, step: int, text: str) -> Story:
    message = {"id": f"a-{turn}-{step}", "role": "assistant", "content": [{"type": "text", "text": text}],
               "source": {"kind": "model", "provider": "prov", "model": "mod"}}
    return s.append({"type": "assistant/message", "data": {"turn": turn, "step": step, "message": message},
                     "surfaceOp": "append"}, f"assistant/message {turn}/{step}: {len(text)} chars")


def _first_step(s: Story) -> Story:
    """Turn 1, step 1 as the loop runs it: the prompt claimed, the snapshot entered, the route logged, a reply."""
    s.turn()
    s.op("pre_step", {"context": SANDBOX, "step": {"turn": 1, "step": 1}, "claimed": [_prompt("u-1", "x" * 600)]},
         "pre-step 1/1: no route logged yet (no pressure); step/start, the claimed prompt, the snapshot entered")
    s.header()
    _reply(s, 1, 1, "y" * 260)
    return s.append({"type": "step/end", "data": {"turn": 1, "step": 1}}, "step/end 1/1")


def g2_context_window() -> Trace:
    """§15 G2 in dsh's order: step 2's pre-step projects no candidate (the retained snapshot is current), then
    its pressure compaction shadows the head span holding the snapshot: step 2's request lacks it."""
    s = _first_step(Story().configure(400))
    s.op("pre_step", {"context": SANDBOX, "step": {"turn": 1, "step": 2}, "summaries": [{"outcome": "text", "text": "ok"}]},
         "pre-step 1/2: candidate none (retained = current), then pressure compacts the span holding the snapshot")
    return _trace(s, "G2-one-request-context-window", "promise-runtime-context-never-lost")


def g2_overflow_retries() -> Trace:
    """§15 G2 overflow variant in dsh's order: as above, then step 2's request overflows; the same-step retry
    (spec 10.3: no re-projection) goes out without the snapshot too: two requests in a row."""
    s = _first_step(Story().configure(400))
    s.op("pre_step", {"context": SANDBOX, "step": {"turn": 1, "step": 2},
                      "summaries": [{"outcome": "text", "text": "k" * 120}]},
         "pre-step 1/2: no candidate, then pressure compacts the span holding the snapshot: request 1 lacks it")
    s.op("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED", "summaries": [{"outcome": "text", "text": "ok"}]},
         "overflow: retain-0 re-summarizes the checkpoint, retry authorized; the retry lacks it too")
    return _trace(s, "G2-overflow-retries-widen-context-window", "promise-runtime-context-one-request")


def _trace(s: Story, finding: str, prop: str) -> Trace:
    from dataclasses import replace

    from .search import first_violation

    trace = replace(s.trace(finding, prop, "policy"), source="verify",
                    command=f"python -m surfacecheck.findings.reach_traces properties/findings/reachability  # {finding}",
                    notes={"finding": finding, "reachability": "public-api, in dsh's own event order"})
    return replace(trace, violation=first_violation(trace.steps, prop))


BUILDERS = {"G2-one-request-context-window": g2_context_window,
            "G2-overflow-retries-widen-context-window": g2_overflow_retries}


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "properties/findings/reachability")
    for finding, build in BUILDERS.items():
        trace = build()
        if trace.violation is None:
            print(f"{finding}: the dsh-order story no longer breaks {trace.property} on the model", file=sys.stderr)
            return 1
        print(write_trace(out / f"{finding}.jsonl", trace))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
