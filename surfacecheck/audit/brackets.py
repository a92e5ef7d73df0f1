"""Compaction brackets and the durable lock, as the log shows them (spec 8.1-8.3, 1.5, 1.8).

A bracket is `compaction/start` → (`compaction/summary` → checkpoint replace) → `compaction/end`.
The unmatched start *is* the lock (spec 8.1 step 6); a later `session/end-seed` makes it stale
(spec 1.5). The checkpoint must sit right after its summary (spec 8.2 step 13: one synchronous
commit body) and carry the compact checkpoint source of its bracket (spec 8.2 step 9).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from surfacecheck.model.event import Event

from .findings import AuditIssue, finding

UNCHECKED = "unchecked"


def field(data: Any, key: str, default: Any = None) -> Any:
    return data.get(key, default) if isinstance(data, dict) else default


def id_key(value: Any) -> str:
    """A hashable key for a compactionId of any JSON type (a corrupted log may carry an object)."""
    return json.dumps(value, sort_keys=True, default=str)


def is_compact_source(event: Event) -> bool:
    """`isCompactCheckpointSource` (spec 8.2 step 9): only `kind` and `plugin` are checked."""
    source = field(event.data, "source")
    return event.type == "user/message" and field(source, "kind") == "plugin" and field(source, "plugin") == "compact"


@dataclass
class Bracket:
    compaction_id: Any
    start_seq: int
    turn: Any
    command: Any
    mode: str  # pressure | context-overflow | manual
    expected: Any = UNCHECKED  # (start, end) | None (no compactable range) | UNCHECKED
    why: str = ""
    summary_seq: int | None = None
    summary_range: tuple | None = None
    checkpoint_seq: int | None = None

    @property
    def owner(self) -> str:
        return "standalone compaction" if self.turn is None else f"compaction for turn {self.turn}"


class Brackets:
    """The open brackets, the latest end-seed, and the summary awaiting its checkpoint."""

    def __init__(self) -> None:
        self.open: dict[Any, Bracket] = {}
        self.end_seed: int | None = None
        self.awaiting: Bracket | None = None  # the summary was the previous event

    def live(self) -> list[Bracket]:
        return [b for b in self.open.values() if self.end_seed is None or b.start_seq > self.end_seed]

    # -- the event right after a summary (spec 8.2 step 13, 8.3) ---------------------------------
    def after_summary(self, event: Event, is_replace: bool) -> tuple[list[AuditIssue], Bracket | None]:
        """Check the event after a summary; returns findings and the bracket when it is its checkpoint."""
        bracket, self.awaiting = self.awaiting, None
        if bracket is None:
            return [], None
        if is_replace:
            found = []
            source = field(event.data, "source")
            expected = {"kind": "plugin", "plugin": "compact", "compactionId": bracket.compaction_id}
            observed = {k: field(source, k) for k in ("kind", "plugin", "compactionId")}
            if event.type != "user/message" or observed != expected or field(source, "sourceCommandId") != bracket.command:
                want = dict(expected, **({"sourceCommandId": bracket.command} if bracket.command is not None else {}))
                found.append(finding("checkpoint-source", event.seq, f"checkpoint of compaction {bracket.compaction_id!r}"
                                     f" (summary seq {bracket.summary_seq}): expected a user/message with source {want}, "
                                     f"observed a {event.type} with source {source!r}"))
            bracket.checkpoint_seq = event.seq
            return found, bracket
        if event.type == "compaction/end" and field(event.data, "compactionId") == bracket.compaction_id \
                and field(event.data, "error") is not None:
            return [], None  # spec 8.3: the checkpoint append failed, the bracket closes with an error
        return [finding("bracket-order", event.seq, f"expected the checkpoint replace of compaction "
                        f"{bracket.compaction_id!r} right after its compaction/summary at seq {bracket.summary_seq} "
                        f"(one synchronous commit body), observed {event.type}")], None

    # -- bracket events ---------------------------------------------------------------------------
    def start(self, event: Event, bracket: Bracket) -> list[AuditIssue]:
        found = []
        live = self.live()
        if live:
            held = live[-1]
            found.append(finding("lock-overlap", event.seq, f"compaction/start while {held.owner} "
                                 f"{held.compaction_id!r} (start seq {held.start_seq}) is still unmatched; expected "
                                 "the durable lock to be free (a later session/end-seed would make it stale), observed "
                                 "it held"))
        self.open[id_key(bracket.compaction_id)] = bracket
        return found

    def summary(self, event: Event) -> tuple[list[AuditIssue], Bracket | None]:
        cid = field(event.data, "compactionId")
        bracket = self.open.get(id_key(cid))
        if bracket is None:
            return [self._unmatched(event, cid)], None
        found = self._other_live(event, bracket)
        if bracket.summary_seq is not None:
            found.append(finding("bracket-order", event.seq, f"compaction/summary repeated within compaction {cid!r}: "
                                 f"expected one summary, observed a second after seq {bracket.summary_seq}"))
        rng = field(event.data, "shadowedRange")
        bracket.summary_seq = event.seq
        bracket.summary_range = (field(rng, "start"), field(rng, "end"))
        self.awaiting = bracket
        return found, bracket

    def end(self, event: Event) -> list[AuditIssue]:
        cid = field(event.data, "compactionId")
        bracket = self.open.pop(id_key(cid), None)
        if bracket is None:
            return [self._unmatched(event, cid)]
        found = self._other_live(event, bracket)
        if field(event.data, "error") is None and (bracket.summary_seq is None or bracket.checkpoint_seq is None):
            missing = "compaction/summary" if bracket.summary_seq is None else "checkpoint replace"
            found.append(finding("bracket-order", event.seq, f"successful compaction/end of {cid!r} (start seq "
                                 f"{bracket.start_seq}): expected start, summary, checkpoint, end; observed no {missing}"))
        return found

    def stray_checkpoint(self, event: Event) -> list[AuditIssue]:
        """A compact-sourced replace that is not right after a summary (spec 1.8 checkpoint rule, §15 G1)."""
        live = self.live()
        if live:
            held = live[-1]
            return [finding("bracket-order", event.seq, f"checkpoint replace inside {held.owner} "
                            f"{held.compaction_id!r}: expected it right after that bracket's compaction/summary, "
                            f"observed it {'before the summary' if held.summary_seq is None else 'later'}")]
        return [finding("checkpoint-unbracketed", event.seq, "compact-sourced user/message replacement: expected "
                        "it inside a compaction bracket, right after its compaction/summary, observed no open "
                        "compaction/start; dsh's surface accepts it, the optional compaction invariant would refuse "
                        "it (spec 1.8, §15 G1)")]

    def end_seed_seen(self, event: Event) -> list[AuditIssue]:
        self.end_seed = event.seq
        found = [self._orphan(b, f"made stale by session/end-seed at seq {event.seq}") for b in self.open.values()]
        self.open.clear()
        return found

    def finish(self) -> list[AuditIssue]:
        found = [self._orphan(b, "still unmatched at the end of the log") for b in self.open.values()]
        self.open.clear()
        return found

    # -- helpers ------------------------------------------------------------------------------------
    def _other_live(self, event: Event, bracket: Bracket) -> list[AuditIssue]:
        others = [b for b in self.live() if b is not bracket and b.start_seq > bracket.start_seq]
        if not others:
            return []
        held = others[-1]
        return [finding("lock-overlap", event.seq, f"{event.type} of {bracket.compaction_id!r} while the later "
                        f"{held.owner} {held.compaction_id!r} (start seq {held.start_seq}) holds the lock: expected "
                        "one compaction at a time, observed two open")]

    @staticmethod
    def _unmatched(event: Event, cid: Any) -> AuditIssue:
        return finding("bracket-order", event.seq, f"{event.type} names compaction {cid!r}: expected an open "
                       "compaction/start with that id before its summary and end, observed none")

    @staticmethod
    def _orphan(bracket: Bracket, why: str) -> AuditIssue:
        return finding("lock-orphaned", bracket.start_seq, f"compaction/start of {bracket.owner} "
                       f"{bracket.compaction_id!r}: expected a matching compaction/end, observed none ({why}); "
                       "crash evidence: the lock stays live until a reload appends session/end-seed (spec 8.3, 1.5)")
