"""Range selection and the compaction entry checks (seed §6-7, §9; spec 7, 8.1).

`select_compactable_range` walks back from the tail until the retain budget is reached (always
keeping the newest node), then moves the cut head-ward to the nearest balanced cut; the range is
always head-anchored. `validate_surface_region` and `inspect_entry_state` are the synchronous
entry of the locked transaction: nothing is written when they fail.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .errors import CompactionError, ManualCompactionError
from .meter import Measurement
from .pairing import Cuts
from .seams import active
from .session import END_SEED, Session
from .walk import Walk


@dataclass(frozen=True)
class Range:
    """A head-anchored `{start, end}` span of surface seqs (inclusive)."""

    start: int
    end: int


class Retention(NamedTuple):
    """The retention walk's state (spec 7 step 3): the next node to price walking head-ward, the suffix
    priced so far, the index kept, and whether the suffix has reached the budget."""

    index: int
    accumulated: int
    keep: int
    reached: bool


def _retention_start(prices, retain_tokens) -> Retention:
    """Nothing priced yet; with no node priced the keep index is the surface's length."""
    return Retention(len(prices) - 1, 0, len(prices), False)


def _retention_continues(walk: Retention, prices, retain_tokens) -> bool:
    """Walk on until the budget is reached or the head is passed."""
    return not walk.reached and walk.index >= 0


def _retention_step(walk: Retention, prices, retain_tokens):
    """Price one more node head-ward; it is kept, and the walk stops once the suffix reaches the budget."""
    accumulated = walk.accumulated + prices[walk.index]
    return Retention(walk.index - 1, accumulated, walk.index, accumulated >= retain_tokens), None


RETENTION_WALK = Walk("retention walk (spec 7 step 3)", _retention_start, _retention_continues, _retention_step)


def retention_index(prices: tuple[int, ...], retain_tokens: int) -> int:
    """Spec 7 step 3: the largest index whose suffix sum reaches the budget; the last node is always kept."""
    seams = active()
    return seams.walk_run(seams.retention_walk, prices, retain_tokens)[0].keep


def _balance_start(balanced, keep: int) -> int:
    return keep


def _balance_continues(keep: int, balanced, start: int) -> bool:
    """Move on while the cut before ``keep`` would split a tool call from its result."""
    return keep > 0 and not balanced[keep]


def _balance_step(keep: int, balanced, start: int):
    return keep - 1, None


BALANCE_WALK = Walk("balance walk (spec 7 step 4)", _balance_start, _balance_continues, _balance_step)


def nearest_balanced_cut(balanced: tuple[bool, ...], keep: int) -> int:
    """Spec 7 step 4: the nearest balanced cut at or head-ward of ``keep`` (0 when there is none)."""
    seams = active()
    return seams.walk_run(seams.balance_walk, balanced, keep)[0]


def select_compactable_range(session: Session, measurement: Measurement, retain_tokens: int) -> Range | None:
    """`selectCompactableRange` (spec 7): None when nothing can be compacted."""
    priced = measurement.nodes
    if not priced:
        return None
    nodes = session.nodes
    if nodes != measurement.seqs:
        raise CompactionError("compaction: token-meter surface does not match the current session surface")
    seams = active()
    keep = seams.retention_index(measurement.prices, retain_tokens)
    if keep == 0:
        return None
    keep = nearest_balanced_cut(seams.fold_cuts(session).balanced, keep)
    if keep == 0:
        return None
    return Range(nodes[0], nodes[keep - 1])


@dataclass(frozen=True)
class Selection:
    """`SurfaceSelection`: a validated span with its positions and shadowed seqs."""

    start: int
    end: int
    start_index: int
    end_index: int
    shadowed: tuple[int, ...]


def validate_surface_region(session: Session, start: int, end: int, cuts: Cuts | None = None) -> Selection:
    """`validateSurfaceRegion` (spec 8.1 step 2): present, ordered, and balanced at both edges."""
    nodes = session.nodes
    start_index = nodes.index(start) if start in nodes else -1
    end_index = nodes.index(end) if end in nodes else -1
    if start_index == -1:
        raise CompactionError(f"compactRegion: start seq {start} not found in surface")
    if end_index == -1:
        raise CompactionError(f"compactRegion: end seq {end} not found in surface")
    if start_index > end_index:
        raise CompactionError(
            f"compactRegion: start seq {start} (position {start_index}) is after end seq {end} "
            f"(position {end_index}) on the surface"
        )
    cuts = cuts or active().fold_cuts(session)
    if not cuts.balanced[start_index]:
        raise CompactionError(
            f"compactRegion: start seq {start} is not a balanced boundary (would split a step's tool-call/result pair)"
        )
    if not cuts.balanced[end_index + 1]:
        raise CompactionError(
            f"compactRegion: end seq {end} is not a balanced boundary (would split a step, or the step is still open)"
        )
    return Selection(start, end, start_index, end_index, nodes[start_index : end_index + 1])


@dataclass(frozen=True)
class EntryState:
    """`inspectCompactionEntryState` (spec 8.1 step 3): open turn, unmatched start, latest end-seed."""

    open_turn: int | None
    unmatched_start_seq: int | None
    latest_end_seed_seq: int | None


def inspect_entry_state(session: Session) -> EntryState:
    """Backward scan; each of the three facts is found independently (spec 8.1 step 3)."""
    open_turn = unmatched = end_seed = None
    turn_known = lock_known = False
    for event in reversed(session.log):
        if end_seed is None and event.type == END_SEED:
            end_seed = event.seq
        if not lock_known and event.type in ("compaction/start", "compaction/end"):
            unmatched = event.seq if event.type == "compaction/start" else None
            lock_known = True
        if not turn_known and event.type in ("turn/start", "turn/end"):
            open_turn = event.data.get("turn") if event.type == "turn/start" else None
            turn_known = True
        if turn_known and lock_known and end_seed is not None:
            break
    return EntryState(open_turn, unmatched, end_seed)


def lock_is_live(state: EntryState) -> bool:
    """Spec 1.5/8.1 step 4: an unmatched start is live unless a later `session/end-seed` made it stale."""
    if state.unmatched_start_seq is None:
        return False
    return not (state.latest_end_seed_seq is not None and state.latest_end_seed_seq > state.unmatched_start_seq)


def assert_no_active_compaction(session: Session, stage: str) -> None:
    """`assertNoActiveCompaction` (spec 8.1 step 4, 9.2 step 5): the durable lock is the only mutex."""
    if lock_is_live(inspect_entry_state(session)):
        raise ManualCompactionError(
            "busy", f"{stage}: compaction already in progress; the session compaction lock is already active"
        )
