"""The explored graph as integer arrays, for the checks that read every edge or every state.

The search keeps its edges as tuples (:mod:`.bfs`); the progress checks (:mod:`.progress`) and the
report's graph figures read all of them. Here they are read once into NumPy arrays — each edge's
source and target, each state's surface price (header + Σ node prices, spec 4.3) — so a check picks its
candidate edges by array masks and walks only those in Python, in edge order; and the
strongly connected components of the whole graph are counted by SciPy's compiled graph routines instead
of through a networkx graph built arc by arc (that build alone costs seconds at 6/2/2). An edge's label and
record are numbers into small tables (:func:`edge_actions`, :func:`edge_records`), so a check judges each
record once and picks edges by a mask. A graph the search kept in columns (:mod:`.columns`) is read as it is.
"""
from __future__ import annotations

from operator import itemgetter

import numpy as np

from . import oracle
from .bfs import Exploration
from .world import ROUTED, SURF


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted: ``numpy.unique`` without its hash table (NumPy 2.4 takes that path when no
    index or inverse is asked for; on a million integers it is ~50× slower here than one sort)."""
    ordered = np.sort(values)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if ordered.size else ordered


def endpoints(exp: Exploration) -> tuple[np.ndarray, np.ndarray]:
    """Every edge's source and target state, in edge order (made once per exploration)."""
    found = exp.cache.get("endpoints")
    if found is None and exp.columns is not None:
        found = exp.cache["endpoints"] = (exp.columns.src.astype(np.int64), exp.columns.dst.astype(np.int64))
    if found is None:
        count = len(exp.edges)
        found = exp.cache["endpoints"] = (np.fromiter(map(itemgetter(0), exp.edges), np.int64, count),
                                          np.fromiter(map(itemgetter(1), exp.edges), np.int64, count))
    return found


def prices(exp: Exploration) -> np.ndarray:
    """Every state's surface price, ``oracle.total`` of its surface (priced once per distinct surface)."""
    found = exp.cache.get("prices")
    if found is None and exp.columns is not None:
        c = exp.columns
        numbers, inverse = np.unique(c.gsid, return_inverse=True)
        table = np.array([oracle.total(c.surfaces[g]) for g in numbers.tolist()], dtype=np.int64)
        found = exp.cache["prices"] = table[inverse.reshape(-1)]
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


def _numbered(exp: Exploration, column: int, key) -> tuple[np.ndarray, list]:
    """Every edge's ``column`` (2: action, 3: record) as a number into a table of the distinct values, told
    apart by ``key`` (a record by identity: the search shares one among many edges)."""
    ids: dict = {}
    table: list = []

    def number(value) -> int:
        found = ids.get(key(value))
        if found is None:
            found = ids[key(value)] = len(table)
            table.append(value)
        return found

    numbers = np.fromiter(map(number, map(itemgetter(column), exp.edges)), np.int64, len(exp.edges))
    return numbers, table


def edge_actions(exp: Exploration) -> tuple[np.ndarray, list]:
    """Every edge's action label as a number into a table of labels."""
    found = exp.cache.get("actions")
    if found is None:
        found = exp.cache["actions"] = ((exp.columns.action, exp.columns.actions) if exp.columns is not None
                                        else _numbered(exp, 2, lambda label: label))
    return found


def edge_records(exp: Exploration) -> tuple[np.ndarray, list]:
    """Every edge's record (its kind, outcome, findings) as a number into a table of records."""
    found = exp.cache.get("records")
    if found is None:
        found = exp.cache["records"] = ((exp.columns.record, exp.columns.records) if exp.columns is not None
                                        else _numbered(exp, 3, id))
    return found


def judged(exp: Exploration, judge, dtype=bool) -> np.ndarray:
    """``judge(record)`` of every edge, each record judged once."""
    numbers, table = edge_records(exp)
    return np.array([judge(record) for record in table], dtype=dtype)[numbers]


def label_ranks(exp: Exploration) -> np.ndarray:
    """Every edge's action label as its rank among the labels (comparing ranks compares labels)."""
    numbers, table = edge_actions(exp)
    rank = np.empty(len(table), np.int64)
    rank[np.argsort(np.array(table, dtype=object), kind="stable")] = np.arange(len(table))
    return rank[numbers]


def depths(exp: Exploration) -> np.ndarray:
    """Every state's depth (its distance from the initial state)."""
    found = exp.cache.get("depths")
    if found is None:
        found = exp.cache["depths"] = np.asarray(exp.depth, dtype=np.int64)
    return found


def routed(exp: Exploration) -> np.ndarray:
    """Whether each state's routed flag is set (a request header went out, spec 9.2)."""
    if exp.columns is not None:
        return exp.columns.routed
    return np.fromiter(map(itemgetter(ROUTED), exp.states), bool, len(exp.states))


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
    arcs = distinct(src * nodes + dst)
    matrix = csr_matrix((np.ones(arcs.size, dtype=np.int8), (arcs // nodes, arcs % nodes)), shape=(nodes, nodes))
    components, _labels = connected_components(matrix, directed=True, connection="strong")
    return {"nodes": nodes, "arcs": int(arcs.size), "strongly_connected_components": int(components)}
