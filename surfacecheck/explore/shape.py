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
place). Of the tail it reads each node's price, pairing delta and whether it is big (:func:`alike`:
the snapshots ``cX`` and ``cY`` read alike). The *shape* is ``(m, Σ prices, big-result positions,
tail)``; a group of surfaces of one shape shares its runs, and runs are memoised on what they read
and their :class:`~.oracle.Effect` is re-based positionally onto each surface of that shape
(:func:`rebase`): surviving nodes keep their own codes, new nodes take the run's.

Of the prefix sum ``T`` a run reads less than its value (:func:`view`): the thresholds (spec 9.2) are
read as the sides of them the surface is on, and a summary's fate as one comparison per range end the
tail allows: the shrink rule (spec 8.2 step 10) rejects when the framed checkpoint's price ``F``
(spec 4.1: its content; the K or KB node) is at least the shadowed count ``T' + c``, where ``T'`` is
``T`` less what the pruner took from the prefix and ``c`` the range's part of the (possibly pruned)
tail. Nothing else decides on ``T``: a committed checkpoint shadows the whole prefix, so every later
measurement is ``F`` plus the tail; a rejected one leaves the surface as it was. So the key keeps
``T``'s place among the breakpoints ``F - c + k·δ`` (:func:`shrink_class`; δ what pruning one big
result saves, ``k`` how many of the prefix's were pruned), every combination of them — more than
are read, never fewer. Labels are the one thing a representative's run keeps of its own ``T``
(token counts in a report, :func:`masked`); they are not part of the state graph.

A summary that never arrives (a failed or cancelled summarizer, :data:`SUMLESS_OUTCOMES`) reads even
less. The op prunes first (pressure and overflow, spec 9.2 step 9, 10.2), and the pruner reads only where
the big results are (:func:`pruned_at`). Then it selects a range, and of that range only whether it
exists: the range is the prefix through the balanced cut ``m`` (spec 7), so it exists iff ``m > 0``.
Its seqs reach only the events' data and the labels. Selecting it, and checking it on entry, folds the
surface's tool pairing (spec 3, :func:`pairing`): a count over each node's delta, which raises on a corrupt
surface (only a control makes one). The transaction opens the bracket, and the
summarizer fails or the signal aborts without reading its input (spec 8.2 step 8,
``model.summarizer.run_script``). The bracket closes with the error, and nothing is shadowed. What the
op does after that reads the generation the pruner advanced (the overflow listener's retry, spec 10.2)
and the thresholds' side (pressure). So such a run is keyed on ``m > 0``, the pairing deltas (and so the
length), the big results' positions and the side.

This is an argument, not an assumption: ``World(check_oracle=True)`` (``explore --oracle``)
runs the model on the real surface as well and records any difference, and the tests compare the
two state graphs at small bounds. A transition whose shared run found a violation is always
re-run on its real surface, so violation messages name the real seqs.
"""
from __future__ import annotations

import re
from bisect import bisect_left
from functools import lru_cache
from operator import itemgetter

from surfacecheck.model.config import resolve_compact_spec, resolve_target_policy

from . import concrete as C
from . import oracle

SHARED_OPS = frozenset({"pressure", "overflow", "manual", "reload", "prune"})
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
    keep = retained_from(surf, retain)
    depth = 0
    balanced = [True]  # balanced[k]: no tool call open before surface position k (spec 3)
    for code in surf[:keep]:
        depth += C.TOOL_DELTA.get(code, 0)
        balanced.append(depth == 0)
    while keep > 0 and not balanced[keep]:
        keep -= 1
    return keep


def retained_from(surf: tuple, retain: int) -> int:
    """``retention_index`` (spec 7 step 3) of the surface's prices with every big result pruned, walked here
    in one loop rather than through the model's :class:`model.walk.Walk` records: from the tail, each node
    priced is kept, until the suffix reaches the budget (a test pins it to the model's function)."""
    accumulated, keep = 0, len(surf)
    for index in range(len(surf) - 1, -1, -1):
        accumulated += _pruned_price(surf[index])
        keep = index
        if accumulated >= retain:
            break
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
    * the pruner (spec 6) reads the tool results on the surface one by one and rewrites each big one
      in place (:func:`pruned_at`): it reads no other node and no sum;
    * a pressure check below the threshold returns before reading anything else (spec 9.2), and one that
      pruning brings below it after the pruner (spec 9.2 step 10);
    * without a range (``m == 0``) no summary is asked for: every outcome reads what a failed one reads;
    * the prefix sum is read only by the thresholds (spec 9.2: before and after pruning), the shrink
      rule and the success report (spec 8.2 steps 9-13, after a summary arrives), so a failed or
      cancelled summary reads only which side of the thresholds the surface is on, whether a range
      exists (``m > 0``) and what the pruner reads (the module docstring), and one that arrives the side
      and the shrink rule's verdict per range end (:func:`shrink_class`; the report's token count is a
      label) — and where the rule rejects it at every range end, only what a failed one reads (the
      bracket closes with the error, nothing shadowed);
    * ``/compact`` does not prune (spec 11.2): its big results are priced like any node."""
    if op == "reload":
        return ("~r", len(surf))
    if op == "prune":
        return ("~p",) + pruned_at(surf)
    side = ()
    if op == "pressure":
        threshold = threshold_tokens(settings)
        if oracle.total(surf, routed) < threshold:  # no event written, whatever the length (:func:`rebase`)
            return ("~n",)
        side = (oracle.total(surf, routed) - sum(oracle.price(c) - _pruned_price(c) for c in surf) >= threshold,)
        if not side[0]:  # pruning suffices: the check returns before it selects a range (spec 9.2 step 10)
            return ("~ps",) + pruned_at(surf)
    m, total, big, tail = signature(surf, retain_tokens(settings) if op == "pressure" else 0)
    if op == "manual":
        big = ()
    pruner_reads = pruned_at(surf)[1] if op != "manual" else ()  # spec 11.2: /compact does not prune
    if m == 0 or outcome in SUMLESS_OUTCOMES:  # no summary arrives (none is asked for without a range): the
        # surface is read by the pruner and for whether a range exists only (the module docstring)
        return ("~f", m > 0, pairing(surf), pruner_reads) + side
    framed = FRAMED.get(outcome)
    if framed is None:  # an outcome whose summary is not known here: the sum itself
        return ("~", m, total, big, alike(tail)) + side
    shrink = shrink_class(total, framed, len(big), tail, op != "manual")
    if shrink == 0 and outcome != "concurrent":  # rejected at every range end: read as a failed summary is
        return ("~x", pairing(surf), pruner_reads) + side
    return ("~s", m, shrink, big, alike(tail)) + side


@lru_cache(maxsize=1 << 16)
def pruned_at(surf: tuple) -> tuple:
    """What the pruner (spec 6 `pruneSession`) reads of a surface: its length (where the events it writes
    land) and the positions of its big tool results (the only ones it rewrites; a small result, ``R`` or
    an already pruned ``p``, stays as it is)."""
    return (len(surf), tuple(i for i, code in enumerate(surf) if code == BIG_RESULT))


@lru_cache(maxsize=1 << 16)
def pairing(surf: tuple) -> tuple:
    """What the tool-pairing fold (spec 3) reads of a surface: each node's delta (+ its tool calls, −1 a
    result, else 0), a count, ids not matched; it raises where the count goes below zero."""
    return tuple(C.TOOL_DELTA.get(code, 0) for code in surf)


@lru_cache(maxsize=1 << 16)
def alike(tail: tuple) -> tuple:
    """What a run reads of each tail node (the module docstring): its price (spec 4: the retention walk,
    the measurements, the shrink rule's part ``c``), its pairing delta (spec 3) and whether the pruner
    rewrites it (spec 6). Two codes alike in all three (the runtime-context snapshots ``cX`` and ``cY``)
    are read alike; a survivor keeps its own code (:func:`rebase`)."""
    return tuple((oracle.price(code), C.TOOL_DELTA.get(code, 0), code == BIG_RESULT) for code in tail)


SUMLESS_OUTCOMES = frozenset({"fail", "cancel"})
FRAMED = {"good": "K", "concurrent": "K", "big": "KB"}
"""The checkpoint each summary outcome frames (:func:`.concrete.summary_script`: concurrent returns the
good text while another producer appends)."""


@lru_cache(maxsize=1 << 16)
def _breakpoints(framed: str, big: int, tail: tuple, prunes: bool) -> tuple:
    """Sorted ``F - c + k·δ`` over every range part ``c`` of the tail (each big result priced whole or
    pruned when the op prunes) and ``k`` = 0..``big`` pruned prefix results."""
    price = oracle.price
    delta = price(BIG_RESULT) - _pruned_price(BIG_RESULT) if prunes else 0
    parts, sums = {0}, {0}
    for code in tail:
        step = {price(code)} | ({_pruned_price(code)} if prunes else set())
        sums = {total + extra for total in sums for extra in step}
        parts |= sums
    f = price(framed)
    return tuple(sorted({f - c + k * delta for c in parts for k in range(big + 1 if prunes else 1)}))


def shrink_class(total: int, framed: str, big: int, tail: tuple, prunes: bool) -> int:
    """Where the prefix sum lies among the shrink rule's breakpoints: how many are below it (the rule
    rejects iff ``F >= T' + c``, i.e. ``T <= F - c + k·δ``)."""
    return bisect_left(_breakpoints(framed, big, tail, prunes), total)


def masked(label: str) -> str:
    """A label with its numbers hidden: what two runs of one shape class must agree on."""
    return _DIGITS.sub("#", label)


_DIGITS = re.compile(r"\d+")


def rebase(eff: oracle.Effect, surf: tuple) -> oracle.Effect:
    """The run's effect moved onto ``surf`` (same shape): a node that survived keeps its code. An op that
    wrote no event left the surface as it was (spec 2: the surface is a fold of the log), whatever its length."""
    if not eff.events:
        return eff if eff.surf == surf else eff._replace(surf=surf, ret=_unmoved(len(surf)))
    plan = rebase_plan(eff.ret, len(eff.surf))
    if plan is None:
        return eff
    new_surf = plan(surf + eff.surf)
    if new_surf == eff.surf:
        return eff
    return oracle.Effect(new_surf, *eff[1:])


@lru_cache(maxsize=None)
def _unmoved(length: int) -> tuple:
    return tuple(range(length))


@lru_cache(maxsize=1 << 16)
def rebase_plan(moved: tuple, length: int):
    """Where each node of the new surface comes from, as one ``itemgetter`` over ``surf + eff.surf``: a
    survivor from its old index, a new node from the run's surface; None when no node survived."""
    take = [len(moved) + j for j in range(length)]
    for old, new in enumerate(moved):
        if new >= 0:
            take[new] = old
    if all(index >= len(moved) for index in take):
        return None
    if length == 1:
        return lambda nodes: (nodes[take[0]],)
    return itemgetter(*take)
