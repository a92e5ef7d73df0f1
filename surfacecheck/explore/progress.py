"""Progress (liveness) on the explored graph: lassos and bounded response, with networkx.

* ``explore-no-compaction-loop`` (spec 10.2, seed §12 "progress is the proof"): no cycle of
  automatic compaction steps (pressure pre-steps, overflow retries) in which the surface price
  never falls and no step completes. Found as a strongly connected component of that subgraph
  with a cycle; the counterexample is a lasso: the shortest path to the component, then its loop.
* ``pressure-bounded-response`` (spec 9.2-9.3): from any state over the threshold, within
  ``k`` pre-step checks the pressure is relieved, a typed failure is recorded, or the check
  reports no compactable range (spec 9.2 step 11: the documented silent null, §15 G4/G5).
* ``explore-runtime-context-reemitted`` (spec 12 "one-request window", seed §14): once the
  current runtime context is not visible on the surface, the next ``k`` = 1 step re-emits it.

Bounded response is computed exactly, not by sampling paths: on the subgraph of pending,
non-discharging transitions, the longest number of counted transitions from each state
(condensation DAG; a counted transition inside a cycle makes it unbounded); for ``k`` = 1 only
whether a counted transition is reachable at all (one backward search; tests compare the two).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import networkx as nx
import numpy as np

from .arrays import both_ends, depths, distinct, endpoints, judged, label_ranks, prices, routed
from .bfs import Exploration
from .layout import CONTEXTS, RET_RADIX
from .world import CTX, RET, SURF

AUTOMATIC = ("overflow", "step")  # the compaction steps the runtime takes by itself
RESPONDED = frozenset({"compacted", "pruned", "warned", "null", "unrouted"})
PROGRESS_PROPERTIES = ("explore-no-compaction-loop", "pressure-bounded-response",
                       "explore-runtime-context-reemitted")


@dataclass
class ProgressFinding:
    property: str
    message: str
    prefix: list  # edge indices from the initial state
    loop: list  # edge indices of the loop (lasso) or the too-long path


def _canonical_best(exp: Exploration, candidates) -> int:
    """The candidate state of least depth reached by the least action labels (order-independent)."""
    candidates = list(candidates)
    least = min(exp.depth[s] for s in candidates)
    path = exp.path_to({s for s in candidates if exp.depth[s] == least})
    return exp.edges[path[-1]][1] if path else 0


def _price(exp: Exploration, index: int) -> int:
    return int(prices(exp)[index])


def compaction_loops(exp: Exploration) -> ProgressFinding | None:
    """A lasso of automatic compaction steps that never lowers the price and completes no step."""
    src_at, dst_at = endpoints(exp)
    price = prices(exp)
    automatic = judged(exp, lambda edge: edge.kind in AUTOMATIC and not edge.completes)
    candidates = np.flatnonzero(automatic & (price[dst_at] >= price[src_at]))  # the price never falls
    sub = nx.DiGraph()
    for src, dst, index in zip(*_least_per_arc(exp, candidates)):
        sub.add_edge(src, dst, e=index)
    return lasso(exp, sub, lambda state: _price(exp, state))


def _least_per_arc(exp: Exploration, candidates: np.ndarray, first=None) -> tuple[list, list, list]:
    """Per arc (source-target pair) among the ``candidates`` edges, the one with the least ``first`` (when
    given), then the least action label, then the earliest; the arcs in the order of their first candidate."""
    if not candidates.size:
        return [], [], []
    src_at, dst_at = endpoints(exp)
    src, dst = src_at[candidates], dst_at[candidates]
    pair = src * len(exp.states) + dst
    keys = (candidates, label_ranks(exp)[candidates]) + (() if first is None else (first,)) + (pair,)
    order = np.lexsort(keys)
    grouped = pair[order]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    chosen = order[starts][np.argsort(np.minimum.reduceat(candidates[order], starts), kind="stable")]
    return src[chosen].tolist(), dst[chosen].tolist(), candidates[chosen].tolist()


def lasso(exp: Exploration, sub: nx.DiGraph, price) -> ProgressFinding | None:
    """The canonical lasso into a cycle of ``sub`` (arcs keep their least edge as ``e``), if it has one."""
    cyclic = set()
    for component in nx.strongly_connected_components(sub):
        if len(component) > 1 or any(sub.has_edge(n, n) for n in component):
            cyclic |= component
    if not cyclic:
        return None
    entry = _canonical_best(exp, cyclic)
    loop = _shortest_cycle(exp, sub, entry)
    return ProgressFinding("explore-no-compaction-loop",
                           f"a cycle of {len(loop)} automatic compaction step(s) that never lowers the surface price "
                           f"({price(entry)} tokens) and completes no step", exp.path_to(entry), loop)


def _shortest_cycle(exp: Exploration, sub: nx.DiGraph, start: int) -> list[int]:
    if sub.has_edge(start, start):
        return [sub[start][start]["e"]]
    parents, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for node in frontier:
            for succ in sorted(sub.successors(node), key=lambda d: exp.edges[sub[node][d]["e"]][2]):
                index = sub[node][succ]["e"]
                if succ == start:
                    path = [index]
                    while parents[node] is not None:
                        node, index = parents[node]
                        path.append(index)
                    return path[::-1]
                if succ not in parents:
                    parents[succ] = (node, index)
                    nxt.append(succ)
        frontier = nxt
    return []


class PendingArcs(NamedTuple):
    """The pending subgraph of a bounded-response property, one entry per arc (a distinct source-target
    pair) in arc order (its first edge's order): the edge kept for it is the counted one with the least
    action label, the earliest on ties (what a witness walks)."""

    src: np.ndarray
    dst: np.ndarray
    counted: np.ndarray  # bool
    index: np.ndarray  # the edge's index in ``exp.edges``

    def successors(self) -> dict:
        """``src -> [(dst, weight, edge index)]`` in arc order; weight 1 for a counted edge."""
        succs: dict = {}
        for src, dst, counted, index in zip(self.src.tolist(), self.dst.tolist(), self.counted.tolist(),
                                            self.index.tolist()):
            succs.setdefault(src, []).append((dst, int(counted), index))
        return succs


def pending_arcs(exp: Exploration, pending: np.ndarray, counted, discharged) -> PendingArcs | None:
    """The arcs between pending states over edges that do not discharge the obligation (None if none)."""
    candidates = both_ends(exp, pending)
    # 2 discharges, 0 counted, 1 neither: judged once per edge record
    flags = judged(exp, lambda edge: 2 if discharged(edge) else 0 if counted(edge) else 1, np.int8)[candidates]
    candidates, flags = candidates[flags != 2], flags[flags != 2]
    if not candidates.size:
        return None
    src, dst, chosen = (np.asarray(column, dtype=np.int64) for column in _least_per_arc(exp, candidates, flags))
    is_counted = np.zeros(len(exp.edges), bool)
    is_counted[candidates[flags == 0]] = True
    return PendingArcs(src, dst, is_counted[chosen], chosen)


def bounded_response(exp: Exploration, prop: str, trigger, counted, discharged, k: int, what: str):
    """The first state (canonical) from which some path makes ``k`` counted transitions while still pending."""
    arcs = pending_arcs(exp, trigger(exp), counted, discharged)
    if arcs is None:
        return None
    score = scores(exp, arcs, k)
    bad = np.flatnonzero(score >= k)
    if not bad.size:
        return None
    depth = depths(exp)[bad]
    shallow = bad[depth <= np.partition(depth, min(63, depth.size - 1))[min(63, depth.size - 1)]]
    bad = sorted(shallow.tolist(), key=lambda s: (exp.depth[s], repr(exp.states[s][:11])))  # the first 64 of all
    return shortest_witness(exp, prop, what, k, bad, arcs.successors(), score)


def shortest_witness(exp: Exploration, prop: str, what: str, k: int, bad: list, succs: dict, score) -> ProgressFinding:
    """Among the first bad states (canonical order), the shortest prefix + witness, least labels on ties."""
    best = None
    for start in bad[:64]:
        walk = _witness(exp, succs, score, start, k)
        prefix = exp.path_to(start)
        key = (len(prefix) + len(walk), exp.labels(prefix) + exp.labels(walk))
        if best is None or key < best[0]:
            best = (key, prefix, walk)
    return ProgressFinding(prop, f"{what}: {k} {'step' if k == 1 else 'steps'} passed without a response",
                           best[1], best[2])


def scores(exp: Exploration, arcs: PendingArcs, k: int) -> np.ndarray:
    """Per state, the counted transitions a path from it through the pending subgraph can make, as far as a
    comparison with ``k`` needs (0 off the subgraph)."""
    if k == 1:
        return _reaches_counted(arcs, len(exp.states))
    score = np.zeros(len(exp.states), dtype=float)
    for node, value in _most_counted(list(zip(arcs.src.tolist(), arcs.dst.tolist())), arcs.successors()).items():
        score[node] = value
    return score


def _most_counted(pairs, succs: dict) -> dict:
    """Per state of the pending subgraph (its arcs' ``(src, dst)`` pairs), the most counted transitions a path
    from it can make (infinite through a cycle with a counted one): longest paths over networkx's condensation."""
    sub = nx.DiGraph(list(pairs))
    cond = nx.condensation(sub)
    members = cond.graph["mapping"]
    by_comp: dict[int, float] = {}
    for comp in reversed(list(nx.topological_sort(cond))):
        best = 0.0
        for node in cond.nodes[comp]["members"]:
            for succ, weight, _index in succs.get(node, ()):
                other = members[succ]
                if other == comp:
                    if weight:
                        best = float("inf")
                else:
                    best = max(best, weight + by_comp[other])
        by_comp[comp] = best
    return {node: by_comp[comp] for node, comp in members.items()}


def _reaches_counted(arcs: PendingArcs, nodes: int) -> np.ndarray:
    """``k`` = 1 (the default): a state scores 1 when a path in the pending subgraph reaches a counted
    transition, else 0 — what :func:`_most_counted` says when compared with 1 (``>= 1`` iff a counted arc
    is reachable), found by one breadth-first search over the reversed arcs from an extra node that points
    at every source of a counted arc (SciPy's ``breadth_first_order``) instead of a condensation."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order

    score = np.zeros(nodes, dtype=np.int64)
    sources = distinct(arcs.src[arcs.counted])
    if not sources.size:
        return score
    rows = np.concatenate([arcs.dst, np.full(sources.size, nodes)])
    cols = np.concatenate([arcs.src, sources])
    reversed_arcs = csr_matrix((np.ones(rows.size, dtype=np.int8), (rows, cols)), shape=(nodes + 1, nodes + 1))
    reached = breadth_first_order(reversed_arcs, nodes, directed=True, return_predecessors=False)
    score[reached[reached < nodes]] = 1
    return score


def _witness(exp, succs, score, start, k) -> list[int]:
    """The shortest path from ``start`` making ``k`` counted transitions while pending (BFS on (state, count))."""
    parents = {(start, 0): None}
    frontier = [(start, 0)]
    while frontier:
        nxt = []
        for node, count in frontier:
            for succ, weight, index in sorted(succs.get(node, ()), key=lambda item: exp.edges[item[2]][2]):
                reached = count + weight
                if reached + score[succ] < k and reached < k:
                    continue
                item = (succ, min(reached, k))
                if item in parents:
                    continue
                parents[item] = ((node, count), index)
                if reached >= k:
                    path, cur = [], item
                    while parents[cur] is not None:
                        cur, edge = parents[cur]
                        path.append(edge)
                    return path[::-1]
                nxt.append(item)
        frontier = nxt
    return []


def pressure_response(exp: Exploration, k: int = 1):
    threshold = exp.world.settings.threshold

    def over(exp: Exploration) -> np.ndarray:
        return routed(exp) & (prices(exp) >= threshold)

    return bounded_response(
        exp, "pressure-bounded-response", over, lambda e: e.kind == "step",
        lambda e: e.failure or (e.kind == "step" and e.pkind in RESPONDED), k,
        f"over the threshold ({threshold} tokens) the pre-step neither relieved the pressure nor recorded a failure")


def context_missing(state) -> bool:
    """Spec 12: the current runtime context (or CLEARED, once any snapshot existed) is not the newest
    snapshot visible on the surface."""
    ctx, ret, surf = state[CTX], state[RET], state[SURF]
    if not ctx and ret == -2:
        return False
    wanted = "c" + (ctx or "0")
    visible = [code for code in surf if code[0] == "c"]
    return not visible or visible[-1] != wanted


def _context_missing(exp: Exploration) -> np.ndarray:
    """:func:`context_missing` of every state, judged once per (context, retained, surface)."""
    if exp.columns is not None:
        c = exp.columns
        key = (c.gsid * len(CONTEXTS) + c.ctx) * RET_RADIX + c.ret + 2
        _keys, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        marks = np.array([context_missing(exp.states[index]) for index in first.tolist()], dtype=bool)
        return marks[inverse.reshape(-1)]
    memo: dict = {}
    marks = []
    for state in exp.states:
        key = (state[CTX], state[RET], state[SURF])
        found = memo.get(key)
        if found is None:
            found = memo[key] = context_missing(state)
        marks.append(found)
    return np.array(marks, dtype=bool)


def context_window(exp: Exploration, k: int = 1):
    return bounded_response(exp, "explore-runtime-context-reemitted", _context_missing,
                            lambda e: e.kind == "step", lambda e: False, k,
                            "the current runtime context is not on the surface and the next pre-step did not re-emit it")


def check_progress(exp: Exploration, k: int = 1) -> list[ProgressFinding]:
    found = [compaction_loops(exp), pressure_response(exp, k), context_window(exp, k)]
    return [f for f in found if f is not None]
