"""Lockstep: run each protocol request on the runtime under test and on the reference model, and
report the first divergence of result or state as a trace :class:`Violation`.

After every step the two runtimes are asked the read-only state queries of level ``log`` —
``surface`` (nodes and replaceGeneration, spec 2.1), ``cuts`` (the N+1 tool-pairing cuts, spec 3),
``measure`` (policy measurement, spec 4.3) and ``projection`` (the O(1) shadow-price total, spec
5.1) — and their answers must be equal. Monitors (``properties/monitors.py``) then watch the
runtime under test alone. Property names of divergences are ``lockstep-<what>``.

Spec-level refusals are compared by ``type``, ``rule`` and ``seq`` (spec "Conventions": reproduce the
class of failure); their message too when the runtime words them as dsh does (dsh itself, the embedded
runtime, the model: ``WORDED_RUNTIMES``), and a configuration refusal's with any runtime.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from surfacecheck.core.protocol import ProtocolError, Runtime, RuntimeUnavailable
from surfacecheck.runtime.written import events_as_compared
from surfacecheck.properties.stateful.answers import Answers
from surfacecheck.core.trace import Step, Violation

STATE_QUERIES = ("surface", "cuts", "measure", "projection")
OBSERVABILITY = ("projection", {"usage": True, "breakdown": True, "pressure": True})
"""The observability surfaces beside the pressure total (spec 5.2): the cumulative ``tokenUsage``, the
``contextBreakdown`` composition and the ``contextPressure`` occupancy, compared after the state queries
(``lockstep-usage``, ``lockstep-breakdown``, ``lockstep-pressure``). Without them, ``surfacecheck mutate``'s mutants
of dsh's usage fold, its breakdown unit and its occupancy unit survive the whole gate."""
OBSERVED_PARTS = (("usage", "tokenUsage", "token usage"), ("breakdown", "contextBreakdown", "context breakdown"),
                  ("pressure", "contextPressure", "context pressure"))
"""Each observed part, its projection unit (whose schema may refuse the value: ``refused``), its name in a report."""
_OBSERVABILITY_KEY = f"{OBSERVABILITY[0]}:{sorted(OBSERVABILITY[1].items())!r}"  # StepQuery's keys for the two
_USAGE_KEY = f"{OBSERVABILITY[0]}:{sorted({'usage': True}.items())!r}"

LOCKSTEP_PREFIX = "lockstep-"
RUNTIME_EXCEPTION = "runtime-exception"
IGNORED_RESULT_KEYS = frozenset({"labels", "elapsed", "time_ns"})


OPTIONAL_FIGURES = frozenset({"reads", "changed", "requests"})
"""Figures of dsh's own implementation a runtime may leave out, compared when it answers them: ``cuts``'s ``reads``,
the log reads of its balance cache (spec 3: reused without reading events, extended over the tail, rebuilt on a
replace), the summary ``requests`` an op made (spec 8.5: what the summarizer is asked), and ``projection``'s
``changed``, the last seq at which each unit's state reference changed (spec 5.2: an
unchanged state is returned by reference, so the registry's change feed fires exactly when a value changed). A
runtime in another language has no such cache or registry."""


def answered(expected: Any, observed: Any) -> Any:
    """``expected`` without the optional figures ``observed`` leaves out."""
    if isinstance(expected, dict) and isinstance(observed, dict) and any(
            key in expected and key not in observed for key in OPTIONAL_FIGURES):
        return {key: value for key, value in expected.items() if key not in OPTIONAL_FIGURES or key in observed}
    return expected


def is_lockstep_property(name: str) -> bool:
    return name.startswith(LOCKSTEP_PREFIX)


ERROR_KEYS = ("error", "failure", "cause")
MESSAGE_RULES = frozenset({"compaction-config", "pruner-config"})
"""Refusals whose message is compared with any runtime: every configuration check dsh runs (spec 9.1, the pruner's
spec 6) refuses under one rule, so only the message tells which check fired."""
WORDED_RUNTIMES = ("dsh", "embedded", "model")
"""Runtimes that word every refusal as dsh does (the model carries dsh's texts): with them every message is compared,
so a check that fires for another reason, or an error that names other figures, is a divergence. Without it,
``surfacecheck mutate``'s mutants of dsh's messages and of which of two checks fires survive the whole gate."""


def worded(runtime: Runtime) -> bool:
    """Whether ``runtime`` words its refusals as dsh does (its name, or the part before ``:``, is one of them)."""
    return str(getattr(runtime, "name", "")).split(":", 1)[0] in WORDED_RUNTIMES


def normalize(value: Any, messages: bool = False) -> Any:
    """A result as compared: error / failure objects reduced to type/rule/seq (and the message: of a configuration
    refusal, `MESSAGE_RULES`, or of every one with ``messages``), bookkeeping keys dropped."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in IGNORED_RESULT_KEYS:
                continue
            if key in ERROR_KEYS and isinstance(item, dict):
                worded_here = messages or item.get("rule") in MESSAGE_RULES
                kept = ("type", "rule", "seq", "message") if worded_here else ("type", "rule", "seq")
                out[key] = {k: item.get(k) for k in kept}
            else:
                out[key] = normalize(item, messages)
        return out
    if isinstance(value, (list, tuple)):
        return [normalize(v, messages) for v in value]
    return value


def is_error(result: Any) -> bool:
    return isinstance(result, dict) and isinstance(result.get("error"), dict)


class StepQuery:
    """``query(op, args)`` for monitors: read-only questions about the state after one step,
    answered once per step (several monitors ask the same)."""

    def __init__(self, runtime: Runtime, preset: dict[str, dict] | None = None):
        self._runtime = runtime
        self._cache: dict[str, dict] = {} if preset is None else preset  # the lockstep hands over its own dict
        self._derived: dict[Callable, Any] = {}

    def once(self, derive: Callable[["StepQuery"], Any]) -> Any:
        """``derive(self)``, worked out once per step: every monitor that keeps the same view of the state (e.g.
        the watchers' surface, cuts and prices) shares it. The answers it reads are this step's, so is it."""
        if derive not in self._derived:
            self._derived[derive] = derive(self)
        return self._derived[derive]

    def __call__(self, op: str, args: dict | None = None) -> dict:
        args = args or {}
        key = op if not args else f"{op}:{sorted(args.items())!r}"
        if key not in self._cache:
            observability = self._cache.get(_OBSERVABILITY_KEY) if key == _USAGE_KEY else None
            self._cache[key] = call_runtime(self._runtime, op, args) if observability is None else \
                {k: v for k, v in observability.items() if k not in ("breakdown", "pressure")}  # the usage part
        return self._cache[key]


def _part(answer: dict, part: str, unit: str) -> dict:
    """One observed part of a projection answer, and whether its unit's own schema refuses it (spec 5.2)."""
    return {part: answer.get(part), **({"refused": True} if unit in (answer.get("refused") or ()) else {})}


def call_runtime(runtime: Runtime, op: str, args: dict) -> dict:
    """One request; a Python exception inside an in-process runtime is reported as a result-shaped
    crash so it becomes a violation (a :class:`RuntimeUnavailable` still propagates: inconclusive)."""
    try:
        result = runtime.call(op, args)
    except RuntimeUnavailable:
        raise
    except ProtocolError as exc:  # a request the runtime's protocol layer rejects: compared like a result
        return {"protocol_error": {"type": exc.type}}
    except Exception as exc:  # an in-process runtime's own bug
        return {"__crash__": f"{type(exc).__name__}: {exc}"}
    if not isinstance(result, dict):
        return {"__crash__": f"result is not an object: {result!r}"}
    return result


class Lockstep:
    """Drive ``runtime`` (and ``reference``, unless ``None``) one protocol step at a time.

    ``run(step)`` returns the runtime's result and the first violation of this step (or ``None``);
    ``steps`` is everything run so far (a trace's body). ``queries`` counts state queries made.
    """

    def __init__(self, runtime: Runtime, reference: Runtime | None = None, *,
                 monitors: Iterable = (), state_queries: tuple[str, ...] = STATE_QUERIES, prefer: str | None = None):
        self.runtime = runtime
        self.reference = reference
        self.monitors = list(monitors)
        self.state_queries = state_queries
        self.prefer = prefer  # when a step breaks several properties, report this one (a replayed trace's)
        self.messages = worded(runtime)  # compare every refusal's message (WORDED_RUNTIMES)
        self.steps: list[Step] = []
        self.violation: Violation | None = None
        self.logged = 0  # events of the log compared so far (lockstep-log)
        self.expected: dict[str, dict] = {}  # the reference's state answers after the last step, once equal
        self._many = getattr(runtime, "call_many", None)  # a pipelining runtime's batch call
        queries = [(op, {}) for op in state_queries] + ([OBSERVABILITY] if "projection" in state_queries else [])
        self._state_requests = tuple(queries)  # read-only questions with constant arguments (see _requests)

    def run(self, step: Step) -> tuple[dict, Violation | None]:
        self.steps.append(step)
        number = len(self.steps)
        self.expected = {}
        answers = Answers(self.runtime, self._requests(step), call_runtime, self._many)
        observed = answers(0)
        violation = None
        if "__crash__" in observed:
            violation = Violation(RUNTIME_EXCEPTION, f"{step.op} raised {observed['__crash__']}", number,
                                  None, observed["__crash__"])
        preset: dict[str, dict] = {}
        if violation is None and self.reference is not None:
            expected = call_runtime(self.reference, step.op, step.args)
            if "__crash__" in expected:
                raise RuntimeError(f"reference model crashed on step {number} {step.op}: {expected['__crash__']}")
            expected = answered(expected, observed)
            violation = None if expected == observed else \
                self._compare(f"{LOCKSTEP_PREFIX}result", number, f"{step.op} result", expected, observed)
            if step.op == "reset":
                self.logged = 0
            if violation is None:
                violation, preset = self._compare_state(number, answers)
        if "__crash__" not in observed:
            query = StepQuery(self.runtime, preset)
            found = [violation] if violation is not None else []
            for monitor in self.monitors:  # every monitor sees every step (they keep state)
                try:
                    seen = monitor.observe(number, step, observed, query)
                except RuntimeUnavailable:
                    raise
                except Exception as exc:  # noqa: BLE001 - an answer of the wrong shape breaks the property
                    seen = Violation(getattr(monitor, "name", "monitor"), f"step {number}: the runtime's answers "
                                     f"cannot be read as the protocol says: {type(exc).__name__}: {exc}", number)
                if seen is not None:
                    found.append(seen)
            preferred = [v for v in found if v.property == self.prefer]
            violation = (preferred or found or [None])[0]
        if violation is not None and self.violation is None:
            self.violation = violation
        return observed, violation

    def _requests(self, step: Step) -> list[tuple[str, dict]]:
        """The step, then (in lockstep) the state queries in the order they are compared."""
        if self.reference is None:
            return [(step.op, step.args)]
        requests = [(step.op, step.args), *self._state_requests]
        if "surface" in self.state_queries:
            requests.append(("events", {"from": 0 if step.op == "reset" else self.logged}))
        return requests

    def _compare_state(self, number: int, answers: Callable[[int], dict]) -> tuple[Violation | None, dict]:
        seen: dict[str, dict] = {}
        for index, op in enumerate(self.state_queries, start=1):
            observed = answers(index)
            expected = answered(call_runtime(self.reference, op, {}), observed)
            seen[op] = observed
            if "__crash__" in observed:
                return Violation(RUNTIME_EXCEPTION, f"{op} query raised {observed['__crash__']}", number,
                                 None, observed["__crash__"]), seen
            if expected != observed:  # equal as sent: equal as compared (see _compare)
                name = op
                if op == "surface" and not is_error(expected) and not is_error(observed) \
                        and expected.get("nodes") == observed.get("nodes"):
                    name = "generation"
                violation = self._compare(f"{LOCKSTEP_PREFIX}{name}", number, f"state {op} after the step", expected,
                                          observed)
                if violation is not None:
                    return violation, seen
            self.expected[op] = expected
        index = len(self.state_queries) + 1
        if "projection" in self.state_queries:
            op, args = OBSERVABILITY
            expected, observed = call_runtime(self.reference, op, args), answers(index)
            index += 1
            if "__crash__" in observed:
                return Violation(RUNTIME_EXCEPTION, f"{op} observability query raised {observed['__crash__']}",
                                 number, None, observed["__crash__"]), seen
            seen[_OBSERVABILITY_KEY] = observed  # StepQuery's key: a monitor asking gets this answer (or its usage part)
            for part, unit, what in OBSERVED_PARTS:
                want, got = _part(expected, part, unit), _part(observed, part, unit)
                if want == got:
                    continue
                violation = self._compare(f"{LOCKSTEP_PREFIX}{part}", number, f"state {what} after the step", want, got)
                if violation is not None:
                    return violation, seen
            if "changed" in observed and expected.get("changed") != observed["changed"]:
                return self._compare(f"{LOCKSTEP_PREFIX}projection-changes", number, "the projection units' change "
                                     "feed after the step (the seq each unit's state last changed at)",
                                     {"changed": expected.get("changed")}, {"changed": observed["changed"]}), seen
        if "surface" in self.state_queries:
            return self._compare_log(number, lambda: answers(index)), seen
        return None, seen

    def _compare_log(self, number: int, observe: Callable[[], dict]) -> Violation | None:
        """The events the step wrote, as written (spec 1.1): not only their types (``appended``) but their data —
        the summary, its span and price, usage, the checkpoint text, the command records; ``surfacecheck mutate``'s
        mutants of what dsh writes into its own events are caught here."""
        expected, observed = call_runtime(self.reference, "events", {"from": self.logged}), observe()
        if "__crash__" in observed:
            return Violation(RUNTIME_EXCEPTION, f"events query raised {observed['__crash__']}", number, None,
                             observed["__crash__"])
        written = expected.get("events") or []
        self.logged += len(written)
        observed_events = observed.get("events") or []
        if written == observed_events:
            return None  # equal as written, so equal as compared (events_as_compared is a function of the answer)
        a, b = events_as_compared({"events": written}), events_as_compared({"events": observed_events})
        return _compare(f"{LOCKSTEP_PREFIX}log", number, "the events the step wrote", a, b)

    def _compare(self, prop: str, number: int, what: str, expected: dict, observed: dict) -> Violation | None:
        """:func:`_compare`, after a shortcut: two answers equal as sent are equal as compared (``normalize`` is a
        function of the answer), so the walk runs only when they differ, and then it is the same walk."""
        if expected == observed:
            return None
        return _compare(prop, number, what, expected, observed, self.messages)


def _compare(prop: str, number: int, what: str, expected: dict, observed: dict,
             messages: bool = False) -> Violation | None:
    a, b = normalize(expected, messages), normalize(observed, messages)
    if a == b:
        return None
    return Violation(prop, f"step {number}: {what} differs from the model{_first_difference(a, b)}",
                     number, expected, observed)


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            if a.get(key, _MISSING) != b.get(key, _MISSING):
                if key not in a or key not in b:
                    return f" at {path}.{key} (missing on {'runtime' if key not in b else 'model'})"
                return _first_difference(a[key], b[key], f"{path}.{key}")
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f" at {path or '.'} (length {len(a)} expected, {len(b)} observed)"
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return _first_difference(x, y, f"{path}[{i}]")
    return f" at {path or '.'}: expected {a!r}, observed {b!r}"[:300]


_MISSING = object()

MonitorFactory = Callable[[], Any]
