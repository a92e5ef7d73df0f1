"""Obligation 1 for surfaces of any length: cut-legality by inductive invariants (spec 7, 3).

The model's ``select_compactable_range`` is run symbolically over an :class:`~.unbounded.UnboundedSurface`
(symbolic length, kinds, calls and prices) and a symbolic budget. Its three walks — retention, the
pairing fold behind ``fold_cuts``, the balance walk — are summarized by their invariants
(:mod:`.unbounded`), each checked by initiation and consecution against the model's own step; what
``select_compactable_range`` does around them (its early returns, the order of the walks, the range it
builds) is run as it is. Every clause of the bounded statement is then checked at the exit, against
spec 7 stated declaratively: R is the largest position whose suffix reaches the budget (0 when none),
the cut is the nearest balanced one at or before R.
"""
from __future__ import annotations

import z3

from surfacecheck.model.region import Range

from .encoding import pairing_patch
from .induction import check, check_walks, new_report, note_failure, path_facts, summarizing
from .obligation import Clause
from .symexec import SymInt, explore, select
from .unbounded import UnboundedMeasurement, UnboundedSurface, invariants

NULL, RAISED = -1, -2
TIMEOUT_MS = 20_000
CONTROL_TIMEOUT_MS = 1_000  # a control need only fail: a check not unsat within this is a failure


def spec_retention(surface: UnboundedSurface, budget):
    """Spec 7 step 3 declaratively: R, the largest position whose suffix reaches the budget, else 0."""
    n, R, j = surface.n, z3.Int(f"{surface.name}_retention"), z3.Int(f"{surface.name}_rj")
    return R, [R >= 0, R <= z3.If(n > 0, n - 1, 0), z3.Or(R == 0, surface.suffix(R) >= budget),
               z3.ForAll([j], z3.Implies(z3.And(R < j, j < n), surface.suffix(j) < budget), patterns=[surface.P(j)])]


def clauses(surface: UnboundedSurface, R, start, end) -> list[tuple[str, object]]:
    """The bounded obligation's clauses, for any n (start/end are positions; end -1 = null, -2 = raised)."""
    n, bal = surface.n, surface.balanced
    c = z3.Int(f"{surface.name}_c")
    returned = end >= 0
    none_in = lambda low: z3.ForAll([c], z3.Implies(z3.And(low < c, c <= R), z3.Not(bal(c))))  # noqa: E731
    return [
        ("never raises on a well-formed surface", end != RAISED),
        ("range starts at position 0", z3.Implies(returned, start == 0)),
        ("non-empty and keeps at least one node", z3.Implies(returned, z3.And(end >= 0, end + 1 <= n - 1))),
        ("both edges balanced", z3.Implies(returned, z3.And(bal(0), bal(end + 1)))),
        ("cut at or before the retention point", z3.Implies(returned, end + 1 <= R)),
        ("no balanced cut skipped", z3.Implies(returned, none_in(end + 1))),
        ("null exactly when spec 7 says", z3.And(z3.Implies(end == NULL, none_in(0)),
                                                 z3.Implies(returned, z3.And(end + 1 >= 1, end + 1 <= R, bal(end + 1))))),
    ]


def _position(path, attribute):
    if path.error is not None:
        return RAISED
    if path.value is None:
        return NULL
    if not isinstance(path.value, Range):
        return RAISED
    value = getattr(path.value, attribute)
    return value.expr if isinstance(value, SymInt) else value


def prove(select_fn, timeout_ms: int = TIMEOUT_MS, first_failure: bool = False) -> dict:
    """The induction checks of every summarized walk, then each clause at the exit. Returns status
    (``proved`` only when every check is unsat), the clauses, the checks, the number of paths and, when
    a check fails, ``failed`` (which one). ``first_failure`` stops at the first check not proved (for
    the negative controls, which only need to fail)."""
    surface = UnboundedSurface("u")
    budget = z3.Int("u_budget")
    session = surface.session()
    measurement = UnboundedMeasurement(session)
    with summarizing(invariants(surface)), pairing_patch():
        paths = explore(lambda: select_fn(session, measurement, SymInt(budget)))
    out = new_report(paths)
    if out["failed"]:
        return out
    axioms = surface.axioms()
    check_walks(paths, axioms, timeout_ms, first_failure, out)
    if first_failure and out["failed"]:
        return out
    premises = axioms + surface.well_formed() + [budget >= 0, budget <= 10 * 1_000_000]
    start, end = z3.Int("u_start"), z3.Int("u_end")
    R, spec = spec_retention(surface, budget)
    facts = premises + spec + path_facts(paths)
    facts += [start == select(paths, lambda p: _position(p, "start"), RAISED),
              end == select(paths, lambda p: _position(p, "end"), RAISED)]
    for label, goal in clauses(surface, R, start, end):
        status, _ = check(facts, goal, timeout_ms)
        out["clauses"].append(Clause(label, status))
        if note_failure(out, status, f"at the exit: {label}") and first_failure:
            return out
    return out

