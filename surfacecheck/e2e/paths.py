"""Which compaction paths a session log exercised, and at which seqs.

* `pressure-prune`: `compaction/prune` seqs in a pre-step block (spec 6, 9.2 step 9);
* `pressure-summary`: `compaction/start` seqs of pre-step brackets whose checkpoint landed (spec 9.2 step 11);
* `overflow-retry`: seqs of the overflow `finish` chunks whose step was retried after a compaction
  advanced the generation (spec 10.1-10.3);
* `manual-compact`: `command/run` seqs of `/compact` (spec 11.1), whatever its result;
* `summary-failed`: `compaction/end` seqs that carry an error (spec 8.3);
* `second-generation`: checkpoint seqs whose shadowed nodes include an earlier checkpoint (spec 9.4).

The attribution to a path uses the same decision points as the prediction (:mod:`.predict`).
"""
from __future__ import annotations

from typing import Any, Iterable

from surfacecheck.model.summarizer import is_checkpoint

from .predict import as_events, decision_points
from .script import PATHS


def paths_exercised(events: Iterable[Any]) -> dict[str, list[int]]:
    """path -> seqs, for every path in :data:`~.script.PATHS` (empty list when not exercised)."""
    events = as_events(events)
    out: dict[str, list[int]] = {name: [] for name in PATHS}
    checkpoints: set[int] = set()
    for _, point in decision_points(events):
        if point.kind == "feed":
            continue
        if point.kind == "manual":
            out["manual-compact"].append(point.seq)
        if point.kind == "overflow" and point.retried and any(e.replace is not None for e in point.events):
            out["overflow-retry"].append(point.seq - 1)
        block = point.events
        for i, event in enumerate(block):
            data = event.data if isinstance(event.data, dict) else {}
            if event.type == "compaction/prune" and point.kind == "pre-step":
                out["pressure-prune"].append(event.seq)
            elif event.type == "compaction/start" and point.kind == "pre-step":
                cid = data.get("compactionId")
                if any(e.type == "compaction/summary" and (e.data or {}).get("compactionId") == cid for e in block[i:]):
                    out["pressure-summary"].append(event.seq)
            elif event.type == "compaction/end" and "error" in data:
                out["summary-failed"].append(event.seq)
            elif event.replace is not None and event.type == "user/message" and is_checkpoint(data):
                shadowed = set(block[i - 1].data.get("shadowedSeqs") or []) if i > 0 else set()
                if shadowed & checkpoints:
                    out["second-generation"].append(event.seq)
                checkpoints.add(event.seq)
    return out


def coverage(paths: dict[str, list[int]]) -> list[str]:
    """The paths a run exercised, in PATHS order."""
    return [name for name in PATHS if paths.get(name)]
