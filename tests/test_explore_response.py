"""Bounded response at k = 1 by one backward search (surfacecheck/explore/progress.py): the very findings
the condensation gives, on the correct model and on the controls that break the two response properties."""
from __future__ import annotations

import numpy as np
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
    real = progress.scores
    monkeypatch.setattr(progress, "_reaches_counted", lambda arcs, nodes: None)  # would break any use at k = 1
    monkeypatch.setattr(progress, "scores", lambda exp, arcs, k: real(exp, arcs, 2))  # the condensation's counts
    assert _findings(exp) == fast
    assert bool(fast) == (variant is not CORRECT)


def _arcs(arcs: dict) -> progress.PendingArcs:
    pairs = list(arcs)
    return progress.PendingArcs(np.array([s for s, _d in pairs]), np.array([d for _s, d in pairs]),
                                np.array([arcs[p][0][0] == 0 for p in pairs]), np.array([arcs[p][1] for p in pairs]))


def test_a_counted_arc_reached_through_a_cycle_scores_one_and_k2_needs_two():
    # 0 -> 1 -> 2 -> 1 (a pending cycle), 2 -> 3 counted: every node but 3 reaches the counted arc
    arcs = {(0, 1): ((1, "a"), 0), (1, 2): ((1, "b"), 1), (2, 1): ((1, "c"), 2), (2, 3): ((0, "d"), 3)}
    assert progress._reaches_counted(_arcs(arcs), 5).tolist() == [1, 1, 1, 0, 0]  # node 4 is off the subgraph
    succs = _arcs(arcs).successors()
    assert succs == {0: [(1, 0, 0)], 1: [(2, 0, 1)], 2: [(1, 0, 2), (3, 1, 3)]}
    assert progress._most_counted(arcs, succs) == {0: 1, 1: 1, 2: 1, 3: 0}
    arcs[(3, 2)] = ((0, "e"), 4)  # now a counted cycle 2 -> 3 -> 2: unbounded
    succs.setdefault(3, []).append((2, 1, 4))
    assert progress._most_counted(arcs, succs)[0] == float("inf")
    assert progress._reaches_counted(_arcs(arcs), 4).tolist() == [1, 1, 1, 1]


def test_pending_arcs_keep_the_counted_least_label_per_pair():
    """Per (src, dst) the counted edge wins, then the least action label, then the earliest; arcs in the
    order their first edge was found; discharging edges are dropped."""
    exp = explore(World(Bounds(4, 1, 1)))
    pending = np.ones(len(exp.states), dtype=bool)
    arcs = progress.pending_arcs(exp, pending, lambda e: e.kind == "step", lambda e: e.kind == "reload")
    expected: dict = {}
    for index, (src, dst, action, edge) in enumerate(exp.edges):
        if edge.kind != "reload":
            rank = (0 if edge.kind == "step" else 1, action)
            if (src, dst) not in expected or rank < expected[(src, dst)][0]:
                expected[(src, dst)] = (rank, index)
    assert list(zip(arcs.src.tolist(), arcs.dst.tolist())) == list(expected)
    assert arcs.index.tolist() == [index for _rank, index in expected.values()]
    assert arcs.counted.tolist() == [rank[0] == 0 for rank, _index in expected.values()]
