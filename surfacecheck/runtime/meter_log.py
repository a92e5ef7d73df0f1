"""The arguments of ``meter_replay {events, header?}`` and ``measure {header?}`` (``docs/protocol.md``; spec 4.2-4.3).

``TokenMeter.measure(session, requestHeader?)`` reads only ``session.events``, its per-session fold kept apart for
each session object: handed a log no ``Session.append`` validated, it folds it from seq 0 and must fail loud where an
event cannot be folded (a replace range off the surface or reversed, an assistant answer citing a later, a repeated, a
non-chunk or another step's source). The checks here keep a handed log to what dsh's meter and the model read alike:
each event an envelope as ``events`` answers it, its seq its position (the meter reads a cited source by position),
a surface-eligible event with a marker, every marker and citation of the shapes ``Session.append`` lets through. What
stays free is what the meter must refuse by itself: which seqs a range and a citation name.
"""
from __future__ import annotations

import copy
from typing import Any

from surfacecheck.model.event import SURFACE_EVENT_TYPES

from ..core.protocol import ProtocolError

KEYS = frozenset({"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"})
"""An event's envelope keys (spec 1.1), as ``events`` answers them."""


def _natural(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _marker_problem(op: Any) -> str | None:
    """Why ``op`` is not a surface marker ``Session.append`` writes (spec 1.4 step 2), or None."""
    if op == "append":
        return None
    if not isinstance(op, dict) or set(op) != {"op", "start", "end"} or op["op"] != "replace":
        return "surfaceOp is 'append' or {op: 'replace', start, end}"
    if not (_natural(op["start"]) and _natural(op["end"])):
        return "a replace's start and end are non-negative integers"
    return None


def handed_log(args: dict) -> list[dict]:
    """``meter_replay``'s ``events``, a JSON copy the caller cannot change; ProtocolError('bad-args') when one is not
    an event the meter can read as dsh does."""
    events = args.get("events")
    if not isinstance(events, list):
        raise ProtocolError("bad-args", "argument 'events' must be a list of events")
    for index, event in enumerate(events):
        where = f"events[{index}]"
        if not isinstance(event, dict):
            raise ProtocolError("bad-args", f"{where} must be a JSON object")
        extra = sorted(set(event) - KEYS)
        if extra:
            raise ProtocolError("bad-args", f"{where} has unknown keys {extra}")
        if not isinstance(event.get("type"), str):
            raise ProtocolError("bad-args", f"{where}.type must be a string")
        seq = event.get("seq")
        if isinstance(seq, bool) or seq != index or not isinstance(seq, int):
            raise ProtocolError("bad-args", f"{where}.seq must be {index} (a log's seqs are its positions, spec 1.3)")
        time = event.get("time")
        if time is not None and (isinstance(time, bool) or not isinstance(time, int)):
            raise ProtocolError("bad-args", f"{where}.time must be an integer")
        if "data" not in event:
            raise ProtocolError("bad-args", f"{where} has no data")
        if event["type"] in SURFACE_EVENT_TYPES and "surfaceOp" not in event:
            raise ProtocolError("bad-args", f"{where} is surface-eligible and carries no surfaceOp")
        problem = _marker_problem(event["surfaceOp"]) if "surfaceOp" in event else None
        if problem is not None:
            raise ProtocolError("bad-args", f"{where}: {problem}")
        cites = event.get("sourceEventSeqs", [])
        if not isinstance(cites, list) or not all(_natural(seq) for seq in cites):
            raise ProtocolError("bad-args", f"{where}.sourceEventSeqs is a list of non-negative integers")
    return copy.deepcopy(events)


def request_header(args: dict) -> dict | None:
    """The optional ``header``: an EpochHeader (``request/header``'s ``data.header``, spec 4.3) measure prices in
    place of the latest logged one, as a copy; None when absent or null. Its fields are of the types dsh reads them
    as (``canonicalHeader``, ``headerEquals``, ``estimateHeader``), so a wrong one is bad-args, not a shape dsh and
    the model misread apart."""
    header = args.get("header")
    if header is None:
        return None
    if not isinstance(header, dict) or not isinstance(header.get("config"), dict):
        raise ProtocolError("bad-args", "header is an EpochHeader {config: {...}, system?, tools?, adapterDefaults?}")
    for key, kind, name in (("system", str, "a string"), ("tools", list, "a list"),
                            ("adapterDefaults", dict, "an object")):
        if key in header and not isinstance(header[key], kind):
            raise ProtocolError("bad-args", f"header.{key} is {name}")
    return copy.deepcopy(header)
