"""A decision's events in the form the model's prediction and the runtime's log are compared in: each event
without ids, times and error wording (:func:`comparable`), and a block's compaction actions in order
(:func:`actions`: prune pairs and summary brackets with their prices, spec 6 and 8)."""
from __future__ import annotations

from surfacecheck.model.estimate import estimate_message
from surfacecheck.model.event import Event
from surfacecheck.model.surface import derive_event_message


def comparable(event: Event) -> tuple:
    """What a decision is about: type, seq, surface metadata, data without ids, times and error wording."""
    data = event.data if isinstance(event.data, dict) else event.data
    if event.type in ("compaction/start", "compaction/end"):
        data = {k: v for k, v in data.items() if k not in ("compactionId", "error")}
        if event.type == "compaction/end":
            data["failed"] = "error" in event.data
    elif event.type == "compaction/summary":
        data = {k: data.get(k) for k in ("sourceCommandId", "summary", "shadowedRange", "shadowedSeqs",
                                         "shadowedTokenCount", "provider", "model", "maxTokens")}
    elif event.type == "user/message" and event.replace is not None:
        data = {"content": data.get("content"), "role": data.get("role"),
                "source": {k: v for k, v in (data.get("source") or {}).items() if k != "compactionId"}}
    return (event.type, event.seq, event.surface_op, event.source_event_seqs, data)


def actions(events: tuple[Event, ...]) -> list[dict]:
    """The compaction actions of one block, in order: prune pairs and summary brackets."""
    out: list[dict] = []
    open_bracket: dict | None = None
    for i, event in enumerate(events):
        data = event.data if isinstance(event.data, dict) else {}
        if event.type == "compaction/prune":
            rng = data.get("shadowedRange") or {}
            after = events[i + 1].seq if i + 1 < len(events) else event.seq + 1
            out.append({"kind": "prune", "seq": event.seq, "range": [rng.get("start"), rng.get("end")],
                        "shadowedSeqs": data.get("shadowedSeqs"), "shadowedTokenCount": data.get("shadowedTokenCount"),
                        "replacementTokens": _price(events, i + 1), "status": "ok",
                        "at": {"status": event.seq, "replacementTokens": after}})
        elif event.type == "compaction/start":
            open_bracket = {"kind": "summary", "seq": event.seq, "turn": data.get("turn"), "range": None,
                            "shadowedSeqs": None, "shadowedTokenCount": None, "replacementTokens": None,
                            "status": "open", "at": {"status": event.seq + 1}}
            out.append(open_bracket)
        elif event.type == "compaction/summary" and open_bracket is not None:
            rng = data.get("shadowedRange") or {}
            open_bracket.update({"range": [rng.get("start"), rng.get("end")], "shadowedSeqs": data.get("shadowedSeqs"),
                                 "shadowedTokenCount": data.get("shadowedTokenCount"),
                                 "replacementTokens": _price(events, i + 1)})
            open_bracket["at"].update({"range": event.seq, "replacementTokens": event.seq + 1})
        elif event.type == "compaction/end" and open_bracket is not None:
            open_bracket["status"] = "error" if "error" in data else "ok"
            open_bracket = None
    return out


def _price(events: tuple[Event, ...], i: int) -> int | None:
    """estimateMessage of the replacement right after a metering event (spec 4.1)."""
    if i >= len(events) or events[i].replace is None:
        return None
    try:
        message = derive_event_message(events[i])
        return None if message is None else estimate_message(message)
    except (KeyError, TypeError, AttributeError):
        return None
