"""Discovery of findings: the promise monitors (``properties/promises.py``) over real logs and a short
seeded Hypothesis search on the model, each violation with a replayable (and minimised) trace.

(a) every scenario and corpus log is appended event by event through :class:`ModelRuntime` with the
promise monitors watching (spec 5: only log-level promises can fire there); (b) the policy and
compaction machines (``properties/stateful``, unshrunk) run on the model with the standard invariants
plus the promises not yet seen, re-run once per promise found. A violation is a dsh behaviour the
design promised against (spec §15); the registry decides whether it is known.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from properties.monitors import lookup
from properties.promises import PROMISES
from surfacecheck.runtime.model_runtime import ModelRuntime
from surfacecheck.trace import Step, Trace, Violation
from surfacecheck.verify.lockstep import Lockstep
from surfacecheck.verify.minimise import delete_steps

SEARCH_LEVELS = ("policy", "compaction")
"""The machines searched, in order: policy (pressure, overflow, runtime context), then compaction
(faults, manual compaction, aborts)."""
EXAMPLES_PER_RUN = 100
"""Examples per Hypothesis run: fixed, so a seed gives the same discoveries. Hypothesis does not shrink
(its shrinking is time-bounded, hence not reproducible under load): :func:`minimise` does, by step deletion."""


@dataclass
class Discovery:
    """One promise violation found by discovery: where, the violation, and the steps that reach it."""

    promise: str
    where: str
    violation: Violation
    steps: list[Step] = field(default_factory=list)
    level: str = "log"
    seed: int | None = None

    def trace(self, command: str) -> Trace:
        return Trace(source="verify", level=self.level, property=self.promise, steps=tuple(self.steps),
                     violation=self.violation, runtime="model", seed=self.seed, command=command,
                     notes={"discovered": self.where})


def first_violation(steps: Iterable[Step], promise: str, runtime=None) -> Violation | None:
    """Run ``steps`` on a fresh model (or ``runtime``) watched by ``promise`` alone; its first violation."""
    rt = runtime or ModelRuntime()
    lockstep = Lockstep(rt, None, monitors=[lookup(promise).factory()])
    for step in steps:
        _result, violation = lockstep.run(step)
        if violation is not None and violation.property == promise:
            return violation
    return None


def minimise(steps: list[Step], promise: str) -> list[Step]:
    """Delete steps (never the leading ``reset``) while ``promise`` still fails on the model: a 1-minimal
    witness in the sense of delta debugging (the same ddmin as verify's traces)."""
    return delete_steps(list(steps), lambda candidate: first_violation(candidate, promise) is not None)


def wire(event) -> dict:
    """A log event as the protocol's ``append`` event (spec 1.1 keys, no seq)."""
    from model.event import ABSENT

    return {k: v for k, v in event.to_json().items() if v is not ABSENT and k not in ("seq", "ignorable")}


def scan_log(source: str, path: Path, promises: tuple[str, ...] = PROMISES) -> list[Discovery]:
    """Append ``path`` event by event through the model with every promise watching; the first violation
    of each promise (its trace is the prefix up to it, the log's events as protocol appends)."""
    from model.jsonl import read_log

    monitors = {name: lookup(name).factory() for name in promises}
    runtime = ModelRuntime()
    lockstep = Lockstep(runtime, None, monitors=list(monitors.values()))
    found: dict[str, Discovery] = {}
    lockstep.run(Step("reset", {}, "a new empty session"))
    for event in read_log(path).events:
        step = Step("append", {"event": wire(event)}, f"{path.name} seq {event.seq}: {event.type}")
        lockstep.steps.append(step)
        number = len(lockstep.steps)
        result = runtime.call("append", step.args)
        query = _Query(runtime)
        for name, monitor in monitors.items():
            if name in found:
                continue
            violation = monitor.observe(number, step, result, query)
            if violation is not None:
                found[name] = Discovery(name, f"{source}/{path.name}", violation, list(lockstep.steps))
    return list(found.values())


class _Query:
    """Read-only questions to the model after a step, answered once each."""

    def __init__(self, runtime) -> None:
        self.runtime, self.seen = runtime, {}

    def __call__(self, op: str, args: dict) -> dict:
        if op not in self.seen or args:
            self.seen[op] = self.runtime.call(op, args)
        return self.seen[op]


def scan_logs(paths: Iterable[tuple[str, Path]], progress=None) -> tuple[list[Discovery], int]:
    """Every log through :func:`scan_log`; the discoveries and the number of logs scanned."""
    found, logs = [], 0
    for source, path in paths:
        logs += 1
        found += scan_log(source, path)
        if progress is not None:
            progress.update(1)
    return found, logs


def hypothesis_search(seconds: float, seed: int, exclude: Iterable[str] = (),
                      examples_per_run: int = EXAMPLES_PER_RUN,
                      levels: tuple[str, ...] = SEARCH_LEVELS) -> tuple[list[Discovery], int]:
    """Each level's machine on the model with the promises watching, re-run without each promise it
    finds (``examples_per_run`` each, so a seed reproduces; ``seconds`` is a safety cap on starting new
    runs); the discoveries (minimised by step deletion) and the examples run."""
    pending = [p for p in PROMISES if p not in set(exclude)]
    found: list[Discovery] = []
    examples = 0
    deadline = time.perf_counter() + seconds
    for level in levels:
        while pending and time.perf_counter() < deadline:
            failure, ran = _one_run(level, pending, seed, examples_per_run)
            examples += ran
            if failure is None:
                break
            steps, violation = failure
            where = f"hypothesis {level} seed {seed}"
            if violation.property not in pending:  # a standard invariant failed on the model: not a finding
                found.append(Discovery(violation.property, where, violation, steps, level, seed))
                return found, examples
            steps = minimise(steps, violation.property)
            violation = first_violation(steps, violation.property) or violation
            found.append(Discovery(violation.property, where, violation, steps, level, seed))
            pending.remove(violation.property)
    return found, examples


def _one_run(level: str, pending: list[str], seed: int, examples: int):
    """One unshrunk Hypothesis run of ``level``'s machine: its first failure (steps, violation) or None."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.reporting import with_reporter
    from hypothesis.stateful import run_state_machine_as_test

    from properties.stateful.base import LockstepFailure, RunContext, bind
    from surfacecheck.verify.runner import MACHINES, hypothesis_seed, monitors_for

    context = RunContext(ModelRuntime(), None, monitors_for(level) + tuple(pending))
    machine = hypothesis_seed(seed)(bind(MACHINES[level], context))
    config = settings(max_examples=examples, stateful_step_count=25, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck), phases=(Phase.generate,), print_blob=False)
    try:
        with with_reporter(lambda _text: None):
            run_state_machine_as_test(machine, settings=config)
    except LockstepFailure:
        pass
    except Exception:  # noqa: BLE001 - Hypothesis's Flaky etc.: keep what was found
        if context.failure is None:
            raise
    return context.failure, context.examples
