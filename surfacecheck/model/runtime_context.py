"""Runtime-context projection: the durable snapshot of dynamic context (seed §14; spec 12).

dsh keeps the system header stable and materializes changing runtime context as an owned
``user/message`` at the history tail (`packages/core/agent-loop/src/runtime-context.ts`
`RuntimeContextProjection`). Its only state is *what it last retained*:

* :data:`NEVER` — TS ``undefined``: no owned snapshot ever existed;
* :data:`NONE` — TS ``null``: snapshots existed but none is retained (e.g. one was shadowed);
* :class:`RetainedSnapshot` ``(seq, text)`` — the latest retained snapshot; ``text`` is ``None``
  for a malformed (not exactly one text block) message, so it never equals a rendered snapshot.

Everything here is an immutable value or a pure function. The state has two *different* entry
points, reproduced deliberately (spec 15 G3): :func:`restore_retained` (constructor backward scan,
"latest owned snapshot still visible") and :func:`fold_retained` (live rule over committed events).
:func:`project` never changes the state; the state only follows committed events.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence, Union

from .errors import ModelError
from .seams import active
from .event import ABSENT, Event, js_read

RUNTIME_CONTEXT_SOURCE = "@deepseek-ai/dsh-system-prompt"
"""Spec 12 / Appendix A: `SOURCE`, the plugin name that owns runtime-context snapshots."""

CONTEXT_HEADER = "Current runtime context. This snapshot supersedes earlier runtime-context snapshots.\n\n"
"""Spec 12 / Appendix A: prefix `joinContextSections` puts before the joined sections."""

CLEARED = "Current runtime context: none. Earlier runtime-context snapshots no longer apply."
"""Spec 12 / Appendix A: the text sent when the active context set became empty."""

DEFAULT_SNAPSHOT_ID = "runtime-context-snapshot"
"""Model-only default for the message id dsh mints with `crypto.randomUUID()` (kept deterministic)."""


class RuntimeContextShapeError(ModelError):
    """A `user/message` whose data dsh's `isOwned`/`textOf` cannot read (TS `TypeError`).

    Live, dsh's `session/event` listener throw is contained (spec 1.3 step 8) so the state is left
    unchanged; in the constructor scan it propagates and agent creation fails.
    """

    rule = "runtime-context-shape"


# -- state --------------------------------------------------------------------------------------
class _Marker:
    """A named singleton state (`NEVER` / `NONE`); falsy like TS `undefined` / `null`."""

    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return self._name

    def __bool__(self) -> bool:
        return False

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        return self._name


NEVER: Any = _Marker("NEVER")
"""TS `undefined`: no owned snapshot ever existed (seed §14; spec 12 "State")."""

NONE: Any = _Marker("NONE")
"""TS `null`: owned snapshots existed but none is retained (seed §14; spec 12 "State")."""


@dataclass(frozen=True)
class RetainedSnapshot:
    """TS `{seq, text}`: the retained owned snapshot's log seq and its `textOf` (None = malformed)."""

    seq: int
    text: Any = None


Retained = Union[RetainedSnapshot, Any]
"""`NEVER | NONE | RetainedSnapshot` (spec 12 "State `retained ∈ {undefined, null, {seq, text?}}`")."""


# -- predicates ---------------------------------------------------------------------------------
def _read(value: Any, key: str) -> Any:
    return js_read(value, key, RuntimeContextShapeError)


def _is_owned_message(message: Any) -> bool:
    """`isOwned(message)` exactly: `source.kind === 'plugin' && source.plugin === SOURCE` (may raise)."""
    source = _read(message, "source")
    return _read(source, "kind") == "plugin" and _read(source, "plugin") == RUNTIME_CONTEXT_SOURCE


def is_owned_snapshot(event: Event) -> bool:
    """Spec 12 (seed §14): the event is a `user/message` owned by `@deepseek-ai/dsh-system-prompt`.

    Replacement or append alike. A message dsh could not read (no `source`) is not owned here;
    :func:`fold_retained` / :func:`restore_retained` reproduce dsh's throw semantics for it.
    """
    if event.type != "user/message":
        return False
    try:
        return _is_owned_message(event.data)
    except RuntimeContextShapeError:
        return False


def text_of(message: Any) -> Any:
    """`textOf(m)` (spec 12; seed §14): the text when `content` is exactly one text block, else None.

    A non-text, multi-block or empty content gives None (TS `undefined`), so a malformed retained
    snapshot never equals a rendered one and is always replaced.
    """
    content = _read(message, "content")
    if isinstance(content, str):
        return None  # JS destructures a string into characters; a character has no `.type`
    if not isinstance(content, (list, tuple)):
        raise RuntimeContextShapeError("message.content is not iterable")
    if len(content) != 1:
        return None
    block = content[0]
    if isinstance(block, dict) and block.get("type") == "text":
        text = block.get("text", ABSENT)
        return None if text is ABSENT else text
    return None


def _owned_user_message(event: Event) -> bool:
    """`event.type === 'user/message' && isOwned(event.data)` with dsh's throw (RuntimeContextShapeError)."""
    return event.type == "user/message" and _is_owned_message(event.data)


def is_replacement_surface_event(event: Event) -> bool:
    """`isReplacementSurfaceEvent`: a surface-eligible event whose `surfaceOp` is present and not `'append'`."""
    return event.is_surface_type and event.surface_op is not ABSENT and event.surface_op != "append"


# -- transitions --------------------------------------------------------------------------------
def restore_retained(session: Any) -> Retained:
    """Constructor scan (seed §14; spec 12 "Constructor"): the latest owned snapshot still visible.

    Scans the log backwards over owned `user/message` events: the first one met turns NEVER into
    NONE; the first one *on the current surface* is retained and the scan stops. Accepts a
    :class:`~model.session.Session` (anything with ``.log`` and ``.nodes``). Raises
    :class:`RuntimeContextShapeError` where dsh's constructor would throw.
    """
    visible = set(session.nodes)
    retained: Retained = NEVER
    for event in reversed(session.log):
        if not _owned_user_message(event):
            continue
        if retained is NEVER:
            retained = NONE
        if event.seq in visible:
            return RetainedSnapshot(event.seq, text_of(event.data))
    return retained


def fold_retained(retained: Retained, event: Event) -> Retained:
    """Live rule (seed §14; spec 12 "Live"): the state after one committed event of this session.

    An owned `user/message` (append or replacement) is retained; otherwise, when a snapshot is
    retained and the event is a *replacement* surface event whose `sourceEventSeqs` include its
    seq, nothing is retained (NONE). Nothing else changes the state — an unrelated replacement
    does not clear it, and shadowing the newest snapshot clears it even if an older one is still
    visible (spec 15 G3). A user/message dsh cannot read makes its listener throw, which dsh
    contains: the state is returned unchanged.
    """
    try:
        owned = _owned_user_message(event)
        if owned:
            return RetainedSnapshot(event.seq, text_of(event.data))
    except RuntimeContextShapeError:
        return retained
    if (
        isinstance(retained, RetainedSnapshot)
        and is_replacement_surface_event(event)
        and isinstance(event.source_event_seqs, (list, tuple))
        and retained.seq in event.source_event_seqs
    ):
        return NONE
    return retained


def fold_retained_log(events: Iterable[Event], retained: Retained = NEVER) -> Retained:
    """:func:`fold_retained` over events committed after the projection was created (seed §14; spec 12)."""
    for event in events:
        retained = fold_retained(retained, event)
    return retained


# -- rendering and projection -------------------------------------------------------------------
def _section_text(section: Any) -> Any:
    if isinstance(section, Mapping):
        return section.get("text", ABSENT)
    return getattr(section, "text", ABSENT)


def _js_join_item(value: Any) -> str:
    """`Array.prototype.join` item conversion: null/undefined → '', else String(value)."""
    if value is None or value is ABSENT:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def join_context_sections(sections: Sequence[Any]) -> str:
    """`joinContextSections` (spec 12; seed §14; `packages/core/system-prompt/src/index.ts`).

    `''` when the section texts joined by a blank line are empty, else :data:`CONTEXT_HEADER` + body.
    (dsh's `renderContextSections` already drops empty sections; the join itself does not.)
    """
    body = "\n\n".join(_js_join_item(_section_text(section)) for section in sections)
    if body == "":
        return ""
    return CONTEXT_HEADER + body


def _section_json(section: Any) -> Any:
    if isinstance(section, Mapping):
        return copy.deepcopy(dict(section))
    return {"name": getattr(section, "name"), "text": getattr(section, "text")}


def project(
    retained: Retained,
    current: str,
    sections: Sequence[Any],
    *,
    id: str = DEFAULT_SNAPSHOT_ID,
) -> dict | None:
    """`RuntimeContextProjection.project(current, sections)` (seed §14; spec 12 "project").

    Returns the uncommitted `user/message` data to enter, or None when no update is needed:

    * nothing ever retained and `current == ''` → None;
    * `snapshot = CLEARED if current == '' else current`;
    * retained text equals `snapshot` → None (an unchanged visible snapshot is never re-sent);
    * else the message `createUserMessage` builds — key order ``content, source, role, id`` — with
      source `{kind:'plugin', plugin}` plus `form:'snapshot', sections` when sections is non-empty.

    ``id`` stands in for dsh's freshly minted UUID. Pure: the state is not changed.
    """
    if retained is NEVER and len(current) == 0:
        return None
    snapshot = CLEARED if len(current) == 0 else current
    if isinstance(retained, RetainedSnapshot) and isinstance(retained.text, str) and retained.text == snapshot:
        return None
    source: dict[str, Any] = {"kind": "plugin", "plugin": RUNTIME_CONTEXT_SOURCE}
    if len(sections) > 0:
        source["form"] = "snapshot"
        source["sections"] = [_section_json(section) for section in sections]
    return {
        "content": [{"type": "text", "text": snapshot}],
        "source": source,
        "role": "user",
        "id": id,
    }


def project_sections(retained: Retained, sections: Sequence[Any], *, id: str = DEFAULT_SNAPSHOT_ID) -> dict | None:
    """Pre-step step 4 (spec 13): `project(joinContextSections(sections), sections)` (seed §14; spec 12)."""
    return active().project(retained, join_context_sections(sections), sections, id=id)


__all__ = [
    "CLEARED",
    "CONTEXT_HEADER",
    "DEFAULT_SNAPSHOT_ID",
    "NEVER",
    "NONE",
    "RUNTIME_CONTEXT_SOURCE",
    "Retained",
    "RetainedSnapshot",
    "RuntimeContextShapeError",
    "fold_retained",
    "fold_retained_log",
    "is_owned_snapshot",
    "is_replacement_surface_event",
    "join_context_sections",
    "project",
    "project_sections",
    "restore_retained",
    "text_of",
]
