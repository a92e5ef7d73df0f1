"""The explorer as it was before issue 19, kept as the benchmarks' losing variant.

What changed since, and what this module restores on top of today's code:

* the search loop hashed every explored edge's successor as a tuple state (its VIEW slice,
  :func:`surfacecheck.explore.canonical.key`) and built each successor tuple before looking it up;
  today a core is numbered once and a state is one packed integer (:mod:`surfacecheck.explore.bfs`);
* each core's moves re-read the shared model runs through their shape group and rebased them per
  outcome, per core; today a surface's effects and an op's moves per retained index are memoised
  (:class:`surfacecheck.explore.world.World`), and duplicates are dropped where they can arise;
* the model ran with four memoised helpers; today with more (:data:`surfacecheck.explore.oracle.SPEEDUPS`);
* a shared run was keyed on the prefix's price sum itself; today a summary's run keys on the sum's shrink
  class (:func:`surfacecheck.explore.shape.shrink_class`), so fewer runs serve the same surfaces.

Results are identical (``tests/test_explore_speed.py`` compares the two graphs edge by edge).
"""
from __future__ import annotations

import time

from surfacecheck.explore import oracle
from surfacecheck.explore.bfs import Exploration, no_cyclic_gc
from surfacecheck.explore.canonical import key
from surfacecheck.explore.safety import check_state
from surfacecheck.explore.shape import retain_tokens, signature, view
from surfacecheck.explore.world import RET, SURF, Edge, World, _comps, _dedupe

PREVIOUS_SPEEDUPS = oracle.SPEEDUPS[:4]


def previous_view(op, surf, outcome, routed, settings) -> tuple:
    """The shared runs' memo key before the shrink class: the prefix's price sum itself."""
    key = view(op, surf, outcome, routed, settings)
    if key[0] != "~s":
        return key
    m, total, big, tail = signature(surf, retain_tokens(settings) if op == "pressure" else 0)
    return ("~", m, total, big, tail) + key[5:]


class PreviousWorld(World):
    """Moves built per core from the shape groups, deduplicated over the whole core; runs keyed on the sum."""

    memos = PREVIOUS_SPEEDUPS

    def __post_init__(self):
        super().__post_init__()
        self._view = previous_view

    def _moves(self, *core) -> list:
        return _dedupe(super()._moves(*core))

    def _effects(self, op, phase, surf, routed, retries, outcomes) -> list:
        return self._shaped_effects(op, phase, surf, routed, retries, outcomes)

    def _effect_moves(self, moves, op, outcomes, phase, pend, surf, ret, ctx, retries, seen, routed):
        for outcome, eff in self._effects(op, phase, surf, routed, retries, outcomes):
            new_ret = oracle.follow_retained(op, ret, eff)
            if op in ("prune", "reload") and eff.events == 0 and eff.surf == surf and new_ret == ret and not eff.violations:
                continue
            new_retries, new_seen = (eff.retries, eff.seen) if op == "reload" else (retries, seen)
            moves.append((f"{op}:{outcome}" if outcome else op,
                          (phase, pend, eff.surf, new_ret, ctx, new_retries, new_seen, routed),
                          0, 0, _comps(eff), eff.events, 0, eff.gen, Edge(op, eff.failure, eff.kind, False,
                                                                          eff.violations, eff.label)))


def explore(world: World, *, symmetry: bool = True, reverse: bool = False) -> Exploration:
    """The previous BFS: successor tuples built per edge, the VIEW slice hashed per edge."""
    with no_cyclic_gc():
        exp = Exploration(world, symmetry)
        start = time.perf_counter()
        initial = world.initial()
        ids = {key(initial, symmetry): 0}
        states, depth, edges = exp.states, exp.depth, exp.edges
        states.append(initial)
        depth.append(0)
        state_checks: dict = {}
        frontier, level = [0], 0
        while frontier:
            nxt = []
            for src in frontier:
                successors = world.successors(states[src])
                if reverse:
                    successors = successors[::-1]
                for action, dst_state, edge in successors:
                    k = key(dst_state, symmetry)
                    dst = ids.get(k)
                    if dst is None:
                        dst = ids[k] = len(states)
                        states.append(dst_state)
                        depth.append(level + 1)
                        nxt.append(dst)
                        check_key = (dst_state[SURF], dst_state[RET])
                        found = state_checks.get(check_key)
                        if found is None:
                            found = state_checks[check_key] = check_state(*check_key)
                        if found:
                            exp.state_violations[dst] = found
                    edges.append((src, dst, action, edge))
            frontier, level = nxt, level + 1
        exp.seconds = time.perf_counter() - start
        return exp
