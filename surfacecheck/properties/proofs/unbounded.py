"""A surface of any length, and the invariants of the model's three walks over it (spec 3, 7).

:class:`UnboundedSurface` has a symbolic length ``n`` and, per position, a kind, a tool-call count, a
price and a pairing delta (Z3 functions), with the prefix price ``P`` and prefix open-call count ``D``
defined by their recurrences (``P(i+1) = P(i) + price(i)``, the same for ``D``). The node deltas and
price floors are read from the model (``event_delta``, ``node_price``) as for bounded surfaces.

The invariants are what :mod:`.induction` checks by initiation and consecution against the model's
own start, guard and step of each walk (``model.region.RETENTION_WALK``, ``BALANCE_WALK``,
``model.pairing.PAIRING_FOLD``), and assumes at each walk's exit:

* retention walk (spec 7 step 3): ``keep = index + 1``, ``accumulated = S(keep)`` (the suffix price from
  ``keep``), ``reached ⇔ keep < n ∧ S(keep) ≥ budget``, and no node after ``keep`` had a suffix
  reaching the budget;
* balance walk (spec 7 step 4): ``keep = keep₀ − k``, never below 0, and every cut in ``(keep, keep₀]``
  is unbalanced;
* pairing fold (spec 3): after k nodes from position ``first``, ``running = r₀ + D(first+k) − D(first)``,
  and the cut written for each folded node is balanced exactly when that count is zero.
"""
from __future__ import annotations

import z3

from surfacecheck.model import pairing, region

from .encoding import Node
from .concrete import ASSISTANT, MAX_CALLS, MAX_PRICE, RESULT, USER, delta_table, min_price
from .induction import SymSeq, WalkRecord
from .symexec import SymInt, expr


class UnboundedSession:
    """Enough of :class:`model.session.Session` for the pairing and range functions, any length."""

    def __init__(self, surface: "UnboundedSurface", length, generation: int = 0):
        self.surface = surface
        self.nodes = SymSeq(length, lambda i: i + surface.base, f"{surface.name}_nodes", lambda seq: seq - surface.base)
        self.generation = generation

    def event_at(self, seq):
        seq = seq if isinstance(seq, SymInt) else SymInt(seq)
        return Node(seq, SymInt(self.surface.delta(seq.expr - self.surface.base)))


class UnboundedMeasurement:
    """``Measurement.nodes`` / ``.seqs`` / ``.prices`` over the session's own node sequence (spec 4.3)."""

    def __init__(self, session: UnboundedSession):
        surface = session.surface
        self.seqs = session.nodes
        self.nodes = SymSeq(session.nodes.length, lambda i: i + surface.base, f"{surface.name}_priced")
        self.prices = SymSeq(session.nodes.length, surface.price, f"{surface.name}_prices")


class UnboundedSurface:
    """n nodes for a symbolic n ≥ 0; position i is seq ``base + i``."""

    def __init__(self, name: str = "u", base: int = 0):
        self.name, self.base = name, base
        self.n = z3.Int(f"{name}_n")
        fn = lambda label: z3.Function(f"{name}_{label}", z3.IntSort(), z3.IntSort())  # noqa: E731
        self.kind, self.calls, self.price, self.delta = fn("kind"), fn("calls"), fn("price"), fn("delta")
        self.P, self.D = fn("prefix_price"), fn("prefix_open")
        self.deltas = delta_table()  # read from the model now, before any stand-in is patched in
        self.floors = {key: min_price(*key) for key in self.deltas}

    def session(self, length=None, generation: int = 0) -> UnboundedSession:
        return UnboundedSession(self, self.n if length is None else length, generation)

    def suffix(self, j, length=None):
        """The price of positions j..length-1 (spec 7 step 3's suffix sum)."""
        return self.P(self.n if length is None else length) - self.P(j)

    def balanced(self, c):
        """Spec 3, from scratch: the cut before position c is balanced when no call is open there."""
        return self.D(c) == 0

    def domain(self, i):
        """What a real node at position i can be: a kind, its calls, a price at or above its floor, its delta."""
        facts = [z3.Or(self.kind(i) == USER, self.kind(i) == ASSISTANT, self.kind(i) == RESULT),
                 z3.If(self.kind(i) == ASSISTANT, z3.And(self.calls(i) >= 0, self.calls(i) <= MAX_CALLS),
                       self.calls(i) == 0),
                 self.price(i) <= MAX_PRICE]
        for (kind, calls), floor in self.floors.items():
            this = z3.And(self.kind(i) == kind, self.calls(i) == calls)
            facts.append(z3.Implies(this, z3.And(self.delta(i) == self.deltas[(kind, calls)], self.price(i) >= floor)))
        return z3.And(facts)

    def axioms(self, length=None) -> list:
        """The surface's definitions: every node real, and the prefix sums by their recurrence."""
        n = self.n if length is None else length
        i = z3.Int(f"{self.name}_i")
        return [n >= 0, self.P(0) == 0, self.D(0) == 0,
                z3.ForAll([i], z3.Implies(z3.And(i >= 0, i < n), self.domain(i)),
                          patterns=[self.kind(i), self.price(i), self.delta(i)]),
                z3.ForAll([i], self.P(i + 1) == self.P(i) + self.price(i), patterns=[self.price(i)]),
                z3.ForAll([i], self.D(i + 1) == self.D(i) + self.delta(i), patterns=[self.delta(i)])]

    def well_formed(self, length=None) -> list:
        """No tool result without an open call before it (spec 3: else a corrupt surface)."""
        n = self.n if length is None else length
        i = z3.Int(f"{self.name}_wf")
        return [z3.ForAll([i], z3.Implies(z3.And(i >= 0, i <= n), self.D(i) >= 0), patterns=[self.D(i)])]

    def decode(self, model: z3.ModelRef, length: int) -> dict:
        value = lambda term: model.eval(term, model_completion=True).as_long()  # noqa: E731
        return {"kinds": [value(self.kind(i)) for i in range(length)],
                "calls": [value(self.calls(i)) for i in range(length)],
                "prices": [value(self.price(i)) for i in range(length)]}


# -- the walks' invariants --------------------------------------------------------------------------
def retention_invariant(surface: UnboundedSurface):
    """Spec 7 step 3 after k nodes priced head-ward (see the module docstring)."""
    def holds(record: WalkRecord, k):
        index, accumulated, keep, reached = record.terms(k)
        n, budget = record.items.length, expr(record.args[0])
        j = z3.Int(f"{record.name}_j")
        return z3.And(keep == index + 1, index >= -1, keep <= n, accumulated == surface.suffix(keep, n),
                      reached == z3.And(keep < n, accumulated >= budget),
                      z3.ForAll([j], z3.Implies(z3.And(keep < j, j < n), surface.suffix(j, n) < budget),
                                patterns=[surface.P(j)]))
    return holds


def balance_invariant(record: WalkRecord, k):
    """Spec 7 step 4 after k moves head-ward: every cut passed over is unbalanced."""
    keep, start = record.terms(k)[0], expr(record.args[0])
    c = z3.Int(f"{record.name}_c")
    return z3.And(keep == start - k, z3.Implies(start >= 0, keep >= 0),
                  z3.ForAll([c], z3.Implies(z3.And(keep < c, c <= start), z3.Not(record.items.at(c)))))


def fold_invariant(surface: UnboundedSurface):
    """Spec 3 after k nodes folded from the first of ``items`` (a run of consecutive surface positions)."""
    def holds(record: WalkRecord, k):
        position, running = record.terms(k)
        items, open_calls = record.items, expr(record.args[1])
        first = items.at(z3.IntVal(0)) - surface.base
        c = z3.Int(f"{record.name}_c")
        count = lambda m: open_calls + surface.D(first + m) - surface.D(first)  # noqa: E731
        return z3.And(position == k, k >= 0, k <= items.length, running == count(k),
                      z3.ForAll([c], z3.Implies(z3.And(c >= 0, c < k), record.out(c) == (count(c + 1) == 0)),
                                patterns=[record.out(c)]))
    return holds


def invariants(surface: UnboundedSurface) -> dict:
    """Each walk's invariant, by the model's walk name."""
    return {region.RETENTION_WALK.name: retention_invariant(surface), region.BALANCE_WALK.name: balance_invariant,
            pairing.PAIRING_FOLD.name: fold_invariant(surface)}


def describe() -> dict:
    """The invariants used, in words (for ``prove --json``)."""
    return {
        region.RETENTION_WALK.name: "keep = index + 1 ∧ accumulated = suffix(keep) ∧ (reached ⇔ keep < n ∧ "
                                    "suffix(keep) ≥ budget) ∧ ∀j ∈ (keep, n): suffix(j) < budget",
        region.BALANCE_WALK.name: "keep = keep₀ − k ∧ keep ≥ 0 ∧ ∀c ∈ (keep, keep₀]: ¬balanced(c)",
        pairing.PAIRING_FOLD.name: "position = k ∧ running = open₀ + D(first+k) − D(first) ∧ ∀c < k: "
                                   "cut c+1 written balanced ⇔ open₀ + D(first+c+1) − D(first) = 0",
    }
