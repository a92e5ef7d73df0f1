"""Facts about the log kept incrementally as events commit (spec 4.4, 8.1 step 3, 10.2).

dsh finds the compaction entry state by a backward scan of the log (`inspectCompactionEntryState`);
a production runtime keeps the three facts up to date per committed event instead: the open turn
(latest `turn/start` vs `turn/end`), the unmatched `compaction/start` (latest start vs end) and the
latest `session/end-seed`. It also keeps the latest logged request header (`session.requestHeader()`)
and the number of `compaction/start` events (which summary script the next one consumes).

Override point (``bugs.py``): :meth:`LogTracker.lock_is_live`.
"""
from __future__ import annotations

END_SEED = "session/end-seed"


class LogTracker:
    """A `session/event` listener; O(1) per event."""

    def __init__(self) -> None:
        self.open_turn = None
        self.unmatched_start: int | None = None
        self.latest_end_seed: int | None = None
        self.header = None  # latest request/header's `data.header` (may be None)
        self.starts = 0

    def observe(self, event: dict) -> None:
        kind, data = event["type"], event.get("data")
        if kind == END_SEED:
            self.latest_end_seed = event["seq"]
        elif kind == "compaction/start":
            self.unmatched_start = event["seq"]
            self.starts += 1
        elif kind == "compaction/end":
            self.unmatched_start = None
        elif kind == "turn/start":
            self.open_turn = data.get("turn") if isinstance(data, dict) else None
        elif kind == "turn/end":
            self.open_turn = None
        elif kind == "request/header" and isinstance(data, dict):
            self.header = data.get("header")

    def lock_is_live(self) -> bool:
        """Spec 1.5 / 8.1 step 4: an unmatched start is the lock unless a later end-seed made it stale."""
        if self.unmatched_start is None:
            return False
        return not (self.latest_end_seed is not None and self.latest_end_seed > self.unmatched_start)

    def routed_target(self) -> tuple[str, str] | None:
        """`routedTarget` (spec 4.4): provider/model of the latest logged header, both non-empty."""
        config = self.header.get("config") if isinstance(self.header, dict) else None
        if isinstance(config, dict) and config.get("provider") and config.get("model"):
            return config["provider"], config["model"]
        return None
