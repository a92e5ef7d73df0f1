"""JSONL session-log I/O compatible with dsh's on-disk format (spec 1.7).

A log is a header line ``{"type":"session","version":0,...}`` followed by one storage record per
line: a verbatim event (spec 1.1) or a packed chunk row (``text-chunks`` / ``reasoning-chunks`` /
``tool-call-chunks``) that expands to a run of ``assistant/chunk`` events. Decoding and packing
mirror dsh's ``chunk-rows.ts`` (``decodeStorageRecord`` / ``packChunkRuns``) so that writing a
log read from disk reproduces its bytes. Every malformed input raises :class:`LogFormatError`
naming the file and the 1-based line; seq contiguity is left to the session layer.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from .errors import LogFormatError
from .event import ABSENT, ENVELOPE_KEYS, Event
from .jsvalue import MAX_SAFE_INTEGER, is_nonneg_safe_integer, is_safe_integer, js_stringify

SESSION_FORMAT_VERSION = 0
MIN_RUN = 3
"""`chunk-rows.ts` MIN_RUN: the shortest delta run the writer packs (spec 1.7)."""

ROW_TAGS = {"text-chunks": "text-delta", "reasoning-chunks": "reasoning-delta", "tool-call-chunks": "tool-call-delta"}
KIND_TAGS = {kind: tag for tag, kind in ROW_TAGS.items()}
_ROW_KEYS = ("type", "seq0", "time0", "data")
_TEXT_DATA_KEYS = ("turn", "step", "index", "dt", "texts")
_TOOL_DATA_KEYS = ("turn", "step", "index", "id", "dt", "args")


@dataclass(frozen=True)
class LogFile:
    """A decoded log: header object, expanded events, and the line each event came from (spec 1.7)."""

    path: str
    header: dict
    events: tuple[Event, ...]
    packed_rows: int
    torn_tail: bool
    lines: tuple[int, ...]


# -- JSON parsing with JavaScript semantics -----------------------------------------------------

def _parse_int(text: str) -> int | float:
    """`JSON.parse` yields doubles: integers beyond the safe range lose precision as in JS."""
    value = int(text)
    return value if abs(value) <= MAX_SAFE_INTEGER else float(text)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_int=_parse_int, parse_constant=_reject_constant)


def _parse(raw: bytes) -> Any:
    """`JSON.parse` of one line; raises ValueError (incl. UnicodeDecodeError) when it is not JSON, or when it
    nests deeper than the decoder can follow (Python's recursion limit; no dsh log comes near it)."""
    try:
        return _DECODER.decode(raw.decode("utf-8"))
    except RecursionError:
        raise ValueError("nested too deeply to decode") from None


def _is_number(value: Any) -> bool:
    """`typeof value === 'number'` for a decoded JSON value."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_record(value: Any) -> bool:
    """`isRecord`: `typeof value === 'object' && value !== null` — a JSON array is one too."""
    return isinstance(value, (dict, list))


def _has_exact_keys(obj: dict | list, keys: Iterable[str]) -> bool:
    """`hasExactKeys` over `Object.keys` (an array's keys are its indices)."""
    own = obj.keys() if isinstance(obj, dict) else (str(i) for i in range(len(obj)))
    return set(own) == set(keys)


# -- decoding (chunk-rows.ts decodeStorageRecord; spec 1.1, 1.5 step 2, 1.7) ---------------------

def _row_members(tag: str, row: dict) -> list[str]:
    """Validate a packed row exactly as `validateRow` does; returns its member payloads."""
    def bad(why: str) -> ValueError:
        return ValueError(f"malformed {tag} storage row: {why}")

    if not _has_exact_keys(row, _ROW_KEYS):
        raise bad("envelope must be exactly {type, seq0, time0, data}")
    if not is_nonneg_safe_integer(row["seq0"]):
        raise bad("seq0 must be a non-negative safe integer")
    if not is_safe_integer(row["time0"]):
        raise bad("time0 must be a safe integer")
    data = row["data"]
    if not _is_record(data):
        raise bad("data must be an object")
    if tag == "tool-call-chunks":
        with_name = _has_exact_keys(data, _TOOL_DATA_KEYS + ("name",))
        if not with_name and not _has_exact_keys(data, _TOOL_DATA_KEYS):
            raise bad("data must be exactly {turn, step, index, id, name?, dt, args}")
        if not isinstance(data["id"], str) or (with_name and not isinstance(data["name"], str)):
            raise bad("id (and name when present) must be strings")
        key = "args"
    else:
        if not _has_exact_keys(data, _TEXT_DATA_KEYS):
            raise bad("data must be exactly {turn, step, index, dt, texts}")
        key = "texts"
    if not all(_is_number(data[k]) for k in ("turn", "step", "index")):
        raise bad("turn/step/index must be numbers")
    members, dt = data[key], data["dt"]
    if not isinstance(members, list) or not members or not all(isinstance(m, str) for m in members):
        raise bad(f"{key} must be a non-empty string array")
    if not isinstance(dt, list) or not all(is_safe_integer(gap) for gap in dt):
        raise bad("dt must be an array of safe integers")
    if len(dt) != len(members) - 1:
        raise bad(f"dt length {len(dt)} does not match {len(members)} members")
    # `value.seq0 + payload.length - 1` in doubles, left to right: near 2**53 the sum rounds, and the guard passes
    # a row whose last member seq is 2**53 (DIVERGENCES D6: dsh's arithmetic, mirrored)
    if not is_safe_integer(float(row["seq0"]) + len(members) - 1):
        raise bad("member seqs must stay safe integers")
    time = row["time0"]
    for gap in dt:
        time += gap
        if not is_safe_integer(time):
            raise bad("member times must stay safe integers")
    return members


def _expand_row(tag: str, row: dict) -> list[Event]:
    """`expandRow`: member k has seq seq0+k and time time0 + sum(dt[:k]) (spec 1.7)."""
    members = _row_members(tag, row)
    data = row["data"]
    events, time = [], _as_int(row["time0"])
    for k, member in enumerate(members):
        if k:
            time += _as_int(data["dt"][k - 1])
        if tag == "tool-call-chunks":
            chunk = {"type": "tool-call-delta", "index": data["index"], "id": data["id"]}
            if "name" in data:
                chunk["name"] = data["name"]
            chunk["argumentsDelta"] = member
        else:
            chunk = {"type": ROW_TAGS[tag], "index": data["index"], "text": member}
        payload = {"turn": data["turn"], "step": data["step"], "chunk": chunk}
        events.append(Event("assistant/chunk", _as_int(row["seq0"]) + k, time, payload))
    return events


def decode_row(tag: str, row: dict) -> list[Event]:
    """A row-tagged record validated and expanded (`validateRow` + `expandRow`); ValueError with dsh's message."""
    return _expand_row(tag, row)


def _as_int(value: int | float) -> int:
    """A safe-integer number as a Python int (`1.0` and `1` are the same JS number)."""
    return int(value)


def _envelope_problem(record: dict) -> str | None:
    """`assertSessionEventEnvelope` (spec 1.5 step 2) as a reason string, or None when valid."""
    extra = [key for key in record if key not in ENVELOPE_KEYS]
    if extra:
        return f"invalid event envelope: unexpected key {extra[0]!r}"
    if not isinstance(record.get("type"), str):
        return "invalid event envelope: type must be a string"
    if not is_nonneg_safe_integer(record.get("seq")):
        return "invalid event envelope: seq must be a non-negative safe integer"
    if not is_safe_integer(record.get("time")):
        return "invalid event envelope: time must be a safe integer"
    if "data" not in record:
        return "invalid event envelope: data is missing"
    if "ignorable" in record and record["ignorable"] is not True:
        return "invalid event envelope: ignorable must be absent or true"
    return None


def decode_record(record: Any) -> list[Event]:
    """One parsed storage record → its events (a packed row expands); ValueError with the reason."""
    if not isinstance(record, dict):
        raise ValueError(f"record is not a JSON object (got {js_stringify(record)[:40]})")
    tag = record.get("type")
    if isinstance(tag, str) and tag in ROW_TAGS:
        return _expand_row(tag, record)
    problem = _envelope_problem(record)
    if problem:
        raise ValueError(problem)
    event = Event.from_json(record)
    return [Event(event.type, _as_int(event.seq), _as_int(event.time), event.data,
                  event.surface_op, event.source_event_seqs, event.ignorable)]


# -- reading -----------------------------------------------------------------------------------

def _header_problem(header: Any) -> str | None:
    """Spec 1.7 line 1: a `session` object; a foreign `version` is refused before anything else.

    Only `type` and `version` are checked: the repo's kit fixtures omit `version` (and older logs
    `delegationDepth`), which the model accepts; a present version must be 0.
    """
    if not isinstance(header, dict) or header.get("type") != "session":
        return 'first line is not a session header (expected an object with "type":"session")'
    version = header.get("version", SESSION_FORMAT_VERSION)
    if not _is_number(version) or version != SESSION_FORMAT_VERSION:
        return f"unsupported session format version {js_stringify(version)}"
    return None


class LogStream:
    """Iterator of `(line_no, Event)` over a log's records, reading one line at a time.

    After exhaustion `packed_rows` and `torn_tail` hold the totals (spec 1.7).
    """

    def __init__(self, path: str, handle, header: dict):
        self.path, self.header = path, header
        self.packed_rows, self.torn_tail = 0, False
        self._gen = self._records(handle)

    def __iter__(self) -> "LogStream":
        return self

    def __next__(self) -> tuple[int, Event]:
        return next(self._gen)

    def close(self) -> None:
        self._gen.close()

    def _records(self, handle) -> Iterator[tuple[int, Event]]:
        with handle:
            line_no = 1
            for raw in handle:
                line_no += 1
                if not raw.endswith(b"\n"):
                    # dsh's scanner never consumes an unterminated final record: torn tail (spec 1.7)
                    self.torn_tail = True
                    return
                try:
                    record = _parse(raw)
                except ValueError as exc:
                    raise LogFormatError(self.path, line_no, f"line is not valid JSON ({exc})") from None
                try:
                    events = decode_record(record)
                except ValueError as exc:
                    raise LogFormatError(self.path, line_no, str(exc)) from None
                if record.get("type") in ROW_TAGS:
                    self.packed_rows += 1
                for event in events:
                    yield line_no, event


def _open(path: str):
    if os.path.isdir(path):
        raise LogFormatError(path, None, "not a file (it is a directory)")
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise LogFormatError(path, None, "not a file (no such file)") from None
    except OSError as exc:
        raise LogFormatError(path, None, f"cannot open: {exc.strerror or exc}") from None


def iter_log(path: str | os.PathLike) -> tuple[dict, LogStream]:
    """Read the header now and stream the events lazily in bounded memory (spec 1.7)."""
    path = os.fspath(path)
    handle = _open(path)
    try:
        first = handle.readline()
        if not first:
            raise LogFormatError(path, 1, "empty file (no session header)")
        if not first.endswith(b"\n"):
            raise LogFormatError(path, 1, "header line is not newline-terminated (torn header)")
        try:
            header = _parse(first)
        except ValueError as exc:
            raise LogFormatError(path, 1, f"header line is not valid JSON ({exc})") from None
        problem = _header_problem(header)
        if problem:
            raise LogFormatError(path, 1, problem)
    except BaseException:
        handle.close()
        raise
    return header, LogStream(path, handle, header)


def read_log(path: str | os.PathLike) -> LogFile:
    """Read a whole log: header, expanded events with their line numbers, packing stats (spec 1.7)."""
    header, stream = iter_log(path)
    lines, events = [], []
    for line_no, event in stream:
        lines.append(line_no)
        events.append(event)
    return LogFile(stream.path, header, tuple(events), stream.packed_rows, stream.torn_tail, tuple(lines))


# -- writing (chunk-rows.ts packChunkRuns; format.ts eventLines) ---------------------------------

def _delta_kind(event: Event) -> str | None:
    """`classify`: the delta kind when the event's entire shape is whitelisted for packing."""
    if event.type != "assistant/chunk":
        return None
    if not (event.surface_op is ABSENT and event.source_event_seqs is ABSENT and event.ignorable is ABSENT):
        return None
    if not is_nonneg_safe_integer(event.seq) or not is_safe_integer(event.time):
        return None
    data = event.data
    if not isinstance(data, dict) or not _has_exact_keys(data, ("turn", "step", "chunk")):
        return None
    if not _is_number(data["turn"]) or not _is_number(data["step"]):
        return None
    chunk = data["chunk"]
    if not isinstance(chunk, dict) or not _is_number(chunk.get("index")):
        return None
    kind = chunk.get("type")
    if kind in ("text-delta", "reasoning-delta"):
        ok = _has_exact_keys(chunk, ("type", "index", "text")) and isinstance(chunk["text"], str)
    elif kind == "tool-call-delta":
        ok = (_has_exact_keys(chunk, ("type", "index", "id", "argumentsDelta"))
              or (_has_exact_keys(chunk, ("type", "index", "id", "name", "argumentsDelta"))
                  and isinstance(chunk["name"], str)))
        ok = ok and isinstance(chunk["id"], str) and isinstance(chunk["argumentsDelta"], str)
    else:
        ok = False
    return kind if ok else None


def _continues(prev: Event, nxt: Event, kind: str) -> bool:
    """`continues`: consecutive seq, safe gap, same turn/step/index (and call id/name)."""
    if nxt.seq != prev.seq + 1 or not is_safe_integer(nxt.time - prev.time):
        return False
    a, b = prev.data, nxt.data
    if a["turn"] != b["turn"] or a["step"] != b["step"] or a["chunk"]["index"] != b["chunk"]["index"]:
        return False
    if kind != "tool-call-delta":
        return True
    ca, cb = a["chunk"], b["chunk"]
    return ca["id"] == cb["id"] and ("name" in ca) == ("name" in cb) and ca.get("name") == cb.get("name")


def _build_row(kind: str, run: list[Event]) -> dict:
    """`buildRow`: key order type, seq0, time0, data{turn, step, index, dt, texts | id, name?, args}."""
    first = run[0].data
    data: dict[str, Any] = {
        "turn": first["turn"], "step": first["step"], "index": first["chunk"]["index"],
        "dt": [b.time - a.time for a, b in zip(run, run[1:])],
    }
    if kind == "tool-call-delta":
        data["id"] = first["chunk"]["id"]
        if "name" in first["chunk"]:
            data["name"] = first["chunk"]["name"]
        data["args"] = [e.data["chunk"]["argumentsDelta"] for e in run]
    else:
        data["texts"] = [e.data["chunk"]["text"] for e in run]
    return {"type": KIND_TAGS[kind], "seq0": run[0].seq, "time0": run[0].time, "data": data}


def pack_records(events: Iterable[Event]) -> Iterator[dict]:
    """`packChunkRuns`: runs of >= MIN_RUN same-block deltas become one row; others pass verbatim."""
    kind, run = None, []

    def flush() -> Iterator[dict]:
        if kind is not None and len(run) >= MIN_RUN:
            yield _build_row(kind, run)
        else:
            yield from (e.to_json() for e in run)

    for event in events:
        k = _delta_kind(event)
        if k is None:
            yield from flush()
            kind, run = None, []
            yield event.to_json()
        elif k == kind and run and _continues(run[-1], event, k):
            run.append(event)
        else:
            yield from flush()
            kind, run = k, [event]
    yield from flush()


def iter_lines(header: dict, events: Iterable[Event], pack_chunks: bool = True) -> Iterator[str]:
    """The log's lines, each newline-terminated: header, then one record per line (spec 1.7)."""
    yield js_stringify(header) + "\n"
    records = pack_records(events) if pack_chunks else (e.to_json() for e in events)
    for record in records:
        yield js_stringify(record) + "\n"


def dumps_log(header: dict, events: Iterable[Event], pack_chunks: bool = True) -> str:
    """The full log text as dsh's JSONL writer produces it (spec 1.7)."""
    return "".join(iter_lines(header, events, pack_chunks))


def write_log(path: str | os.PathLike, header: dict, events: Iterable[Event], pack_chunks: bool = True) -> None:
    """Write a log file (UTF-8, one record per line, trailing newline), streaming the events."""
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        for line in iter_lines(header, events, pack_chunks):
            handle.write(line)
