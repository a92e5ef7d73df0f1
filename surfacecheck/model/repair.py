"""Crash repair: synthetic closers for an interrupted tail turn (spec 1.6; `packages/core/session/src/repair.ts`).

:func:`interrupted_turn_closers` is dsh's `interruptedTurnClosers(events)`: a pure scan that returns
the events to append after a loaded log so that the tail turn is closed — one error `tool/result`
per still-pending tool call (in the order the assistant requested them), then `step/end` if a step
is open, then `turn/end {reason:{kind:'interrupted'}}`. Seqs continue the log; every closer reuses
the last real event's time. A balanced or empty log gives ``[]``. Crash repair never closes a
`compaction/*` bracket (spec 1.5).

The closers are returned as plain records (dicts) with repair.ts's key order
``type, seq, time, data, surfaceOp?, sourceEventSeqs?``; :func:`closer_events` turns them into
:class:`~model.event.Event` values, and :func:`repair` appends them to a session through
:func:`model.session.append` (persistence instead seeds them, spec 1.5 `prepareCore`).
"""
from __future__ import annotations

from typing import Any, Iterable

from .errors import ModelError
from .event import ABSENT, Event, js_read
from .jsvalue import _js_number
from .session import Session, append

TOOL_NOT_STARTED = "TOOL_NOT_STARTED"
"""Recovery code for an assistant tool request that never reached a recorded `tool/call`."""

TOOL_OUTCOME_UNKNOWN = "TOOL_OUTCOME_UNKNOWN"
"""Recovery code for a recorded `tool/call` whose result was not durably recorded."""

OUTCOME_UNKNOWN_TEXT = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. "
    "Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the "
    "operation is read-only or idempotent; if it may have side effects, first verify external state "
    "or ask the user. Do not retry blindly."
)
"""The synthetic result text for a recorded call (repair.ts, verbatim)."""

NOT_STARTED_TEXT = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."
"""The synthetic result text for an unrecorded call (repair.ts, verbatim)."""

INTERRUPTED_REASON = {"kind": "interrupted"}


class RepairScanError(ModelError):
    """The scan read a property of null/undefined (dsh throws a `TypeError`; the log is not a valid committed log)."""

    rule = "repair-scan"


def _read(value: Any, key: str) -> Any:
    return js_read(value, key, RepairScanError)


def _template(value: Any) -> str:
    """`${value}` in a JS template literal."""
    if value is ABSENT:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _js_number(value)
    if isinstance(value, dict):
        return "[object Object]"
    if isinstance(value, (list, tuple)):
        return ",".join("" if item is None or item is ABSENT else _template(item) for item in value)
    return str(value)


def _as_event(event: Event | dict) -> Event:
    return event if isinstance(event, Event) else Event.from_json(event)


def _iter_blocks(content: Any) -> Iterable[Any]:
    """`for (const block of content)`: arrays and strings iterate; anything else throws."""
    if isinstance(content, (list, tuple, str)):
        return content
    raise RepairScanError("message.content is not iterable")


def interrupted_turn_closers(events: Iterable[Event | dict]) -> list[dict]:
    """`interruptedTurnClosers(events)` (spec 1.6): closer records for an open tail turn, else ``[]``.

    Scan: `turn/start` opens a turn (clears step and pending calls); `turn/end` closes both and
    clears; `step/start` opens a step; `step/end` clears pending calls and closes the step; each
    `tool-call` block of an `assistant/message` registers a pending call `{step}` keyed by its id
    (re-registering keeps its first position, as a JS `Map` does); `tool/call` records its seq on a
    pending entry; `tool/result` (append or replace) removes `message.source.callId`.
    ``events`` may be :class:`Event` values or decoded records.
    """
    log = [_as_event(event) for event in events]
    open_turn: Any = None
    open_step: Any = None
    pending: dict[Any, dict[str, Any]] = {}
    for event in log:
        kind = event.type
        if kind == "turn/start":
            open_turn = _read(event.data, "turn")
            open_step = None
            pending.clear()
        elif kind == "turn/end":
            open_turn = None
            open_step = None
            pending.clear()
        elif kind == "step/start":
            open_step = _read(event.data, "step")
        elif kind == "step/end":
            pending.clear()
            open_step = None
        elif kind == "assistant/message":
            for block in _iter_blocks(_read(_read(event.data, "message"), "content")):
                if _read(block, "type") == "tool-call":
                    pending[_read(block, "id")] = {"step": _read(event.data, "step")}
        elif kind == "tool/call":
            entry = pending.get(_read(event.data, "callId"))
            if entry is not None:
                entry["callSeq"] = event.seq
        elif kind == "tool/result":
            pending.pop(_read(_read(_read(event.data, "message"), "source"), "callId"), None)

    if open_turn is None or not log:
        return []
    last = log[-1]
    seq = last.seq + 1
    time = last.time
    closers: list[dict] = []
    for call_id, entry in pending.items():
        started = "callSeq" in entry
        message = {
            "id": f"interrupted-tool-result-{_template(call_id)}-{_template(seq)}",
            "role": "user",
            "source": {"kind": "tool", "callId": call_id},
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call_id,
                    "isError": True,
                    "content": [{"type": "text", "text": OUTCOME_UNKNOWN_TEXT if started else NOT_STARTED_TEXT}],
                }
            ],
        }
        closer: dict[str, Any] = {
            "type": "tool/result",
            "seq": seq,
            "time": time,
            "data": {
                "turn": open_turn,
                "step": entry["step"],
                "message": message,
                "error": (
                    {"name": "ToolOutcomeUnknownError", "code": TOOL_OUTCOME_UNKNOWN}
                    if started
                    else {"name": "ToolNotStartedError", "code": TOOL_NOT_STARTED}
                ),
            },
            "surfaceOp": "append",
        }
        if started:
            closer["sourceEventSeqs"] = [entry["callSeq"]]
        closers.append(_drop_undefined(closer))
        seq += 1
    if open_step is not None:
        closers.append(
            _drop_undefined({"type": "step/end", "seq": seq, "time": time, "data": {"turn": open_turn, "step": open_step}})
        )
        seq += 1
    closers.append(
        _drop_undefined(
            {"type": "turn/end", "seq": seq, "time": time, "data": {"turn": open_turn, "reason": dict(INTERRUPTED_REASON)}}
        )
    )
    return closers


interruptedTurnClosers = interrupted_turn_closers
"""dsh's name for :func:`interrupted_turn_closers` (spec 1.6)."""


def _drop_undefined(value: Any) -> Any:
    """What `JSON.stringify` writes for a value holding `undefined` (ABSENT) properties: they vanish."""
    if isinstance(value, dict):
        return {key: _drop_undefined(item) for key, item in value.items() if item is not ABSENT}
    if isinstance(value, list):
        return [None if item is ABSENT else _drop_undefined(item) for item in value]
    return value


def closer_events(events: Iterable[Event | dict]) -> list[Event]:
    """The closers of :func:`interrupted_turn_closers` as :class:`Event` values (spec 1.6)."""
    return [Event.from_json(record) for record in interrupted_turn_closers(events)]


def repair(session: Session) -> Session:
    """Append the crash-repair closers to ``session`` via :func:`model.session.append` (spec 1.6).

    Each closer is appended with its own `surfaceOp` / `sourceEventSeqs` and the last real event's
    time, so the surface validation of spec 1.4 runs on it; a balanced session is returned as is.
    """
    for closer in interrupted_turn_closers(session.log):
        session, event = append(
            session,
            closer["type"],
            closer["data"],
            surface_op=closer.get("surfaceOp", ABSENT),
            source_event_seqs=closer.get("sourceEventSeqs", ABSENT),
            time=closer["time"],
        )
        assert event.seq == closer["seq"], (event.seq, closer["seq"])
    return session


__all__ = [
    "INTERRUPTED_REASON",
    "NOT_STARTED_TEXT",
    "OUTCOME_UNKNOWN_TEXT",
    "RepairScanError",
    "TOOL_NOT_STARTED",
    "TOOL_OUTCOME_UNKNOWN",
    "closer_events",
    "interruptedTurnClosers",
    "interrupted_turn_closers",
    "repair",
]
