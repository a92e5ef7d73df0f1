"""``replay_trace(trace, runtime_spec) -> ReplayOutcome``: run a trace's steps again and re-check
its property, for traces from ``verify``, ``prove`` and ``explore`` alike.

The steps run against the runtime in lockstep with the model (unless the runtime *is* the
model); the monitors fed are the standard invariants plus the one the trace's ``property`` names
(when it is a registered monitor). The outcome says whether a violation remains and whether it is
the recorded one (same property): exit 1 while it persists, 0 once fixed, 3 inconclusive.
"""
from __future__ import annotations

from dataclasses import dataclass

from surfacecheck.properties.monitors import lookup
from surfacecheck.core.protocol import Runtime, RuntimeUnavailable
from surfacecheck.runtime.select import add_variant_provider, open_runtime
from surfacecheck.core.trace import Trace, Violation
from surfacecheck.properties.stateful.lockstep import Lockstep, is_lockstep_property
from surfacecheck.properties.trace_check import ENGINE_PROPERTIES

SEEDED_PROVIDER = "surfacecheck.verify.seeded"


def ensure_variants() -> None:
    """Make the seeded-bug variants (``embedded:<bug>``, from the checkout's tests/seeded_bugs) openable."""
    add_variant_provider(SEEDED_PROVIDER)


@dataclass
class ReplayOutcome:
    """``violation`` found on replay (or None); ``same`` when it is the trace's recorded property;
    ``unavailable`` when the runtime failed (inconclusive); ``steps_run`` of ``steps_total``."""

    runtime: str
    property: str
    steps_run: int
    steps_total: int
    violation: Violation | None = None
    unavailable: str | None = None
    stderr: str = ""

    @property
    def same(self) -> bool:
        return self.violation is not None and self.violation.property == self.property

    @property
    def exit_code(self) -> int:
        return 3 if self.unavailable else 1 if self.violation else 0

    @property
    def verdict(self) -> str:
        if self.unavailable:
            return "inconclusive"
        if self.violation is None:
            return "fixed"
        return "failing" if self.same else "failing-differently"

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "exit_code": self.exit_code, "runtime": self.runtime,
                "property": self.property, "same_property": self.same, "steps_run": self.steps_run,
                "steps_total": self.steps_total, "violation": self.violation.to_json() if self.violation else None,
                "unavailable": self.unavailable, "stderr": self.stderr[-2000:] if self.stderr else ""}

    def describe(self) -> str:
        if self.unavailable:
            return f"inconclusive: runtime {self.runtime} unavailable: {self.unavailable}"
        if self.violation is None:
            return f"fixed: all {self.steps_total} steps ran on {self.runtime} and {self.property} held"
        v = self.violation
        which = "still fails" if self.same else f"fails differently (recorded {self.property})"
        return f"{which} at step {v.step}: {v.property}: {v.message}"


def monitor_names(trace: Trace) -> list[str]:
    """The standard invariants for the trace's level, plus the trace's own property if it is a monitor.
    ``KeyError`` for a property that is neither a monitor nor a lockstep property."""
    from surfacecheck.verify.runner import monitors_for

    names = list(monitors_for(trace.level))
    prop = trace.property
    if not (is_lockstep_property(prop) or prop in ENGINE_PROPERTIES) and prop not in names:
        lookup(prop)
        names.append(prop)
    return names


def replay_trace(trace: Trace, runtime_spec: str | None = None, *, runtime: Runtime | None = None,
                 timeout: float = 10.0) -> ReplayOutcome:
    """Replay ``trace`` against ``runtime_spec`` (default: the runtime the trace names) or an open ``runtime``.

    ``ValueError`` for an unknown runtime spelling; ``KeyError`` for an unknown property."""
    ensure_variants()
    spec = runtime_spec or (runtime.name if runtime is not None else trace.runtime)
    names = monitor_names(trace)
    outcome = ReplayOutcome(spec, trace.property, 0, len(trace.steps))
    owned = runtime is None
    reference = None
    try:
        if runtime is None:
            runtime = open_runtime(spec, timeout=timeout)
        levels = runtime.hello().get("levels", [])
        if trace.level not in levels:
            outcome.unavailable = f"unsupported: runtime {spec} supports levels {levels}, the trace needs {trace.level}"
            return outcome
        reference = None if spec == "model" else open_runtime("model")
        lockstep = Lockstep(runtime, reference, monitors=[lookup(n).factory() for n in names], prefer=trace.property)
        for step in trace.steps:
            outcome.steps_run += 1
            _result, violation = lockstep.run(step)
            if violation is not None:
                outcome.violation = violation
                break
    except RuntimeUnavailable as exc:
        outcome.unavailable, outcome.stderr = f"{exc.kind}: {exc}", exc.stderr
    finally:
        if owned and runtime is not None:
            runtime.close()
        if reference is not None:
            reference.close()
    return outcome

