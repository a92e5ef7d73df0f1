"""The runtime interface: JSON requests in, JSON results out (``docs/protocol.md``).

Every runtime — the reference model adapter, the embedded runtime, a ``cmd:`` child process —
is driven through one method, :meth:`Runtime.call` ``(op, args) -> result``, so a trace step is
literally a protocol request and the lockstep driver treats every runtime alike.

Operations by level (each level includes the ones above it):

``log``
    ``reset {}`` new empty session · ``append {event}`` append one dsh event
    (``{type, data, time?, surfaceOp?, sourceEventSeqs?}``; the runtime assigns ``seq``) →
    ``{seq, generation}`` · ``surface {}`` → ``{nodes: [seq...], generation}`` · ``cuts {}`` →
    ``{balanced: [bool × (N+1)]}`` · ``measure {}`` → ``{total, prices: [int × N]}`` ·
    ``projection {}`` → ``{total: int | null}`` · ``meter_replay {events, header?}`` → ``measure``'s answer over a
    handed log (spec 4.2-4.3)
``compaction``
    ``select_range {retain_tokens}`` → ``{range: {start, end} | null}`` · ``prune {pruner?}`` ·
    ``compact {start, end, manual?, summaries?}`` (scripted summary outcomes)
``policy``
    ``configure {policy, context_window?, route?, summaries?}`` · ``pre_step {context?, step?, claimed?, summaries?}`` ·
    ``request_error {code, summaries?}`` · ``manual_compact {args?, summary?}`` · ``reload {}`` (crash and reopen)

``conversation`` (a level of its own, served by agent runtimes other than dsh; ``docs/conversation-protocol.md``)
    ``open {settings, system?, history?}`` · ``turn {user, replies?, summaries?, overflow_above?, ...}`` ·
    ``compact {summaries?, summarizer_window?}``

Exact shapes: ``docs/protocol.md`` and ``docs/schemas/`` (generated from :mod:`.schemas`).

A request the runtime refuses for a spec reason is *not* an exception: the result is
``{"error": {"type", "rule", "seq", "message"}}`` and the lockstep driver compares it with the
model's. :class:`RuntimeUnavailable` is for the runtime itself failing (hung, died, spoke
gibberish): the run is then inconclusive, never a pass.
"""
from __future__ import annotations

from typing import Any, Protocol

PROTOCOL = "surfacecheck-runtime/1"
LEVELS = ("log", "compaction", "policy")
OPS: dict[str, tuple[str, ...]] = {
    "log": ("reset", "append", "surface", "cuts", "measure", "projection", "events", "meter_replay"),
    "compaction": ("select_range", "prune", "compact"),
    "policy": ("configure", "pre_step", "request_error", "manual_compact", "reload"),
    "conversation": ("open", "turn", "compact"),
}
OPTIONAL_OPS: tuple[str, ...] = ("closers", "rows", "decode")
"""Read-only persistence views a runtime may serve at any level and announces in ``hello``'s ``ops`` (spec 1.6-1.7):
``closers`` (the crash-repair closers a reopen would append), ``rows`` (the log as the JSONL writer packs it) and
``decode`` (one storage record as the reader expands it). Compared only where the runtime under test announces them."""
CONVERSATION = "conversation"
"""The level of a runtime-neutral conversation; it stands apart from the log levels (it includes none of them)."""
ANNOUNCEABLE = LEVELS + (CONVERSATION,)


def ops_at(level: str) -> tuple[str, ...]:
    """The operations available at ``level`` (a level includes every level before it)."""
    index = LEVELS.index(level)
    return tuple(op for lvl in LEVELS[: index + 1] for op in OPS[lvl])


class RuntimeUnavailable(Exception):
    """The runtime could not answer: it hung past its timeout, exited, or broke the protocol.

    ``kind`` is ``timeout``, ``exited``, ``protocol`` or ``unsupported``; ``stderr`` the tail of
    the child's standard error when there is one. Any run that meets it is inconclusive (exit 3)."""

    def __init__(self, kind: str, message: str, stderr: str = ""):
        super().__init__(message)
        self.kind, self.stderr = kind, stderr


class ProtocolError(ValueError):
    """A request the protocol itself rejects (not a spec refusal): ``type`` is ``unknown-op``,
    ``bad-args``, ``unsupported-level``, ``unsupported`` or ``bad-request``. In-process runtimes raise it
    from :meth:`Runtime.call`; a server answers ``{"id", "error": {"type", "message"}}``."""

    TYPES = ("bad-request", "unknown-op", "bad-args", "unsupported-level", "unsupported", "internal")

    def __init__(self, type_: str, message: str):
        super().__init__(message)
        self.type, self.message = type_, message

    def to_json(self) -> dict[str, str]:
        return {"type": self.type, "message": self.message}


class Runtime(Protocol):
    """What the suite drives. ``name`` is what reports print (``model``, ``embedded``, ``cmd:...``)."""

    name: str

    def hello(self) -> dict[str, Any]:
        """``{"protocol": PROTOCOL, "name": str, "levels": [...], "ops": [...]}``."""

    def call(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        """Run one request; a spec-level refusal is a result ``{"error": {...}}``, not an exception."""

    def close(self) -> None:
        """Release the runtime (kill a child process)."""


def dispatch(handlers: dict[str, Any], op: str, args: Any) -> dict[str, Any]:
    """Route one request to its handler; the protocol errors every in-process runtime shares
    (``unsupported-level``, ``unknown-op``, ``bad-args``) are raised here, once."""
    handler = handlers.get(op)
    if handler is None:
        if any(op in ops_at(level) for level in LEVELS):
            raise ProtocolError("unsupported-level", f"op {op!r} belongs to a level this runtime does not support")
        raise ProtocolError("unknown-op", f"unknown op {op!r}")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise ProtocolError("bad-args", "args must be a JSON object")
    return handler(args)


def announced_ops(handlers: dict[str, Any], levels: tuple[str, ...] | list[str]) -> list[str]:
    """The protocol ops a runtime serves at ``levels``, in :data:`OPS` order (``hello``'s ``ops``)."""
    return [op for level in levels for op in OPS[level] if op in handlers] + [op for op in OPTIONAL_OPS if op in handlers]


def bind_level_ops(handlers: dict[str, Any], ops: Any, levels: tuple[str, ...] = ("compaction", "policy")) -> tuple[str, ...]:
    """Register ``ops.<op>`` for every op of ``levels`` (the :data:`OPS` table is the one list of op names);
    returns every level the runtime then supports."""
    for level in levels:
        handlers.update({op: getattr(ops, op) for op in OPS[level]})
    return LEVELS
