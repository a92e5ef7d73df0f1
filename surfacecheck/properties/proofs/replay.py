"""Replay a proof's counterexample through a runtime and run the obligation's monitor over it.

``replay_steps(steps, runtime, property)`` opens the runtime (``model`` or a proof variant), runs
each protocol request, asks the monitor after each one, and returns the first violation. A negative
control passes when its trace, replayed through the variant it refutes, shows its violation.
"""
from __future__ import annotations

from surfacecheck.runtime.select import open_runtime
from surfacecheck.core.trace import Step, Trace, Violation

READ_ONLY = frozenset({"surface", "cuts", "measure", "projection", "select_range"})


def replay_steps(steps: list[Step] | tuple[Step, ...], runtime: str, prop: str) -> Violation | None:
    """The first violation of monitor ``prop`` while running ``steps`` on a fresh ``runtime``."""
    from surfacecheck.properties.monitors import lookup

    monitor = lookup(prop).factory()
    rt = open_runtime(runtime)
    try:
        def query(op: str, args: dict) -> dict:
            if op not in READ_ONLY:
                raise ValueError(f"monitor asked a non-read-only question {op!r}")
            return rt.call(op, args)

        for number, step in enumerate(steps, 1):
            result = rt.call(step.op, step.args)
            violation = monitor.observe(number, step, result, query)
            if violation is not None:
                return violation
    finally:
        rt.close()
    return None


def make_trace(steps, prop: str, runtime: str, violation: Violation | None, notes: dict, command: str | None = None,
               level: str = "compaction") -> Trace:
    return Trace(source="prove", level=level, property=prop, steps=tuple(steps), violation=violation,
                 runtime=runtime, seed=None, command=command, notes=notes)


def replayed_control(name: str, description: str, status: str, steps, runtime: str, prop: str,
                     expect: str | None, notes: dict, seconds: float, level: str = "compaction"):
    """A negative control's result: its counterexample as a trace, replayed through ``runtime``;
    ``replayed`` is True when the monitor reports a violation whose message starts with ``expect``."""
    from .obligation import ControlResult

    control = ControlResult(name, description, status, runtime=runtime, seconds=seconds)
    if not steps:
        return control
    violation = replay_steps(steps, runtime, prop)
    control.replayed = violation is not None and (expect is None or violation.message.startswith(expect))
    control.replay_message = violation.message if violation is not None else "no violation on replay"
    control.trace = make_trace(steps, prop, runtime, violation, dict(notes, control=name), level=level)
    return control


def attach_refutation(result, steps, prop: str, expect: str | None, notes: dict, level: str = "compaction") -> None:
    """The obligation itself was refuted: replay its counterexample through the model as it is now."""
    violation = replay_steps(steps, "model", prop)
    result.replayed = violation is not None and (expect is None or violation.message.startswith(expect))
    result.replay_message = violation.message if violation is not None else "no violation on replay"
    result.trace = make_trace(steps, prop, "model", violation, notes, level=level)
