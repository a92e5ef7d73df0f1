"""Runtime-context retention on the live session (spec 12, 13 steps 4-7; seed §14), written independently
of ``model.runtime_context``: one mutable slot observed on every committed event, like dsh's
`RuntimeContextProjection`.

``state`` is ``NEVER`` (no owned snapshot ever existed), ``NONE`` (some existed, none retained) or a
``(seq, text)`` pair; ``text`` is None for a malformed (not exactly one text block) snapshot, so it
never equals a rendered one. The live rule (:meth:`ContextRetention.observe`) and the constructor scan
(:meth:`ContextRetention.restore`, used at reload) are different on purpose (spec 15 G3).

Override point (seeded bugs): :meth:`ContextRetention.shadowed`.
"""
from __future__ import annotations

from typing import Any

from surfacecheck.model.errors import ModelError

SOURCE = "@deepseek-ai/dsh-system-prompt"
HEADER = "Current runtime context. This snapshot supersedes earlier runtime-context snapshots.\n\n"
CLEARED = "Current runtime context: none. Earlier runtime-context snapshots no longer apply."
NEVER, NONE = "never", "none"


class ContextShapeError(ModelError):
    """An owned-snapshot test that dsh's `isOwned`/`textOf` would throw on (a JS TypeError)."""

    rule = "runtime-context-shape"


def _get(value: Any, key: str) -> Any:
    """JS property read: a missing key is undefined; reading from null/undefined/a primitive throws."""
    if isinstance(value, dict):
        return value.get(key)
    if value is None:
        raise ContextShapeError(f"cannot read properties of null (reading '{key}')")
    return None


def owned(event: dict) -> bool:
    """`event.type === 'user/message' && isOwned(event.data)`; raises where dsh would throw."""
    if event["type"] != "user/message":
        return False
    source = _get(event.get("data"), "source")
    return _get(source, "kind") == "plugin" and _get(source, "plugin") == SOURCE


def snapshot_text(data: Any) -> str | None:
    """`textOf`: the text of exactly one text block, else None; a non-iterable content throws."""
    content = _get(data, "content")
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        raise ContextShapeError("message.content is not iterable")
    if len(content) != 1 or not isinstance(content[0], dict) or content[0].get("type") != "text":
        return None
    text = content[0].get("text")
    return text if "text" in content[0] else None


def render(sections: list[dict]) -> str:
    """`joinContextSections`: '' for no text, else the header and the texts joined by a blank line."""
    body = "\n\n".join("" if s.get("text") is None else str(s.get("text")) for s in sections)
    return HEADER + body if body else ""


class ContextRetention:
    """The retained runtime-context snapshot of one session (spec 12 "State")."""

    def __init__(self) -> None:
        self.state: Any = NEVER

    def observe(self, event: dict) -> None:
        """Live rule: an owned snapshot is retained; a replacement citing the retained seq clears it."""
        try:
            if owned(event):
                self.state = (event["seq"], snapshot_text(event.get("data")))
                return
        except ContextShapeError:
            return  # dsh's session/event listener throw is contained: state unchanged
        if isinstance(self.state, tuple) and self.shadowed(event, self.state[0]):
            self.state = NONE

    @staticmethod
    def shadowed(event: dict, seq: int) -> bool:
        """A replacement surface event (surfaceOp present, not 'append') whose sourceEventSeqs cite ``seq``."""
        op = event.get("surfaceOp", "append")
        cites = event.get("sourceEventSeqs")
        surface_type = event["type"] in ("user/message", "assistant/message", "tool/result")
        return surface_type and op != "append" and isinstance(cites, list) and seq in cites

    def restore(self, log: list[dict], visible: set[int]) -> None:
        """Constructor scan (reload): the newest owned snapshot still on the surface; raises ContextShapeError."""
        state: Any = NEVER
        for event in reversed(log):
            if not owned(event):
                continue
            state = NONE
            if event["seq"] in visible:
                state = (event["seq"], snapshot_text(event.get("data")))
                break
        self.state = state

    def candidate(self, sections: list[dict], ident: str) -> dict | None:
        """`project(joinContextSections(sections), sections)`: the message data to enter, or None."""
        current = render(sections)
        if self.state == NEVER and not current:
            return None
        text = current or CLEARED
        if isinstance(self.state, tuple) and self.state[1] == text:
            return None
        source: dict[str, Any] = {"kind": "plugin", "plugin": SOURCE}
        if sections:
            source.update(form="snapshot", sections=[dict(s) for s in sections])
        return {"content": [{"type": "text", "text": text}], "source": source, "role": "user", "id": ident}
