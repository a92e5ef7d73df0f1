"""`tokenUsage` (spec 5.2, seed §15 "usage surface"), built the production way: four running buckets.

Samples are `assistant/chunk` usage chunks and `assistant/message.usage`; a new sample for the same
``(turn, step)`` replaces the previous one (an identical one changes nothing). Nothing else counts:
`compaction/summary.usage` is never read (§15 G10). A sample whose shape cannot be read leaves the
fold stuck (``error`` set), like every other fold of this runtime (spec 4.2).
"""
from __future__ import annotations

BUCKETS = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")
"""The four billing buckets, named as the usage samples and the protocol name them."""


class UsageTotals:
    """Cumulative billing buckets plus the last sample's ``(turn, step, buckets)``."""

    def __init__(self) -> None:
        self.totals = {name: 0 for name in BUCKETS}
        self.last: tuple | None = None
        self.error: Exception | None = None

    def observe(self, event: dict) -> None:
        if self.error is not None:
            return
        try:
            self._fold(event)
        except (KeyError, TypeError, IndexError, AttributeError) as exc:
            self.error = exc

    def _fold(self, event: dict) -> None:
        data = event.get("data")
        data = data if isinstance(data, dict) else {}
        if event.get("type") == "assistant/chunk":
            chunk = data.get("chunk")
            if not isinstance(chunk, dict) or chunk.get("type") != "usage":
                return
            usage = chunk["usage"]
        elif event.get("type") == "assistant/message" and data.get("usage") is not None:
            usage = data["usage"]
        else:
            return
        sample = tuple(usage.get(name, 0) for name in BUCKETS)
        where = (data.get("turn"), data.get("step"))
        previous = self.last[2] if self.last is not None and self.last[:2] == where else None
        if previous == sample:
            return
        fresh = dict(self.totals)
        for index, name in enumerate(BUCKETS):
            fresh[name] = fresh[name] - (previous[index] if previous is not None else 0) + sample[index]
        self.totals, self.last = fresh, (*where, sample)

    def report(self) -> dict | None:
        """The four buckets (protocol names), or None once the fold is stuck."""
        return None if self.error is not None else dict(self.totals)
