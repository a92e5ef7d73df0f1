"""The optional read-only persistence views of a log (``core.protocol.OPTIONAL_OPS``; spec 1.6-1.7).

``closers``: what crash repair appends when the log is reopened now — dsh-session's `interruptedTurnClosers`, the
call `PersistenceCoordinator.prepareCore` makes on every load (model: ``model/repair.py``). ``rows``: the storage
records the JSONL writer turns the log into — `packChunkRuns` — and whether `decodeStorageRecord` reads them back
as the same events (model: ``model/jsonl.py``). Both are pure functions of the log, so the model and the embedded
runtime share them; the dsh adapter calls dsh's own functions (``runtimes/dsh/adapter/storage.mjs``).
"""
from __future__ import annotations

import json
from typing import Any, Iterable

from surfacecheck.model.errors import ModelError
from surfacecheck.model.event import Event
from surfacecheck.model.jsonl import decode_record, pack_records
from surfacecheck.model.repair import interrupted_turn_closers

from .codec import refusal


def _events(log: Iterable[Any]) -> list[Event]:
    return [event if isinstance(event, Event) else Event.from_json(event) for event in log]


def closers(log: Iterable[Any]) -> dict:
    """``{"closers": [record...]}`` (spec 1.6), or the ``repair-scan`` refusal when the scan reads a missing
    property (dsh's `TypeError`: the log is no committed log dsh can repair)."""
    try:
        return {"closers": interrupted_turn_closers(_events(log))}
    except ModelError as exc:
        return refusal(exc)


def rows(log: Iterable[Any]) -> dict:
    """``{"records": [...], "roundtrip": bool}`` (spec 1.7): the storage records in order — a packed row as written,
    a verbatim event as its seq (the event itself is ``events``' business, and a runtime's minted ids would differ)
    — and whether decoding every record (as parsed JSON) gives back the log's events."""
    events = _events(log)
    records = list(pack_records(events))
    try:
        decoded = [event for record in records for event in decode_record(json.loads(json.dumps(record)))]
        roundtrip = [event.to_json() for event in decoded] == [event.to_json() for event in events]
    except ValueError:
        roundtrip = False
    return {"records": [record if "seq0" in record else record["seq"] for record in records], "roundtrip": roundtrip}


def storage_ops(log_of) -> dict:
    """The two handlers over ``log_of()`` (the runtime's current log), for a runtime's op table."""
    return {"closers": lambda args: closers(log_of()), "rows": lambda args: rows(log_of())}
