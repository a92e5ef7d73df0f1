"""Reading dsh event JSON the way the production folds do (spec 1.1, 1.4, 2.3, 3, 4.1).

Pure functions over plain event dicts (``{seq, type, data, surfaceOp?, sourceEventSeqs?}``); no
model folds. Pricing uses the shared estimator (``model.estimate``, spec 4.1): the one value helper
both implementations must agree on byte for byte.
"""
from __future__ import annotations

from typing import Any

from surfacecheck.model.estimate import estimate_message
from surfacecheck.model.jsvalue import is_nonneg_safe_integer

SURFACE_TYPES = frozenset({"user/message", "assistant/message", "tool/result"})
"""Spec 1.1 `SURFACE_EVENT_TYPES`."""

METERING_TYPES = frozenset({"compaction/summary", "compaction/prune"})
"""Spec 5.1: the events that arm a shadow-price claim."""

APPEND = "append"


def surface_op(event: dict) -> Any:
    """The fold's view of an event (spec 5.1 `isSurfaceEvent`): ``"append"``, ``(start, end)`` or ``None``.

    Lenient like the token folds: a surface-type event with a well-formed replace range counts even
    if the session would refuse it (the session validates separately, spec 1.4)."""
    if event.get("type") not in SURFACE_TYPES:
        return None
    op = event.get("surfaceOp")
    if op == APPEND:
        return APPEND
    if isinstance(op, dict) and op.get("op") == "replace":
        start, end = op.get("start"), op.get("end")
        if is_nonneg_safe_integer(start) and is_nonneg_safe_integer(end):
            return (int(start), int(end))
    return None


def derive_message(event: dict) -> Any:
    """`deriveEventMessage` (spec 2.3): user data verbatim, assistant message unless empty, tool message."""
    kind = event.get("type")
    data = event.get("data")
    if kind == "user/message":
        return data
    if kind == "assistant/message":
        message = data["message"]
        return None if len(message["content"]) == 0 else message
    if kind == "tool/result":
        return data["message"]
    return None


def price_message(message: Any) -> int:
    """The bare price of one message: `estimateMessage` (spec 4.1); 0 for no message (spec 4.2)."""
    return 0 if message is None else estimate_message(message)


def price_event(event: dict) -> int:
    """A surface node's price: its derived message priced (spec 4.2 `foldSurfaceTokens`)."""
    return price_message(derive_message(event))


def pairing_delta(event: dict) -> int:
    """`eventDelta` (spec 3): +tool-call blocks of an assistant message, -1 per tool result, else 0."""
    kind = event.get("type")
    if kind == "assistant/message":
        return sum(1 for block in event["data"]["message"]["content"]
                   if isinstance(block, dict) and block.get("type") == "tool-call")
    if kind == "tool/result":
        return -1
    return 0
