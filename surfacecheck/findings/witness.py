"""Hand-built minimal witness traces, one per registered finding (spec §15), from protocol ops only.

``python -m surfacecheck.findings.witness DIR`` writes them (``properties/findings/*.jsonl`` in the
checkout); each replays to exit 1 on the model and on the embedded runtime. Every builder is the
smallest story the gap's text in §15 tells: deleting any step makes the promise hold again.
"""
from __future__ import annotations

import sys
from pathlib import Path

from surfacecheck.core.trace import Step, Trace, write_trace

T0 = 1_700_000_000_000
POLICY = {"thresholdRatio": 0.5, "compactionRetries": 1, "maxOverflowRetries": 1, "maxTokens": 512}


class Story:
    """A trace under construction: numbered times, steps with spec-word labels."""

    def __init__(self) -> None:
        self.steps: list[Step] = [Step("reset", {}, "a new empty session")]
        self.time = T0

    def op(self, op: str, args: dict, label: str) -> "Story":
        self.steps.append(Step(op, args, label))
        return self

    def append(self, event: dict, label: str) -> "Story":
        self.time += 1
        return self.op("append", {"event": {**event, "time": self.time}}, label)

    def user(self, uid: str, text: str, label: str = "") -> "Story":
        data = {"id": uid, "role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": "user"}}
        return self.append({"type": "user/message", "data": data, "surfaceOp": "append"},
                           label or f"user/message {uid}: {len(text)} chars")

    def header(self, system: str = "") -> "Story":
        header = {"config": {"provider": "prov", "model": "mod"}}
        if system:
            header["system"] = system
        return self.append({"type": "request/header", "data": {"header": header, "reason": "initial"}},
                           f"request/header prov/mod{f' with a {len(system)}-char system prompt' if system else ''}")

    def turn(self, turn: int = 1) -> "Story":
        return self.append({"type": "turn/start", "data": {"turn": turn}}, f"turn/start {turn}")

    def step_start(self, turn: int, step: int) -> "Story":
        return self.append({"type": "step/start", "data": {"turn": turn, "step": step}}, f"step/start {turn}/{step}")

    def configure(self, window: int, **policy) -> "Story":
        merged = {**POLICY, **policy}
        return self.op("configure", {"policy": merged, "context_window": window},
                       f"policy {merged}, context window {window}")

    def tool_round(self, turn: int, step: int, call: str, result_text: str) -> "Story":
        meta = {"turn": turn, "step": step}
        msg = {"id": f"a-{call}", "role": "assistant", "content": [
            {"type": "tool-call", "id": call, "name": "read", "arguments": "{}"}],
            "source": {"kind": "model", "provider": "prov", "model": "mod"}}
        self.append({"type": "assistant/message", "data": {**meta, "message": msg}, "surfaceOp": "append"},
                     f"assistant/message with tool call {call}")
        self.append({"type": "tool/call", "data": {**meta, "callId": call, "name": "read", "arguments": "{}"}},
                     f"tool/call {call}")
        call_seq = sum(1 for s in self.steps if s.op == "append") - 1
        result = {"id": f"r-{call}", "role": "user", "source": {"kind": "tool", "callId": call}, "content": [
            {"type": "tool-result", "toolCallId": call, "content": [{"type": "text", "text": result_text}],
             "isError": False}]}
        return self.append({"type": "tool/result", "data": {**meta, "message": result}, "surfaceOp": "append",
                            "sourceEventSeqs": [call_seq]}, f"tool/result for {call}: {len(result_text)} chars")

    def trace(self, finding: str, prop: str, level: str) -> Trace:
        return Trace(source="verify", level=level, property=prop, steps=tuple(self.steps), runtime="model",
                     command=f"python -m surfacecheck.findings.witness properties/findings  # {finding}",
                     notes={"finding": finding})


def g1_unclaimed_replace() -> Trace:
    """§15 G1: a replacement with no adjacent claim folds with delta 0; the projection keeps the old price."""
    s = Story().user("u-1", "long " * 200)
    data = {"id": "ck-1", "role": "user", "content": [{"type": "text", "text": "checkpoint"}],
            "source": {"kind": "plugin", "plugin": "fixture"}}
    s.append({"type": "user/message", "data": data, "surfaceOp": {"op": "replace", "start": 0, "end": 0},
              "sourceEventSeqs": [0]}, "user/message replaces node 0 with no compaction/prune|summary claim")
    return s.trace("G1-unclaimed-replace-drift", "promise-projection-exact", "log")


def g7_shrink_floor() -> Trace:
    """§15 G7: overflow over [U(100), A(20)]-like surface: the range [U] is priced <= 103, cannot shrink."""
    s = Story().configure(200, auto=False).header().user("u-1", "x" * 360).user("u-2", "y" * 80).turn()
    s.op("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED"},
         "agent/request-error overflow: retain-0 summary of [u-1]")
    return s.trace("G7-shrink-floor", "promise-compaction-progress", "policy")


def g12_late_cancel() -> Trace:
    """§15 G12: the turn is aborted while the automatic summary runs; the summary returns and commits."""
    s = Story().configure(200).header().user("u-1", "x" * 800).user("u-2", "y" * 80).turn()
    s.op("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED", "summaries": [{"outcome": "late-cancel", "ratio": 0.1}]},
         "agent/request-error overflow; the turn is cancelled while the summarizer runs, which returns anyway")
    return s.trace("G12-automatic-ignores-cancellation", "promise-cancellation-respected", "policy")


def g16_partial_prune() -> Trace:
    """§15 G16: the overflow prune shrinks a tool result, the generation advances, retry; still over the window."""
    pruner = {"thresholdChars": 100, "headChars": 10, "tailChars": 10}
    s = Story().configure(200, toolResultPruner=pruner).header().user("u-1", "x" * 1200)
    s.turn().step_start(1, 1).tool_round(1, 1, "call-1", "r" * 400)
    s.op("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED", "summaries": [{"outcome": "failure"}]},
         "agent/request-error overflow: prune lands, the summary fails; retry on pruning alone")
    return s.trace("G16-partial-prune-progress", "promise-retry-after-real-progress", "policy")


def g4_envelope() -> Trace:
    """§15 G4/G14: a system prompt over the threshold: the pre-step summarizes twice and stays above it."""
    s = Story().configure(200).header(system="s" * 480).user("u-1", "x" * 800).user("u-2", "y" * 200).turn()
    s.op("pre_step", {}, "agent/pre-step pressure: summarize, re-summarize the checkpoint, still above threshold")
    return s.trace("G4-uncompactable-envelope", "promise-pressure-relieved", "policy")


def g2_context_window() -> Trace:
    """§15 G2: the pre-step's pressure compaction shadows the retained snapshot; this request lacks it."""
    ctx = [{"name": "sandbox", "text": "sandbox: read-only"}]
    s = Story().configure(400).header().user("u-1", "x" * 600).turn()
    s.op("pre_step", {"context": ctx, "step": {"turn": 1, "step": 1}}, "pre-step 1/1: enters the runtime snapshot")
    s.user("u-2", "y" * 260).user("u-3", "z" * 20)
    s.op("pre_step", {"context": ctx, "step": {"turn": 1, "step": 2}, "summaries": [{"outcome": "text", "text": "ok"}]},
         "pre-step 1/2: candidate none (retained = current), then pressure compacts the span holding the snapshot")
    return s.trace("G2-one-request-context-window", "promise-runtime-context-never-lost", "policy")


def g11_cancellation_wins() -> Trace:
    """§15 G11: /compact's caller aborts during the flush: the command says aborted, the checkpoint stands."""
    s = Story().user("u-1", "x" * 800).user("u-2", "y" * 80)
    s.op("manual_compact", {"faults": {"cancel_during_flush": True}},
         "/compact; the caller aborts while the committed checkpoint is flushed")
    return s.trace("G11-manual-cancellation-beats-success", "promise-cancellation-honest", "compaction")


def g8_lock_bypass() -> Trace:
    """§15 G8: a failed compaction/end leaves the lock held; overflow recovery prunes anyway and retries."""
    pruner = {"thresholdChars": 100, "headChars": 10, "tailChars": 10}
    s = Story().configure(200, toolResultPruner=pruner).header().user("u-1", "x" * 1200)
    s.turn().step_start(1, 1).tool_round(1, 1, "call-1", "r" * 400)
    s.op("compact", {"start": 1, "end": 1, "faults": {"fail_appends": ["compaction/end"]}},
         "compactRegion(u-1): the compaction/end append fails, the bracket stays open (orphan lock)")
    s.op("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED"},
         "agent/request-error overflow: prunes before the lock check, then compactRegion is busy")
    return s.trace("G8-overflow-prune-bypasses-lock", "promise-lock-respected", "policy")


BUILDERS = {"G1-unclaimed-replace-drift": g1_unclaimed_replace, "G7-shrink-floor": g7_shrink_floor,
            "G12-automatic-ignores-cancellation": g12_late_cancel, "G16-partial-prune-progress": g16_partial_prune,
            "G4-uncompactable-envelope": g4_envelope, "G2-one-request-context-window": g2_context_window,
            "G11-manual-cancellation-beats-success": g11_cancellation_wins,
            "G8-overflow-prune-bypasses-lock": g8_lock_bypass}

# further witness modules each define BUILDERS of their own (one module per family of promises)
_MORE = ("surfacecheck.findings.witness_context", "surfacecheck.findings.witness_measure")


def _extend() -> None:
    import importlib

    for module in _MORE:
        try:
            BUILDERS.update(importlib.import_module(module).BUILDERS)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module.startswith(exc.name):
                raise


_extend()


def minimal(finding: str) -> Trace:
    """The builder's trace, minimised by step deletion on the model, with its recorded violation."""
    from dataclasses import replace

    from .search import first_violation, minimise

    trace = BUILDERS[finding]()
    steps = tuple(minimise(list(trace.steps), trace.property))
    return replace(trace, steps=steps, violation=first_violation(steps, trace.property))


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "surfacecheck/properties/findings")
    for finding in BUILDERS:
        print(write_trace(out / f"{finding}.jsonl", minimal(finding)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
