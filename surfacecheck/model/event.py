"""The session event envelope (seed §2 "append-only log"; spec 1.1).

An :class:`Event` is an immutable value. ``surface_op`` and ``source_event_seqs`` keep the raw
JSON value as stored (so a malformed marker can still be validated and reported, spec 1.4); the
sentinel :data:`ABSENT` means the key was not present at all (``null`` is a present, invalid value).
``data`` is a JSON value that the model never mutates; equality and hashing use its canonical text.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .frozen import quick_init
from .jsvalue import canonical, is_nonneg_safe_integer

SURFACE_EVENT_TYPES = frozenset({"user/message", "assistant/message", "tool/result"})
"""Spec 1.1 `SURFACE_EVENT_TYPES`: exactly the message-producing types."""

METERING_EVENT_TYPES = frozenset({"compaction/summary", "compaction/prune"})
"""Spec 5.1: the events that arm a shadow-price claim."""

ENVELOPE_KEYS = frozenset({"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"})
"""Spec 1.5 step 2: the only keys a stored event may carry."""

APPEND = "append"


class _Absent:
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self):
        return (_Absent, ())


ABSENT: Any = _Absent()


class _Once:
    """A property of a frozen value worked out on first read and kept in the instance's ``__dict__`` (which
    then answers every later read; ``functools.cached_property`` takes a lock per first read on 3.11)."""

    def __init__(self, derive: Callable[[Any], Any]):
        self.derive, self.name, self.__doc__ = derive, derive.__name__, derive.__doc__

    def __get__(self, instance: Any, owner: type) -> Any:
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.derive(instance)
        return value


@quick_init
@dataclass(frozen=True)
class Replace:
    """A parsed positional replace marker `{op:'replace', start, end}` (spec 2.1)."""

    start: int
    end: int

    def to_json(self) -> dict:
        return {"op": "replace", "start": self.start, "end": self.end}


@quick_init
@dataclass(frozen=True, eq=False)
class Event:
    """One log entry: `{type, seq, time, data, sourceEventSeqs?, surfaceOp?, ignorable?}` (spec 1.1)."""

    type: str
    seq: int
    time: int
    data: Any
    surface_op: Any = ABSENT
    source_event_seqs: Any = ABSENT
    ignorable: Any = ABSENT
    _key: str = field(default="", repr=False, compare=False)

    # -- identity --------------------------------------------------------------------------------
    def key(self) -> str:
        if not self._key:
            object.__setattr__(self, "_key", canonical(self.to_json()))
        return self._key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Event) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    # -- spec predicates (each a function of the frozen event, so worked out once: every fold asks them) --
    @_Once
    def is_surface_type(self) -> bool:
        """Spec 1.1: the type is surface-eligible (whether or not its marker is valid)."""
        return self.type in SURFACE_EVENT_TYPES

    @_Once
    def is_append(self) -> bool:
        return self.is_surface_type and self.surface_op == APPEND

    @_Once
    def replace(self) -> Replace | None:
        """The replace range when this is a well-formed replace marker, else None."""
        op = self.surface_op
        if self.is_surface_type and isinstance(op, dict) and op.get("op") == "replace":
            start, end = op.get("start"), op.get("end")
            if is_nonneg_safe_integer(start) and is_nonneg_safe_integer(end):  # JS reads 0.0 as 0
                return Replace(int(start), int(end))
        return None

    @property
    def sources(self) -> tuple[int, ...]:
        """`sourceEventSeqs` as a tuple (empty when absent)."""
        seqs = self.source_event_seqs
        return tuple(seqs) if isinstance(seqs, (list, tuple)) else ()

    # -- wire form -------------------------------------------------------------------------------
    def to_json(self) -> dict:
        """Key order as `Session.append` writes it: type, seq, time, data, sourceEventSeqs?, surfaceOp?, ignorable?"""
        out: dict[str, Any] = {"type": self.type, "seq": self.seq, "time": self.time, "data": self.data}
        if self.source_event_seqs is not ABSENT:
            seqs = self.source_event_seqs
            out["sourceEventSeqs"] = list(seqs) if isinstance(seqs, tuple) else seqs
        if self.surface_op is not ABSENT:
            op = self.surface_op
            out["surfaceOp"] = op.to_json() if isinstance(op, Replace) else op
        if self.ignorable is not ABSENT:
            out["ignorable"] = self.ignorable
        return out

    @classmethod
    def from_json(cls, obj: dict) -> "Event":
        """Build from a decoded record without validating it (validation is `envelope_problem`)."""
        return cls(
            type=obj.get("type"),
            seq=obj.get("seq"),
            time=obj.get("time"),
            data=obj.get("data", ABSENT),
            surface_op=obj.get("surfaceOp", ABSENT),
            source_event_seqs=obj.get("sourceEventSeqs", ABSENT),
            ignorable=obj.get("ignorable", ABSENT),
        )


def js_read(value: Any, key: str, error: type = TypeError) -> Any:
    """JS property read `value[key]`: throws (``error``) on null/undefined, ABSENT on other non-objects."""
    if value is None or value is ABSENT:
        shown = "null" if value is None else "undefined"
        raise error(f"Cannot read properties of {shown} (reading '{key}')")
    if isinstance(value, dict):
        return value.get(key, ABSENT)
    return ABSENT


def surface_marker(op: Replace | str) -> Any:
    """The JSON value to store as `surfaceOp` for a parsed marker."""
    return op.to_json() if isinstance(op, Replace) else op
