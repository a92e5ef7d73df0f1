"""`contextPressure` (spec 5.2, the context-occupancy unit), built the production way: two last-wins slots and
the surface total at the moment of the newest sample.

The newest usage sample (an `assistant/chunk` usage chunk or `assistant/message.usage`) gives the prompt-side
pressure, input plus cache reads and writes, never output; the newest `request/context` gives the window (absent
clears it). The sample is stamped with the surface total *before* the same event's own surface delta, so
``projectedTokens`` = the sample moved by what the surface did since. The surface total is the shadow-price
projection's (spec 5.1): the occupancy is stuck (reported null) once the projection is, or once a sample cannot
be read.
"""
from __future__ import annotations

from surfacecheck.model.event import ABSENT


class Occupancy:
    """The window, the newest prompt-side sample and the projection total it was taken at."""

    def __init__(self) -> None:
        self.context_window = ABSENT
        self.pressure_tokens: int | None = None
        self.sampled_at: int | None = None
        self.error: Exception | None = None

    def observe(self, event: dict, total_before: int | None) -> None:
        """Fold ``event``; ``total_before`` is the projection's running total before the event's own delta."""
        if self.error is not None:
            return
        try:
            self._fold(event, total_before)
        except (KeyError, TypeError, IndexError, AttributeError) as exc:
            self.error = exc

    def _fold(self, event: dict, total_before: int | None) -> None:
        kind, data = event.get("type"), event.get("data")
        data = data if isinstance(data, dict) else {}
        if kind == "request/context":
            self.context_window = data.get("contextWindow", ABSENT)
        usage = None
        if kind == "assistant/chunk" and data["chunk"]["type"] == "usage":
            usage = data["chunk"]["usage"]
        elif kind == "assistant/message":
            usage = data.get("usage")
        if usage is not None:
            self.pressure_tokens = (usage["inputTokens"] + usage.get("cacheReadTokens", 0)
                                    + usage.get("cacheWriteTokens", 0))
            self.sampled_at = total_before

    def report(self, total: int | None) -> dict | None:
        """dsh's view (protocol names): each figure only once known; None once stuck or while the projection is."""
        if self.error is not None or total is None:
            return None
        view: dict = {}
        if self.context_window is not ABSENT:
            view["contextWindow"] = self.context_window
        if self.pressure_tokens is not None:
            view["pressureTokens"] = self.pressure_tokens
            if self.sampled_at is not None:
                view["projectedTokens"] = max(0, self.pressure_tokens + total - self.sampled_at)
        return view
