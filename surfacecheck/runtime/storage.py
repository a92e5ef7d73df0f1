"""The optional read-only persistence views of a log (``core.protocol.OPTIONAL_OPS``; spec 1.6-1.7).

``closers``: what crash repair appends when the log is reopened now — dsh-session's `interruptedTurnClosers`, the
call `PersistenceCoordinator.prepareCore` makes on every load (model: ``model/repair.py``). ``rows``: the storage
records the JSONL writer turns the log into — `packChunkRuns` — and whether `decodeStorageRecord` reads them back
as the same events (model: ``model/jsonl.py``); ``decode``: one parsed storage record as `decodeStorageRecord` reads
it. All are pure functions of their input, so the model and the embedded runtime share them; the dsh adapter calls dsh's own functions (``runtimes/dsh/adapter/storage.mjs``).
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from surfacecheck.model.errors import ModelError
from surfacecheck.model.event import Event
from surfacecheck.model.jsonl import ROW_TAGS, decode_record, decode_row, pack_records
from surfacecheck.model.repair import interrupted_turn_closers

from ..core.protocol import ProtocolError
from .codec import refusal


class StorageRowError(ModelError):
    """`decodeStorageRecord` refused a row-tagged record (`malformed <tag> storage row: …`, spec 1.7)."""

    rule = "storage-row"


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


def decode(args: dict) -> dict:
    """``{"events": [...]}`` for one parsed storage record (spec 1.7, `decodeStorageRecord`): a row-tagged object
    validated and expanded, anything else passed through as one event, unvalidated; a malformed row is the refusal
    ``storage-row`` (dsh's message)."""
    if "record" not in args:
        raise ProtocolError("bad-args", "missing argument 'record'")
    record = args["record"]
    tag = record.get("type") if isinstance(record, dict) else None
    if not (isinstance(tag, str) and tag in ROW_TAGS):
        return {"events": [record]}
    try:
        return {"events": [event.to_json() for event in decode_row(tag, record)]}
    except ValueError as exc:
        return refusal(StorageRowError(str(exc)))


def storage_ops(log_of) -> dict:
    """The handlers over ``log_of()`` (the runtime's current log), for a runtime's op table."""
    return {"closers": lambda args: closers(log_of()), "rows": lambda args: rows(log_of()), "decode": decode}
