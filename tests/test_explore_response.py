"""Bounded response at k = 1 by one backward search (surfacecheck/explore/progress.py): the very findings
the condensation gives, on the correct model and on the controls that break the two response properties."""
from __future__ import annotations

import pytest

from surfacecheck.explore import progress
from surfacecheck.explore.bfs import explore
from surfacecheck.explore.variants import CORRECT, VARIANTS
from surfacecheck.explore.world import Bounds, World

CASES = [(CORRECT, Bounds(4, 2, 1)), (VARIANTS["pressure-skipped"], Bounds(4, 1, 1)),
         (VARIANTS["never-reemit-runtime-context"], Bounds(4, 1, 1))]


def _findings(exp):
    return [(f.property, f.message, f.prefix, f.loop) for f in
            (progress.pressure_response(exp, 1), progress.context_window(exp, 1)) if f is not None]


@pytest.mark.parametrize("variant, bounds", CASES, ids=[v.name for v, _b in CASES])
def test_the_backward_search_finds_what_the_condensation_finds(variant, bounds, monkeypatch):
    exp = explore(World(bounds, variant=variant))
    fast = _findings(exp)
    monkeypatch.setattr(progress, "_reaches_counted", lambda arcs: None)  # would break any use at k = 1
    monkeypatch.setattr(progress, "scores", lambda arcs, succs, k: progress._most_counted(arcs, succs))
    assert _findings(exp) == fast
    assert bool(fast) == (variant is not CORRECT)


def test_a_counted_arc_reached_through_a_cycle_scores_one_and_k2_needs_two():
    # 0 -> 1 -> 2 -> 1 (a pending cycle), 2 -> 3 counted: every node but 3 reaches the counted arc
    arcs = {(0, 1): ((1, "a"), 0), (1, 2): ((1, "b"), 1), (2, 1): ((1, "c"), 2), (2, 3): ((0, "d"), 3)}
    assert progress._reaches_counted(arcs) == {0: 1, 1: 1, 2: 1, 3: 0}
    succs: dict = {}
    for (src, dst), (rank, index) in arcs.items():
        succs.setdefault(src, []).append((dst, 1 - rank[0], index))
    assert progress._most_counted(arcs, succs) == {0: 1, 1: 1, 2: 1, 3: 0}
    arcs[(3, 2)] = ((0, "e"), 4)  # now a counted cycle 2 -> 3 -> 2: unbounded
    succs.setdefault(3, []).append((2, 1, 4))
    assert progress._most_counted(arcs, succs)[0] == float("inf")
