"""State canonicalisation: the VIEW (symmetry) reduction of the explored world (spec 1.1, 2.1, 4.1).

Two states that differ only in absolute seq numbers, ids or timestamps are one state:

* **ids and timestamps** never enter a state: node codes stand for messages, and a message's
  price depends on its text alone (spec 4.1 prices content, never ``id`` or ``time``), so the
  model's decisions (range selection, shrink rule, thresholds) cannot depend on them;
* **seq offsets**: the surface is kept as node codes in surface order, not as seqs (a replace
  is positional, spec 2.1); the retained runtime-context snapshot is a surface *index*;
* **counters that only grow**: the log length, the turn number and the replace generation are
  dropped from the view (each transition's decisions read differences, never their values).

With the reduction off (``--no-symmetry``) the key is the whole state including log length, turn
and generation; every transition appends, so without it there are no cycles and the graph is
bounded only by ``max_seq``. The reduction therefore changes the count (a test shows it) but not
a safety verdict; the lasso (progress) check needs it, as TLC's VIEW does for liveness.
"""
from __future__ import annotations

from .world import VIEW_LEN


def key(state: tuple, symmetry: bool = True) -> tuple:
    """The state's identity in the visited set: its VIEW, or the whole state without the reduction."""
    return state[:VIEW_LEN] if symmetry else state


def describe(state: tuple) -> dict:
    """A state as JSON (for reports and traces' notes)."""
    phase, pend, surf, ret, ctx, retries, seen, routed, events, calls, comps = state[:VIEW_LEN]
    return {"phase": phase, "pending": pend, "surface": list(surf), "retained": ret, "context": ctx or None,
            "overflow_retries": retries, "overflow_seen": seen, "routed": routed,
            "events": events, "tool_calls": calls, "compactions": comps}
