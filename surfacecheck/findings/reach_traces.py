"""Public-API reachability traces: a defect's story told in the order dsh's own agent loop
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

from surfacecheck.core.trace import Trace, write_trace

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


def _step(s: Story, turn: int, step: int, claimed: list[dict], label: str, **extra) -> Story:
    """One pre-step as the loop runs it (the listener, then step/start and the claimed batch)."""
    return s.op("pre_step", {"step": {"turn": turn, "step": step}, "claimed": claimed, **extra}, label)


def _end(s: Story, turn: int, step: int) -> Story:
    return s.append({"type": "step/end", "data": {"turn": turn, "step": step}}, f"step/end {turn}/{step}")


def g4_envelope() -> Trace:
    """§15 G4/G14 in dsh's order: the route logged with a 480-char system prompt in step 1; step 2's pre-step
    summarizes, re-summarizes the lone checkpoint and is still above the threshold."""
    s = Story().configure(200).turn()
    _step(s, 1, 1, [_prompt("u-1", "x" * 800)], "pre-step 1/1: no route logged yet; the prompt claimed")
    s.header(system="s" * 480)
    _end(_reply(s, 1, 1, "y" * 200), 1, 1)
    _step(s, 1, 2, [], "pre-step 1/2 pressure: summarize, re-summarize the checkpoint, still above threshold")
    return _trace(s, "G4-uncompactable-envelope", "promise-pressure-relieved")


def g7_shrink_floor() -> Trace:
    """§15 G7 in dsh's order: step 2's request overflows over [u-1 (~100 tokens), reply]; the retain-0 range is
    [u-1], priced under the 103-token floor: 'summary is not smaller'."""
    s = Story().turn()
    _step(s, 1, 1, [_prompt("u-1", "x" * 360)], "pre-step 1/1 (no context capacity known: no pressure): the prompt claimed")
    s.header()
    _end(_reply(s, 1, 1, "y" * 80), 1, 1)
    _step(s, 1, 2, [], "pre-step 1/2")
    s.op("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED"}, "agent/request-error overflow: retain-0 summary of [u-1]")
    return _trace(s, "G7-shrink-floor", "promise-compaction-progress")


def g12_late_cancel() -> Trace:
    """§15 G12 in dsh's order: step 1 claims a prompt and a steer, its request overflows, the turn is cancelled
    while the automatic summary runs, the summary returns and commits."""
    s = Story().configure(200).turn()
    _step(s, 1, 1, [_prompt("u-1", "x" * 800), _prompt("u-2", "y" * 80)],
          "pre-step 1/1: no route logged yet; the prompt and a steer claimed")
    s.header()
    s.op("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED", "summaries": [{"outcome": "late-cancel", "ratio": 0.1}]},
         "agent/request-error overflow; the turn is cancelled while the summarizer runs, which returns anyway")
    return _trace(s, "G12-automatic-ignores-cancellation", "promise-cancellation-respected")


def g16_partial_prune() -> Trace:
    """§15 G16 in dsh's order: step 1 runs a tool with a 400-char result; step 2 claims a large steer the
    pressure listener cannot see (G13), the request overflows, the prune lands, the summary fails: retry on
    pruning alone, still over the window."""
    pruner = {"thresholdChars": 100, "headChars": 10, "tailChars": 10}
    s = Story().configure(400, toolResultPruner=pruner).turn()
    _step(s, 1, 1, [_prompt("u-1", "x" * 40)], "pre-step 1/1: the prompt claimed")
    s.header()
    _end(s.tool_round(1, 1, "call-1", "r" * 400), 1, 1)
    _step(s, 1, 2, [_prompt("u-2", "z" * 1600)], "pre-step 1/2: below threshold; a 1600-char steer claimed after it")
    s.op("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED", "summaries": [{"outcome": "failure"}]},
         "agent/request-error overflow: prune lands, the summary fails; retry on pruning alone")
    return _trace(s, "G16-partial-prune-progress", "promise-retry-after-real-progress")


def g15_warn_once_collision() -> Trace:
    """§15 G15 in dsh's order: retainTokens 300 from load; with no context capacity step 2's pre-step warns
    for prov/mod; the adapter's model then gains contextWindow 400 (only the adapter reloads, the engine keeps
    its warned set) and step 3's 'retainTokens (300) must be less than threshold tokens 200' is never logged."""
    s = Story().configure(None, retainTokens=300).turn()
    _step(s, 1, 1, [_prompt("u-1", "hello")], "pre-step 1/1: no route logged yet; the prompt claimed")
    s.header()
    _end(_reply(s, 1, 1, "ok"), 1, 1)
    _step(s, 1, 2, [], "pre-step 1/2: no context capacity for prov/mod: warned, key prov/mod remembered")
    _end(_reply(s, 1, 2, "ok"), 1, 2)
    s.configure(400, retainTokens=300)
    s.steps[-1] = type(s.steps[-1])(s.steps[-1].op, s.steps[-1].args,
                                     "the adapter's model gains contextWindow 400; compaction-basic's policy unchanged")
    _step(s, 1, 3, [], "pre-step 1/3: retainTokens (300) >= threshold 200 for prov/mod: silently skipped")
    return _trace(s, "G15-warn-once-key-collision", "promise-config-errors-reported")


def g13_entering_batch() -> Trace:
    """§15 G13 in dsh's order: step 2's pre-step measures the logged surface (19 tokens) and lets out a request
    carrying the 4000-char steer it claimed after the listener ran."""
    s = Story().configure(1000).turn()
    _step(s, 1, 1, [_prompt("u-1", "hello")], "pre-step 1/1: the prompt claimed")
    s.header()
    _end(_reply(s, 1, 1, "ok"), 1, 1)
    _step(s, 1, 2, [_prompt("u-2", "x" * 4000)], "pre-step 1/2: the listener measures, then a 4000-char steer is entered")
    return _trace(s, "G13-entering-batch-blind-spot", "promise-measure-conservative")


def g5_indivisible() -> Trace:
    """§15 G5, the variant dsh's loop writes: one huge prompt, no runtime context after it; the request
    overflows and the retention walk keeps the newest (only) node: nothing is compactable."""
    s = Story().configure(200).turn()
    _step(s, 1, 1, [_prompt("u-1", "x" * 2000)], "pre-step 1/1: no route logged yet; a 2000-char prompt claimed")
    s.header()
    s.op("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED"}, "agent/request-error overflow: no compactable range")
    return _trace(s, "G5-indivisible-tool-unit", "promise-span-compactable")


def _trace(s: Story, finding: str, prop: str) -> Trace:
    from dataclasses import replace

    from .search import first_violation

    trace = replace(s.trace(finding, prop, "policy"), source="verify",
                    command=f"python -m surfacecheck.findings.reach_traces properties/findings/reachability  # {finding}",
                    notes={"finding": finding, "reachability": "public-api, in dsh's own event order"})
    return replace(trace, violation=first_violation(trace.steps, prop))


BUILDERS = {"G2-one-request-context-window": g2_context_window,
            "G2-overflow-retries-widen-context-window": g2_overflow_retries,
            "G4-uncompactable-envelope": g4_envelope, "G7-shrink-floor": g7_shrink_floor,
            "G12-automatic-ignores-cancellation": g12_late_cancel, "G16-partial-prune-progress": g16_partial_prune,
            "G15-warn-once-key-collision": g15_warn_once_collision,
            "G13-entering-batch-blind-spot": g13_entering_batch, "G5-indivisible-tool-unit": g5_indivisible}


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "surfacecheck/properties/findings/reachability")
    for finding, build in BUILDERS.items():
        trace = build()
        if trace.violation is None:
            print(f"{finding}: the dsh-order story no longer breaks {trace.property} on the model", file=sys.stderr)
            return 1
        print(write_trace(out / f"{finding}.jsonl", trace))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
