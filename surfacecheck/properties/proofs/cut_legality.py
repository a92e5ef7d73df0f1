"""Obligation 1, cut-legality: range selection obeys spec 7 on every surface of up to N nodes.

The model's own ``select_compactable_range`` (spec 7) is explored symbolically over a surface of n
symbolic nodes (kinds, tool-call counts, prices) and a symbolic retain budget, for n = 0..N. Each
path's result is compared with spec 7 stated declaratively: the retention point R is the largest
index whose suffix sum reaches the budget (0 when none does); the range is head-anchored, ends at
the nearest balanced cut C ≤ R (no balanced cut skipped), keeps at least one node, and is null
exactly when the surface is empty or no cut in 1..R is balanced.
"""
from __future__ import annotations

import z3

from surfacecheck.model import region
from surfacecheck.model.region import Range
from surfacecheck.model.seams import active

from .concrete import surface_steps
from .encoding import SymbolicSurface, pairing_patch
from .obligation import PROVED, REFUTED, Clause, ObligationResult, Stopwatch, check, fold_status
from .symexec import SymInt, explore, select
from surfacecheck.core.trace import Step

NAME = "cut-legality"
SECTION = "spec 7 steps 1-5, spec 3; seed §6-7"
NULL, RAISED = -1, -2


def model_select(session, measurement, retain):
    """The model's range selection in the seams active now (so a broken model is what gets proved)."""
    return active().select_compactable_range(session, measurement, retain)


def spec_facts(surface: SymbolicSurface, budget):
    """Balanced cuts and the retention point R of spec 7 step 3, declaratively."""
    return spec_terms(surface.price, surface.d, budget, surface.name)


def spec_terms(prices: list, deltas: list, budget, name: str):
    """Spec 3 balanced cuts and spec 7 step 3's retention point R (the largest index whose suffix sum
    reaches the budget, 0 when none does) for nodes with the given price and delta terms."""
    n = len(prices)
    running = [z3.Sum(deltas[:k + 1]) for k in range(n)]
    bal = [z3.BoolVal(True)] + [r == 0 for r in running]
    suffix = [z3.Sum(prices[j:]) for j in range(n)]
    R = z3.Int(f"{name}_retention")
    facts = [R >= 0, R <= max(n - 1, 0)]
    for j in range(n):
        facts.append(z3.Implies(R == j, z3.Or(j == 0, suffix[j] >= budget)))
        facts.append(z3.Implies(R < j, suffix[j] < budget))
    return bal, R, facts


def nearest_cut(bal: list, R, name: str):
    """Spec 7 step 4 declaratively: C = the largest balanced cut in 1..R, 0 when there is none."""
    C = z3.Int(f"{name}_cut")
    n = len(bal) - 1
    facts = [C >= 0, C <= R]
    for c in range(n + 1):
        facts.append(z3.Implies(C == c, bal[c]) if c else z3.BoolVal(True))
        if c:
            facts.append(z3.Implies(z3.And(C < c, c <= R), z3.Not(bal[c])))
    return C, facts


def legality_clauses(n: int, bal, R, start, end) -> list[tuple[str, object]]:
    """Spec 7's promises about a result (start/end are positions; end -1 = null, -2 = raised)."""
    def cut(c):  # bal[c] for a symbolic c
        term = z3.BoolVal(False)
        for index in range(len(bal)):
            term = z3.If(c == index, bal[index], term)
        return term

    some_cut = z3.Or([z3.And(c <= R, bal[c]) for c in range(1, n + 1)]) if n else z3.BoolVal(False)
    returned = end >= 0
    return [
        ("never raises on a well-formed surface", end != RAISED),
        ("range starts at position 0", z3.Implies(returned, start == 0)),
        ("non-empty and keeps at least one node", z3.Implies(returned, z3.And(end >= 0, end + 1 <= n - 1))),
        ("both edges balanced", z3.Implies(returned, z3.And(bal[0], cut(end + 1)))),
        ("cut at or before the retention point", z3.Implies(returned, end + 1 <= R)),
        ("no balanced cut skipped", z3.Implies(returned, z3.And([z3.Implies(z3.And(end + 1 < c, c <= R), z3.Not(bal[c]))
                                                              for c in range(1, n + 1)]))),
        ("null exactly when spec 7 says", (end == NULL) == z3.Not(some_cut)),
    ]


def _outcome(seqs):
    def index(path, field):
        if path.error is not None:
            return RAISED
        if path.value is None:
            return NULL
        return seqs.index(getattr(path.value, field)) if isinstance(path.value, Range) else RAISED
    return index


def check_length(n: int, select_fn=model_select, name: str = "s") -> tuple[list[Clause], dict | None]:
    """All clauses for surfaces of exactly n nodes; the first counterexample decoded, if any."""
    surface = SymbolicSurface(n, name)
    budget = z3.Int(f"{name}_budget")
    premises = surface.domain() + surface.well_formed() + [budget >= 0, budget <= 10 * 1_000_000]
    with pairing_patch():
        session, measurement = surface.session(), surface.measurement()
        paths = explore(lambda: select_fn(session, measurement, SymInt(budget)), premises=premises)
    index = _outcome(surface.seqs)
    start, end = z3.Int(f"{name}_start"), z3.Int(f"{name}_end")
    bal, R, facts = spec_facts(surface, budget)
    facts += premises + [start == select(paths, lambda p: index(p, "start"), RAISED),
                         end == select(paths, lambda p: index(p, "end"), RAISED)]
    clauses = legality_clauses(n, bal, R, start, end)
    status, model = check(facts, z3.And([goal for _, goal in clauses]))
    if status != REFUTED:
        return [Clause(label, status) for label, _ in clauses], None
    out, cex = [], None
    for label, goal in clauses:
        status, model = check(facts, goal)
        clause = Clause(label, status)
        if status == REFUTED and cex is None:
            cex = dict(surface.decode(model), budget=model.eval(budget, model_completion=True).as_long(),
                       observed_end=model.eval(end, model_completion=True).as_long(), clause=label, n=n)
            clause.counterexample = cex
        out.append(clause)
    return out, cex


def prove(bound: int, select_fn=model_select) -> tuple[str, list[Clause], dict | None, int]:
    """Check n = 0..bound; stops at the first refuted length. Returns (status, clauses, cex, paths)."""
    merged: dict[str, str] = {}
    for n in range(bound + 1):
        clauses, cex = check_length(n, select_fn, f"s{n}")
        for clause in clauses:
            previous = merged.get(clause.name, PROVED)
            merged[clause.name] = fold_status([previous, clause.status])
        if cex is not None:
            return REFUTED, [Clause(k, v) for k, v in merged.items()], cex, n
    return fold_status(list(merged.values())), [Clause(k, v) for k, v in merged.items()], None, bound


def trace_steps(cex: dict) -> list[Step]:
    """Protocol steps reproducing a counterexample: the surface, then ``select_range``."""
    steps, _ = surface_steps(cex["kinds"], cex["calls"], cex["prices"])
    return [Step("reset", {}, "a new empty session"), *steps,
            Step("select_range", {"retain_tokens": cex["budget"]}, f"selectCompactableRange with retain {cex['budget']}")]


# -- negative controls -----------------------------------------------------------------------------
def select_one_toward_tail(session, measurement, retain):
    """Wrong on purpose: the model's range, with its end moved one node toward the tail."""
    span = region.select_compactable_range(session, measurement, retain)
    if span is None:
        return None
    nodes = session.nodes
    return Range(span.start, nodes[min(nodes.index(span.end) + 1, len(nodes) - 1)])


def select_without_balance_walk(session, measurement, retain):
    """Wrong on purpose: spec 7 without step 4 (the cut stays at the retention point even if unbalanced)."""
    if not measurement.nodes:
        return None
    keep = region.retention_index(measurement.prices, retain)
    return None if keep == 0 else Range(session.nodes[0], session.nodes[keep - 1])


CONTROLS = (
    ("cut-one-toward-tail", "the selected end moved one node toward the tail", select_one_toward_tail),
    ("cut-without-balance-walk", "spec 7 step 4 skipped: the cut may split a tool call from its result",
     select_without_balance_walk),
)


CONTROL_BOUND = 6  # a wrong selection is refuted on tiny surfaces already


def run(bound: int):
    """Obligation 1 for any length (:mod:`.cut_legality_unbounded`), with the bounded proof up to ``bound``
    nodes as its cross-check; each negative control must fail the unbounded proof and be refuted by a
    concrete surface, replayed through its variant."""
    from . import cut_legality_unbounded as unbounded
    from .replay import attach_refutation, replayed_control
    from .induction import combine, control_status, notes as unbounded_notes
    from .unbounded import describe

    watch = Stopwatch()
    proof = unbounded.prove(model_select)
    unbounded_seconds = watch.seconds
    b_status, b_clauses, cex, reached = prove(bound)
    status = combine(proof["status"], b_status)
    clauses = proof["clauses"] or b_clauses
    result = ObligationResult(NAME, SECTION, status, "unbounded", 0.0, clauses,
                              notes=dict(unbounded_notes(proof, unbounded_seconds, describe()),
                                         cross_check={"bound": bound, "status": b_status, "lengths": f"0..{reached}"},
                                         budget="symbolic, 0..10^7",
                                         kinds="user, assistant with 0-3 tool calls, tool result"))
    if cex is not None:
        result.notes["counterexample"] = cex
        attach_refutation(result, trace_steps(cex), NAME, cex["clause"], {"obligation": NAME, "counterexample": cex})
    for name, description, fn in CONTROLS:
        control_watch = Stopwatch()
        failed = unbounded.prove(fn, unbounded.CONTROL_TIMEOUT_MS, first_failure=True)
        c_status, _, c_cex, _ = prove(CONTROL_BOUND, fn)  # a concrete surface (controls do not depend on --bound)
        steps = trace_steps(c_cex) if c_cex else []
        control = replayed_control(
            name, description, control_status(failed["status"], c_status), steps, f"model:prove-{name}",
            NAME, c_cex["clause"] if c_cex else None, {"obligation": NAME, "counterexample": c_cex},
            control_watch.seconds)
        control.unbounded = {"status": failed["status"], "failed": failed["failed"]}
        result.controls.append(control)
    result.seconds = watch.seconds
    return result
