"""The one counterexample trace format, shared by ``verify``, ``prove`` and ``explore``.

A trace is a JSON-lines file:

1. a header line::

     {"format": "surfacecheck-trace/1", "source": "verify" | "prove" | "explore",
      "level": "log" | "compaction" | "policy", "runtime": "embedded", "seed": 1234 | null,
      "property": "projection-equals-recount", "command": "surfacecheck verify ...",
      "created": "2026-11-30T01:00:00Z", "notes": {...}}

2. one line per operation, in order, numbered from 1; ``op`` and ``args`` are exactly a request of
   the runtime protocol (``docs/protocol.md``), ``label`` says in the spec's words what it does::

     {"step": 1, "op": "append", "args": {"event": {...}}, "label": "user/message 0: a prompt"}

3. a last line with the first violation found (``expected``/``observed`` are any JSON)::

     {"violation": {"property": "...", "step": 7, "message": "...", "expected": ..., "observed": ...}}

``surfacecheck replay TRACE`` runs the operations against a runtime (in lockstep with the model)
and re-checks the property; it exits 1 while the violation persists and 0 once it is gone.
"""
from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from surfacecheck.model.frozen import quick_init

FORMAT = "surfacecheck-trace/1"
SOURCES = ("verify", "prove", "explore", "e2e")  # e2e: a bundle of `surfacecheck e2e dsh`
LEVELS = ("log", "compaction", "policy")


class TraceError(ValueError):
    """A trace file that cannot be read; ``str()`` is ``PATH:LINE: reason``."""

    def __init__(self, path: str | Path, line: int, reason: str):
        super().__init__(f"{path}:{line}: {reason}")
        self.path, self.line, self.reason = str(path), line, reason


@quick_init  # made once per step of every run
@dataclass(frozen=True)
class Step:
    """One protocol request: ``op`` with its ``args``; ``label`` tells the story in spec words."""

    op: str
    args: dict = field(default_factory=dict)
    label: str = ""

    def to_json(self, number: int) -> dict:
        record = {"step": number, "op": self.op, "args": self.args}
        if self.label:
            record["label"] = self.label
        return record


@dataclass(frozen=True)
class Violation:
    """The first broken property or divergence: at which step, what was expected, what was seen."""

    property: str
    message: str
    step: int | None = None
    expected: Any = None
    observed: Any = None

    def to_json(self) -> dict:
        return {"property": self.property, "step": self.step, "message": self.message,
                "expected": self.expected, "observed": self.observed}


@dataclass(frozen=True)
class Trace:
    """A replayable counterexample (see the module docstring for the file format)."""

    source: str
    level: str
    property: str
    steps: tuple[Step, ...]
    violation: Violation | None = None
    runtime: str = "model"
    seed: int | None = None
    command: str | None = None
    created: str | None = None
    notes: dict = field(default_factory=dict)

    def header(self) -> dict:
        created = self.created or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"format": FORMAT, "source": self.source, "level": self.level, "runtime": self.runtime,
                "seed": self.seed, "property": self.property, "command": self.command,
                "created": created, "notes": self.notes}

    def dumps(self) -> str:
        lines = [self.header()] + [s.to_json(i) for i, s in enumerate(self.steps, 1)]
        if self.violation is not None:
            lines.append({"violation": self.violation.to_json()})
        return "".join(json.dumps(line, ensure_ascii=False, sort_keys=False) + "\n" for line in lines)


def write_trace(path: str | Path, trace: Trace) -> Path:
    """Write ``trace`` to ``path`` (parents created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(trace.dumps(), encoding="utf-8")
    return path


def _require(cond: bool, path, line: int, reason: str) -> None:
    if not cond:
        raise TraceError(path, line, reason)


def read_trace(path: str | Path) -> Trace:
    """Read a trace file; raises :class:`TraceError` (``PATH:LINE: reason``) on anything malformed."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(path, 0, "not a file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(path, 0, f"cannot read as UTF-8 text: {exc}") from None
    records: list[tuple[int, Any]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            records.append((number, json.loads(raw)))
        except json.JSONDecodeError as exc:
            raise TraceError(path, number, f"not JSON: {exc.msg}") from None
        except RecursionError:
            raise TraceError(path, number, "not JSON this suite can read: nested too deeply") from None
    _require(bool(records), path, 1, "empty file: expected a trace header line")
    line, header = records[0]
    _require(isinstance(header, dict) and header.get("format") == FORMAT, path, line,
             f"not a trace header: expected an object with \"format\": \"{FORMAT}\"")
    _require(header.get("source") in SOURCES, path, line, f"header source must be one of {SOURCES}")
    _require(header.get("level") in LEVELS, path, line, f"header level must be one of {LEVELS}")
    _require(isinstance(header.get("property"), str), path, line, "header property must be a string")
    steps: list[Step] = []
    violation = None
    for line, record in records[1:]:
        _require(isinstance(record, dict), path, line, "expected a JSON object")
        if "violation" in record:
            _require(violation is None, path, line, "a second violation line")
            v = record["violation"]
            _require(isinstance(v, dict) and isinstance(v.get("property"), str), path, line,
                     "violation must be an object with a string property")
            violation = Violation(v["property"], str(v.get("message", "")), v.get("step"),
                                  v.get("expected"), v.get("observed"))
            continue
        _require(violation is None, path, line, "a step after the violation line")
        _require(record.get("step") == len(steps) + 1, path, line,
                 f"step number {record.get('step')!r}, expected {len(steps) + 1}")
        _require(isinstance(record.get("op"), str), path, line, "step op must be a string")
        args = record.get("args", {})
        _require(isinstance(args, dict), path, line, "step args must be an object")
        steps.append(Step(record["op"], args, str(record.get("label", ""))))
    return Trace(source=header["source"], level=header["level"], property=header["property"],
                 steps=tuple(steps), violation=violation, runtime=str(header.get("runtime") or "model"),
                 seed=header.get("seed"), command=header.get("command"), created=header.get("created"),
                 notes=header.get("notes") or {})
