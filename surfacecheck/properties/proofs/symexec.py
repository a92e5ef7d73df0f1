"""Symbolic execution of the model's own Python functions with Z3 values (how proofs stay tied to the model).

Instead of transcribing a rule into Z3 by hand, an obligation runs the executable model's function
(``model.region.retention_index``, ``model.pairing.extend_cuts``, ``model.projection.fold_claim``, ...)
with :class:`SymInt` arguments. Every comparison yields a :class:`SymBool`; when the model branches on
one (``if``, ``while``, ``and``/``not``), :func:`explore` forks: it re-runs the function once per
branch choice (depth first), so the result is the exact set of paths ``(condition, outcome)`` of the
code as it is *now* — patch the model and the encoding changes with it.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable

import z3

from surfacecheck.model.seams import active, using

_ACTIVE: list["_Run"] = []


class PathLimit(RuntimeError):
    """More paths than the caller allowed (the obligation reports ``unknown``)."""


def _raw(value):
    return value.expr if isinstance(value, (SymInt, SymBool)) else value


class SymBool:
    """A Z3 boolean the model may branch on: ``bool()`` asks the active run which branch to take."""

    __slots__ = ("expr",)

    def __init__(self, expr):
        self.expr = expr

    def __bool__(self) -> bool:
        if not _ACTIVE:
            raise TypeError("symbolic condition used outside explore()")
        return _ACTIVE[-1].decide(self.expr)

    def __invert__(self):
        return SymBool(z3.Not(self.expr))

    def __and__(self, other):
        return SymBool(z3.And(self.expr, _raw(other)))

    def __or__(self, other):
        return SymBool(z3.Or(self.expr, _raw(other)))

    def __eq__(self, other):  # type: ignore[override]
        return SymBool(self.expr == _raw(other))

    def __ne__(self, other):  # type: ignore[override]
        return SymBool(self.expr != _raw(other))

    __hash__ = object.__hash__


_TERMS: dict[tuple, Any] = {}
"""Hash-consed results of symbolic operations: re-running the model along another path rebuilds the same
terms, so each is built once (the key holds AST ids; the value keeps the operands alive so ids stay unique)."""


def _key(value):
    return ("i", value) if isinstance(value, int) else value.get_id()


def _op(name: str, a, b, build):
    raw_b = _raw(b)
    key = (name, a.get_id(), _key(raw_b))
    hit = _TERMS.get(key)
    if hit is None:
        hit = (build(a, raw_b), a, raw_b)
        if len(_TERMS) > 500_000:
            _TERMS.clear()
        _TERMS[key] = hit
    return hit[0]


class SymInt:
    """A Z3 integer that flows through the model's arithmetic; comparisons give :class:`SymBool`."""

    __slots__ = ("expr",)

    def __init__(self, expr):
        self.expr = expr if not isinstance(expr, int) else z3.IntVal(expr)

    def __add__(self, other):
        return SymInt(_op("+", self.expr, other, lambda a, b: a + b))

    __radd__ = __add__

    def __sub__(self, other):
        return SymInt(_op("-", self.expr, other, lambda a, b: a - b))

    def __rsub__(self, other):
        return SymInt(_op("r-", self.expr, other, lambda a, b: b - a))

    def __neg__(self):
        return SymInt(-self.expr)

    def __mul__(self, other):
        return SymInt(_op("*", self.expr, other, lambda a, b: a * b))

    __rmul__ = __mul__

    def __floordiv__(self, other):  # floor division by a positive constant (Z3 integer division)
        return SymInt(_op("//", self.expr, other, lambda a, b: a / b))

    def __lt__(self, other):
        return SymBool(_op("<", self.expr, other, lambda a, b: a < b))

    def __le__(self, other):
        return SymBool(_op("<=", self.expr, other, lambda a, b: a <= b))

    def __gt__(self, other):
        return SymBool(_op(">", self.expr, other, lambda a, b: a > b))

    def __ge__(self, other):
        return SymBool(_op(">=", self.expr, other, lambda a, b: a >= b))

    def __eq__(self, other):  # type: ignore[override]
        return SymBool(_op("==", self.expr, other, lambda a, b: a == b))

    def __ne__(self, other):  # type: ignore[override]
        return SymBool(_op("!=", self.expr, other, lambda a, b: a != b))

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"SymInt({self.expr})"


def reset_terms() -> None:
    """Forget the hash-consed terms (between obligations: they keep Z3 terms alive)."""
    _TERMS.clear()


def expr(value) -> Any:
    """The Z3 term of a symbolic or concrete value (ints become ``IntVal``, bools ``BoolVal``)."""
    if isinstance(value, (SymInt, SymBool)):
        return value.expr
    if isinstance(value, bool):
        return z3.BoolVal(value)
    if isinstance(value, int):
        return z3.IntVal(value)
    return value


class _Premises:
    """Facts every explored input satisfies; a branch they rule out is never taken (memoized per term)."""

    def __init__(self, premises: list):
        self.solver = z3.Solver() if premises else None  # decides what the premises force, per new term
        if self.solver is not None:
            self.solver.add(*premises)
        self.memo: dict[int, tuple] = {}  # AST id -> (the term, kept alive so its id is not reused; answer)

    def forced(self, cond) -> bool | None:
        """True/False when the premises force ``cond``; None when both branches are possible."""
        key = cond.get_id()
        hit = self.memo.get(key)
        if hit is None:
            test = z3.simplify(cond) if self.solver is None else cond  # no premises: x != x is settled
            if z3.is_true(test) or z3.is_false(test):
                answer = z3.is_true(test)
            elif self.solver is None:
                answer = None
            else:
                can_true = self.solver.check(cond) != z3.unsat
                can_false = self.solver.check(z3.Not(cond)) != z3.unsat
                answer = None if can_true and can_false else can_true
            hit = self.memo[key] = (cond, answer)
        return hit[1]


class _Run:
    def __init__(self, prefix: list[bool], premises: _Premises):
        self.prefix = prefix
        self.premises = premises
        self.decisions: list[bool] = []
        self.conditions: list = []
        self.facts: list = []
        self.records: list = []

    def decide(self, cond) -> bool:
        forced = self.premises.forced(cond)
        if forced is not None:
            return forced
        position = len(self.decisions)
        choice = self.prefix[position] if position < len(self.prefix) else True
        self.decisions.append(choice)
        self.conditions.append(cond if choice else z3.Not(cond))
        return choice


@dataclass(frozen=True)
class Path:
    """One path through the function: its condition, and what it returned or raised."""

    condition: Any
    value: Any = None
    error: BaseException | None = None
    facts: tuple = ()  # what the path assumed about values it met (a summarized loop's exit, see assume())
    records: tuple = ()  # what the path noted for the caller (the loops it summarized)


def explore(fn: Callable[[], Any], *, premises: list | None = None, limit: int = 20000) -> list[Path]:
    """Every path of ``fn()`` (depth first) over inputs satisfying ``premises`` (a branch the premises
    rule out is not taken); raises :class:`PathLimit` beyond ``limit`` paths."""
    facts = _Premises(list(premises or []))
    paths: list[Path] = []
    stack: list[list[bool]] = [[]]
    while stack:
        prefix = stack.pop()
        run = _Run(prefix, facts)
        _ACTIVE.append(run)
        try:
            value, error = fn(), None
        except PathLimit:
            raise
        except Exception as exc:  # the model raising is an outcome of that path
            value, error = None, exc
        finally:
            _ACTIVE.pop()
        for position in range(len(run.decisions) - 1, len(prefix) - 1, -1):
            stack.append(run.decisions[:position] + [False])
        paths.append(Path(z3.And(run.conditions) if run.conditions else z3.BoolVal(True), value, error,
                          tuple(run.facts), tuple(run.records)))
        if len(paths) > limit:
            raise PathLimit(f"more than {limit} paths")
    return paths


def assume(fact, record: Any = None) -> None:
    """Inside :func:`explore`: the current path holds only where ``fact`` does (a loop summarized by its
    invariant, :mod:`.induction`); ``record`` is kept on the path for the caller."""
    if not _ACTIVE:
        raise TypeError("assume() used outside explore()")
    _ACTIVE[-1].facts.append(fact)
    if record is not None:
        _ACTIVE[-1].records.append(record)


def select(paths: list[Path], project: Callable[[Path], Any], default) -> Any:
    """One Z3 term equal to ``project(path)`` on the path whose condition holds (an ``If`` chain)."""
    term = expr(default)
    for path in reversed(paths):
        term = z3.If(path.condition, expr(project(path)), term)
    return term


@contextlib.contextmanager
def standing_in(**stand_ins):
    """The model runs with these seams replaced (the symbolic stand-ins for event reads and prices), on top
    of the seams active on entry (:mod:`surfacecheck.model.seams`)."""
    with using(active().replace(**stand_ins)) as seams:
        yield seams
