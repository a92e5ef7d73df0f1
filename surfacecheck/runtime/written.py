"""The events a runtime wrote, as the suite compares them (spec 1.1): every field, the ids a runtime mints for itself
named by where they recur. Shared by the lockstep (``lockstep-log``) and the runtime
stage's protocol sample (``events``)."""
from __future__ import annotations

from typing import Any

MINTED_IDS = ("id", "commandId", "sourceCommandId")
"""Event data fields holding ids a runtime mints itself (dsh: a random UUID for the checkpoint message, a random
command id): compared by where they recur, not by their spelling: each side's ids are named in order of appearance
within one answer (the events one step wrote), so a name never depends on what came before."""


def as_compared(event: Any, names: dict) -> Any:
    """``event`` with its minted ids named by first appearance (keys walked in sorted order, so the names never
    depend on how a runtime orders its keys)."""
    if not isinstance(event, dict) or not isinstance(event.get("data"), dict):
        return event
    return {**event, "data": _named(event["data"], names)}


def _named(value: Any, names: dict) -> Any:
    if isinstance(value, dict):
        out = {}
        for key in sorted(value):
            item = value[key]
            if key in MINTED_IDS and isinstance(item, str):
                out[key] = names.setdefault(item, f"#{len(names) + 1}")
            else:
                out[key] = _named(item, names)
        return out
    if isinstance(value, list):
        return [_named(v, names) for v in value]
    return value


def events_as_compared(answer: Any) -> Any:
    """An ``events`` answer with every event as compared (ids named afresh for this answer)."""
    if not isinstance(answer, dict) or not isinstance(answer.get("events"), list):
        return answer
    names: dict = {}
    return {**answer, "events": [as_compared(e, names) for e in answer["events"]]}
