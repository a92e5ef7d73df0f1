"""Obligation 4, generation-progress (seed §3, §12; spec 2.1, 9.2, 10.2).

All four parts run the model's own code with symbolic values:
(a) ``apply_plan`` (spec 2.1): a replace raises the generation by exactly one; append and log-only
    events leave it unchanged.
(b) ``on_request_error`` (spec 10.2) with a symbolic overflow compaction outcome (generation after,
    error, abort), retries and ``maxOverflowRetries``: a retry implies the generation advanced, and
    the ranking function ``maxOverflowRetries - retries`` is >= 0 before and strictly drops on every
    retry — so retries are bounded between resets.
(c) ``compact_if_needed`` pressure mode (spec 9.2) with symbolic measurements, ranges and summary
    outcomes: at most ``compactionRetries + 1`` summaries per invocation.
(d) ``fold_surface_tokens`` (spec 4.2): a landed summary (framed < shadowed, the shrink rule)
    strictly lowers the surface price.
Negative control: a listener that retries without progress; Z3 finds a lasso (a retry whose state
equals the state before it), replayed as a concrete trace that repeats forever.
"""
from __future__ import annotations

from types import SimpleNamespace

import z3

from surfacecheck.model import meter, policy, surface
from surfacecheck.model.config import CompactionConfig, RuntimePolicy
from surfacecheck.model.event import Event
from surfacecheck.model.policy import PRESSURE, Environment, OverflowState
from surfacecheck.model.region import Range
from surfacecheck.model.seams import active
from surfacecheck.model.surface import Surface, SurfacePlan
from surfacecheck.model.transaction import Outcome

from .obligation import PROVED, REFUTED, Clause, ObligationResult, Stopwatch, check, fold_status
from .symexec import SymBool, SymInt, explore, expr, standing_in
from surfacecheck.core.trace import Step

NAME = "generation-progress"
SECTION = "spec 2.1, 9.2, 10.2; seed §3, §12"
OVERFLOW_CODE = "CONTEXT_WINDOW_EXCEEDED"
MAX_COMPACTION_RETRIES = 3


def replace_counts() -> str:
    """(a) apply_plan: generation' = generation + 1 exactly for a replace."""
    g = z3.Int("g")
    goals = []
    for kind in ("append", "replace", "none"):
        plan = SurfacePlan(kind, 5, 1, 2, 0, 1, (1, 2))
        paths = explore(lambda: surface.apply_plan(Surface((1, 2, 3), SymInt(g)), plan))
        for path in paths:
            after = expr(path.value.generation)
            goals.append(z3.Implies(path.condition, after == g + (1 if kind == "replace" else 0)))
    return check([g >= 0], z3.And(goals))[0]


class _Session(SimpleNamespace):
    """What the overflow listener reads of a session: its generation."""


def overflow_paths(listener=None):
    """(b) Explore ``on_request_error`` (or ``listener``); returns (paths, symbols)."""
    g0, g1, r, M = z3.Ints("g0 g1 r M")
    failed, aborted_after, signal = z3.Bools("failed aborted_after signal")
    listener = listener or (lambda *args: active().on_request_error(*args))

    def compact(session, mode, env, signal_aborted=False):
        after = _Session(generation=SymInt(g1))
        error = RuntimeError("compaction failed") if SymBool(failed) else None
        if error is not None:
            error.message = "compaction failed"
        return Outcome(after, value=None, error=error, aborted=SymBool(aborted_after), labels=())

    env = Environment(policy=RuntimePolicy(CompactionConfig(max_overflow_retries=SymInt(M))))
    premises = [g0 >= 0, g1 >= g0, r >= 0, M >= 0]  # generations never go down (part a)
    paths = []
    with standing_in(compact_if_needed=compact, routed_target=lambda session: ("prov", "mod")):
        for code in (OVERFLOW_CODE, "RATE_LIMITED"):
            paths += explore(lambda: listener(_Session(generation=SymInt(g0)), OverflowState(SymInt(r), False), code,
                                              env, SymBool(signal)), premises=premises)
    return paths, (g0, g1, r, M), premises


def overflow_claims(listener=None) -> tuple[str, str, str]:
    """(b) retry ⇒ progress; ranking function; a retry counts; no retry leaves the count."""
    paths, (g0, g1, r, M), premises = overflow_paths(listener)
    progress, ranking = [], []
    for path in paths:
        if path.error is not None:
            progress.append(z3.Not(path.condition))
            continue
        _, state, retry = path.value
        r_after = expr(state.retries)
        if retry:  # the compaction ran, so the generation after is g1
            progress.append(z3.Implies(path.condition, g1 > g0))
            ranking.append(z3.Implies(path.condition, z3.And(M - r >= 0, M - r_after < M - r, M - r_after >= 0)))
        else:
            ranking.append(z3.Implies(path.condition, r_after == r))
    return check(premises, z3.And(progress))[0], check(premises, z3.And(ranking))[0], paths


def lasso(listener) -> dict | None:
    """A retry whose state (generation, retries) is the state before it: it can repeat forever."""
    paths, (g0, g1, r, M), premises = overflow_paths(listener)
    for path in paths:
        if path.error is not None or not path.value[2]:
            continue
        solver = z3.Solver()
        solver.add(*premises, path.condition, g1 == g0, expr(path.value[1].retries) == r)
        if solver.check() == z3.sat:
            model = solver.model()
            value = lambda term: model.eval(expr(term), model_completion=True)  # noqa: E731
            return {"generation": value(g0).as_long(), "retries": value(r).as_long(),
                    "maxOverflowRetries": value(M).as_long(), "compaction_failed": z3.is_true(value(z3.Bool("failed")))}
    return None


def pressure_summaries(retries: int) -> str:
    """(c) at most retries + 1 summaries per pressure invocation, whatever ranges and outcomes occur."""
    total0 = z3.Int("total0")
    calls = []

    def measure_fn(session):
        index = len(calls)
        return SimpleNamespace(total_tokens=SymInt(z3.Int(f"total_{index}")) if index else SymInt(total0), nodes=())

    def select_fn(session, measurement, retain):
        return Range(1, 2) if SymBool(z3.Bool(f"range_{len(calls)}")) else None

    def compact_fn(session, start, end, options, summarizer, faults, aborted):
        calls.append(1)
        failed = SymBool(z3.Bool(f"failed_{len(calls)}"))
        return Outcome(session, value="result", error=RuntimeError("x") if failed else None)

    def run():
        calls.clear()
        env = Environment(policy=RuntimePolicy(CompactionConfig(compaction_retries=retries), context_window=1000))
        outcome = policy.compact_if_needed(SimpleNamespace(generation=0), PRESSURE, env)
        return len(calls), outcome

    with standing_in(measure=measure_fn, select_compactable_range=select_fn, compact_surface_region=compact_fn,
                     routed_target=lambda session: ("prov", "mod"), assert_no_active_compaction=lambda s, stage: None):
        paths = explore(run)
    goals = [z3.Implies(p.condition, z3.BoolVal(p.error is None and p.value[0] <= retries + 1)) for p in paths]
    return check([], z3.And(goals))[0]


def summary_lowers_price() -> str:
    """(d) replacing a span by a cheaper checkpoint lowers the surface price (spec 4.2 fold)."""
    a, b, c, ckpt = z3.Ints("a b c ckpt")
    event = Event("user/message", 9, 0, {}, {"op": "replace", "start": 2, "end": 3})
    nodes = ((1, SymInt(a)), (2, SymInt(b)), (3, SymInt(c)))
    with standing_in(node_price=lambda event: SymInt(ckpt)):
        paths = explore(lambda: meter.fold_surface_tokens(nodes, event))
    goal = z3.And([z3.Implies(p.condition, expr(p.value[2]) < 0) for p in paths])
    return check([a >= 0, b >= 0, c >= 0, ckpt >= 0, ckpt < b + c], goal)[0]


def retry_without_progress(session, state, failure_code, env, signal_aborted=False):
    """Wrong on purpose: an overflow is retried even when compaction made no progress, uncounted."""
    outcome, new_state, retry = policy.on_request_error(session, state, failure_code, env, signal_aborted)
    if failure_code == OVERFLOW_CODE and not signal_aborted and not retry:
        return outcome, state, True
    return outcome, new_state, retry


LASSO_ROUNDS = 3


def trace_steps(cex: dict) -> list[Step]:
    """A routed session of two user messages, the policy, then the same overflow ``LASSO_ROUNDS`` times
    with a failing summary: every round is a retry from the same state."""
    from .concrete import USER, NodeWriter, append_step

    writer = NodeWriter()
    writer.event(append_step("request/header", {"header": {"config": {"provider": "prov", "model": "mod"}},
                                                "reason": "initial"}, "request/header: route prov/mod"))
    writer.node(USER, 0, 60)
    writer.node(USER, 0, 60)
    steps = [Step("reset", {}, "a new empty session"), *writer.steps,
             Step("configure", {"policy": {"maxOverflowRetries": max(cex["maxOverflowRetries"], 0)},
                                "context_window": 1000}, "policy: maxOverflowRetries as in the lasso")]
    for round_ in range(LASSO_ROUNDS):
        steps.append(Step("request_error", {"code": OVERFLOW_CODE, "summaries": [{"outcome": "failure"}]},
                          f"overflow {round_ + 1}: the summary fails (no generation progress)"))
    return steps


def run(bound: int | None = None) -> ObligationResult:
    """Unbounded: each part is a statement over all symbolic values (``bound`` is ignored)."""
    from .replay import replayed_control

    watch = Stopwatch()
    progress, ranking, _ = overflow_claims()
    clauses = [
        Clause("every replace raises the generation by exactly one; nothing else changes it", replace_counts()),
        Clause("an overflow retry implies the generation advanced", progress),
        Clause("ranking function maxOverflowRetries - retries: >= 0 and strictly drops on each retry", ranking),
        Clause(f"at most compactionRetries + 1 summaries per pressure invocation (compactionRetries 0..{MAX_COMPACTION_RETRIES})",
               fold_status([pressure_summaries(k) for k in range(MAX_COMPACTION_RETRIES + 1)])),
        Clause("a landed summary (framed < shadowed) strictly lowers the surface price", summary_lowers_price()),
    ]
    result = ObligationResult(NAME, SECTION, fold_status([c.status for c in clauses]), "unbounded", 0.0, clauses,
                              notes={"symbolic": "generation, retries, maxOverflowRetries, compaction outcome"})
    control_watch = Stopwatch()
    cex = lasso(retry_without_progress)
    status = REFUTED if cex is not None else PROVED
    result.controls.append(replayed_control(
        "retry-without-progress", "an overflow retry allowed without generation progress (a lasso)", status,
        trace_steps(cex) if cex else [], "model:prove-retry-without-progress", "overflow-retry-progress", None,
        {"obligation": NAME, "lasso": cex}, control_watch.seconds, level="policy"))
    result.seconds = watch.seconds
    return result
