"""Range selection and the compaction entry checks (seed §6-7, §9; spec 7, 8.1).

`select_compactable_range` walks back from the tail until the retain budget is reached (always
keeping the newest node), then moves the cut head-ward to the nearest balanced cut; the range is
always head-anchored. `validate_surface_region` and `inspect_entry_state` are the synchronous
entry of the locked transaction: nothing is written when they fail.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import CompactionError, ManualCompactionError
from .meter import Measurement
from .pairing import Cuts, fold_cuts
from .session import END_SEED, Session


@dataclass(frozen=True)
class Range:
    """A head-anchored `{start, end}` span of surface seqs (inclusive)."""

    start: int
    end: int


def retention_index(prices: tuple[int, ...], retain_tokens: int) -> int:
    """Spec 7 step 3: the largest index whose suffix sum reaches the budget; the last node is always kept."""
    accumulated, keep = 0, len(prices)
    for index in range(len(prices) - 1, -1, -1):
        accumulated += prices[index]
        keep = index
        if accumulated >= retain_tokens:
            break
    return keep


def select_compactable_range(session: Session, measurement: Measurement, retain_tokens: int) -> Range | None:
    """`selectCompactableRange` (spec 7): None when nothing can be compacted."""
    priced = measurement.nodes
    if not priced:
        return None
    nodes = session.nodes
    if nodes != measurement.seqs:
        raise CompactionError("compaction: token-meter surface does not match the current session surface")
    keep = retention_index(tuple(price for _, price in priced), retain_tokens)
    if keep == 0:
        return None
    cuts = fold_cuts(session)
    while keep > 0 and not cuts.balanced[keep]:
        keep -= 1
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
    cuts = cuts or fold_cuts(session)
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
