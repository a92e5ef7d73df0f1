"""The model's loops as guarded transitions (a TLA+-style action per node): state, guard, step.

A :class:`Walk` names one loop of dsh's range selection or pairing fold (spec 3, 7): where it starts,
when it continues, and one step. :func:`run` is the only ``while`` the walks share. Written this way,
each loop's body is a small function the proofs can run on a symbolic state
(:mod:`properties.proofs.induction`): a change to a start, guard or step changes what is proved.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple


class Walk(NamedTuple):
    """One loop over ``items``: ``start(items, *args)``, ``guard(state, items, *args)`` and
    ``step(state, items, *args) -> (state, emitted)``; ``emitted`` is None or a value the walk
    writes out (the pairing fold writes one cut per node)."""

    name: str
    start: Callable[..., Any]
    guard: Callable[..., Any]
    step: Callable[..., tuple[Any, Any]]


def run(walk: Walk, items, *args) -> tuple[Any, tuple]:
    """Run ``walk`` over ``items`` to its end: the final state and everything it emitted, in order."""
    state = walk.start(items, *args)
    emitted: list = []
    while walk.guard(state, items, *args):
        state, out = walk.step(state, items, *args)
        if out is not None:
            emitted.append(out)
    return state, tuple(emitted)
