"""Obligation 3 for any length and any number of appends: incremental-pairing by induction (spec 3).

The claim is an induction over the calls of ``refresh_cuts``: if the cache equals the fold from scratch
of the surface it was built for, the model's ``refresh_cuts`` returns the fold from scratch of the
surface now (balanced cuts, open calls, generation) — so after any number of refreshes the cache is
still exact. The cache before is stated declaratively (cut c balanced ⇔ D(c) = 0); the fold the model
runs inside ``refresh_cuts`` (``extend_cuts`` on growth, ``fold_cuts`` on a rebuild) is summarized by
the pairing fold's invariant (:mod:`.unbounded`), checked by initiation and consecution. Cases:

* no cache yet (the induction's start), any surface;
* the same generation, t ≥ 0 nodes appended (the surface before is a prefix of the one now);
* another generation (a checkpoint replaced a span), any surface now, of any length.
"""
from __future__ import annotations

import z3

from surfacecheck.model.pairing import Cuts

from .encoding import pairing_patch
from .induction import SymSeq, check, check_walks, new_report, note_failure, path_facts, summarizing
from .symexec import SymInt, explore, expr
from .unbounded import UnboundedSurface, invariants

TIMEOUT_MS = 20_000
CONTROL_TIMEOUT_MS = 1_000  # a control need only fail: a check not unsat within this is a failure


def exact_cache(surface: UnboundedSurface, length, generation) -> Cuts:
    """The cache as the fold from scratch leaves it (the induction hypothesis), declaratively."""
    nodes = surface.session(length).nodes
    balanced = SymSeq(length + 1, lambda c: surface.balanced(c), f"{surface.name}_cached")
    return Cuts(nodes, balanced, SymInt(surface.D(length)), SymInt(generation))


def _length(value):
    return value.length if isinstance(value, SymSeq) else z3.IntVal(len(value))


def _at(value, c):
    if isinstance(value, SymSeq):
        return value.at(c)
    term = z3.BoolVal(False)
    for index in range(len(value) - 1, -1, -1):
        term = z3.If(c == index, expr(value[index]), term)
    return term


def equals_fold(got: Cuts, surface: UnboundedSurface, length, generation, name: str):
    """``got`` is the spec 3 fold from scratch of ``surface``'s first ``length`` nodes."""
    c = z3.Int(f"{name}_c")
    return z3.And(_length(got.balanced) == length + 1, _length(got.nodes) == length,
                  expr(got.open_calls) == surface.D(length), expr(got.generation) == generation,
                  z3.ForAll([c], z3.Implies(z3.And(c >= 0, c <= length), _at(got.balanced, c) == surface.balanced(c))))


def cases():
    """(label, surface now, its length, its generation, the cache before, premises)."""
    old = UnboundedSurface("o")
    now = UnboundedSurface("v", base=1_000_000)
    g, t = z3.Int("gen"), z3.Int("appended")
    same = old.n + t
    return [
        ("no cache: the first refresh folds from scratch", old, old.n, g, None, []),
        ("the same generation, t >= 0 nodes appended: extend", old, same, g, exact_cache(old, old.n, g),
         [old.n >= 0, t >= 0]),
        ("a new generation (a replace), any surface: rebuild", now, now.n, g + 1, exact_cache(old, old.n, g),
         old.axioms() + old.well_formed()),
    ]


def prove(refresh, timeout_ms: int = TIMEOUT_MS, first_failure: bool = False) -> dict:
    """Each case: the walks' induction checks, then ``refresh(cache, now)`` equals the fold from scratch."""
    out = new_report()
    for label, surface, length, generation, cache, premises in cases():
        session = surface.session(length, SymInt(generation))
        with summarizing(invariants(surface)), pairing_patch():
            paths = explore(lambda: refresh(cache, session))
        out["paths"] += len(paths)
        case = new_report(paths)
        if case["failed"]:
            out.update(status=case["status"], failed=f"{label}: {case['failed']}")
            return out
        axioms = surface.axioms(length) + premises
        check_walks(paths, axioms, timeout_ms, first_failure, out)
        if first_failure and out["failed"]:
            return out
        facts = axioms + surface.well_formed(length) + path_facts(paths)
        claim = z3.And([z3.Not(p.condition) if p.error is not None else
                        z3.Implies(p.condition, equals_fold(p.value, surface, length, generation, f"{surface.name}{i}"))
                        for i, p in enumerate(paths)])
        status, _ = check(facts, claim, timeout_ms)
        out["clauses"].append({"name": label, "status": status})
        if note_failure(out, status, f"at the exit: {label}") and first_failure:
            return out
    return out
