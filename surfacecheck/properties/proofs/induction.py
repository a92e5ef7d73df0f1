"""Proofs for surfaces of any length: the model's walks summarized by inductive invariants.

The model writes each of its loops as a :class:`model.walk.Walk` (a start, a guard, a step). Here a
surface of *symbolic* length is a :class:`SymSeq` (its length a Z3 integer, its elements Z3 functions of
the position), and while :func:`summarizing` is active the model's ``walk_run`` seam is a stand-in
that does not iterate. Over a walk with a symbolic sequence it

* names the state after k steps by Z3 functions of k (``state(k)``) and the number of steps taken
  (``exit``), and runs the walk's own ``start``, ``guard`` and ``step`` symbolically on ``state(k)``:
  the transition relation comes from the model's code, path by path;
* returns ``state(exit)`` and the emitted values ``out(0..exit-1)`` to the model's caller, assuming
  the invariant the obligation names for that walk at every k in 0..exit, plus the guard's failure
  at ``exit`` (the loop's exit condition);
* records the walk (:class:`WalkRecord`) so the obligation can check the invariant inductively:
  initiation (``state(0)`` = the model's start satisfies it) and consecution (from any ``state(k)``
  satisfying it and the guard, the model's step leads to a ``state(k+1)`` satisfying it).

An invariant that is not inductive, or too weak for the property, fails one of those checks: the
proof can fail, and its counterexample names a length and the node values of the surface.
"""
from __future__ import annotations

import builtins
import contextlib
import itertools
from dataclasses import dataclass
from typing import Any, Callable

import z3

from surfacecheck.model import walk as model_walk
from surfacecheck.model.seams import active, using

from . import obligation
from .obligation import PROVED, REFUTED, UNKNOWN
from .symexec import SymBool, SymInt, assume, expr, explore

_INT, _BOOL = z3.IntSort(), z3.BoolSort()


def _sort(value) -> z3.SortRef:
    if isinstance(value, SymBool) or isinstance(value, bool):
        return _BOOL
    if isinstance(value, SymInt) or isinstance(value, int):
        return _INT
    raise TypeError(f"a walk state holds ints and bools only, not {type(value).__name__}")


def _wrap(term):
    return SymBool(term) if term.sort() == _BOOL else SymInt(term)


class Unsupported(TypeError):
    """The code under proof did something a symbolic sequence cannot do (the obligation is unknown)."""


class SymSeq:
    """A sequence of symbolic length: ``length`` a Z3 integer, element i the Z3 term ``at(i)``;
    ``position`` (optional) inverts ``at`` for ``index()`` (a surface's seqs are its positions + a base)."""

    def __init__(self, length, at: Callable[[Any], Any], name: str = "seq", position: Callable | None = None):
        self.length = expr(length)
        self.at = at
        self.name = name
        self.position = position

    def index(self, value):
        if self.position is None:
            raise Unsupported(f"{self.name}.index(): no inverse known")
        return SymInt(self.position(expr(value)))

    def __getitem__(self, index):
        if isinstance(index, slice):
            if index.step is not None or index.stop is not None:
                raise Unsupported("a symbolic sequence slices as seq[start:] only")
            start = expr(index.start or 0)
            length = z3.If(self.length - start > 0, self.length - start, 0)  # Python's seq[start:] (start >= 0)
            position = None if self.position is None else (lambda v: self.position(v) - start)
            return SymSeq(length, lambda i: self.at(i + start), f"{self.name}[start:]", position)
        return _wrap(self.at(expr(index)))

    def __radd__(self, prefix):
        """A concrete tuple followed by this sequence."""
        if not isinstance(prefix, tuple):
            return NotImplemented
        if not prefix:
            return self
        size = len(prefix)

        def at(i):
            term = self.at(i - size)
            for position in range(size - 1, -1, -1):
                term = z3.If(i == position, expr(prefix[position]), term)
            return term
        return SymSeq(self.length + size, at, f"prefix+{self.name}")

    def __add__(self, other):
        if isinstance(other, tuple) and not other:
            return self
        if not isinstance(other, SymSeq):
            return NotImplemented
        size = self.length
        return SymSeq(size + other.length, lambda i: z3.If(i < size, self.at(i), other.at(i - size)),
                      f"{self.name}+{other.name}")

    def __bool__(self) -> bool:
        return bool(SymBool(self.length > 0))

    def __eq__(self, other):  # type: ignore[override]
        if other is self:
            return SymBool(z3.BoolVal(True))
        raise Unsupported("symbolic sequences compare by identity only")

    def __ne__(self, other):  # type: ignore[override]
        return ~self.__eq__(other)

    __hash__ = object.__hash__

    def __len__(self):
        raise Unsupported("a symbolic sequence has no concrete length")

    def __iter__(self):
        raise Unsupported("a symbolic sequence cannot be iterated: its loop must be a model.walk.Walk")


def sym_len(value):
    """``len`` while proving: a :class:`SymSeq`'s symbolic length, else the builtin."""
    return SymInt(value.length) if isinstance(value, SymSeq) else _builtin_len(value)


_builtin_len = builtins.len


@dataclass
class WalkRecord:
    """One summarized walk: its state after k steps (Z3 functions of k), its exit, and the model's own
    start, guard and step turned into Z3 terms at a fresh k."""

    walk: Any
    name: str
    fields: tuple[str, ...] | None  # None: the state is one value
    functions: dict
    exit: Any
    k: Any
    start: Any  # the start state, as Z3 terms (a tuple, one per field)
    guard: Any  # at k (set from the model's guard once the record exists: the guard reads state(k))
    step: Any  # at k: state(k+1) and out(k) as the model's step sets them, on a path that does not raise
    raises: Any  # at k: the step raises
    out: Any  # the emitted values as a Z3 function of the step number (None when the walk emits nothing)
    emits: bool
    invariant: Callable
    items: Any
    args: tuple
    state_type: Any  # the NamedTuple of the model's walk state (None with ``fields`` None)

    def state(self, k):
        """The state after ``k`` steps, in the shape the model's walk uses (a NamedTuple or a value)."""
        values = [_wrap(self.functions[f](k)) for f in (self.fields or ("value",))]
        return self._shape(values)

    def terms(self, k) -> tuple:
        return tuple(self.functions[f](k) for f in (self.fields or ("value",)))

    def holds(self, k):
        """The invariant at step k (a Z3 formula), as the obligation states it."""
        return self.invariant(self, k)

    def _shape(self, values):
        return values[0] if self.fields is None else self.state_type(*values)


class Summaries:
    """While active, the ``walk_run`` seam over a :class:`SymSeq` is summarized by the invariant the
    obligation names for that walk (``invariants[walk.name]``)."""

    def __init__(self, invariants: dict[str, Callable]):
        self.invariants = invariants
        self.counter = itertools.count()

    def run(self, walk, items, *args):
        if not isinstance(items, SymSeq):
            return _real_run(walk, items, *args)
        if walk.name not in self.invariants:
            raise TypeError(f"no invariant named for the {walk.name}")
        name = f"w{next(self.counter)}"
        start = walk.start(items, *args)
        fields = getattr(start, "_fields", None)
        values = tuple(start) if fields is not None else (start,)
        functions = {f: z3.Function(f"{name}_{f}", _INT, _sort(v))
                     for f, v in zip(fields or ("value",), values)}
        k = z3.Int(f"{name}_k")
        record = WalkRecord(walk, name, fields, functions, exit=z3.Int(f"{name}_exit"), k=k,
                            start=tuple(expr(v) for v in values), guard=None, step=None, raises=None, out=None,
                            emits=False, invariant=self.invariants[walk.name], items=items, args=args,
                            state_type=type(start) if fields is not None else None)
        here = record.state(k)
        guard = explore(lambda: bool(walk.guard(here, items, *args)))
        record.guard = z3.Or([p.condition for p in guard if p.error is None and p.value] or [z3.BoolVal(False)])
        steps = explore(lambda: walk.step(here, items, *args))
        emitted = [p.value[1] for p in steps if p.error is None]
        record.emits = any(out is not None for out in emitted)
        if record.emits:
            if any(out is None for out in emitted):
                raise TypeError(f"the {walk.name} emits on some steps only")
            record.out = z3.Function(f"{name}_out", _INT, _sort(emitted[0]))
        nxt = record.terms(k + 1)
        moves = []
        for p in steps:
            if p.error is not None:
                continue
            state, out = p.value
            after = tuple(state) if fields is not None else (state,)
            same = [a == expr(v) for a, v in zip(nxt, after)]
            if record.emits:
                same.append(record.out(k) == expr(out))
            moves.append(z3.And(p.condition, *same))
        record.step = z3.Or(moves) if moves else z3.BoolVal(False)
        record.raises = z3.Or([p.condition for p in steps if p.error is not None] or [z3.BoolVal(False)])
        error = next((p.error for p in steps if p.error is not None), None)
        E = record.exit
        # initiation and consecution (checked by the obligation, induction_checks) give the invariant
        # at every step up to the exit; the path goes on with it at the exit only
        facts = [E >= 0, record.holds(E)]
        if error is not None and bool(SymBool(z3.Bool(f"{name}_raised"))):
            # the walk raised at its step number `exit`: the guard held there and that step raised
            assume(z3.And(*facts, z3.substitute(record.guard, (k, E)), z3.substitute(record.raises, (k, E))), record)
            raise error
        assume(z3.And(*facts, z3.Not(z3.substitute(record.guard, (k, E)))), record)
        out = SymSeq(E, record.out, f"{name}_out") if record.emits else ()
        return record.state(E), out


_real_run = model_walk.run  # the real loop: a walk over concrete items runs as the model runs it


@contextlib.contextmanager
def summarizing(invariants: dict[str, Callable]):
    """Summarize walks over symbolic sequences, and let ``len`` read a symbolic length (everywhere: a
    patched model may call ``len`` from any module; other values get the builtin)."""
    summaries = Summaries(invariants)
    builtins.len = sym_len
    try:
        with using(active().replace(walk_run=summaries.run)):
            yield summaries
    finally:
        builtins.len = _builtin_len


def induction_checks(record: WalkRecord) -> list[tuple[str, Any, list]]:
    """The two inductive checks of one summarized walk, as (label, goal, facts): initiation (the model's
    start state satisfies the invariant) and consecution (a state satisfying it where the guard holds
    steps, by the model's own step, to one that satisfies it again)."""
    k, sized = record.k, record.items.length >= 0  # a sequence's length is never negative
    initiation = ("initiation", record.holds(z3.IntVal(0)),
                  [sized, z3.And([a == b for a, b in zip(record.terms(0), record.start)])])
    consecution = ("consecution", record.holds(k + 1),
                   [sized, k >= 0, record.holds(k), record.guard, z3.Not(record.raises), record.step])
    return [initiation, consecution]


MBQI_ROUNDS = 10
"""Model-based quantifier instantiation rounds per check. The proofs close by E-matching on the patterns;
a check that is not unsat (a wrong variant) then mostly ends as unknown after a fixed amount of work
instead of running to its timeout. Either way a control counts only as "not proved"."""


def check(facts: list, goal, timeout_ms: int) -> tuple[str, z3.ModelRef | None]:
    """Prove ``facts ⇒ goal`` over quantified surface definitions (:func:`.obligation.check`, MBQI capped)."""
    return obligation.check(facts, goal, timeout_ms, mbqi_rounds=MBQI_ROUNDS)


def new_report(paths=()) -> dict:
    """An unbounded proof's report: ``unknown`` at once when a path did what a symbolic sequence cannot."""
    out = {"status": PROVED, "clauses": [], "checks": [], "paths": len(paths), "failed": None}
    unsupported = next((p.error for p in paths if isinstance(p.error, Unsupported)), None)
    if unsupported is not None:
        out.update(status=UNKNOWN, failed=f"not symbolic: {unsupported}")
    return out


def note_failure(out: dict, status: str, label: str) -> bool:
    """Record the first check not proved in ``out``; True when this one was not proved."""
    if status != PROVED and out["failed"] is None:
        out.update(status=UNKNOWN if status == UNKNOWN else REFUTED, failed=label)
    return status != PROVED


def path_facts(paths) -> list:
    """One of the paths is taken, and each holds only with what it assumed (its walks' exits)."""
    return [z3.Or([p.condition for p in paths])] + [z3.Implies(p.condition, z3.And(*p.facts))
                                                     for p in paths if p.facts]


def check_walks(paths, axioms: list, timeout_ms: int, first_failure: bool, out: dict) -> None:
    """Initiation and consecution of every walk the paths summarized, into ``out["checks"]``; the first
    one not proved sets ``out["status"]`` and ``out["failed"]``."""
    for path in paths:
        for record in path.records:
            for label, goal, facts in induction_checks(record):
                status, _ = check(axioms + facts, goal, timeout_ms)
                out["checks"].append({"walk": record.walk.name, "check": label, "status": status})
                if note_failure(out, status, f"{label} of the {record.walk.name}") and first_failure:
                    return


def combine(unbounded: str, bounded: str) -> str:
    """The obligation's status: proved when the unbounded proof and its bounded cross-check both are;
    refuted when a concrete surface refutes it; else unknown (the induction failed, nothing concrete found)."""
    if bounded == REFUTED:
        return REFUTED
    if unbounded == PROVED and bounded == PROVED:
        return PROVED
    return UNKNOWN


def control_status(unbounded: str, bounded: str) -> str:
    """A negative control is refuted when the unbounded proof fails on it and a concrete surface shows why."""
    if unbounded == PROVED:
        return PROVED  # the induction missed a wrong variant: the control fails
    return REFUTED if bounded == REFUTED else UNKNOWN


def notes(proof: dict, seconds: float, invariants: dict) -> dict:
    """What ``prove --json`` says of the unbounded proof: the invariants, the checks, the time."""
    walks = sorted({c["walk"] for c in proof["checks"]})
    checks = {}
    for c in proof["checks"]:
        key = f"{c['walk']}: {c['check']}"
        checks[key] = c["status"] if checks.get(key, PROVED) == PROVED else checks[key]
    return {"unbounded": {"status": proof["status"], "seconds": round(seconds, 3), "paths": proof["paths"],
                          "invariants": {walk: invariants.get(walk, "") for walk in walks},
                          "induction": checks, "failed": proof["failed"]}}

