"""`compactIfNeeded`: the pressure policy and the overflow compaction (seed §1, §5-6, §12; spec 9, 10.2).

Pressure (at `agent/pre-step`): qualify against the threshold, prune first, remeasure, then up to
`compactionRetries + 1` summaries, each over the range the retain budget selects. Overflow (at
`agent/request-error`): prune, then exactly one summary with retain 0 — no threshold, no capacity,
and the lock is checked only by the transaction, after pruning (spec §15 G8).
"""
from __future__ import annotations

from dataclasses import dataclass

from .config import RuntimePolicy, resolve_compact_spec, resolve_target_policy
from .errors import CompactionError, ModelError, TargetPressureConfigError
from .seams import active
from .session import Session, request_header
from .summarizer import ScriptedSummarizer
from .transaction import NO_FAULTS, Faults, Outcome, TransactionOptions

PRESSURE = "pressure"
OVERFLOW = "context-overflow"
STEP_PRESSURE, OVERFLOW_RECOVERY = "step pressure", "context overflow recovery"
"""The triggers compaction-basic's listeners name in their logger lines (spec 9.3, 10.2)."""


def compacted_line(result, trigger: str) -> dict:
    """The listener's info line for a non-null result (`logResult`, spec 9.3)."""
    return {"level": "info", "text": f"compaction ({trigger}): shadowed {len(result.shadowed_seqs)} surface nodes "
                                     f"(seqs {result.start}-{result.end}, ~{result.shadowed_token_count} tokens)"}


def warning(text: str) -> dict:
    return {"level": "warn", "text": text}


def pressure_log(outcome: Outcome, warned: bool) -> tuple[dict, ...]:
    """What the `agent/pre-step` listener logs (spec 9.3): the result, or the error unless it is a
    TargetPressureConfigError already warned for its target key (``warned``)."""
    if outcome.error is not None:
        return () if warned else (warning(f"step compaction failed: {outcome.error.message}; continuing the turn"),)
    return () if outcome.value is None else (compacted_line(outcome.value, STEP_PRESSURE),)


def routed_target(session: Session) -> tuple[str, str] | None:
    """`routedTarget` (spec 4.4): provider/model of the latest logged header, both non-empty."""
    header = request_header(session)
    config = header.get("config") if isinstance(header, dict) else None
    if isinstance(config, dict) and config.get("provider") and config.get("model"):
        return config["provider"], config["model"]
    return None


def summary_policy(session: Session, config, agent_target: tuple[str, str] | None = None):
    """`summarize()` (spec 8.5, D6; compaction-basic `index.ts` `summarize`): every summary request — pressure,
    overflow and manual `/compact` alike — runs under the policy of `conversationTarget(agent)`: the routed target,
    else the agent's own complete provider and model (``agent_target``, its AgentOptions; D13), else the base
    config. Its `maxTokens` caps the request, its summarization pair routes it."""
    target = active().routed_target(session) or agent_target
    return resolve_target_policy(config, *target) if target is not None else config


def summary_options(session: Session, config, agent_target: tuple[str, str] | None = None) -> dict:
    """The transaction options :func:`summary_policy` sets: the cap and the configured summarization pair."""
    policy = summary_policy(session, config, agent_target)
    return {"max_tokens": policy.max_tokens, "summarization": policy.summarization}


@dataclass(frozen=True)
class Environment:
    """The outside world a policy call reads: runtime policy, route capacities, summarizer, faults."""

    policy: RuntimePolicy = RuntimePolicy()
    summarizer: ScriptedSummarizer = ScriptedSummarizer()
    faults: Faults = NO_FAULTS
    capacity: dict | None = None  # (provider, model) -> contextWindow | None; default: policy.context_window

    def context_window(self, target: tuple[str, str]):
        if self.capacity is not None and target in self.capacity:
            return self.capacity[target]
        return self.policy.context_window


def _join(*parts: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(label for part in parts for label in part)


def _prune_first(session: Session, env: Environment, labels: list[str]) -> Outcome:
    """Seed §5 / spec 9.2 step 9, 10.2: prune, then remeasure; value = the new measurement."""
    seams = active()
    pruned = seams.prune_session(session, env.policy.pruner, env.faults)
    labels = tuple(labels) + pruned.labels
    if pruned.error is not None:
        return Outcome(pruned.session, error=pruned.error, labels=labels)
    return Outcome(pruned.session, value=seams.measure(pruned.session), labels=labels)


def compact_if_needed(session: Session, mode: str, env: Environment, signal_aborted: bool = False) -> Outcome:
    """`BasicCompactionEngine.compactIfNeeded(agent, mode)`; value = last CompactionResult or None."""
    seams = active()
    if mode == OVERFLOW:
        return seams.overflow_compaction(session, env, signal_aborted)
    target = seams.routed_target(session)
    if target is None:
        return Outcome(session, labels=("pressure: no routed target in the logged header; no-op",))
    policy = resolve_target_policy(env.policy.compaction, *target)
    try:
        measurement = seams.measure(session)  # step 2: a meter stuck on an event throws to the listener (9.3)
        seams.assert_no_active_compaction(session, "automatic pressure compaction")
        window = env.context_window(target)
        if window is None:
            raise TargetPressureConfigError(policy.key, f"compaction-basic: no context capacity for {policy.key}; "
                                                        "configure contextWindow on that adapter model")
        spec = resolve_compact_spec(policy, window)
    except ModelError as error:
        return Outcome(session, error=error, labels=(f"pressure check failed: {error.message}",))
    labels = [f"pressure: measured {measurement.total_tokens} against threshold {spec.threshold_tokens}"]
    if measurement.total_tokens < spec.threshold_tokens:
        return Outcome(session, labels=tuple(labels) + ("pressure: below threshold; no pruning",))
    if env.policy.pruner is not None:
        pruned = _prune_first(session, env, labels)
        if pruned.error is not None:
            return pruned
        session, labels, measurement = pruned.session, list(pruned.labels), pruned.value
        labels.append(f"pressure: remeasured {measurement.total_tokens} after pruning")
        if measurement.total_tokens < spec.threshold_tokens:
            return Outcome(session, labels=tuple(labels) + ("pressure: pruning sufficed; no summary",))
    result = None
    options = TransactionOptions(max_tokens=spec.max_tokens, summarization=policy.summarization)
    for attempt in range(spec.compaction_retries + 1):
        try:
            span = seams.select_compactable_range(session, measurement, spec.retain_tokens)
        except ModelError as error:
            return Outcome(session, value=result, error=error, labels=tuple(labels))
        if span is None:
            labels.append(f"pressure attempt {attempt + 1}: no compactable range")
            if result is None:
                return Outcome(session, labels=tuple(labels))
            break
        labels.append(f"pressure attempt {attempt + 1}: range {span.start}-{span.end} (retain {spec.retain_tokens})")
        tx = seams.compact_surface_region(session, span.start, span.end, options, env.summarizer, env.faults,
                                          signal_aborted)
        session, labels = tx.session, labels + list(tx.labels)
        if tx.error is not None:
            return Outcome(session, value=result, error=tx.error, labels=tuple(labels))
        result = tx.value
        measurement = seams.measure(session)
        if measurement.total_tokens < spec.threshold_tokens:
            labels.append(f"pressure: {measurement.total_tokens} now below threshold {spec.threshold_tokens}")
            return Outcome(session, value=result, labels=tuple(labels))
    error = CompactionError(
        f"compaction still above threshold after {spec.compaction_retries + 1} compaction attempts "
        f"({measurement.total_tokens} estimated tokens >= threshold {spec.threshold_tokens})")
    return Outcome(session, value=result, error=error, labels=tuple(labels) + (error.message,))


def _overflow(session: Session, env: Environment, signal_aborted: bool) -> Outcome:
    """`compactIfNeeded(agent, 'context-overflow')` (spec 10.2): prune, then one retain-0 summary."""
    seams = active()
    if seams.routed_target(session) is None:
        return Outcome(session, labels=("overflow: no routed target; nothing to compact",))
    labels: list[str] = []
    try:
        measurement = seams.measure(session)  # a stuck meter throws to the listener, which warns (10.2)
    except ModelError as error:
        return Outcome(session, error=error, labels=(f"overflow: measure failed: {error.message}",))
    if env.policy.pruner is not None:
        pruned = _prune_first(session, env, labels)
        if pruned.error is not None:
            return pruned
        session, labels, measurement = pruned.session, list(pruned.labels), pruned.value
    try:
        span = seams.select_compactable_range(session, measurement, 0)
    except ModelError as error:  # a corrupt surface (spec 3) throws to the listener too
        return Outcome(session, error=error, labels=tuple(labels) + (f"overflow: no range: {error.message}",))
    if span is None:
        return Outcome(session, labels=tuple(labels) + ("overflow: no compactable range (retain 0)",))
    labels.append(f"overflow: range {span.start}-{span.end} (retain 0)")
    target = seams.routed_target(session)
    policy = resolve_target_policy(env.policy.compaction, *target)
    tx = seams.compact_surface_region(session, span.start, span.end,
                                      TransactionOptions(max_tokens=policy.max_tokens,
                                                         summarization=policy.summarization),
                                      env.summarizer, env.faults, signal_aborted)
    return Outcome(tx.session, value=tx.value, error=tx.error, aborted=tx.aborted, labels=tuple(labels) + tx.labels)


@dataclass(frozen=True)
class OverflowState:
    """compaction-basic's per-agent overflow bookkeeping (spec 10.2): retries since the last reset."""

    retries: int = 0
    seen_overflow: bool = False


def on_request_error(session: Session, state: OverflowState, failure_code: str, env: Environment,
                     signal_aborted: bool = False) -> tuple[Outcome, OverflowState, bool]:
    """The `agent/request-error` listener (spec 10.2). Returns (outcome, new state, retry?).

    A retry is authorized only when the generation advanced (seed §12: progress is the proof). With
    ``auto: false`` there is no listener at all (spec 9.3: `BasicCompactionEngine`'s constructor calls
    `_registerAutomaticCompaction()` only `if (this.config.auto)`; found by the dsh lockstep, D2)."""
    if not env.policy.compaction.auto:
        return Outcome(session, labels=("auto: false: no agent/request-error listener is registered; next()",)), \
            state, False
    if failure_code != "CONTEXT_WINDOW_EXCEEDED" or signal_aborted:
        return Outcome(session, labels=("request error: not an overflow, or cancelled; next()",)), state, False
    state, seams = OverflowState(state.retries, True), active()
    target = seams.routed_target(session)
    if target is None:
        return Outcome(session, labels=("overflow: no routed target; next()",)), state, False
    policy = resolve_target_policy(env.policy.compaction, *target)
    if state.retries >= policy.max_overflow_retries:
        return Outcome(session, labels=(f"overflow: retries exhausted ({state.retries} >= "
                                        f"{policy.max_overflow_retries}); the request error stands",)), state, False
    gen0 = session.generation
    outcome = seams.compact_if_needed(session, OVERFLOW, env, signal_aborted)
    advanced = outcome.session.generation > gen0
    aborted = signal_aborted or outcome.aborted
    if outcome.error is not None:
        if not aborted and advanced:
            label = ("overflow compaction failed after durable surface progress: "
                     f"{outcome.error.message}; retrying from the replacement surface")
            return (Outcome(outcome.session, error=outcome.error, labels=outcome.labels + (label,),
                            logged=(warning(f"context-{label}"),)), OverflowState(state.retries + 1, True), True)
        label = f"overflow compaction failed: {outcome.error.message}; preserving the original request error"
        why = "cancellation prevents retry" if aborted else "preserving the original request error"
        line = warning(f"context-overflow compaction failed: {outcome.error.message}; {why}")
        return Outcome(outcome.session, error=outcome.error, labels=outcome.labels + (label,), logged=(line,)), \
            state, False
    if aborted or not advanced:
        return (Outcome(outcome.session, value=outcome.value, labels=outcome.labels
                        + ("overflow: no generation advance; the request error stands",)), state, False)
    logged = () if outcome.value is None else (compacted_line(outcome.value, OVERFLOW_RECOVERY),)
    return (Outcome(outcome.session, value=outcome.value, labels=outcome.labels
                    + (f"overflow: generation {gen0} -> {outcome.session.generation}; retry the same step",),
                    logged=logged), OverflowState(state.retries + 1, True), True)


def reset_overflow(state: OverflowState, event_type: str, status: str | None = None,
                   auto: bool = True) -> OverflowState:
    """Spec 10.2 (DISAGREES D3): cleared on `agent/status` idle and on any `assistant/message` after an overflow,
    by the `agent/status` and `session/event` listeners that `_registerAutomaticCompaction()` adds: with ``auto:
    false`` neither is registered and a count carried over from an earlier policy stays (spec 9.3; D12)."""
    if not auto:
        return state
    if (event_type == "agent/status" and status == "idle") or (event_type == "assistant/message" and state.seen_overflow):
        return OverflowState(0, state.seen_overflow)
    return state
