"""The one counterexample trace format, shared by ``verify``, ``prove`` and ``explore``.

A trace is a JSON-lines file:

1. a header line::

     {"format": "surfacecheck-trace/1", "source": "verify" | "prove" | "explore" | "e2e" | "contract",
      "level": "log" | "compaction" | "policy" | "conversation", "runtime": "embedded", "seed": 1234 | null,
      "property": "projection-equals-recount", "command": "surfacecheck verify ...",
      "created": "2026-11-30T01:00:00Z", "notes": {...}}

   A ``contract`` trace (level ``conversation``, ``docs/conversation-protocol.md``) names a promise of the
   compaction contract as its property, carries the ``provider`` whose role rules apply, and opens with an
   ``open`` step.

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
from typing import Any, Callable

from surfacecheck.core.protocol import ANNOUNCEABLE, CONVERSATION, LEVELS, OPS
from surfacecheck.model.frozen import quick_init

FORMAT = "surfacecheck-trace/1"
SOURCES = ("verify", "prove", "explore", "e2e", "contract")
"""e2e: a bundle of ``surfacecheck e2e dsh``; contract: a witness of ``surfacecheck contract`` (conversation level)."""
TRACE_LEVELS = ANNOUNCEABLE  # the log levels, and the conversation level


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
    provider: str | None = None  # a conversation trace's provider (whose role rules the promises apply)

    def header(self) -> dict:
        created = self.created or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        header = {"format": FORMAT, "source": self.source, "level": self.level, "runtime": self.runtime,
                  "seed": self.seed, "property": self.property, "command": self.command,
                  "created": created, "notes": self.notes}
        if self.provider is not None:
            header["provider"] = self.provider
        return header

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


HEADER_KEYS = ("format", "source", "level", "runtime", "seed", "property", "command", "created", "notes", "provider")
STEP_KEYS = ("step", "op", "args", "label")
VIOLATION_KEYS = ("property", "step", "message", "expected", "observed")
E2E_PROPERTIES = ("e2e-model-agreement", "e2e-audit-clean")
"""The properties an e2e bundle's trace names (the model-vs-runtime agreement, the audit of the runtime's log)."""
PROTOCOL_OPS = frozenset(op for level in TRACE_LEVELS for op in OPS[level])
NO_STEPS = "no steps: a trace that runs nothing proves nothing"

StepCheck = Callable[[str, dict], "str | None"]
"""``(op, args) -> reason`` when a step's args do not fit its op (the protocol's request schema), else None."""
PropertyCheck = Callable[[str], "str | None"]
"""``property -> reason`` when a trace names a property no engine checks, else None."""


def _require(cond: bool, path, line: int, reason: str) -> None:
    if not cond:
        raise TraceError(path, line, reason)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _only_keys(record: dict, allowed: tuple[str, ...], path, line: int, what: str) -> None:
    extra = sorted(set(record) - set(allowed))
    _require(not extra, path, line, f"{what}: unknown field(s) {', '.join(map(repr, extra))}; "
                                    f"expected only {', '.join(allowed)}")


def _records(path: Path) -> list[tuple[int, Any]]:
    """The file's non-blank lines as ``(line number, JSON value)``."""
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
    return records


def _check_header(header: Any, path, line: int, check_property: PropertyCheck | None) -> None:
    _require(isinstance(header, dict) and header.get("format") == FORMAT, path, line,
             f"not a trace header: expected an object with \"format\": \"{FORMAT}\"")
    _only_keys(header, HEADER_KEYS, path, line, "header")
    _require(header.get("source") in SOURCES, path, line, f"header source must be one of {SOURCES}")
    _require(header.get("level") in TRACE_LEVELS, path, line, f"header level must be one of {TRACE_LEVELS}")
    _require((header["level"] == CONVERSATION) == (header["source"] == "contract"), path, line,
             f"header level {CONVERSATION!r} goes with source 'contract' and only with it")
    _require(header.get("provider") is None or (isinstance(header["provider"], str) and header["provider"] != ""),
             path, line, "header provider must be a non-empty string or null")
    _require(isinstance(header.get("property"), str) and header["property"] != "", path, line,
             "header property must be a non-empty string")
    _require(isinstance(header.get("runtime", "model"), str) and header.get("runtime", "model") != "", path, line,
             "header runtime must be a non-empty string (a runtime spelling: model, embedded, dsh, cmd:...)")
    _require(header.get("seed") is None or _is_int(header["seed"]), path, line, "header seed must be an integer or null")
    for key in ("command", "created"):
        _require(header.get(key) is None or isinstance(header[key], str), path, line,
                 f"header {key} must be a string or null")
    _require(header.get("notes") is None or isinstance(header["notes"], dict), path, line,
             "header notes must be an object or null")
    if header["source"] == "e2e":
        _require(header["property"] in E2E_PROPERTIES, path, line,
                 f"header property {header['property']!r}: an e2e trace names one of {E2E_PROPERTIES}")
    elif check_property is not None:
        reason = check_property(header["property"])
        _require(reason is None, path, line, f"header property: {reason}")


def _read_violation(record: dict, path, line: int, check_property: PropertyCheck | None) -> Violation:
    _only_keys(record, ("violation",), path, line, "violation line")
    v = record["violation"]
    _require(isinstance(v, dict) and isinstance(v.get("property"), str) and v["property"] != "", path, line,
             "violation must be an object with a non-empty string property")
    _only_keys(v, VIOLATION_KEYS, path, line, "violation")
    _require(isinstance(v.get("message", ""), str), path, line, "violation message must be a string")
    _require(v.get("step") is None or (_is_int(v["step"]) and v["step"] >= 0), path, line,
             "violation step must be a step number or null")
    if check_property is not None and v["property"] not in E2E_PROPERTIES:
        reason = check_property(v["property"])
        _require(reason is None, path, line, f"violation property: {reason}")
    return Violation(v["property"], v.get("message", ""), v.get("step"), v.get("expected"), v.get("observed"))


def _read_step(record: dict, number: int, path, line: int, check_step: StepCheck | None,
               ops: frozenset | tuple = PROTOCOL_OPS) -> Step:
    _require(_is_int(record.get("step")) and record["step"] == number, path, line,
             f"step number {record.get('step')!r}, expected {number}")
    _only_keys(record, STEP_KEYS, path, line, f"step {number}")
    op = record.get("op")
    _require(isinstance(op, str), path, line, "step op must be a string")
    _require(op in ops, path, line,
             f"step {number}: unknown op {op!r}; the protocol's ops here are {', '.join(sorted(ops))}")
    args = record.get("args", {})
    _require(isinstance(args, dict), path, line, "step args must be an object")
    _require(isinstance(record.get("label", ""), str), path, line, "step label must be a string")
    if check_step is not None:
        reason = check_step(op, args)
        _require(reason is None, path, line, f"step {number} ({op}): {reason}")
    return Step(op, args, record.get("label", ""))


def read_trace(path: str | Path, *, check_step: StepCheck | None = None,
               check_property: PropertyCheck | None = None) -> Trace:
    """Read a trace file; raises :class:`TraceError` (``PATH:LINE: reason``) on anything malformed.

    The structure is checked here (header fields, step numbers in order, ops of the protocol, one violation
    line last, at least one step); ``check_step`` and ``check_property`` add what needs the layers above
    (each op's request schema, the registered properties): the suite's readers go through
    :func:`surfacecheck.properties.trace_check.read_valid_trace`, which passes both. An e2e bundle's trace
    (source ``e2e``) records the runtime's log rather than a run to replay, so it may have no steps."""
    path = Path(path)
    records = _records(path)
    _require(bool(records), path, 1, "empty file: expected a trace header line")
    line, header = records[0]
    _check_header(header, path, line, check_property)
    steps: list[Step] = []
    violation = None
    level_ops = OPS.get(header["level"], ()) if header["level"] == CONVERSATION else PROTOCOL_OPS
    for line, record in records[1:]:
        _require(isinstance(record, dict), path, line, "expected a JSON object")
        if "violation" in record:
            _require(violation is None, path, line, "a second violation line")
            violation = _read_violation(record, path, line, check_property)
            continue
        _require(violation is None, path, line, "a step after the violation line")
        steps.append(_read_step(record, len(steps) + 1, path, line, check_step, level_ops))
        if header["level"] == CONVERSATION:
            _require((steps[-1].op == "open") == (len(steps) == 1), path, line,
                     f"step {len(steps)} ({steps[-1].op}): a conversation trace opens with one open step, "
                     "then turn and compact steps")
    _require(bool(steps) or header["source"] == "e2e", path, records[-1][0], NO_STEPS)
    if violation is not None and violation.step is not None:
        _require(violation.step <= len(steps), path, records[-1][0],
                 f"violation step {violation.step} is past the last step ({len(steps)})")
    return Trace(source=header["source"], level=header["level"], property=header["property"],
                 steps=tuple(steps), violation=violation, runtime=header.get("runtime") or "model",
                 seed=header.get("seed"), command=header.get("command"), created=header.get("created"),
                 notes=header.get("notes") or {}, provider=header.get("provider"))


def peek_header(path: str | Path) -> dict | None:
    """The first line of ``path`` as a JSON object when it is a trace header (``format`` matches), else None:
    how ``replay`` picks the engine before reading the whole trace (which that engine then checks)."""
    try:
        with open(path, encoding="utf-8") as handle:
            first = next((raw for raw in handle if raw.strip()), "")
        header = json.loads(first)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    return header if isinstance(header, dict) and header.get("format") == FORMAT else None
