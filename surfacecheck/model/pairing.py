"""The tool-pairing fold: which cuts of the surface keep tool calls with their results (seed §7; spec 3).

A surface of N nodes has N+1 cuts. Each node contributes a *delta* — `assistant/message`: +number of
tool-call blocks, `tool/result`: −1 (append or replace alike), anything else 0 — and a cut is
*balanced* when the running count before it is zero. Ids are not matched: it is a count (spec 3,
"Call ids are not matched"). A count below zero is a corrupt surface.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .errors import ToolPairingError
from .event import Event
from .session import Session
from .frozen import quick_init
from .seams import active
from .walk import Walk


def event_delta(event: Event) -> int:
    """`eventDelta` (spec 3): +tool calls of an assistant message, −1 per tool result, else 0."""
    if event.type == "assistant/message":
        content = event.data["message"]["content"]
        return sum(1 for block in content if isinstance(block, dict) and block.get("type") == "tool-call")
    if event.type == "tool/result":
        return -1
    return 0


@quick_init
@dataclass(frozen=True)
class Cuts:
    """Spec 3 cache value: `cutBalanced` for the N+1 cuts of one surface generation."""

    nodes: tuple[int, ...]
    balanced: tuple[bool, ...]
    open_calls: int
    generation: int

    def index(self, seq: int) -> int:
        try:
            return self.nodes.index(seq)
        except ValueError:
            raise ToolPairingError(f"tool-pairing balance: surface seq {seq} not found", seq=seq) from None

    def balanced_before(self, seq: int) -> bool:
        """`toolPairingBalancedBefore(session, seq)` = cutBalanced[idx(seq)]."""
        return self.balanced[self.index(seq)]

    def balanced_after(self, seq: int) -> bool:
        """`toolPairingBalancedAfter(session, seq)` = cutBalanced[idx(seq)+1]."""
        return self.balanced[self.index(seq) + 1]


EMPTY_CUTS = Cuts((), (True,), 0, 0)


def _lookup(session: Session, seq: int) -> Event:
    event = session.event_at(seq)
    if event is None or event.seq != seq:
        raise ToolPairingError(
            f"tool-pairing balance: surface seq {seq} has no matching session event (corrupt surface)", seq=seq
        )
    return event


class Fold(NamedTuple):
    """The pairing fold's state (spec 3): the next node to fold, and the open calls before its cut."""

    position: int
    running: int


def _fold_start(new_nodes, session: Session, open_calls: int) -> Fold:
    return Fold(0, open_calls)


def _fold_continues(fold: Fold, new_nodes, session: Session, open_calls: int) -> bool:
    return fold.position < len(new_nodes)


def _fold_step(fold: Fold, new_nodes, session: Session, open_calls: int):
    """Fold one node: its delta moves the running count; the cut after it is balanced at zero."""
    seq = new_nodes[fold.position]
    running = fold.running + active().event_delta(_lookup(session, seq))
    if running < 0:
        raise ToolPairingError(
            f"tool-pairing balance: tool/result at surface seq {seq} has no matching tool-call (corrupt surface)",
            seq=seq,
        )
    return Fold(fold.position + 1, running), running == 0


PAIRING_FOLD = Walk("pairing fold (spec 3)", _fold_start, _fold_continues, _fold_step)


def extend_cuts(cuts: Cuts, session: Session, new_nodes: tuple[int, ...]) -> Cuts:
    """Fold unseen tail nodes onto `cuts` (spec 3 incremental extension; transactional: raises, never half-applies)."""
    seams = active()
    fold, balanced = seams.walk_run(seams.pairing_fold, new_nodes, session, cuts.open_calls)
    return Cuts(cuts.nodes + new_nodes, cuts.balanced + balanced, fold.running, session.generation)


def fold_cuts(session: Session) -> Cuts:
    """The full fold from the empty state over the current surface (spec 3 "rebuild")."""
    return extend_cuts(Cuts((), (True,), 0, session.generation), session, session.nodes)


def refresh_cuts(cached: Cuts | None, session: Session) -> Cuts:
    """`balanceCache` (spec 3): rebuild on a generation change or shrink, extend on growth, else reuse."""
    if cached is None or cached.generation != session.generation or len(cached.nodes) > len(session.nodes):
        return fold_cuts(session)
    if len(cached.nodes) < len(session.nodes):
        return extend_cuts(cached, session, session.nodes[len(cached.nodes):])
    return cached


def refresh_reads(cached: Cuts | None, session: Session) -> int:
    """The log reads `balanceCache` makes to bring ``cached`` to the surface (spec 3; dsh's own test "does no event
    reads for unchanged or log-only growth, folds only appended nodes, and rebuilds on replace"): the log once and
    each folded node's event on a rebuild or an extension, nothing on reuse."""
    if cached is None or cached.generation != session.generation or len(cached.nodes) > len(session.nodes):
        return 1 + len(session.nodes)
    if len(cached.nodes) < len(session.nodes):
        return 1 + len(session.nodes) - len(cached.nodes)
    return 0


def balanced_before(session: Session, seq: int) -> bool:
    """`toolPairingBalancedBefore` over the current surface (recount: the model favours clarity)."""
    return fold_cuts(session).balanced_before(seq)


def balanced_after(session: Session, seq: int) -> bool:
    """`toolPairingBalancedAfter` over the current surface."""
    return fold_cuts(session).balanced_after(seq)
