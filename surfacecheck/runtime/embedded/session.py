"""The embedded session: a mutable append-only log with its live surface manager (spec 1.3, 1.5).

:meth:`EmbeddedSession.append` applies dsh's `Session.append` checks in order (lossless JSON data,
legacy header guard, lossless surface metadata, then surface validation, spec 1.3); a refused event
raises and leaves the log and surface untouched. Committed events are published to listeners (the
meter, the projection) the way dsh's `session/event` observers are.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from surfacecheck.model.errors import SessionAppendError
from surfacecheck.model.event import ABSENT
from surfacecheck.model.jsvalue import plain_json_first

from .surface import SurfaceManager

END_SEED = "session/end-seed"


def is_lossless_json(value: Any) -> bool:
    """`snapshotJsonValue` acceptance (spec 1.3 step 1): finite numbers, no -0, string keys. Plain leaves,
    dicts and lists by exact type first; anything else as :func:`lossless_by_definition` says."""
    return plain_json_first(value, lossless_by_definition)


def lossless_by_definition(value: Any) -> bool:
    """The acceptance type by type (``is_lossless_json`` answers as this does)."""
    if value is None or isinstance(value, (bool, str, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value) and not (value == 0 and math.copysign(1.0, value) < 0)
    if isinstance(value, list):
        return all(lossless_by_definition(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and lossless_by_definition(item) for key, item in value.items())
    return False


def legacy_header_problem(type_: str, data: Any, location: str) -> str | None:
    """`assertSupportedRequestHeader` (spec 1.3 step 2)."""
    if type_ == "request/header-delta":
        return f"{location} uses unsupported legacy request/header-delta format"
    if type_ == "request/header" and isinstance(data, dict) and data.get("reason") == "fallback":
        return f'{location} uses unsupported legacy request/header reason "fallback"'
    return None


class EmbeddedSession:
    """`Session`: ``log`` (event dicts, seq == index), ``surface`` and the listeners of committed events."""

    surface_class = SurfaceManager

    def __init__(self) -> None:
        self.log: list[dict] = []
        self.surface = self.surface_class()
        self.first_live_seq = 0
        self.listeners: list[Callable[[dict], None]] = []

    @property
    def next_seq(self) -> int:
        return len(self.log)

    @property
    def generation(self) -> int:
        return self.surface.generation

    def event_at(self, seq: int) -> dict | None:
        return self.log[seq] if isinstance(seq, int) and 0 <= seq < len(self.log) else None

    def append(self, type_: str, data: Any = ABSENT, surface_op: Any = ABSENT, source_event_seqs: Any = ABSENT,
               time: int | None = None) -> dict:
        """`Session.append` (spec 1.3): the committed event, or SessionAppendError/SurfaceError (log unchanged)."""
        seq = self.next_seq
        if data is ABSENT or not is_lossless_json(data):
            raise SessionAppendError(f'session event "{type_}" carries non-JSON-serializable data', seq=seq)
        problem = legacy_header_problem(type_, data, f'session event "{type_}"')
        if problem:
            raise SessionAppendError(problem, seq=seq)
        if not is_lossless_json(None if surface_op is ABSENT else surface_op) or not is_lossless_json(
                None if source_event_seqs is ABSENT else source_event_seqs):
            raise SessionAppendError(f'session event "{type_}" carries non-JSON-serializable surface metadata',
                                     seq=seq)
        event: dict[str, Any] = {"type": type_, "seq": seq,
                                 "time": (self.log[-1]["time"] if self.log else 0) if time is None else time,
                                 "data": data}
        if source_event_seqs is not ABSENT:
            event["sourceEventSeqs"] = source_event_seqs
        if surface_op is not ABSENT:
            event["surfaceOp"] = surface_op
        self.commit(event)
        return event

    def commit(self, event: dict) -> None:
        """`validateNext` then `log.push` and publish (spec 1.3 steps 6-8)."""
        plan = self.surface.plan(event, len(self.log), self.event_at)
        self.log.append(event)
        self.surface.apply(plan)
        for listener in self.listeners:
            listener(event)
