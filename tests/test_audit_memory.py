"""The audit streams: its fold state is bounded by the surface, not by the log's length (issue 3).

A generator writes a long, valid dsh-shaped log (tool turns, streamed chunks with usage, a
/compact-style standalone bracket
every few turns so the surface stays small) straight to disk; the audit of 5·10^3 and 5·10^4
events must reach the same peak memory (tracemalloc), within a small margin. Not timed.
(5·10^3 vs 5·10^4 here to keep CI fast; the 10^6 figure is measured by hand, see docs/audit.md.)
"""
from __future__ import annotations

import gc
import json
import tracemalloc
from pathlib import Path

import pytest

from surfacecheck.model.event import Event
from surfacecheck.model.meter import node_price
from surfacecheck.audit.auditor import Auditor
from surfacecheck.audit.reader import AuditStream

TEXT = "Inspect the next module and report its exports. " * 2
MODEL = {"provider": "mock", "model": "mock-chat"}


def _events(n: int, compact_every: int = 8):
    """Yield (record) dicts of a valid log with at least `n` events (spec 1.1 envelope, 8.2 brackets)."""
    seq, nodes, prices, turn = 0, [], {}, 0

    def rec(type_, data, **extra):
        nonlocal seq
        out = {"type": type_, "seq": seq, "time": 1_800_000_000_000 + seq, "data": data, **extra}
        seq += 1
        return out

    def node(record):
        return Event.from_json(record)

    header_logged = False
    while seq < n:
        turn += 1
        yield rec("turn/start", {"turn": turn})
        yield rec("step/start", {"turn": turn, "step": 1})
        user = rec("user/message", {"id": f"u{turn}", "role": "user", "content": [{"type": "text", "text": TEXT}],
                                    "source": {"kind": "user"}}, surfaceOp="append")
        nodes.append(user["seq"]); prices[user["seq"]] = node_price(node(user)); yield user
        if not header_logged:
            header_logged = True
            yield rec("request/header", {"header": {"config": MODEL, "system": "sys"}, "reason": "initial"})
        call = f"call-{turn}"
        asst = rec("assistant/message", {"turn": turn, "step": 1, "message": {
            "role": "assistant", "content": [{"type": "tool-call", "id": call, "name": "read", "arguments": "{}"}],
            "source": {"kind": "model", **MODEL}}}, surfaceOp="append")
        nodes.append(asst["seq"]); prices[asst["seq"]] = node_price(node(asst)); yield asst
        tool_call = rec("tool/call", {"turn": turn, "step": 1, "callId": call, "name": "read", "arguments": "{}"})
        yield tool_call
        result = rec("tool/result", {"turn": turn, "step": 1, "message": {
            "id": f"r{turn}", "role": "user", "source": {"kind": "tool", "callId": call},
            "content": [{"type": "tool-result", "toolCallId": call, "content": [{"type": "text", "text": TEXT}]}]}},
            sourceEventSeqs=[tool_call["seq"]], surfaceOp="append")
        nodes.append(result["seq"]); prices[result["seq"]] = node_price(node(result)); yield result
        yield rec("step/end", {"turn": turn, "step": 1})
        yield rec("step/start", {"turn": turn, "step": 2})
        chunks = []
        for chunk in ({"type": "text-delta", "index": 0, "text": "Do"}, {"type": "text-delta", "index": 0, "text": "ne."},
                      {"type": "usage", "usage": {"inputTokens": 12, "outputTokens": 3}},
                      {"type": "finish", "reason": {"kind": "stop"}}):
            chunks.append(rec("assistant/chunk", {"turn": turn, "step": 2, "chunk": chunk}))
        yield from chunks
        answer = rec("assistant/message", {"turn": turn, "step": 2, "message": {
            "role": "assistant", "content": [{"type": "text", "text": "Done."}], "source": {"kind": "model", **MODEL}},
            "usage": {"inputTokens": 12, "outputTokens": 3}},
            sourceEventSeqs=[c["seq"] for c in chunks], surfaceOp="append")
        nodes.append(answer["seq"]); prices[answer["seq"]] = node_price(node(answer)); yield answer
        yield rec("step/end", {"turn": turn, "step": 2})
        yield rec("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        if turn % compact_every == 0:  # spec 11.2: a standalone bracket over the retain-0 range
            cid = f"c{turn}"
            span = nodes[:-1]
            start = rec("compaction/start", {"compactionId": cid, "turn": None})
            yield start
            summary = rec("compaction/summary", {"compactionId": cid, "summary": [{"type": "text", "text": "sum"}],
                                                 "shadowedRange": {"start": span[0], "end": span[-1]},
                                                 "shadowedSeqs": span, "shadowedTokenCount": sum(prices[s] for s in span),
                                                 **MODEL})
            yield summary
            checkpoint = rec("user/message", {"id": f"k{turn}", "role": "user",
                                              "content": [{"type": "text", "text": "summary of earlier work"}],
                                              "source": {"kind": "plugin", "plugin": "compact", "compactionId": cid}},
                             sourceEventSeqs=[start["seq"], summary["seq"], *span],
                             surfaceOp={"op": "replace", "start": span[0], "end": span[-1]})
            for s in span:
                prices.pop(s)
            nodes = [checkpoint["seq"], nodes[-1]]
            prices[checkpoint["seq"]] = node_price(node(checkpoint))
            yield checkpoint
            yield rec("compaction/end", {"compactionId": cid, "turn": None})


def write_log(path: Path, n: int) -> int:
    count = 0
    with open(path, "w", encoding="utf-8") as out:
        out.write(json.dumps({"type": "session", "version": 0, "id": "synthetic", "createdAt": 0}) + "\n")
        for record in _events(n):
            out.write(json.dumps(record, separators=(",", ":")) + "\n")
            count += 1
    return count


def audit_peak(path: Path, every: int = 2000, keep_records: bool = False) -> tuple[int, int, int]:
    """(peak live bytes, findings, replacements) auditing `path` with counting callbacks.

    Live memory is sampled every `every` events after a full collection: a collection also empties
    CPython's tuple free lists, which otherwise keep freed surface tuples counted by tracemalloc."""
    counts = {"findings": 0, "replacements": 0}
    peak = 0
    gc.collect()
    tracemalloc.start()
    try:
        kept: list = []

        def on_replacement(record) -> None:
            counts["replacements"] += 1
            if keep_records:
                kept.append(record)

        auditor = Auditor(on_finding=lambda f: counts.__setitem__("findings", counts["findings"] + 1),
                          on_replacement=on_replacement)
        for index, (line, event) in enumerate(AuditStream(path)):
            auditor.feed(event, line)
            if index % every == every - 1:
                gc.collect()
                peak = max(peak, tracemalloc.get_traced_memory()[0])
        auditor.finish()
    finally:
        tracemalloc.stop()
    return peak, counts["findings"], counts["replacements"]


def test_generated_log_is_clean(tmp_path):
    path = tmp_path / "small.jsonl"
    write_log(path, 400)
    peak, findings, replacements = audit_peak(path)
    assert findings == 0
    assert replacements >= 2


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("audit-memory")
    small, large = root / "small.jsonl", root / "large.jsonl"
    return small, write_log(small, 5_000), large, write_log(large, 50_000)


@pytest.fixture(scope="module")
def small_peak(logs):
    return audit_peak(logs[0])


def test_peak_memory_does_not_grow_with_log_length(logs, small_peak):
    small, n_small, large, n_large = logs
    assert n_large >= 10 * n_small * 0.99
    peak_small, f_small, r_small = small_peak
    peak_large, f_large, r_large = audit_peak(large)
    assert f_small == f_large == 0
    assert r_large > 9 * r_small  # the large log really does ten times the work
    assert peak_large < peak_small * 1.25 + 64 * 1024, (peak_small, peak_large)


def test_negative_control_growing_state_is_detected(logs, small_peak):
    """Keeping every replacement record (what the CLI's JSON report does) grows with the log: the
    same bound catches it, so it would catch a fold that kept per-event state."""
    peak_large = audit_peak(logs[2], keep_records=True)[0]
    assert not peak_large < small_peak[0] * 1.25 + 64 * 1024, (small_peak[0], peak_large)
