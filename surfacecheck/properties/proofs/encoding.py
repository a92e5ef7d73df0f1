"""Symbolic surfaces: n nodes with symbolic kinds, tool-call counts and prices (spec 2, 3, 4).

A :class:`SymbolicSurface` of length n has, per node, a kind (user message, assistant message,
tool result), a tool-call count (assistant only, up to ``MAX_CALLS``) and a price at or above the
floor the model gives that kind. Its pairing deltas come from ``model.pairing.event_delta`` (via
:func:`~properties.proofs.concrete.delta_table`), and :class:`FakeSession` lets the model's own
functions (``fold_cuts``, ``select_compactable_range``, ``refresh_cuts``) run over it symbolically.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import z3


from .concrete import ASSISTANT, MAX_CALLS, MAX_PRICE, RESULT, USER, delta_table, min_price
from .symexec import SymInt, standing_in


@dataclass(frozen=True)
class Node:
    """A stand-in event: ``seq`` (concrete, or symbolic on an unbounded surface) and its symbolic
    pairing ``delta``."""

    seq: int | SymInt
    delta: SymInt
    type: str = "symbolic"


class FakeSession:
    """Enough of :class:`model.session.Session` for the pairing and range functions (spec 3, 7)."""

    def __init__(self, nodes: tuple[Node, ...], generation: int = 0):
        self._by_seq = {node.seq: node for node in nodes}
        self.nodes = tuple(node.seq for node in nodes)
        self.generation = generation

    def event_at(self, seq: int):
        return self._by_seq.get(seq)


class FakeMeasurement:
    """``Measurement.nodes`` / ``.seqs`` with symbolic prices (spec 4.3)."""

    def __init__(self, seqs: tuple[int, ...], prices):
        self.nodes = tuple(zip(seqs, prices))
        self.seqs = tuple(seqs)
        self.prices = tuple(prices)


def symbolic_delta(node: Node) -> SymInt:
    """The stand-in for ``model.pairing.event_delta`` while exploring."""
    return node.delta


def pairing_patch():
    """Run the real pairing fold with each node's delta read from the encoding."""
    return standing_in(event_delta=symbolic_delta)


@dataclass
class SymbolicSurface:
    """n nodes (n concrete) with symbolic kind, calls and price; ``name`` keeps variables apart."""

    n: int
    name: str = "s"
    seq_base: int = 0
    kind: list = field(init=False)
    calls: list = field(init=False)
    price: list = field(init=False)

    def __post_init__(self):
        self.kind = [z3.Int(f"{self.name}_kind_{i}") for i in range(self.n)]
        self.calls = [z3.Int(f"{self.name}_calls_{i}") for i in range(self.n)]
        self.price = [z3.Int(f"{self.name}_price_{i}") for i in range(self.n)]
        self.deltas = delta_table()  # read from the model now, before any symbolic stand-in is patched in
        self.floors = {key: min_price(*key) for key in self.deltas}
        self.d = [z3.Int(f"{self.name}_delta_{i}") for i in range(self.n)]

    @property
    def seqs(self) -> tuple[int, ...]:
        return tuple(self.seq_base + i for i in range(self.n))

    def delta(self, i: int):
        """Spec 3 delta of node i: a variable tied by :meth:`domain` to the model's ``event_delta`` of its kind."""
        return self.d[i]

    def domain(self) -> list:
        """Kinds, call counts and prices a real log can have (price floors from the model)."""
        facts = []
        for i in range(self.n):
            facts += [z3.Or(self.kind[i] == USER, self.kind[i] == ASSISTANT, self.kind[i] == RESULT),
                      z3.If(self.kind[i] == ASSISTANT, z3.And(self.calls[i] >= 0, self.calls[i] <= MAX_CALLS),
                            self.calls[i] == 0),
                      self.price[i] <= MAX_PRICE]
            for (kind, calls), floor in self.floors.items():
                this = z3.And(self.kind[i] == kind, self.calls[i] == calls)
                facts.append(z3.Implies(this, z3.And(self.d[i] == self.deltas[(kind, calls)], self.price[i] >= floor)))
        return facts

    def running(self) -> list:
        """Running open-call count after each node (spec 3)."""
        out, acc = [], z3.IntVal(0)
        for i in range(self.n):
            acc = acc + self.delta(i)
            out.append(acc)
        return out

    def well_formed(self) -> list:
        """No tool result without an open call before it (else the model raises: corrupt surface)."""
        return [r >= 0 for r in self.running()]

    def nodes(self) -> tuple[Node, ...]:
        return tuple(Node(seq, SymInt(self.delta(i))) for i, seq in enumerate(self.seqs))

    def session(self, generation: int = 0) -> FakeSession:
        return FakeSession(self.nodes(), generation)

    def measurement(self) -> FakeMeasurement:
        return FakeMeasurement(self.seqs, [SymInt(p) for p in self.price])

    def decode(self, model: z3.ModelRef) -> dict:
        """The concrete surface a Z3 model picks: kinds, calls, prices."""
        value = lambda term: model.eval(term, model_completion=True).as_long()  # noqa: E731
        return {"kinds": [value(k) for k in self.kind], "calls": [value(c) for c in self.calls],
                "prices": [value(p) for p in self.price]}
