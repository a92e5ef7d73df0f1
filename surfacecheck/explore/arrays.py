"""The explored graph as integer arrays, for the checks that read every edge or every state.

The search keeps its edges as tuples (:mod:`.bfs`); the progress checks (:mod:`.progress`) and the
report's graph figures read all of them. Here they are read once into NumPy arrays — each edge's
source and target, each state's surface price (header + Σ node prices, spec 4.3) — so a check picks its
candidate edges by array masks and walks only those in Python, in edge order; and the
strongly connected components of the whole graph are counted by SciPy's compiled graph routines instead
of through a networkx graph built arc by arc (that build alone costs seconds at 6/2/2).
"""
from __future__ import annotations

from operator import itemgetter

import numpy as np

from . import oracle
from .bfs import Exploration
from .world import SURF


def endpoints(exp: Exploration) -> tuple[np.ndarray, np.ndarray]:
    """Every edge's source and target state, in edge order (made once per exploration)."""
    found = exp.cache.get("endpoints")
    if found is None:
        count = len(exp.edges)
        found = exp.cache["endpoints"] = (np.fromiter(map(itemgetter(0), exp.edges), np.int64, count),
                                          np.fromiter(map(itemgetter(1), exp.edges), np.int64, count))
    return found


def prices(exp: Exploration) -> np.ndarray:
    """Every state's surface price, ``oracle.total`` of its surface (priced once per distinct surface)."""
    found = exp.cache.get("prices")
    if found is None:
        memo: dict = {}
        values = []
        for state in exp.states:
            surf = state[SURF]
            price = memo.get(surf)
            if price is None:
                price = memo[surf] = oracle.total(surf)
            values.append(price)
        found = exp.cache["prices"] = np.array(values, dtype=np.int64)
    return found


def both_ends(exp: Exploration, marked: np.ndarray) -> np.ndarray:
    """The indices of the edges whose source and target are both marked, in edge order."""
    src, dst = endpoints(exp)
    return np.flatnonzero(marked[src] & marked[dst])


def graph_figures(exp: Exploration) -> dict:
    """The report's figures of the whole state graph: states, arcs (distinct source-target pairs) and
    strongly connected components (SciPy's ``connected_components``, connection ``strong``)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    nodes = len(exp.states)
    src, dst = endpoints(exp)
    arcs = np.unique(src * nodes + dst)
    matrix = csr_matrix((np.ones(arcs.size, dtype=np.int8), (arcs // nodes, arcs % nodes)), shape=(nodes, nodes))
    components, _labels = connected_components(matrix, directed=True, connection="strong")
    return {"nodes": nodes, "arcs": int(arcs.size), "strongly_connected_components": int(components)}
