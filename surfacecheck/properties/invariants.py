"""The standard invariants: properties of one runtime's run that need no reference model.

Each monitor watches the protocol requests and results of one run (see ``properties/monitors.py``)
and asks the runtime read-only questions about the state after each step. They hold for any
correct runtime, so ``verify`` checks them beside the lockstep comparison and ``replay`` checks
them on any trace. Every monitor names its spec / seed section.
"""
from __future__ import annotations

import difflib
from typing import Any

from surfacecheck.properties.monitors import register
from surfacecheck.core.trace import Step, Violation

RUNTIME_OPS = frozenset({"prune", "compact", "pre_step", "request_error", "manual_compact"})
"""Requests after which the runtime itself may have written replacements (spec 6, 8-11)."""
PRUNING_OPS = frozenset({"prune", "pre_step", "request_error"})
"""Requests that may run the pruner (spec 6 callers: pressure and overflow; never `/compact`, spec 11.2)."""


def _ok(result: Any) -> bool:
    return isinstance(result, dict) and "error" not in result and "__crash__" not in result


def _as_list(value: Any) -> list:
    return value if type(value) is list else list(value)


def _replace_marker(step: Step) -> dict | None:
    event = step.args.get("event") if step.op == "append" else None
    op = event.get("surfaceOp") if isinstance(event, dict) else None
    return op if isinstance(op, dict) and op.get("op") == "replace" else None


def replacements(before: list[int], after: list[int]) -> list[tuple[int, int, int, int]]:
    """Edits of the node list that are not plain appends: ``(i1, i2, j1, j2)`` spans of ``before``
    (``[i1:i2]``) that ``after[j1:j2]`` took the place of (spec 2.1 replace splices a span)."""
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    edits = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal" or (tag == "insert" and i1 == len(before)):
            continue
        edits.append((i1, i2, j1, j2))
    return edits


def watched(query) -> tuple[list[int], int | None, list[bool] | None, list[int] | None]:
    """The surface after a step as the watchers keep it: nodes and generation (``None`` when ``surface`` was
    refused), the cuts and the prices (``None`` when refused). Each query's answer is its own object that nobody
    changes afterwards, so a list is kept as it is; anything else becomes a list."""
    surface = query("surface", {})
    nodes, generation = (_as_list(surface.get("nodes", [])), surface.get("generation", 0)) if _ok(surface) \
        else (None, None)
    cuts = query("cuts", {})
    measure = query("measure", {})
    return (nodes, generation, _as_list(cuts["balanced"]) if _ok(cuts) and "balanced" in cuts else None,
            _as_list(measure["prices"]) if _ok(measure) and "prices" in measure else None)


class _Watcher:
    """Base: remembers the surface (nodes, generation), cuts and prices after the previous step."""

    name = "?"

    def __init__(self) -> None:
        self.nodes: list[int] = []
        self.generation = 0
        self.cuts: list[bool] | None = [True]
        self.prices: list[int] | None = []

    def remember(self, query) -> None:
        """Keep this step's answers for the next step (:func:`watched`). A lockstep step's query derives them
        once for all its watchers (``query.once``); any other query callable is asked here."""
        once = getattr(query, "once", None)
        nodes, generation, self.cuts, self.prices = watched(query) if once is None else once(watched)
        if nodes is not None:  # a refused surface keeps the last one seen
            self.nodes, self.generation = nodes, generation

    def fail(self, number: int, message: str, expected=None, observed=None) -> Violation:
        return Violation(self.name, message, number, expected, observed)


@register("generation-counts-replaces", engine="verify")
class GenerationCountsReplaces(_Watcher):
    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        before_nodes, before_gen = self.nodes, self.generation
        surface = query("surface", {})
        if not _ok(surface):
            return None
        self.remember(query)
        nodes, gen = self.nodes, surface.get("generation")
        if step.op == "reset":
            if gen != 0 or nodes:
                return self.fail(number, f"after reset the surface must be empty at generation 0, got {gen}",
                                 {"nodes": [], "generation": 0}, surface)
            return None
        if gen < before_gen:
            return self.fail(number, f"{step.op}: generation went down from {before_gen} to {gen}", before_gen, gen)
        if step.op == "append":
            ok = _ok(result)
            replace = ok and _replace_marker(step) is not None
            expected = before_gen + (1 if replace else 0)
            if gen != expected or (ok and result.get("generation", gen) != gen):
                return self.fail(number, f"append ({'replace' if _replace_marker(step) else 'no replace'}"
                                         f"{'' if ok else ', refused'}): generation {before_gen} -> "
                                         f"{gen}, expected {expected}", expected,
                                 {"surface": gen, "result": result.get("generation")})
            return None
        if gen > before_gen and nodes == before_nodes:
            return self.fail(number, f"{step.op}: generation grew {before_gen} -> {gen} but the surface is unchanged",
                             before_gen, gen)
        if step.op in RUNTIME_OPS and replacements(before_nodes, nodes) and gen == before_gen:
            return self.fail(number, f"{step.op}: the surface was spliced but the generation stayed {gen}",
                             before_gen + 1, gen)
        return None


@register("pairing-balanced-at-replacement-edges", engine="verify")
class PairingBalancedAtEdges(_Watcher):
    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        before_nodes, before_cuts = self.nodes, self.cuts
        self.remember(query)
        if step.op not in RUNTIME_OPS or self.cuts is None or before_cuts is None or _concurrent_replace(step.args):
            return None
        for i1, i2, j1, j2 in replacements(before_nodes, self.nodes):
            if j2 - j1 != 1 or i2 <= i1:
                continue
            edges = (self.cuts[j1], self.cuts[j2])
            if i2 - i1 == 1 and edges == (before_cuts[i1], before_cuts[i2]):
                continue  # a one-node rewrite (the pruner) leaves its cuts alone (spec 3)
            if edges != (True, True):
                return self.fail(number, f"{step.op}: replacement node {self.nodes[j1]} (surface positions "
                                         f"{i1}..{i2 - 1} before) has cuts {list(edges)}; a compaction span must "
                                         f"lie between balanced cuts", [True, True], list(edges))
        return None


@register("summaries-smaller", engine="verify")
class SummariesSmaller(_Watcher):
    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        before_nodes, before_prices = self.nodes, self.prices
        self.remember(query)
        if step.op not in RUNTIME_OPS or self.prices is None or before_prices is None or _concurrent_replace(step.args):
            return None  # (a concurrent producer's own replace is not the runtime's checkpoint)
        for i1, i2, j1, j2 in replacements(before_nodes, self.nodes):
            if j2 - j1 != 1 or i2 <= i1 or (i2 - i1 == 1 and step.op in PRUNING_OPS):
                continue  # a one-node rewrite may be the pruner's (spec 6 shrinks chars, not tokens)
            shadowed, price = sum(before_prices[i1:i2]), self.prices[j1]
            if price >= shadowed:
                return self.fail(number, f"{step.op}: replacement node {self.nodes[j1]} costs {price} tokens, "
                                         f"not less than the {shadowed} of the {i2 - i1} node(s) it shadows",
                                 f"< {shadowed}", price)
        return None


@register("projection-equals-recount", engine="verify")
class ProjectionEqualsRecount(_Watcher):
    """Metered: every replace so far consumed an adjacent claim over its exact range whose price was
    the exact recount of the span. Runtime-made replacements are metered by construction (spec 5.1
    "producers guarantee adjacency"), unless a scripted concurrent producer wrote a replace."""

    def __init__(self) -> None:
        super().__init__()
        self.metered = True
        self.claim: tuple[int, int, int] | None = None

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        before_nodes, before_prices = self.nodes, self.prices
        self.remember(query)
        if step.op == "reset":
            self.metered, self.claim = True, None
        elif step.op == "append" and _ok(result):
            self._fold(step.args.get("event") or {}, before_nodes, before_prices)
        elif step.op in RUNTIME_OPS and _concurrent_replace(step.args):
            self.metered, self.claim = False, None
        elif step.op in RUNTIME_OPS or step.op == "reload":
            self.claim = None
        if not self.metered or self.prices is None:
            return None
        projection = query("projection", {})
        if not _ok(projection):
            return None
        recount = sum(self.prices)
        if projection.get("total") != recount:
            return self.fail(number, f"after {step.op}: projection total {projection.get('total')} differs from "
                                     f"the recount {recount} of a fully metered surface", recount,
                             projection.get("total"))
        return None

    def _fold(self, event: dict, nodes: list[int], prices: list[int] | None) -> None:
        kind, marker = event.get("type"), event.get("surfaceOp")
        if kind in ("compaction/prune", "compaction/summary"):
            data = event.get("data") or {}
            rng = data.get("shadowedRange") or {}
            start, end = rng.get("start"), rng.get("end")
            exact = False
            if prices is not None and start in nodes and end in nodes:
                i, j = nodes.index(start), nodes.index(end)
                exact = i <= j and sum(prices[i:j + 1]) == data.get("shadowedTokenCount")
            self.claim = (start, end, exact)
            return
        if isinstance(marker, dict) and marker.get("op") == "replace":
            claim, self.claim = self.claim, None
            if claim is None or claim[:2] != (marker.get("start"), marker.get("end")) or not claim[2]:
                self.metered = False
            return
        self.claim = None


def _concurrent_replace(args: dict) -> bool:
    scripts = []
    for key in ("summary", "summaries"):
        value = args.get(key)
        scripts += value if isinstance(value, list) else [value] if isinstance(value, dict) else []
    for script in scripts:
        for entry in (script or {}).get("concurrent") or []:
            if isinstance(entry, (list, tuple)) and len(entry) >= 3 and isinstance(entry[2], dict):
                return True
    return False


from surfacecheck.properties import policy_invariants as _policy  # noqa: E402,F401  (registers the producer and policy monitors)
