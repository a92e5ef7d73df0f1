"""Discovery of findings: the promise monitors (``properties/promises.py``) over real logs and a short
seeded Hypothesis search on the model, each violation with a replayable (and minimised) trace.

(a) every scenario and corpus log is appended event by event through :class:`ModelRuntime` with the
promise monitors watching (spec 5: only log-level promises can fire there); (b) the policy and
compaction machines (``properties/stateful``, unshrunk) run on the model with the standard invariants
plus the promises not yet seen, re-run once per promise found; (c) the explorer's bounded world
(``surfacecheck/explore``) at a small bound, every state reached along its BFS shortest path, driven
concretely through the model with every promise watching (:func:`explore_search`). A violation is a
dsh behaviour the design promised against (spec §15); the registry decides whether it is known.

"Promise" means every registered monitor whose name starts ``promise-`` (:func:`promise_names`),
whichever module registered it. Each search also records, per promise, what it watched (the
evidence that a promise *held*: logs and events, Hypothesis examples and steps).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from surfacecheck.properties.monitors import all_monitors, lookup
from surfacecheck.runtime.model_runtime import ModelRuntime
from surfacecheck.core.trace import Step, Trace, Violation
from surfacecheck.properties.stateful.lockstep import Lockstep
from surfacecheck.verify.minimise import delete_steps

SEARCH_LEVELS = ("policy", "compaction")
"""The machines searched, in order: policy (pressure, overflow, runtime context), then compaction
(faults, manual compaction, aborts)."""
EXAMPLES_PER_RUN = 100
"""Examples per Hypothesis run: fixed, so a seed gives the same discoveries. Hypothesis does not shrink
(its shrinking is time-bounded, hence not reproducible under load): :func:`minimise` does, by step deletion."""


def promise_names() -> tuple[str, ...]:
    """Every registered ``promise-*`` monitor, in registration order (properties/promises*.py)."""
    return tuple(name for name in all_monitors() if name.startswith("promise-"))


@dataclass
class Discovery:
    """One promise violation found by discovery: where, the violation, and the steps that reach it."""

    promise: str
    where: str
    violation: Violation
    steps: list[Step] = field(default_factory=list)
    level: str = "log"
    seed: int | None = None
    source: str = "verify"

    def trace(self, command: str) -> Trace:
        return Trace(source=self.source, level=self.level, property=self.promise, steps=tuple(self.steps),
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
    from surfacecheck.model.event import ABSENT

    return {k: v for k, v in event.to_json().items() if v is not ABSENT and k not in ("seq", "ignorable")}


def scan_log(source: str, path: Path, promises: Iterable[str] | None = None,
             stats: dict | None = None, reload_after: bool = False) -> list[Discovery]:
    """Append ``path`` event by event through the model with every promise watching; the first violation
    of each promise (its trace is the prefix up to it, the log's events as protocol appends).
    ``stats["events"]`` counts the events appended. ``reload_after`` then reopens the log (a new process
    resuming it), so a promise about reloading is judged too."""
    from surfacecheck.model.jsonl import read_log

    monitors = {name: lookup(name).factory() for name in (promise_names() if promises is None else promises)}
    runtime = ModelRuntime()
    lockstep = Lockstep(runtime, None, monitors=list(monitors.values()))
    found: dict[str, Discovery] = {}
    lockstep.run(Step("reset", {}, "a new empty session"))
    for event in read_log(path).events:
        if stats is not None:
            stats["events"] = stats.get("events", 0) + 1
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
    if reload_after:
        _result, violation = lockstep.run(Step("reload", {}, f"{path.name} reopened (a new process resumes it)"))
        if violation is not None and violation.property not in found:
            found[violation.property] = Discovery(violation.property, f"{source}/{path.name}", violation,
                                                  list(lockstep.steps))
    return list(found.values())


class _Query:
    """Read-only questions to the model after a step, answered once each."""

    def __init__(self, runtime) -> None:
        self.runtime, self.seen = runtime, {}

    def __call__(self, op: str, args: dict) -> dict:
        if op not in self.seen or args:
            self.seen[op] = self.runtime.call(op, args)
        return self.seen[op]


def scan_logs(paths: Iterable[tuple[str, Path]], progress=None,
              stats: dict | None = None) -> tuple[list[Discovery], int]:
    """Every log through :func:`scan_log`; the discoveries and the number of logs scanned (``stats``
    gets ``events``)."""
    found, logs = [], 0
    for source, path in paths:
        logs += 1
        found += scan_log(source, path, stats=stats)
        if progress is not None:
            progress.update(1)
    return found, logs


def hypothesis_search(seconds: float, seed: int, exclude: Iterable[str] = (),
                      examples_per_run: int = EXAMPLES_PER_RUN, levels: tuple[str, ...] = SEARCH_LEVELS,
                      evidence: dict | None = None) -> tuple[list[Discovery], int]:
    """Each level's machine on the model with the promises watching, re-run without each promise it
    finds (``examples_per_run`` each, so a seed reproduces; ``seconds`` is a safety cap on starting new
    runs); the discoveries (minimised by step deletion) and the examples run. ``evidence[promise]``
    gets the examples and steps each promise watched, per level."""
    pending = [p for p in promise_names() if p not in set(exclude)]
    found: list[Discovery] = []
    examples = 0
    deadline = time.perf_counter() + seconds
    for level in levels:
        while pending and time.perf_counter() < deadline:
            failure, ran, steps_run = _one_run(level, pending, seed, examples_per_run)
            examples += ran
            if evidence is not None:
                for name in pending:
                    seen = evidence.setdefault(name, {"examples": 0, "steps": 0, "levels": []})
                    seen["examples"] += ran
                    seen["steps"] += steps_run
                    if level not in seen["levels"]:
                        seen["levels"].append(level)
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
    """One unshrunk Hypothesis run of ``level``'s machine: its first failure (steps, violation) or None,
    the examples and the steps run."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.reporting import with_reporter
    from hypothesis.stateful import run_state_machine_as_test

    from surfacecheck.properties.stateful.base import LockstepFailure, RunContext, bind
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
    return context.failure, context.examples, context.steps


EXPLORE_BOUNDS = (4, 2, 1)
"""The explorer pass's default bounds (events, tool pairs, compactions): the explore stage's own, 3 182
states, about 3 s with shared prefixes; it reaches §15 G2 (3/1/1 does not)."""


class _Watched:
    """The model runtime with promise monitors fed after every request (the explorer's concretiser
    drives it; it reads ``session`` and ``level_state`` through to the model)."""

    def __init__(self, runtime, promises: Iterable[str]) -> None:
        self.runtime, self.number, self.found = runtime, 0, {}
        self.monitors = {name: lookup(name).factory() for name in promises}
        self.steps: list[Step] = []

    def __getattr__(self, name):
        return getattr(self.runtime, name)

    def call(self, op: str, args: dict) -> dict:
        result = self.runtime.call(op, args)
        self.number += 1
        self.steps.append(Step(op, args))
        query = _Query(self.runtime)
        for name, monitor in self.monitors.items():
            if name not in self.found:
                violation = monitor.observe(self.number, self.steps[-1], result, query)
                if violation is not None:
                    self.found[name] = violation
        return result


def _save(obj) -> dict:
    """A restorable copy of ``obj``'s attributes: model values are immutable (spec-model rule: transitions
    return new values), so one level of copying for the mutable containers is enough."""
    return {k: (type(v)(v) if isinstance(v, (list, set, dict)) and k != "_ops" else v) for k, v in vars(obj).items()}


def _restore(obj, saved: dict) -> None:
    obj.__dict__.clear()
    obj.__dict__.update(_save(_Box(saved)))


class _Box:
    def __init__(self, values: dict) -> None:
        self.__dict__.update(values)


def _checkpoint(driver, watched) -> tuple:
    """Everything one explorer path changes: the concretiser, the watched runtime and its monitors, the
    model runtime and its level state (restored in place: the runtime's op table is bound to it)."""
    import copy

    runtime = watched.runtime
    level = runtime.level_state
    return (_save(driver), _save(watched), copy.deepcopy(watched.monitors), _save(runtime),
            level, _save(level) if level is not None else None)


def _rollback(driver, watched, saved: tuple) -> None:
    import copy

    d, w, monitors, r, level, level_saved = saved
    _restore(driver, d)
    _restore(watched, w)
    watched.monitors = copy.deepcopy(monitors)
    _restore(watched.runtime, r)
    if level is not None:
        _restore(level, level_saved)


def explore_search(bounds: tuple[int, int, int] = EXPLORE_BOUNDS, promises: Iterable[str] | None = None,
                   progress=None, share: bool = True) -> tuple[list[Discovery], dict]:
    """The explorer's bounded world (BFS, spec 13's agent) at ``bounds``; then the BFS tree (each state's
    canonical parent: least action label, so each state is reached along a shortest path) is walked depth
    first, run concretely on the model with the promises watching, sharing prefixes (the state before
    each branch is restored; ``share=False`` re-runs every root-to-leaf path from a fresh runtime, the
    slow reference the tests compare against). Every state and tree edge is watched. Per promise the first
    violation on the fewest steps, minimised by step deletion; and the statistics."""
    from surfacecheck.explore.bfs import explore
    from surfacecheck.explore.oracle import Settings
    from surfacecheck.explore.tracegen import Concretiser
    from surfacecheck.explore.world import EVENTS, Bounds, World

    names = promise_names() if promises is None else tuple(promises)
    began = time.perf_counter()
    exp = explore(World(Bounds(*bounds), Settings()))
    parent: list[int | None] = [None] * len(exp.states)
    for index, (src, dst, action, _edge) in enumerate(exp.edges):
        if exp.depth[src] == exp.depth[dst] - 1 and (parent[dst] is None or action < exp.edges[parent[dst]][2]):
            parent[dst] = index
    children: list[list[tuple[str, int]]] = [[] for _ in exp.states]
    for state, index in enumerate(parent):
        if index is not None:
            children[exp.edges[index][0]].append((exp.edges[index][2], state))
    watched = _Watched(ModelRuntime(), names)
    driver = Concretiser(Settings(), runtime=watched)
    best: dict[str, tuple[int, list[Step], Violation, list[str]]] = {}
    actions: list[str] = []
    ran, mismatches = [0], [0]  # protocol requests run with the promises watching; α mismatches

    def lineage(state: int) -> list[int]:
        """The states on the tree path to ``state`` (root excluded), in order."""
        out = []
        while parent[state] is not None:
            out.append(state)
            state = exp.edges[parent[state]][0]
        return out[::-1]

    def record() -> None:
        for name, violation in watched.found.items():
            if name not in best or violation.step < best[name][0]:
                best[name] = (violation.step, list(driver.steps[:violation.step]), violation, list(actions))

    def act(action: str, state: int) -> None:
        actions.append(action)
        before = watched.number
        driver.act(action)
        ran[0] += watched.number - before
        if driver.abstract() != exp.states[state][:EVENTS]:  # α of the concrete run must be the explored state
            mismatches[0] += 1
        record()

    def walk(state: int) -> None:
        nonlocal watched, driver
        kids = sorted(children[state])
        if not share and not kids:  # the reference: this leaf's whole path again, on a fresh runtime
            path, watched = list(actions), _Watched(ModelRuntime(), names)
            driver = Concretiser(Settings(), runtime=watched)
            actions.clear()
            for action, on_path in zip(path, lineage(state)):
                act(action, on_path)
        for number, (action, child) in enumerate(kids):
            if not share:
                actions.append(action)
                walk(child)
                actions.pop()
                continue
            saved = _checkpoint(driver, watched) if number < len(kids) - 1 else None
            act(action, child)
            walk(child)
            actions.pop()
            if saved is not None:
                _rollback(driver, watched, saved)
        if progress is not None:
            progress.update(1)

    walk(0)
    where = "explore {}/{}/{}".format(*bounds)
    found = []
    for name, (_n, path, violation, path_actions) in sorted(best.items()):
        path = minimise(path, name)
        found.append(Discovery(name, f"{where} ({' '.join(path_actions)})", first_violation(path, name) or violation,
                               path, "policy", None, "explore"))
    stats = {"bounds": "{}/{}/{}".format(*bounds), "states": len(exp.states), "edges": len(exp.edges),
             "paths": sum(1 for c in children if not c), "steps": ran[0], "simulation_mismatches": mismatches[0],
             "seconds": round(time.perf_counter() - began, 3)}
    return found, stats
