"""Shared model runs: one run of the model serves every surface of the same *shape* (spec 6, 7, 9-11).

A model run (:func:`.oracle.run`) reads the whole surface, but its decisions read the oldest
nodes only through sums. Every range the compaction ops select starts at the first node (spec 7
step 4: ``Range(nodes[0], nodes[keep - 1])``) and ends at a balanced cut at or after

    m = the balanced cut at or below ``retention_index(prices with every big result pruned, retain)``

— pruning (spec 6) only lowers prices, so the suffix budget (spec 7 step 3) is reached at or
after ``m`` whatever is pruned; the retain budget is 0.16·W for a pressure check (spec 9.2) and 0
for overflow (spec 10.2) and ``/compact`` (spec 11.2), which only move the end tailward; the walk
back to a balanced cut (spec 3, 7) stops at ``m`` at the latest. So the prefix ``surf[:m]`` is
either shadowed whole by the first checkpoint or left untouched, and what the model reads of it
is: its length, its price sum (threshold, spec 9.2; shrink rule, spec 8.2 step 10; the
``/compact`` report), and where its big tool results are (the pruner, spec 6, rewrites each in
place). The *shape* is ``(m, Σ prices, big-result positions, tail)``; runs are memoised on it
and their :class:`~.oracle.Effect` is re-based positionally onto each surface of that shape
(:func:`rebase`): surviving nodes keep their own codes, new nodes take the run's.

This is an argument, not an assumption: ``World(check_oracle=True)`` (``explore --oracle``)
runs the model on the real surface as well and records any difference, and the tests compare the
two state graphs at small bounds. A transition whose shared run found a violation is always
re-run on its real surface, so violation messages name the real seqs.
"""
from __future__ import annotations

from functools import lru_cache

from model.config import resolve_compact_spec, resolve_target_policy
from model.region import retention_index

from . import concrete as C
from . import oracle

SHARED_OPS = frozenset({"pressure", "overflow", "manual", "reload"})
BIG_RESULT = "S"  # the only code the pruner rewrites (2400 chars > thresholdChars 1000); p stays


@lru_cache(maxsize=None)
def retain_tokens(settings: oracle.Settings) -> int:
    """The pressure retain budget (spec 9.1 `resolveCompactSpec`), the largest any op uses."""
    policy = resolve_target_policy(settings.policy.compaction, C.PROVIDER, C.MODEL)
    return resolve_compact_spec(policy, settings.context_window).retain_tokens


@lru_cache(maxsize=None)
def threshold_tokens(settings: oracle.Settings) -> int:
    """The pressure threshold floor(0.8·W) (spec 9.1 `resolveCompactSpec`)."""
    policy = resolve_target_policy(settings.policy.compaction, C.PROVIDER, C.MODEL)
    return resolve_compact_spec(policy, settings.context_window).threshold_tokens


@lru_cache(maxsize=None)
def _pruned_price(code: str) -> int:
    return oracle.price("p" if code == BIG_RESULT else code)


@lru_cache(maxsize=1 << 18)
def split(surf: tuple, retain: int) -> int:
    """``m``: the length of the prefix every selected range covers (see the module docstring)."""
    if not surf:
        return 0
    keep = retention_index(tuple(_pruned_price(code) for code in surf), retain)
    depth = 0
    balanced = [True]  # balanced[k]: no tool call open before surface position k (spec 3)
    for code in surf[:keep]:
        depth += C.TOOL_DELTA.get(code, 0)
        balanced.append(depth == 0)
    while keep > 0 and not balanced[keep]:
        keep -= 1
    return keep


@lru_cache(maxsize=1 << 18)
def signature(surf: tuple, retain: int) -> tuple:
    """The shape of a surface: ``(m, Σ prefix prices, big results in the prefix, tail codes)``."""
    m = split(surf, retain)
    prefix = surf[:m]
    return (m, sum(oracle.price(code) for code in prefix),
            tuple(i for i, code in enumerate(prefix) if code == BIG_RESULT), surf[m:])


def view(op: str, surf: tuple, outcome: str, routed: bool, settings: oracle.Settings) -> tuple:
    """The memo key of a shared run (what the run reads of the surface; the module docstring says why).

    * reload (spec 1.5): reopening re-derives the same surface from the log, whatever its codes;
    * a pressure check below the threshold returns before reading anything else (spec 9.2);
    * the prefix sum is read only by the thresholds (spec 9.2: before and after pruning), the shrink
      rule and the success report (spec 8.2 steps 9-13, after a summary arrives), so a failed or
      cancelled summary reads only which side of the thresholds the surface is on;
    * ``/compact`` does not prune (spec 11.2): its big results are priced like any node."""
    if op == "reload":
        return ("~r", len(surf))
    side = ()
    if op == "pressure":
        threshold = threshold_tokens(settings)
        if oracle.total(surf, routed) < threshold:
            return ("~n", len(surf))
        side = (oracle.total(surf, routed) - sum(oracle.price(c) - _pruned_price(c) for c in surf) >= threshold,)
    m, total, big, tail = signature(surf, retain_tokens(settings) if op == "pressure" else 0)
    if op == "manual":
        big = ()
    if outcome in SUMLESS_OUTCOMES:
        return ("~f", m, big, tail) + side
    return ("~", m, total, big, tail)


SUMLESS_OUTCOMES = frozenset({"fail", "cancel"})


def rebase(eff: oracle.Effect, surf: tuple) -> oracle.Effect:
    """The run's effect moved onto ``surf`` (same shape): a node that survived keeps its code."""
    new = list(eff.surf)
    for old, moved in enumerate(eff.ret):
        if moved >= 0:
            new[moved] = surf[old]
    new_surf = tuple(new)
    if new_surf == eff.surf:
        return eff
    return oracle.Effect(new_surf, eff.ret, eff.retries, eff.seen, eff.kind, eff.failure, eff.events, eff.gen,
                         eff.checkpoints, eff.concurrent, eff.violations, eff.label, eff.consulted)
