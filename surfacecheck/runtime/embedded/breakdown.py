"""`contextBreakdown` (spec 5.2 composition, D4), built the production way: what the surface is made of.

System and tools are priced last-wins from each `request/header` (spec 4.1 estimates of its canonical header);
messages are the shadow-price projection's running total (spec 5.1: the same claim fold, so it stays put across a
replacement that meets no claim). The composition is stuck (reported null) once the projection is, or once a
header cannot be read.
"""
from __future__ import annotations

from surfacecheck.model.estimate import canonical_header, estimate_system_tokens, estimate_tools_tokens


class Composition:
    """The last header's system and tools prices; the message total is read from the projection."""

    def __init__(self) -> None:
        self.system_tokens = 0
        self.tools_tokens = 0
        self.error: Exception | None = None

    def observe(self, event: dict) -> None:
        if self.error is not None or event.get("type") != "request/header":
            return
        try:
            header = canonical_header((event.get("data") or {}).get("header"))
            self.system_tokens, self.tools_tokens = estimate_system_tokens(header), estimate_tools_tokens(header)
        except (KeyError, TypeError, IndexError, AttributeError) as exc:
            self.error = exc

    def report(self, message_tokens: int | None) -> dict | None:
        """The three parts (protocol names); None once stuck or while the projection is."""
        if self.error is not None or message_tokens is None:
            return None
        return {"systemTokens": self.system_tokens, "toolsTokens": self.tools_tokens, "messageTokens": message_tokens}
