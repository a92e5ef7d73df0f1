"""Streaming read of a session log for the audit (spec 1.7), with `PATH:LINE: reason` failures.

Reuses the model's decoder (`model.jsonl`: header check, packed chunk rows, envelope check). Two
differences from `model.jsonl.iter_log`: an unterminated final line that still parses is reported
(`torn-tail`, dsh drops it) instead of silently skipped, and one that does not parse is truncated
JSON, which the issue classes as non-log input (exit 2).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

from surfacecheck.model.errors import LogFormatError
from surfacecheck.model.event import Event
from surfacecheck.model.jsonl import ROW_TAGS, _parse, decode_record, iter_log


class AuditInputError(Exception):
    """The input cannot be read as a log at all: `PATH:LINE: reason` (exit 2)."""

    def __init__(self, path: str, line: int | None, reason: str):
        self.path, self.line, self.reason = path, line, reason
        super().__init__(f"{path}:{line}: {reason}" if line is not None else f"{path}: {reason}")


class AuditStream:
    """Iterate `(line, event)`; after exhaustion `torn_line` names an ignored unterminated final line."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self.torn_line: int | None = None
        try:
            self.header, stream = iter_log(self.path)
        except LogFormatError as exc:
            raise AuditInputError(exc.path, exc.line, exc.reason) from None
        stream.close()  # we read the lines ourselves (to see the torn tail)

    def __iter__(self) -> Iterator[tuple[int, Event]]:
        with open(self.path, "rb") as handle:
            handle.readline()
            line_no = 1
            for raw in handle:
                line_no += 1
                try:
                    record = _parse(raw)
                except ValueError as exc:
                    why = "truncated JSON record" if not raw.endswith(b"\n") else "line is not valid JSON"
                    raise AuditInputError(self.path, line_no, f"{why} ({exc})") from None
                if not raw.endswith(b"\n"):
                    self.torn_line = line_no  # spec 1.7: never consumed by dsh's scanner
                    return
                if isinstance(record, dict) and not isinstance(record.get("type"), str):
                    raise AuditInputError(self.path, line_no, "invalid event envelope: type must be a string")
                try:
                    events = decode_record(record)
                except (ValueError, TypeError, KeyError) as exc:
                    raise AuditInputError(self.path, line_no, str(exc)) from None
                del record
                for event in events:
                    yield line_no, event


def log_paths(target: str | os.PathLike) -> list[Path]:
    """A file is itself; a folder is its `*.jsonl` files (recursively, sorted). Errors: AuditInputError."""
    path = Path(target)
    if path.is_dir():
        found = sorted(p for p in path.rglob("*.jsonl") if p.is_file())
        if not found:
            raise AuditInputError(str(path), None, "folder holds no *.jsonl logs")
        return found
    if not path.exists():
        raise AuditInputError(str(path), None, "not a file (no such file or folder)")
    if not path.is_file():
        raise AuditInputError(str(path), None, "not a regular file")
    return [path]


__all__ = ["AuditInputError", "AuditStream", "ROW_TAGS", "log_paths"]
