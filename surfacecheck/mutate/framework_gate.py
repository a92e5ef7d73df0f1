"""The compaction contract as the gate of a framework's mutants (``mutate --runtime langchain``, ``strands``, ...).

A **scenario** is one conversation session as a fixed script: ``open``'s args, then every ``turn`` and
``compact`` with its args, and the provider whose role rules apply. The gate's scenarios are

* ``witness:ID``: every registered finding of the runtime (``contract/findings.json``), its witness's steps;
* ``search:N``: the sessions of a contract search at a fixed seed and a fixed number of examples
  (:func:`search_scripts`: the search's own state machine and strategies, generation only, no shrinking, no
  minimizing and no clock deciding anything), recorded once on the unmutated module.

A scenario's **verdict** (:func:`verdict`) is what the contract reads from the session it produces: every broken
promise with its trace step, the type of every error an exchange ended in (an untyped one is the runtime raising:
a mutant that makes the framework raise where it did not is seen), and a refusal of a request (a protocol error).
A mutant is killed when one scenario's verdict differs from the unmutated one: a witness that stops breaking its
promise, breaks it at another step, or breaks another as well; a search session that breaks a promise it kept.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase
from hypothesis import seed as hypothesis_seed
from hypothesis import settings as Settings
from hypothesis.errors import Unsatisfiable
from hypothesis.reporting import with_reporter
from hypothesis.stateful import run_state_machine_as_test

from surfacecheck.core.protocol import ProtocolError, Runtime
from surfacecheck.verify.runner import CI_SEED

SEED = CI_SEED
EXAMPLES = 30
"""Search sessions in the gate (``--examples``)."""
STEPS = 6
"""Turns and direct compactions after each search session's ``open``."""


@dataclass(frozen=True)
class Scenario:
    """One session as a fixed script (see the module docstring)."""

    id: str
    open_args: dict
    requests: tuple  # ((op, args), ...)
    provider: str
    promise: str | None = None  # a witness's registered promise


@dataclass
class Baseline:
    """A scenario on the unmutated module: its verdict, the mutated functions it reaches, its seconds."""

    scenario: Scenario
    verdict: tuple
    hits: frozenset = frozenset()
    seconds: float = 0.0


def verdict(runtime: Runtime, scenario: Scenario, spec: str) -> tuple:
    """Run ``scenario`` on ``runtime`` and read the contract's verdict of the session (hashable, comparable).
    ``RuntimeUnavailable`` (the runtime hung or died) propagates."""
    from surfacecheck.contract import promises
    from surfacecheck.contract.driver import Driver

    driver = Driver(runtime, spec, scenario.provider)
    try:
        driver.open(scenario.open_args)
    except ProtocolError as exc:
        return (("refused", "open", exc.type),)
    outcome = []
    for op, args in scenario.requests:
        exchange = driver.run(op, args)
        errors = tuple(s.get("type") for s in exchange.answer.get("steps") or () if s.get("kind") == "error")
        if errors:
            outcome.append(("errors", exchange.number, errors))
        if driver.halted is not None:
            outcome.append(("refused", exchange.number, driver.halted.get("type")))
            break
    breaches = sorted({(b.promise, b.step) for b in promises.judge(driver.session)})
    return tuple(outcome) + tuple(("broken", promise, step) for promise, step in breaches)


def broken(found: tuple) -> set[str]:
    """The promises a verdict says are broken."""
    return {item[1] for item in found if item[0] == "broken"}


def witnesses(runtime_name: str) -> list[Scenario]:
    """The registered findings of ``runtime_name`` as scenarios, in the registry's order."""
    from surfacecheck.contract import promises, registry
    from surfacecheck.contract.driver import default_provider
    from surfacecheck.contract.replay import read_contract_trace

    found = registry.for_runtime(registry.load(None, tuple(p.id for p in promises.PROMISES)), runtime_name)
    out = []
    for finding in found:
        trace = read_contract_trace(finding.trace_path)
        out.append(Scenario(f"witness:{finding.id}", dict(trace.steps[0].args),
                            tuple((s.op, dict(s.args)) for s in trace.steps[1:]),
                            trace.provider or default_provider(runtime_name), finding.promise))
    return out


class _Recorder:
    """A runtime that passes every call on and keeps each session's script (``open`` starts a new one)."""

    def __init__(self, runtime: Runtime):
        self.runtime, self.name, self.scripts = runtime, runtime.name, []

    def hello(self):
        return self.runtime.hello()

    def call(self, op: str, args: dict):
        if op == "open":
            self.scripts.append([dict(args), []])
        else:
            self.scripts[-1][1].append((op, dict(args)))
        return self.runtime.call(op, args)

    def close(self):  # the caller owns the runtime
        pass


def search_scripts(runtime: Runtime, spec: str, provider: str, *, examples: int = EXAMPLES, steps: int = STEPS,
                   seed: int = SEED) -> list[Scenario]:
    """``examples`` sessions of the contract search's state machine at ``seed``, as scripts. The machine's judge
    never stops an example (every session runs its drawn steps); Hypothesis only generates (no shrink, no
    database, no deadline), so the scripts depend on the seed, the counts and the strategies alone."""
    from surfacecheck.contract.machine import SearchContext, machine_class

    recorder = _Recorder(runtime)
    context = SearchContext(recorder, spec, provider, judge=lambda session: [])
    machine = hypothesis_seed(seed)(machine_class(context))
    settings = Settings(max_examples=examples, stateful_step_count=steps, deadline=None, database=None,
                        derandomize=False, print_blob=False, suppress_health_check=list(HealthCheck),
                        phases=(Phase.explicit, Phase.generate))
    try:
        with with_reporter(lambda text: None):
            run_state_machine_as_test(machine, settings=settings)
    except Unsatisfiable:
        pass
    if context.gone is not None:
        raise context.gone.cause
    return [Scenario(f"search:{i + 1}", open_args, tuple(requests), provider)
            for i, (open_args, requests) in enumerate(recorder.scripts)]


@dataclass
class GateRun:
    """What one mutant did to the gate: ``status`` (Killed, Survived, NoCoverage, Timeout, RuntimeError), the
    scenario that killed it (or where it hung or died), the difference, the scenarios run and the seconds."""

    status: str
    by: str | None = None
    why: str = ""
    ran: int = 0
    seconds: float = 0.0
    detail: dict = field(default_factory=dict)


def run_mutant(runtime: Runtime, spec: str, baselines: list[Baseline], function: str) -> GateRun:
    """The scenarios reaching ``function`` (a mutated function's qualified name), in order, against the
    mutant active in ``runtime``; stops at the first verdict that differs from the unmutated one."""
    from surfacecheck.core.protocol import RuntimeUnavailable

    started = time.perf_counter()
    reaching = [b for b in baselines if function in b.hits]
    if not reaching:
        return GateRun("NoCoverage")
    run = GateRun("Survived")
    for base in reaching:
        run.ran += 1
        try:
            found = verdict(runtime, base.scenario, spec)
        except RuntimeUnavailable as exc:
            run.status = "Timeout" if exc.kind == "timeout" else "RuntimeError"
            run.by, run.why = base.scenario.id, f"{exc.kind}: {exc}"
            break
        if found != base.verdict:
            run.status, run.by = "Killed", base.scenario.id
            run.detail = {"unmutated": [list(x) for x in base.verdict], "mutant": [list(x) for x in found]}
            break
    run.seconds = time.perf_counter() - started
    return run
