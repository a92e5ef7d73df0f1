"""A sample session as protocol requests that reaches every op (the conformance script).

:func:`sample_requests` returns ``(op, args)`` pairs: a dsh-shaped turn with a request header, a
tool call whose big result the pruner shrinks (spec 6), range selection (spec 7), an automatic
compaction (spec 8), the pressure listener (spec 9), an overflow recovery (spec 10.2), a manual
``/compact`` (spec 11), a crash + reload (spec 1.5) and the persistence views of a turn interrupted mid-step
(spec 1.6-1.7), plus a few requests the session refuses
(spec 1.3 legacy header; 1.4 replace of a missing seq). Used by the protocol tests and by the
``protocol`` stage of ``surfacecheck check``.
"""
from __future__ import annotations

from typing import Any

PROVIDER, MODEL = "prov", "mod"
POLICY = {"thresholdRatio": 0.5, "retainTokens": 150, "compactionRetries": 1, "maxOverflowRetries": 1,
          "maxTokens": 512, "toolResultPruner": {"thresholdChars": 1200, "headChars": 300, "tailChars": 200}}


class _Events:
    """Builds append requests; the next seq is tracked so events can cite earlier ones."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict]] = []
        self.seq = 0
        self.time = 1_800_000_000_000

    def add(self, type_: str, data: Any, **extra) -> int:
        self.time += 1
        self.requests.append(("append", {"event": {"type": type_, "data": data, "time": self.time, **extra}}))
        self.seq += 1
        return self.seq - 1

    def user(self, text: str) -> int:
        return self.add("user/message", {"id": f"u-{self.seq}", "role": "user", "source": {"kind": "user"},
                                         "content": [{"type": "text", "text": text}]}, surfaceOp="append")

    def assistant(self, turn: int, step: int, text: str, calls: tuple[str, ...] = ()) -> int:
        content = [{"type": "text", "text": text}] + [
            {"type": "tool-call", "id": call, "name": "read", "arguments": "{}"} for call in calls]
        return self.add("assistant/message", {"turn": turn, "step": step, "message": {
            "id": f"a-{self.seq}", "role": "assistant", "content": content,
            "source": {"kind": "model", "provider": PROVIDER, "model": MODEL}},
            "usage": {"inputTokens": 40, "outputTokens": 8}}, surfaceOp="append")

    def result(self, turn: int, step: int, call: str, text: str) -> int:
        call_seq = self.add("tool/call", {"turn": turn, "step": step, "callId": call, "name": "read", "arguments": "{}"})
        return self.add("tool/result", {"turn": turn, "step": step, "message": {
            "id": f"r-{self.seq}", "role": "user", "source": {"kind": "tool", "callId": call},
            "content": [{"type": "tool-result", "toolCallId": call, "content": [{"type": "text", "text": text}],
                         "isError": False}]}}, surfaceOp="append", sourceEventSeqs=[call_seq])

    def step(self, turn: int, step: int, text: str, calls: tuple[str, ...] = (), result: str = "") -> None:
        self.add("step/start", {"turn": turn, "step": step})
        self.assistant(turn, step, text, calls)
        for call in calls:
            self.result(turn, step, call, result)
        self.add("step/end", {"turn": turn, "step": step})


def sample_requests() -> list[tuple[str, dict]]:
    """Every op at least once, in an order a real runtime would see them."""
    ev = _Events()
    ev.requests.append(("reset", {}))
    ev.requests.append(("configure", {"policy": POLICY, "context_window": 2000,
                                      "summaries": [{"outcome": "text", "ratio": 0.2}]}))
    ev.add("turn/start", {"turn": 1})
    ev.add("request/header", {"header": {"config": {"provider": PROVIDER, "model": MODEL}, "system": "be brief"},
                              "reason": "initial"})
    ev.user("please read the three files and summarise them " * 8)
    ev.step(1, 1, "reading the first file " * 10, ("call-1",), "alpha line\n" * 300)
    ev.step(1, 2, "reading the second file " * 10, ("call-2",), "beta line\n" * 40)
    ev.requests += [("surface", {}), ("cuts", {}), ("measure", {}), ("projection", {}),
                    ("select_range", {"retain_tokens": 100}), ("select_range", {"retain_tokens": 0}),
                    ("closers", {}), ("rows", {})]  # the open turn's crash repair; the storage records
    ev.requests += [("measure", {"header": {"config": {"provider": PROVIDER, "model": "other"}, "system": "be brief"}}),
                    ("meter_replay", {"events": _handed(1, 0)}), ("meter_replay", {"events": _handed(0, 1), "header": None})]
    ev.requests.append(("append", {"event": {"type": "request/header", "data": {"header": {}, "reason": "fallback"}}}))
    ev.requests.append(("append", {"event": {"type": "user/message", "data": {}, "surfaceOp": {
        "op": "replace", "start": 999, "end": 999}}}))
    ev.requests.append(("pre_step", {}))  # prunes the big result first (spec 9.2 step 9)
    ev.requests += [("surface", {}), ("projection", {}), ("measure", {})]
    ev.requests.append(("prune", {"pruner": {"thresholdChars": 2000, "headChars": 300, "tailChars": 200}}))
    ev.requests.append(("compact", {"start": 2, "end": 14, "summary": {"outcome": "failure"}}))
    ev.requests += [("surface", {}), ("cuts", {}), ("projection", {})]
    ev.requests.append(("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED"}))
    ev.requests.append(("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED"}))
    ev.requests += [("surface", {}), ("measure", {}), ("select_range", {"retain_tokens": 50})]
    return ev.requests + _after_turn()


def _handed(start: int, end: int) -> list[dict]:
    """A log handed to the meter (``meter_replay``, spec 4.2): two prompts, then a third replacing ``start``-``end``;
    reversed, the meter cannot fold it and refuses at seq 2."""
    def prompt(seq: int, op: object) -> dict:
        return {"type": "user/message", "seq": seq, "time": 0, "surfaceOp": op, "data": {
            "id": f"h-{seq}", "role": "user", "source": {"kind": "user"}, "content": [{"type": "text", "text": "hi " * seq}]}}
    return [prompt(0, "append"), prompt(1, "append"), prompt(2, {"op": "replace", "start": start, "end": end})]


def _after_turn() -> list[tuple[str, dict]]:
    """Close the turn, then the idle-time operations: manual compact, reload, a last read of everything."""
    return [
        ("append", {"event": {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}}}),
        ("manual_compact", {"args": "now"}),
        ("manual_compact", {"summary": {"outcome": "text", "text": "Summary: files read."}}),
        ("manual_compact", {"summary": {"outcome": "text", "ratio": 2.0}}),
        ("reload", {}),
        ("surface", {}), ("cuts", {}), ("measure", {}),
        ("projection", {"usage": True, "breakdown": True, "pressure": True}),
        ("events", {"from": 20}),
        ("compact", {"start": 27, "end": 11, "manual": True}),
        # a second turn's first step: the claimed prompt, then the runtime-context snapshot (spec 13, D9)
        ("append", {"event": {"type": "turn/start", "data": {"turn": 2}}}),
        ("pre_step", {"step": {"turn": 2, "step": 1}, "context": [{"name": "cwd", "text": "/work"}],
                      "claimed": [{"id": "u-2", "role": "user", "source": {"kind": "user"},
                                   "content": [{"type": "text", "text": "and now?"}]}]}),
        ("surface", {}), ("measure", {}), ("projection", {}),
        *_interrupted(),
    ]


def _chunk(index: int, body: dict, time: int, turn: int = 2, step: int = 1, **data) -> tuple[str, dict]:
    return ("append", {"event": {"type": "assistant/chunk", "time": 1_800_000_000_100 + time, "data": {
        "turn": turn, "step": step, "chunk": {"index": index, **body}, **data}}})


def _interrupted() -> list[tuple[str, dict]]:
    """Turn 2's step streams, answers with three tool calls and dies before two of them finish; then the
    persistence views (spec 1.6-1.7) and the storage decoder on rows it must refuse. The deltas are runs the JSONL
    writer packs (text, reasoning, tool calls with and without a name; times apart) and near misses it must write
    verbatim: a run broken by its index, call id, name (presence or value), step or turn, or an event whose shape is
    not exactly a delta's (a key more, a step, index, id, name or arguments of the wrong type, no chunk)."""
    text = lambda t: {"type": "text-delta", "text": t}  # noqa: E731 - three lines of data, not logic
    call = lambda i, a, **n: {"type": "tool-call-delta", "id": i, **n, "argumentsDelta": a}  # noqa: E731
    deltas = [
        _chunk(0, text("Checking "), 0), _chunk(0, text("the "), 3), _chunk(0, text("tree."), 4),
        *[_chunk(1, {"type": "reasoning-delta", "text": t}, 5) for t in ("a", "b", "c")],
        *[_chunk(2, call("c-7", a, name="read"), 6) for a in ("{", '"p":1', "}")],
        *[_chunk(3, call("c-8", a), 7) for a in ("{", "}", "")],
        _chunk(4, text("x"), 8), _chunk(4, text("y"), 8), _chunk(5, text("z"), 8),
        _chunk(6, call("x", "1", name="n"), 9), _chunk(6, call("y", "2", name="n"), 9), _chunk(6, call("y", "3", name="n"), 9),
        _chunk(7, call("z", "1", name="n"), 9), _chunk(7, call("z", "2"), 9), _chunk(7, call("z", "3"), 9),
        _chunk(8, call("w", "1", name="n"), 9), _chunk(8, call("w", "2", name="m"), 9), _chunk(8, call("w", "3", name="m"), 9),
        _chunk(9, text("s"), 10), _chunk(9, text("s"), 10), _chunk(9, text("s"), 10, step=9),
        _chunk(10, text("t"), 10), _chunk(10, text("t"), 10), _chunk(10, text("t"), 10, turn=3),
        *[_chunk(11, {**text("k"), "extra": 1}, 11) for _ in range(3)],
        *[_chunk(12, {"type": "text-delta", "text": 7}, 11) for _ in range(3)],
        *[_chunk(13, text("d"), 11, x=1) for _ in range(3)],
        *[_chunk(14, {"type": "block-start", "blockType": "text"}, 11) for _ in range(3)],
        *[("append", {"event": {"type": "assistant/chunk", "time": 1_800_000_000_112, "data": {
            "turn": "2", "step": 1, "chunk": {"type": "text-delta", "index": 15, "text": "q"}}}}) for _ in range(3)],
        *[_chunk(16, text("p"), 12, step="1") for _ in range(3)],
        *[_chunk("0", text("i"), 12) for _ in range(3)],
        *[("append", {"event": {"type": "assistant/chunk", "data": {"turn": 2, "step": 1, "chunk": None}}})
          for _ in range(3)],
        *[_chunk(17, {"type": "tool-call-delta", "id": 5, "argumentsDelta": "a"}, 13) for _ in range(3)],
        *[_chunk(18, call("v", 1), 13) for _ in range(3)],
        *[_chunk(19, call("u", "a", name=1), 13) for _ in range(3)],
        *[_chunk(20, {**call("t", "a"), "extra": 1}, 13) for _ in range(3)],
    ]
    calls = ("c-7", "c-8", "c-9")
    answer = ("append", {"event": {"type": "assistant/message", "surfaceOp": "append", "data": {
        "turn": 2, "step": 1, "message": {
            "id": "a-interrupted", "role": "assistant", "source": {"kind": "model", "provider": PROVIDER, "model": MODEL},
            "content": [{"type": "text", "text": "Checking the tree."}] + [
                {"type": "tool-call", "id": c, "name": "read", "arguments": "{}"} for c in calls]}}}})
    started = [("append", {"event": {"type": "tool/call", "data": {"turn": 2, "step": 1, "callId": c, "name": "read",
                                                                   "arguments": "{}"}}}) for c in ("c-7", "c-9")]
    finished = ("append", {"event": {"type": "tool/result", "surfaceOp": "append", "data": {
        "turn": 2, "step": 1, "message": {"id": "r-c-9", "role": "user", "source": {"kind": "tool", "callId": "c-9"},
                                          "content": [{"type": "tool-result", "toolCallId": "c-9", "isError": False,
                                                       "content": [{"type": "text", "text": "done"}]}]}}}})
    return [*deltas, answer, *started, finished, ("closers", {}), ("rows", {}),
            *[("decode", {"record": record}) for record in _storage_records()]]


def _storage_records() -> list:
    """Rows `decodeStorageRecord` expands, passes through or refuses (spec 1.7), one per check."""
    text = {"type": "text-chunks", "seq0": 4, "time0": 100, "data": {
        "turn": 1, "step": 2, "index": 0, "dt": [1, -1], "texts": ["a", "b", "c"]}}
    call = {"type": "tool-call-chunks", "seq0": 9, "time0": 5, "data": {
        "turn": 1, "step": 2, "index": 1, "id": "c", "name": "n", "dt": [0], "args": ["{", "}"]}}
    nameless = {**call, "data": {k: v for k, v in call["data"].items() if k != "name"}}

    def with_data(row: dict, **changes) -> dict:
        return {**row, "data": {**row["data"], **changes}}

    big = 9_007_199_254_740_991
    return [
        text, call, nameless, {**text, "type": "reasoning-chunks"}, {"type": "turn/start", "seq": 0, "data": {}},
        7, None, ["x"],
        {**text, "extra": 1}, {**text, "seq0": -1}, {**text, "seq0": 1.5}, {**text, "time0": "0"},
        {**text, "data": []}, with_data(text, id="c"), with_data(call, name=3), with_data(call, id=None),
        with_data(text, turn="1"), with_data(text, step="2"), with_data(text, index=None), with_data(text, texts=[]),
        with_data(text, texts=["a", 2, "c"]), with_data(text, dt=[1]), with_data(text, dt=[1, 0.5]),
        with_data(text, dt="1"), {**text, "seq0": big - 1}, {**with_data(text, dt=[2, 0]), "time0": big - 1},
        with_data(nameless, args="x"), {**text, "seq0": 0}, {**text, "data": "x"}, with_data(call, extra=1),
        with_data(nameless, extra=1), {**text, "seq0": big},
    ]
