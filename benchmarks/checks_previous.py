"""The explorer's whole-graph checks as they were before they read arrays (commit 82cbd34), kept as the
benchmarks' losing variant (:mod:`benchmarks.bench_explore_checks`).

What changed since (:mod:`surfacecheck.explore.arrays`): the progress checks walked every edge in Python
and priced both ends per edge; a bounded response folded its pending arcs into a dictionary and scored
``k`` = 1 by a dictionary backward search; the report's graph figures came from a networkx graph built
arc by arc. The rest (canonical paths, lassos, witnesses, the condensation for ``k`` > 1) is today's.
``tests/test_explore_arrays.py`` checks that both give the same findings and figures.
"""
from __future__ import annotations

import networkx as nx

from surfacecheck.explore import oracle, progress
from surfacecheck.explore.bfs import Exploration
from surfacecheck.explore.progress import RESPONDED, ProgressFinding
from surfacecheck.explore.world import ROUTED, SURF


def _price(exp: Exploration, index: int) -> int:
    return oracle.total(exp.states[index][SURF])


def compaction_loops(exp: Exploration) -> ProgressFinding | None:
    sub = nx.DiGraph()
    for index, (src, dst, action, edge) in enumerate(exp.edges):
        if edge.kind in ("overflow", "step") and not edge.completes and _price(exp, dst) >= _price(exp, src):
            if not sub.has_edge(src, dst) or action < exp.edges[sub[src][dst]["e"]][2]:
                sub.add_edge(src, dst, e=index)
    return progress.lasso(exp, sub, lambda state: _price(exp, state))


def _reaches_counted(arcs: dict) -> dict:
    preds: dict = {}
    score: dict = {}
    frontier = []
    for (src, dst), (rank, _index) in arcs.items():
        preds.setdefault(dst, []).append(src)
        score.setdefault(src, 0)
        score.setdefault(dst, 0)
        if rank[0] == 0 and not score[src]:
            score[src] = 1
            frontier.append(src)
    while frontier:
        node = frontier.pop()
        for src in preds.get(node, ()):
            if not score[src]:
                score[src] = 1
                frontier.append(src)
    return score


def bounded_response(exp: Exploration, prop: str, trigger, counted, discharged, k: int, what: str):
    pending = [trigger(s) for s in exp.states]
    arcs: dict = {}
    for index, (src, dst, action, edge) in enumerate(exp.edges):
        if pending[src] and pending[dst] and not discharged(edge):
            rank = (0 if counted(edge) else 1, action)
            old = arcs.get((src, dst))
            if old is None or rank < old[0]:
                arcs[(src, dst)] = (rank, index)
    if not arcs:
        return None
    succs: dict = {}
    for (src, dst), (rank, index) in arcs.items():
        succs.setdefault(src, []).append((dst, 1 - rank[0], index))
    score = _reaches_counted(arcs) if k == 1 else progress._most_counted(arcs, succs)
    bad = sorted((s for s, n in score.items() if n >= k), key=lambda s: (exp.depth[s], repr(exp.states[s][:11])))
    if not bad:
        return None
    return progress.shortest_witness(exp, prop, what, k, bad, succs, score)


def check_progress(exp: Exploration, k: int = 1) -> list[ProgressFinding]:
    threshold = exp.world.settings.threshold
    found = [compaction_loops(exp),
             bounded_response(exp, "explore-pressure-bounded-response",
                              lambda state: bool(state[ROUTED]) and oracle.total(state[SURF]) >= threshold,
                              lambda e: e.kind == "step", lambda e: e.failure or (e.kind == "step" and e.pkind in RESPONDED),
                              k, f"over the threshold ({threshold} tokens) the pre-step neither relieved the pressure "
                                 "nor recorded a failure"),
             bounded_response(exp, "explore-runtime-context-reemitted", progress.context_missing,
                              lambda e: e.kind == "step", lambda e: False, k,
                              "the current runtime context is not on the surface and the next pre-step did not "
                              "re-emit it")]
    return [f for f in found if f is not None]


def graph_figures(exp: Exploration) -> dict:
    arcs: dict = {}
    for index, (src, dst, action, _edge) in enumerate(exp.edges):
        if (src, dst) not in arcs or action < exp.edges[arcs[(src, dst)]][2]:
            arcs[(src, dst)] = index
    graph = nx.DiGraph()
    graph.add_nodes_from(range(len(exp.states)))
    graph.add_edges_from((s, d, {"e": i}) for (s, d), i in arcs.items())
    return {"nodes": graph.number_of_nodes(), "arcs": graph.number_of_edges(),
            "strongly_connected_components": sum(1 for _ in nx.strongly_connected_components(graph))}
