"""Obligation 2 for surfaces of any length: pairing-ids by induction over the cuts (spec 3).

The model's ``fold_cuts`` is run over an :class:`~.unbounded.UnboundedSurface` with its pairing fold
summarized by the fold's invariant: cut c is count-balanced exactly when ``D(c) = 0``, where ``D`` sums
the model's own ``event_delta`` per node kind. Ids: the call in slot s of node i has id ``i·M + s``
(M = ``MAX_CALLS``; under unique call ids only id equality matters), a result answers ``rid(j)``.
Before cut c, ``called(c, x)`` and ``answered(c, x)`` are defined by their recurrences (a node adds its
call slots; a result adds its id); ``open = called ∧ ¬answered``; id-closed(c) ⇔ no id is open.

The premise, per result j: it answers a call made before it and not answered yet (unique result ids).
The count equals the number of open ids, shown with a ghost bijection between the open ids and the
ranks ``0..D(c)-1`` (``seat(c, r)`` and ``rank(c, x)``: a call's slots take the next ranks, an answered
id gives its rank to the last seated one). The invariant I(c) — the bijection, and no id at or past
node c called — is checked by initiation and consecution; then at any cut c, I(c) and the fold give
count-balanced ⇔ id-closed. Dropping the premise breaks consecution (the negative control).
"""
from __future__ import annotations

import z3

from surfacecheck.model import pairing

from .concrete import ASSISTANT, MAX_CALLS, RESULT
from .encoding import pairing_patch
from .induction import check, check_walks, new_report, note_failure, path_facts, summarizing
from .symexec import explore
from .unbounded import UnboundedSurface, invariants

TIMEOUT_MS = 20_000
CONTROL_TIMEOUT_MS = 1_000  # a control need only fail: a check not unsat within this is a failure
M = MAX_CALLS
INVARIANT = ("D(c) ≥ 0 ∧ ∀r < D(c): open(c, seat(c, r)) ∧ rank(c, seat(c, r)) = r ∧ ∀x: open(c, x) ⇒ 0 ≤ rank(c, x) < D(c) ∧ "
             "seat(c, rank(c, x)) = x ∧ ∀x: called(c, x) ⇒ x < c·M ∧ ∀x: answered(c, x) ⇒ called(c, x)")


class Ids:
    """The ids of an unbounded surface: answered id per result, the recurrences, the ghost bijection."""

    def __init__(self, surface: UnboundedSurface):
        s, I2B, I2I = surface, (z3.IntSort(), z3.IntSort(), z3.BoolSort()), (z3.IntSort(), z3.IntSort(), z3.IntSort())
        self.s = s
        self.rid = z3.Function("p_rid", z3.IntSort(), z3.IntSort())
        self.called = z3.Function("p_called", *I2B)
        self.answered = z3.Function("p_answered", *I2B)
        self.seat = z3.Function("p_seat", *I2I)
        self.rank = z3.Function("p_rank", *I2I)

    def result(self, c):
        return self.s.kind(c) == RESULT

    def new_slot(self, c, x):
        """x is one of node c's call slots."""
        return z3.And(self.s.kind(c) == ASSISTANT, x >= c * M, x < c * M + self.s.calls(c))

    def open(self, c, x):
        return z3.And(self.called(c, x), z3.Not(self.answered(c, x)))

    def id_closed(self, c):
        x = z3.Int("p_closed_x")
        return z3.ForAll([x], z3.Not(self.open(c, x)), patterns=[self.called(c, x)])

    def definitions(self) -> list:
        """``called``/``answered`` by their recurrences, and the ghost bijection's updates per node kind."""
        s, c, x, r = self.s, z3.Int("p_dc"), z3.Int("p_dx"), z3.Int("p_dr")
        D = s.D
        last = self.seat(c, D(c) - 1)
        answered_rank = self.rank(c, self.rid(c))
        seat_next = z3.If(s.kind(c) == ASSISTANT,
                          z3.If(z3.And(r >= D(c), r < D(c) + s.calls(c)), c * M + r - D(c), self.seat(c, r)),
                          z3.If(self.result(c), z3.If(r == answered_rank, last, self.seat(c, r)), self.seat(c, r)))
        rank_next = z3.If(self.new_slot(c, x), D(c) + x - c * M,
                          z3.If(z3.And(self.result(c), x == last), answered_rank, self.rank(c, x)))
        step = lambda body, pattern: z3.ForAll([c, x], body, patterns=[pattern])  # noqa: E731
        return [
            z3.ForAll([x], z3.And(z3.Not(self.called(0, x)), z3.Not(self.answered(0, x))),
                      patterns=[self.called(0, x)]),
            step(self.called(c + 1, x) == z3.Or(self.called(c, x), self.new_slot(c, x)), self.called(c + 1, x)),
            step(self.answered(c + 1, x) == z3.Or(self.answered(c, x), z3.And(self.result(c), self.rid(c) == x)),
                 self.answered(c + 1, x)),
            z3.ForAll([c, r], self.seat(c + 1, r) == seat_next, patterns=[self.seat(c + 1, r)]),
            step(self.rank(c + 1, x) == rank_next, self.rank(c + 1, x)),
        ]

    def premise(self, c) -> object:
        """At node c: a result answers a call made before it that no earlier result answered."""
        return z3.Implies(self.result(c), z3.And(self.called(c, self.rid(c)), z3.Not(self.answered(c, self.rid(c)))))

    def holds(self, c):
        """I(c), the bijection between the open ids and the ranks below the count D(c)."""
        x, r, D = z3.Int("p_ix"), z3.Int("p_ir"), self.s.D
        seated = self.seat(c, r)
        return z3.And(
            D(c) >= 0,
            z3.ForAll([r], z3.Implies(z3.And(r >= 0, r < D(c)), z3.And(self.open(c, seated), self.rank(c, seated) == r)),
                      patterns=[self.seat(c, r)]),
            z3.ForAll([x], z3.Implies(self.open(c, x), z3.And(self.rank(c, x) >= 0, self.rank(c, x) < D(c),
                                                              self.seat(c, self.rank(c, x)) == x)),
                      patterns=[self.called(c, x), self.answered(c, x)]),
            z3.ForAll([x], z3.Implies(self.called(c, x), x < c * M), patterns=[self.called(c, x)]),
            z3.ForAll([x], z3.Implies(self.answered(c, x), self.called(c, x)), patterns=[self.answered(c, x)]))


def prove(with_premise: bool = True, timeout_ms: int = TIMEOUT_MS, first_failure: bool = False) -> dict:
    """The fold's induction checks, the ghost invariant's initiation and consecution, then at any cut
    count-balanced ⇔ id-closed."""
    surface = UnboundedSurface("p")
    ids = Ids(surface)
    session = surface.session()
    with summarizing(invariants(surface)), pairing_patch():
        paths = explore(lambda: pairing.fold_cuts(session))
    out = new_report(paths)
    if out["failed"]:
        return out
    axioms = surface.axioms() + ids.definitions()
    check_walks(paths, axioms, timeout_ms, first_failure, out)
    if first_failure and out["failed"]:
        return out
    c = z3.Int("p_cut")
    premise = [ids.premise(c)] if with_premise else []
    steps = [("initiation of the id bijection", [], ids.holds(z3.IntVal(0))),
             ("consecution of the id bijection", [c >= 0, c < surface.n, ids.holds(c)] + premise, ids.holds(c + 1))]
    for label, facts, goal in steps:
        status, _ = check(axioms + facts, goal, timeout_ms)
        out["checks"].append({"walk": "id bijection (ghost)", "check": label.split(" of")[0], "status": status})
        if note_failure(out, status, label) and first_failure:
            return out
    facts = axioms + surface.well_formed() + path_facts(paths)
    facts += [c >= 0, c <= surface.n, ids.holds(c)]  # I(c) at the cut in question, by the induction above
    claim = z3.And([z3.Not(p.condition) if p.error is not None else
                    z3.Implies(p.condition, p.value.balanced[c].expr == ids.id_closed(c)) for p in paths])
    status, _ = check(facts, claim, timeout_ms)
    label = "count-balanced cut == id-closed cut, for every cut"
    out["clauses"].append({"name": label, "status": status})
    note_failure(out, status, f"at the exit: {label}")
    return out


def describe() -> dict:
    return {"id bijection (ghost)": INVARIANT}
