"""Logs handed to the token meter (``meter_replay``, spec 4.2-4.3): a session's log, as logged or changed in one
thing the meter reads, which no ``Session.append`` lets through.

dsh's meter folds any ``{events}`` it is handed and must "fail loud" where the log cannot be folded: a replace whose
range names a seq off the surface or is reversed (`foldSurfaceTokens`), an `assistant/message` with usage after a
`request/header` whose `sourceEventSeqs` cite its own or a later seq, a seq twice, a non-chunk or a chunk of another
step (`_estimateProviderAssistant`). A live session refuses every such append (spec 1.4), so only a handed log
reaches these checks. :func:`handed` builds one log per :data:`KINDS`; everything else in it folds as logged.
"""
from __future__ import annotations

import copy
from typing import Any

from . import events as ev

HEADERS = ("as logged", "the logged header", "another header")
"""A handed log as logged, measured with no header, with the latest logged one, or with another (spec 4.3)."""
RANGES = ("replace off the surface", "replace ending off the surface", "reversed replace")
"""A replace appended to the log whose range the meter cannot locate on its surface (spec 4.2 `foldSurfaceTokens`)."""
CITES = ("cites itself", "cites a later seq", "cites a chunk twice", "cites a non-chunk", "cites another step's chunk",
         "cites another turn's chunk")
"""What an answer with usage cites that the meter refuses to price from (spec 4.2 `_estimateProviderAssistant`)."""
KINDS = HEADERS + RANGES + CITES

ANOTHER_HEADER = {"config": {"provider": ev.PROVIDER, "model": "another-model"}, "system": "another system prompt"}
"""An envelope no rule logs: the usage anchor never holds under it (spec 4.3 `optionalHeaderEquals`)."""


def logged_header(events: list[dict]) -> dict | None:
    """The latest logged `request/header`'s envelope, or None."""
    for event in reversed(events):
        if event.get("type") == "request/header" and isinstance(event.get("data"), dict):
            header = event["data"].get("header")
            return header if isinstance(header, dict) and isinstance(header.get("config"), dict) else None
    return None


def handed(events: list[dict], nodes: list[int], kind: str) -> tuple[list[dict], dict | None, str]:
    """``(events, header, label)`` to hand the meter: a copy of ``events`` (the session's log, whose surface is
    ``nodes``) changed as ``kind`` says, and what it shows."""
    log = copy.deepcopy(events)
    if kind in HEADERS:
        header = {"as logged": None, "the logged header": logged_header(log), "another header": ANOTHER_HEADER}[kind]
        shown = "no header" if header is None else kind
        return log, copy.deepcopy(header), f"the log as logged, measured with {shown}"
    if kind in RANGES:
        return _off_range(log, nodes, kind)
    return _cited(log, kind)


def _add(log: list[dict], kind: str, data: Any, **extra) -> int:
    seq = len(log)
    log.append({"type": kind, "seq": seq, "time": log[-1]["time"] if log else 0, "data": data, **extra})
    return seq


def _off_range(log: list[dict], nodes: list[int], kind: str) -> tuple[list[dict], None, str]:
    """A `user/message` replace at the end of the log whose range the surface does not hold in that order."""
    on = set(nodes)
    off = next((seq for seq in reversed(range(len(log))) if seq not in on), len(log))  # else its own seq
    if kind == "reversed replace" and len(nodes) >= 2:
        start, end = nodes[-1], nodes[0]
    elif kind == "replace ending off the surface":
        start, end = (nodes[0] if nodes else off), off
    else:
        start, end = off, (nodes[-1] if nodes else off)
    message = ev.user_message("a replacement handed to the meter", "handed-u")
    seq = _add(log, "user/message", message["data"], surfaceOp={"op": "replace", "start": start, "end": end})
    return log, None, f"a replace at {seq} of {start}-{end}, not a range on the surface"


def _cited(log: list[dict], kind: str) -> tuple[list[dict], None, str]:
    """An answer with usage citing sources the meter refuses: the latest logged one citing itself when there is one
    after a header, else a step of its own at the end of the log (the open step closed first)."""
    if kind == "cites itself":
        header, found = False, None
        for event in log:
            header = header or event["type"] == "request/header"
            data = event.get("data")
            if header and event["type"] == "assistant/message" and isinstance(data, dict) and data.get("usage"):
                found = event
        if found is not None:
            found["sourceEventSeqs"] = [found["seq"]]
            return log, None, f"the answer at {found['seq']} citing itself"
    open_step = None
    for event in log:
        if event["type"] in ("step/start", "step/end") and isinstance(event.get("data"), dict):
            open_step = event["data"] if event["type"] == "step/start" else None
    if open_step is not None:
        _add(log, "step/end", {"turn": open_step.get("turn"), "step": open_step.get("step")})
    _add(log, "request/header", {"header": logged_header(log) or ev.header()["data"]["header"], "reason": "initial"})
    turns = [e["data"].get("turn") for e in log if e["type"] == "step/start" and isinstance(e.get("data"), dict)]
    turn = max((t for t in turns if isinstance(t, int) and not isinstance(t, bool)), default=0) + 1
    start = _add(log, "step/start", {"turn": turn, "step": 1})
    body = {"type": "text-delta", "index": 0, "text": "handed"}
    chunk = _add(log, "assistant/chunk", ev.chunk(turn, 1, body)["data"])
    other = _add(log, "assistant/chunk", ev.chunk(turn, 2, body)["data"])
    # the same step number of another turn: only the turn tells the chunk's step apart
    elsewhere = _add(log, "assistant/chunk", ev.chunk(turn + 1, 1, body)["data"]) if kind == CITES[-1] else None
    seq = len(log)
    cites = {"cites itself": [seq], "cites a later seq": [chunk, seq + 1], "cites a chunk twice": [chunk, chunk],
             "cites a non-chunk": [chunk, start], "cites another step's chunk": [other],
             "cites another turn's chunk": [elsewhere]}[kind]
    answer = ev.assistant_message(turn, 1, "handed-a", "handed", [], {"inputTokens": 50, "outputTokens": 5})
    _add(log, "assistant/message", answer["data"], surfaceOp="append", sourceEventSeqs=cites)
    return log, None, f"a step's answer at {seq} with usage citing {cites} ({kind})"
