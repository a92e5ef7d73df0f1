"""What every lockstep machine shares: the run context (runtimes, counters, the failing trace) and
the machine base that turns each rule into one protocol step run in lockstep.

One :class:`RunContext` serves a whole Hypothesis run: the runtime under test is opened once and
``reset`` at the start of each example (a ``cmd:`` child is spawned once). A violation raises
:class:`LockstepFailure`; the context keeps the steps of the *last* failing example, which is the
shrunk one because Hypothesis replays the minimal example last. A runtime that hangs or dies
raises :class:`RuntimeGone` (a ``BaseException``) which stops Hypothesis at once: inconclusive.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis.stateful import RuleBasedStateMachine

from surfacecheck.properties.monitors import lookup
from surfacecheck.core.protocol import ProtocolError, Runtime, RuntimeUnavailable
from surfacecheck.core.trace import Step, Violation
from surfacecheck.properties.stateful.lockstep import Lockstep

from .inputs import forms_of, key as input_key
from .selection import OneDrawRules


OFFSETS = (0, -1, 1)
"""Where a boundary rule puts a quantity: on its limit, one below, one above (on it first: the case a comparison
moved by one changes, and where the shrinker goes). Each rule takes them in turn
within an example, from one the state picks (a drawn offset follows Hypothesis's choice distribution, whose
small values come with the smallest examples, where a quantity seldom has room to land)."""

MEMORY_EVERY = 64
"""Steps between two looks at the resident set (``--max-memory``)."""


class LockstepFailure(AssertionError):
    """A property failed at a step; carries the :class:`Violation`."""

    def __init__(self, violation: Violation):
        super().__init__(f"{violation.property}: {violation.message}")
        self.violation = violation


class RuntimeGone(BaseException):
    """The runtime under test became unavailable (hang, exit, protocol): stop the run, inconclusive."""

    def __init__(self, cause: RuntimeUnavailable):
        super().__init__(str(cause))
        self.cause = cause


@dataclass
class RunContext:
    """One verify run of one level: the runtimes, the monitors' names, and what happened."""

    runtime: Runtime
    reference: Runtime | None
    monitors: tuple[str, ...]
    examples: int = 0
    steps: int = 0
    failure: tuple[list[Step], Violation] | None = None
    unavailable: RuntimeUnavailable | None = None
    progress: Any = None  # a tqdm bar (or None), advanced once per example
    memory: Any = None  # a surfacecheck.core.memory.MemoryLimit (or None), looked at every MEMORY_EVERY steps
    operations: dict = field(default_factory=dict)  # transition coverage: "op" / "append <event type>" -> steps
    extra: dict = field(default_factory=dict)
    record: list | None = None  # when a list: every example's steps, appended as the example ends (mutate's gate)

    @property
    def oracle(self) -> Runtime:
        """Whom the machine asks about state when building the next step (the model when in lockstep)."""
        return self.reference or self.runtime


class LockstepMachine(RuleBasedStateMachine):
    """Base machine: ``do(op, args)`` runs one step in lockstep; ``context`` is set by :func:`bind`. A step's
    violation raises from ``do`` at once, so nothing is left to check between steps (no ``@invariant``: it
    could not fail, and Hypothesis ran it after every rule)."""

    context: RunContext
    level = "log"
    rule_selection: type | None = OneDrawRules
    """How the next rule is drawn: :class:`OneDrawRules` (one draw per choice), or ``None`` for
    Hypothesis's own rule strategy."""

    def __init__(self) -> None:
        super().__init__()
        if self.rule_selection is not None:
            self._rules_strategy = self.rule_selection(self)
        ctx = self.context
        if ctx.unavailable is not None:
            raise RuntimeGone(ctx.unavailable)
        ctx.examples += 1
        if ctx.progress is not None:
            ctx.progress.update(1)
        self.lockstep = Lockstep(ctx.runtime, ctx.reference, monitors=[lookup(n).factory() for n in ctx.monitors])
        self.events: dict[int, dict] = {}  # seq -> event JSON of what this machine appended
        self.surface_size = 0  # nodes on the oracle's surface after the last step (for preconditions)
        self.counter = 0
        self.time = 1_700_000_000_000
        self.setup()

    def setup(self) -> None:
        self.do("reset", {}, "a new empty session")

    def teardown(self) -> None:
        if self.context.record is not None:
            self.context.record.append(list(self.lockstep.steps))

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.counter}"

    def do(self, op: str, args: dict, label: str = "") -> dict:
        ctx = self.context
        if ctx.memory is not None and (ctx.memory.reached or ctx.steps % MEMORY_EVERY == 0):
            ctx.memory.check()  # MemoryLimitReached (a BaseException, sticky): the run stops, never shrunk
        try:
            result, violation = self.lockstep.run(Step(op, args, label))
        except RuntimeUnavailable as exc:
            ctx.unavailable = exc
            raise RuntimeGone(exc) from None
        ctx.steps += 1
        kind = f"append {args['event'].get('type')}" if op == "append" and isinstance(args.get("event"), dict) else op
        ctx.operations[kind] = ctx.operations.get(kind, 0) + 1
        for schema, form in forms_of(op, args, result):
            name = input_key(schema, form)
            ctx.operations[name] = ctx.operations.get(name, 0) + 1
        if violation is not None:
            ctx.failure = (list(self.lockstep.steps), violation)
            raise LockstepFailure(violation)
        self.surface_size = len(self.ask("surface").get("nodes", []))
        return result

    def append(self, event: dict, label: str) -> int | None:
        """Append ``event`` (time added); its seq, or None when the session refused it."""
        self.time += 1
        event = {**event, "time": self.time}
        result = self.do("append", {"event": event}, label)
        seq = result.get("seq") if "error" not in result else None
        if seq is not None:
            self.events[seq] = event
        return seq

    def ask(self, op: str, args: dict | None = None) -> dict:
        """A read-only question to the oracle (not a trace step). In lockstep the oracle is the model, and its
        answers to the state queries after the last step are the ones the lockstep just compared (equal to the
        runtime's): those are reused instead of asked again (a state query changes nothing, spec 2.1, 3, 4.3)."""
        if not args and self.context.reference is not None and op in self.lockstep.expected:
            return self.lockstep.expected[op]
        try:
            return self.context.oracle.call(op, args or {})
        except ProtocolError:
            return {"error": {"type": "protocol"}}
        except RuntimeUnavailable as exc:
            self.context.unavailable = exc
            raise RuntimeGone(exc) from None

    def surface(self) -> list[int]:
        return list(self.ask("surface").get("nodes", []))

    def total(self) -> int | None:
        """The meter's total after the last step (spec 4.3), None when the meter refuses."""
        measure = self.ask("measure")
        return None if "error" in measure else measure.get("total")

    def landed(self, boundary: str) -> None:
        """Count a boundary case reached exactly (listed with the operations: ``boundary <name>``)."""
        key = f"boundary {boundary}"
        self.context.operations[key] = self.context.operations.get(key, 0) + 1

    def next_offset(self, boundary: str) -> int:
        """The offset this boundary lands at next (:meth:`pick` over -1/0/+1)."""
        return self.pick(boundary, OFFSETS)

    def pick(self, name: str, options: tuple):
        """The option ``name`` takes next: picked by the log's length and the meter's total, moved on by the
        earlier calls of ``name`` in the example (a function of the state, so of the choices that built it; drawn
        options follow Hypothesis's choice distribution, which favours the first, and miss cases at a fixed seed)."""
        calls = self.__dict__.setdefault("boundary_calls", {})
        calls[name] = calls.get(name, -1) + 1
        return options[(len(self.events) + (self.total() or 0) + calls[name]) % len(options)]

    def run_from(self, name: str, items: tuple, length: int) -> tuple:
        """``length`` consecutive items of ``items`` (wrapping round), from a start :meth:`pick` chooses."""
        start = self.pick(name, tuple(range(len(items))))
        return (items * 2)[start:start + length]

    def prices(self) -> list[int] | None:
        measure = self.ask("measure")
        return None if "error" in measure else list(measure["prices"])


def bind(machine: type[LockstepMachine], context: RunContext) -> type[LockstepMachine]:
    """A subclass of ``machine`` bound to ``context`` (Hypothesis instantiates machines with no arguments)."""
    return type(machine.__name__, (machine,), {"context": context})
