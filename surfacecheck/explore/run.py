"""One ``explore`` run: BFS, safety and progress checks, shortest traces, and the JSON report.

Each violated property yields its shortest counterexample (BFS depth; ties broken by the least
action labels, so the result does not depend on the exploration order). The counterexample is
run through the model runtime (or ``model:<variant>``) by :mod:`.tracegen`, which also checks
that the concrete run is α-equal to the abstract path (the quotient's soundness on that path).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from surfacecheck.core.memory import MemoryLimit
from surfacecheck.core.trace import write_trace

from .arrays import edge_actions, edge_records, endpoints, graph_figures, judged
from .bfs import Exploration, explore, no_cyclic_gc
from .oracle import Settings
from .progress import PROGRESS_PROPERTIES, check_progress
from .safety import SAFETY_PROPERTIES
from .tracegen import concretise, make_trace
from .variants import CORRECT, Variant
from .world import EVENTS, Bounds, World


@dataclass
class Counterexample:
    """The shortest path (and, for progress, its loop) the explorer found breaking ``property``."""

    property: str
    kind: str  # safety | progress
    message: str
    actions: list
    loop: list = field(default_factory=list)  # lasso loop / too-long path (progress)
    closing: list = field(default_factory=list)  # actions added so the trace shows the request (not counted)
    trace: str | None = None
    simulation_ok: bool | None = None

    @property
    def length(self) -> int:
        return len(self.actions) + len(self.loop)

    def to_json(self) -> dict:
        return {"property": self.property, "kind": self.kind, "message": self.message, "length": self.length,
                "actions": self.actions, "loop": self.loop, "closing": self.closing, "trace": self.trace,
                "simulation_ok": self.simulation_ok}


def safety_findings(exp: Exploration) -> list[Counterexample]:
    """The shortest counterexample per violated safety property (canonical among equally short ones)."""
    edges: dict[str, dict[int, list]] = {}
    states: dict[str, dict[int, list]] = {}
    numbers, records = edge_records(exp)
    src_at, _dst_at = endpoints(exp)
    for index in np.flatnonzero(judged(exp, lambda edge: bool(edge.violations))).tolist():
        for prop, message in records[numbers[index]].violations:
            edges.setdefault(prop, {}).setdefault(exp.depth[src_at[index]] + 1, []).append((index, message))
    for state, found in exp.state_violations.items():
        for prop, message in found:
            states.setdefault(prop, {}).setdefault(exp.depth[state], []).append((state, message))
    out = []
    for prop in sorted(set(edges) | set(states)):
        by_edge, by_state = edges.get(prop, {}), states.get(prop, {})
        least = min(list(by_edge) + list(by_state))
        options = []
        if least in by_state:
            targets = {s for s, _m in by_state[least]}
            path = exp.path_to(targets)
            end = exp.edges[path[-1]][1] if path else 0
            options.append((exp.labels(path), next(m for s, m in by_state[least] if s == end)))
        if least in by_edge:
            sources = {exp.edges[i][0] for i, _m in by_edge[least]}
            path = exp.path_to(sources)
            end = exp.edges[path[-1]][1] if path else 0
            index, message = min(((i, m) for i, m in by_edge[least] if exp.edges[i][0] == end),
                                 key=lambda item: (exp.edges[item[0]][2], item[0]))
            options.append((exp.labels(path) + [exp.edges[index][2]], message))
        actions, message = min(options)
        out.append(Counterexample(prop, "safety", message, actions))
    return out


def action_counts(exp: Exploration) -> dict:
    """How many edges carry each action label, by label."""
    numbers, labels = edge_actions(exp)
    counts = np.bincount(numbers, minlength=len(labels)).tolist()
    return dict(sorted((label, count) for label, count in zip(labels, counts) if count))


def progress_findings(exp: Exploration, k: int) -> list[Counterexample]:
    out = []
    for found in check_progress(exp, k):
        closing = []
        end = exp.edges[found.loop[-1]][1] if found.loop else None
        if found.property == "explore-runtime-context-reemitted" and end is not None:
            moves = [a for a, _d, _e in exp.world.successors(exp.states[end], bounded=False)]
            closing = [a for a in moves if a.startswith(("reply:A", "overflow:good"))][:1]
        out.append(Counterexample(found.property, "progress", found.message, exp.labels(found.prefix),
                           exp.labels(found.loop), closing))
    return out


def write_traces(findings: list[Counterexample], world: World, trace_dir: Path | None, command: str | None) -> None:
    """Concretise each finding through the (variant) model runtime; write its trace when asked."""
    for finding in findings:
        actions = finding.actions + finding.loop + finding.closing
        driver, states = concretise(actions, world.settings, world.variant)
        finding.simulation_ok = _simulates(world, actions, states)
        if trace_dir is None:
            continue
        notes = {"variant": world.variant.name, "bounds": vars(world.bounds), "actions": actions,
                 "loop_from": len(finding.actions) if finding.loop else None, "closing": finding.closing,
                 "shortest_length": finding.length}
        trace = make_trace(driver, finding.property, finding.message, notes=notes, command=command)
        name = f"explore-{world.variant.name}-{finding.property}.jsonl"
        finding.trace = str(write_trace(Path(trace_dir) / name, trace))


def _simulates(world: World, actions: list[str], states: list[tuple]) -> bool:
    """Replaying the abstract path in the world gives, action by action, the α of the concrete run."""
    state = world.initial()
    for action, concrete in zip(actions, states):
        moves = {a: d for a, d, _e in world.successors(state, bounded=False)}
        if action not in moves:
            return False
        state = moves[action]
        if state[:EVENTS] != concrete:
            return False
    return True


def run_explore(bounds: Bounds, *, variant: Variant = CORRECT, settings: Settings | None = None, symmetry: bool = True,
                reverse: bool = False, k: int = 1, trace_dir: Path | None = None, command: str | None = None,
                on_level=None, cache: Path | None = None, shared: bool = True, oracle: bool = False,
                max_memory: int | None = None, workers: int | None = None, scheduler: str | None = None) -> dict:
    """Explore, check, and return the report (a JSON document). ``cache``: a transition cache file;
    ``shared``: share model runs across surfaces of one shape (:mod:`.shape`); ``oracle``: also run the
    model on every real surface and report any difference (a difference is a failure, exit 1).
    ``max_memory`` (bytes): stop the search before the resident set passes it; the states found so far are
    still checked for safety (a violation there is real: exit 1), progress is not (a partial graph has false
    dead ends), and otherwise the verdict is ``incomplete`` (exit 3), never ok. ``workers``/``scheduler``:
    expand the frontier on Dask (:mod:`.distributed`; the same report, cost figures aside); a lost cluster
    raises :class:`surfacecheck.core.cluster.WorkerLost`."""
    world = World(bounds, settings or Settings(), variant, shared=shared, check_oracle=oracle)
    cached = 0
    if cache is not None:
        from . import cache as transition_cache

        cached = transition_cache.load(world, cache)
    memory = MemoryLimit(max_memory) if max_memory else None
    distributed = None
    if workers is None and scheduler is None:
        exp = explore(world, symmetry=symmetry, reverse=reverse, on_level=on_level, memory=memory)
    else:
        from surfacecheck.core.cluster import pool

        from .distributed import explore_partitioned

        with pool(workers, scheduler) as cluster:
            count = len(cluster.workers)
            exp, figures = explore_partitioned(
                world, lambda fn, tasks: cluster.map(fn, tasks, pin=True, label="explore-level"), count,
                symmetry=symmetry, reverse=reverse, on_level=on_level, memory=memory)
            distributed = {"workers": count, "scheduler": None if cluster.local else cluster.address,
                           "tasks": figures.tasks, "resent": figures.resent, "worker_model_runs": figures.model_runs,
                           "retries": cluster.retries("explore-level")}
    if cache is not None and world.oracle_calls:
        transition_cache.save(world, cache)
    started = time.perf_counter()
    with no_cyclic_gc():
        findings = safety_findings(exp)
        checks_progress = symmetry and exp.complete
        if checks_progress:
            findings += progress_findings(exp, k)
        graph = graph_figures(exp) if exp.complete else None
    check_seconds = time.perf_counter() - started
    write_traces(findings, world, trace_dir, command)
    failed = bool(findings or world.oracle_mismatches)
    verdict = ("violation" if findings else "oracle-mismatch" if world.oracle_mismatches else
               "ok" if exp.complete else "incomplete")
    return {
        "verdict": verdict, "exit_code": 1 if failed else 0 if exp.complete else 3, "variant": variant.name,
        "stopped": exp.stopped, "max_memory": max_memory,
        "bounds": {"events": bounds.events, "tool_pairs": bounds.tool_pairs, "compactions": bounds.compactions,
                   "max_seq": bounds.max_seq},
        "settings": {"context_window": world.settings.context_window, "threshold": world.settings.threshold,
                     "compaction_retries": world.settings.compaction_retries,
                     "max_overflow_retries": world.settings.max_overflow_retries, "response_bound_k": k},
        "symmetry": symmetry, "order": "reverse" if reverse else "forward",
        "states": len(exp.states), "edges": len(exp.edges), "depth": exp.max_depth,
        "seconds": round(exp.seconds, 3), "states_per_second": round(exp.rate, 1),
        "check_seconds": round(check_seconds, 3),
        "model_runs": world.oracle_calls + (distributed["worker_model_runs"] if distributed else 0), "cached_transitions": cached, "complete": exp.complete,
        "graph": graph,
        "invariants": list(SAFETY_PROPERTIES), "progress": list(PROGRESS_PROPERTIES) if checks_progress else [],
        "violations": [f.to_json() for f in findings],
        "actions": action_counts(exp),
        "model_runs_mode": "exact" if not shared else "shared+oracle" if oracle else "shared",
        "distributed": distributed,
        "oracle": {"checked": world.oracle_checks, "mismatches": world.oracle_mismatches[:20],
                   "mismatch_count": len(world.oracle_mismatches)} if oracle else None,
    }
