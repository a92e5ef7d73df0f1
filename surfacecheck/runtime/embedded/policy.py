"""compaction-basic's engine on the live session: pressure, overflow recovery, `/compact` (spec 9-11).

Pressure (`agent/pre-step`): qualify against the threshold, prune first, remeasure, then up to
`compactionRetries + 1` summaries over the retain budget's range. Overflow (`agent/request-error`):
prune, then one retain-0 summary; a retry is authorized only when the generation advanced (seed
§12). `/compact`: `command/run`, `compactNow` (owner-less, retain 0, flush), `command/done`.
Shared with the model: policy resolution (``model.config``: `resolveTargetPolicy`,
`resolveCompactSpec`) and the `/compact` result texts (``model.manual.MESSAGES``, dsh's strings).

Override points (``bugs.py``): :meth:`Engine.retry_allowed`, :meth:`Engine.below_threshold`,
:meth:`Engine.attempts`, :meth:`Engine.observe` (overflow counter resets).
"""
from __future__ import annotations

from surfacecheck.model.config import resolve_compact_spec, resolve_target_policy
from surfacecheck.model.errors import AbortError, CompactionError, ManualCompactionError, ModelError, TargetPressureConfigError
from surfacecheck.model.manual import AGENT_ID
from surfacecheck.model.summarizer import AGENT_OPTIONS

from ..codec import command_raw_input, compact_now_json
from .compaction import NO_FAULTS, Compactor
from .transaction import TxOptions, TxOutcome

OVERFLOW_CODE = "CONTEXT_WINDOW_EXCEEDED"
COMMAND_TEXTS = {
    "busy": "Compaction is unavailable because this process has an active compaction, or the agent is not idle.",
    "cancelled": "Compaction cancelled.",
    "changed": "The history selected for compaction changed before it could be replaced. The conversation is "
               "unchanged; the attempt is recorded in the session log.",
    "summary": "Compaction could not produce a useful summary. The conversation is unchanged; the attempt is "
               "recorded in the session log.",
    "commit": "Compaction did not finish cleanly; some session history may have changed. Inspect the current "
              "session state before retrying.",
    "persistence": "Compaction finished, but the session could not be saved.",
}


class Engine:
    """Per-runtime engine state: the policy, capacities, overflow retries (spec 10.2), warned keys (spec 9.3)."""

    def __init__(self, runtime) -> None:
        from surfacecheck.model.config import RuntimePolicy

        self.rt = runtime
        self.policy = RuntimePolicy()
        self.capacity: dict | None = None
        self.agent: tuple = AGENT_OPTIONS  # the agent's AgentOptions provider and model (None: unset)
        self.summarize_hook = "llm"  # what this engine's summarize() returns (codec.SUMMARIZE_HOOKS)
        self.logged: list[dict] = []  # the listeners' logger lines of the op under way
        self.reopen()

    def reopen(self) -> None:
        """A new engine instance (crash + reload): retries and warned keys start empty."""
        self.retries = 0
        self.seen_overflow = False
        self.warned: set[str] = set()

    def observe(self, event: dict) -> None:
        """Spec 10.2 (DISAGREES D3): the counter clears on `agent/status` idle and on an assistant message
        after an overflow; with ``auto: false`` no listener is registered to clear it (spec 9.3)."""
        if not self.policy.compaction.auto:
            return
        data = event.get("data")
        status = data.get("status") if isinstance(data, dict) else None
        if (event["type"] == "agent/status" and status == "idle") or (
                event["type"] == "assistant/message" and self.seen_overflow):
            self.retries = 0

    def context_window(self, target: tuple[str, str]):
        if self.capacity is not None and target in self.capacity:
            return self.capacity[target]
        return self.policy.context_window

    # -- helpers ------------------------------------------------------------------------------------
    def _compactor(self) -> Compactor:
        return self.rt.compaction_class(self.rt)

    def _prune(self, faults) -> ModelError | None:
        _, error = self._compactor().prune(self.policy.pruner, faults)
        return error

    @staticmethod
    def below_threshold(total: int, threshold: int) -> bool:
        return total < threshold

    @staticmethod
    def attempts(compaction_retries: int) -> int:
        """Spec 9.2: one summary plus `compactionRetries` more."""
        return compaction_retries + 1

    # -- spec 9.2 -----------------------------------------------------------------------------------
    def pressure(self, scripts, faults=NO_FAULTS, aborted: bool = False) -> TxOutcome:
        tracker, compactor = self.rt.tracker, self._compactor()
        target = tracker.routed_target()
        if target is None:
            return TxOutcome()
        policy = resolve_target_policy(self.policy.compaction, *target)
        try:
            total = compactor.total()  # measure(session): a stuck meter throws to the listener (spec 9.2-9.3)
            if tracker.lock_is_live():
                raise ManualCompactionError("busy", "automatic pressure compaction: compaction already in progress; "
                                                    "the session compaction lock is already active")
            window = self.context_window(target)
            if window is None:
                raise TargetPressureConfigError(policy.key, f"compaction-basic: no context capacity for {policy.key}; "
                                                            "configure contextWindow on that adapter model")
            spec = resolve_compact_spec(policy, window)
        except ModelError as error:
            return TxOutcome(error=error)
        if self.below_threshold(total, spec.threshold_tokens):
            return TxOutcome()
        if self.policy.pruner is not None:
            error = self._prune(faults)
            if error is not None:
                return TxOutcome(error=error)
            total = compactor.total()
            if self.below_threshold(total, spec.threshold_tokens):
                return TxOutcome()
        result = None
        options = TxOptions(max_tokens=spec.max_tokens, summarization=policy.summarization)
        for _ in range(self.attempts(spec.compaction_retries)):
            try:
                span = compactor.select_range(spec.retain_tokens)
            except ModelError as error:
                return TxOutcome(result=result, error=error)
            if span is None:
                if result is None:
                    return TxOutcome()
                break
            tx = self.rt.transaction_class(self.rt, scripts, faults).run(span[0], span[1], options, aborted)
            if tx.error is not None:
                return TxOutcome(result=result, error=tx.error)
            result = tx.result
            total = compactor.total()
            if self.below_threshold(total, spec.threshold_tokens):
                return TxOutcome(result=result)
        error = CompactionError(
            f"compaction still above threshold after {spec.compaction_retries + 1} compaction attempts "
            f"({total} estimated tokens >= threshold {spec.threshold_tokens})")
        return TxOutcome(result=result, error=error)

    # -- spec 10.2 ----------------------------------------------------------------------------------
    def overflow(self, scripts, faults=NO_FAULTS, aborted: bool = False) -> TxOutcome:
        """`compactIfNeeded(agent, 'context-overflow')`: prune, then one retain-0 summary."""
        tracker, compactor = self.rt.tracker, self._compactor()
        if tracker.routed_target() is None:
            return TxOutcome()
        try:
            compactor.total()  # measure(session): a stuck meter throws to the listener, which warns (spec 10.2)
        except ModelError as error:
            return TxOutcome(error=error)
        if self.policy.pruner is not None:
            error = self._prune(faults)
            if error is not None:
                return TxOutcome(error=error)
        try:
            span = compactor.select_range(0)  # a corrupt surface (spec 3) throws to the listener too
        except ModelError as error:
            return TxOutcome(error=error)
        if span is None:
            return TxOutcome()
        policy = resolve_target_policy(self.policy.compaction, *tracker.routed_target())
        return self.rt.transaction_class(self.rt, scripts, faults).run(
            span[0], span[1], TxOptions(max_tokens=policy.max_tokens, summarization=policy.summarization), aborted)

    def request_error(self, code: str, scripts, faults=NO_FAULTS, aborted: bool = False) -> tuple[TxOutcome, bool]:
        """The `agent/request-error` listener: (outcome, retry?); none is registered with ``auto: false`` (spec 9.3)."""
        if not self.policy.compaction.auto:
            return TxOutcome(), False
        if code != OVERFLOW_CODE or aborted:
            return TxOutcome(), False
        self.seen_overflow = True
        target = self.rt.tracker.routed_target()
        if target is None:
            return TxOutcome(), False
        policy = resolve_target_policy(self.policy.compaction, *target)
        if self.budget_spent(self.retries, policy.max_overflow_retries):
            return TxOutcome(), False
        generation = self.rt.session.generation
        outcome = self.overflow(scripts, faults, aborted)
        advanced = self.rt.session.generation > generation
        cancelled = aborted or outcome.aborted
        self.log_overflow(outcome, advanced, cancelled)
        if self.retry_allowed(advanced, cancelled, outcome.error):
            self.retries += 1
            return outcome, True
        return outcome, False

    # -- the listeners' logger (spec 9.3, 10.2) -----------------------------------------------------
    def log(self, level: str, text: str) -> None:
        self.logged.append({"level": level, "text": text})

    def log_result(self, result: dict, trigger: str) -> None:
        self.log("info", f"compaction ({trigger}): shadowed {len(result['shadowedSeqs'])} surface nodes (seqs "
                         f"{result['start']}-{result['end']}, ~{result['shadowedTokenCount']} tokens)")

    def log_pressure(self, outcome: TxOutcome, silent: bool) -> None:
        """The pre-step listener: the result, or the error (a target key's config error once)."""
        if outcome.error is not None:
            if not silent:
                self.log("warn", f"step compaction failed: {outcome.error.message}; continuing the turn")
        elif outcome.result is not None:
            self.log_result(outcome.result, "step pressure")

    def log_overflow(self, outcome: TxOutcome, advanced: bool, cancelled: bool) -> None:
        """The request-error listener: a failure after or without durable progress, or the result of a retry."""
        if outcome.error is not None:
            if advanced and not cancelled:
                self.log("warn", "context-overflow compaction failed after durable surface progress: "
                                 f"{outcome.error.message}; retrying from the replacement surface")
            else:
                self.log("warn", f"context-overflow compaction failed: {outcome.error.message}; "
                                 + ("cancellation prevents retry" if cancelled else "preserving the original request error"))
        elif advanced and not cancelled and outcome.result is not None:
            self.log_result(outcome.result, "context overflow recovery")

    @staticmethod
    def budget_spent(retries: int, budget: int) -> bool:
        """Spec 10.2: no recovery once the count has reached `maxOverflowRetries` (0 disables it)."""
        return retries >= budget

    @staticmethod
    def retry_allowed(advanced: bool, aborted: bool, error: ModelError | None) -> bool:
        """Seed §12: retry the same step only after durable progress (the generation advanced), not aborted."""
        return advanced and not aborted

    # -- spec 11 ------------------------------------------------------------------------------------
    def agent_target(self) -> tuple | None:
        """The agent's AgentOptions as a target, when both are non-empty strings (spec 8.5)."""
        provider, model = self.agent
        return (provider, model) if isinstance(provider, str) and provider and isinstance(model, str) and model else None

    def summary_options(self) -> dict:
        """`summarize()` (spec 8.5, D6, D13): the cap and summarization pair of `conversationTarget`'s policy: the
        routed target, else the agent's complete AgentOptions pair, else the base config."""
        target = self.rt.tracker.routed_target() or self.agent_target()
        compaction = self.policy.compaction
        policy = resolve_target_policy(compaction, *target) if target is not None else compaction
        return {"max_tokens": policy.max_tokens, "summarization": policy.summarization}

    def compact_now(self, scripts, faults, source_command_id, caller_aborted: bool, agent_idle: bool,
                    span=False, on_caller_abort=None) -> TxOutcome:
        """`BasicCompactionEngine.compactNow` (spec 11.2); ``span`` when the caller already selected it."""
        if caller_aborted:
            return TxOutcome(error=AbortError(), aborted=True)
        if not agent_idle:
            return TxOutcome(error=ManualCompactionError(
                "busy", "manual compaction requires an idle agent with no waking queued work",
                cause=CompactionError(f'agent "{AGENT_ID}" already has active work')))
        if span is False:
            span = self._compactor().select_range(0)
        if span is None:
            return TxOutcome()
        tx = self.rt.transaction_class(self.rt, scripts, faults).run(
            span[0], span[1], TxOptions(manual=True, source_command_id=source_command_id,
                                        on_caller_abort=on_caller_abort, **self.summary_options()), False)
        if tx.error is not None and tx.agent_aborted:
            return TxOutcome(error=ManualCompactionError("cancelled", "manual compaction was cancelled", cause=tx.error))
        return tx

    def compact_command(self, command_id: str, raw: str, scripts, faults, caller_aborted: bool,
                        agent_idle: bool) -> dict:
        """`/compact` (spec 11.1): `command/run`, the handler, `command/done`; the command's result."""
        if caller_aborted:
            return {"kind": "error", "text": AbortError().reason, "sourceEventSeq": None, "compact_now": None}
        session = self.rt.session
        span, thrown = False, None
        if not raw.strip() and agent_idle:  # select before writing: a shape refusal leaves the log untouched
            try:
                span = self._compactor().select_range(0)
            except ModelError as exc:  # thrown inside the handler, after command/run (spec 11.1, D7)
                thrown = exc
        session.append("command/run", {"commandId": command_id, "name": "compact", "args": command_raw_input(raw),
                                       "source": {"kind": "user"}})
        if thrown is not None and not raw.strip():  # the executor settles command/done error and rejects
            session.append("command/done", {"commandId": command_id, "kind": "error", "text": thrown.message})
            return {"kind": "error", "text": thrown.message, "sourceEventSeq": None,
                    "compact_now": compact_now_json(None, thrown)}
        settled_early = []

        def settle_on_abort() -> None:  # dsh-commands' withAbort: command/done before the error close (D5)
            settled_early.append(True)
            session.append("command/done", {"commandId": command_id, "kind": "error", "text": AbortError().reason})

        if raw.strip():
            result = {"kind": "error", "text": "Usage: /compact (no arguments)", "sourceEventSeq": None,
                      "compact_now": None}
        else:
            now = self.compact_now(scripts, faults, command_id, False, agent_idle, span, settle_on_abort)
            result = {**command_result(now), "compact_now": compact_now_json(now.result, now.error)}
        if settled_early:
            return result
        done = {"commandId": command_id, "kind": result["kind"], "text": result["text"]}
        if result["sourceEventSeq"] is not None:
            done["sourceEventSeq"] = result["sourceEventSeq"]
        session.append("command/done", done)
        return result


def command_result(outcome: TxOutcome) -> dict:
    """Handler mapping (spec 11.1): abort -> the abort reason; ManualCompactionError code -> its text."""
    error = outcome.error
    if outcome.aborted or isinstance(error, AbortError):
        return {"kind": "error", "text": error.reason if isinstance(error, AbortError) else AbortError().reason,
                "sourceEventSeq": None}
    if isinstance(error, ManualCompactionError):
        return {"kind": "error", "text": COMMAND_TEXTS[error.code], "sourceEventSeq": None}
    if error is not None:
        raise error
    if outcome.result is None:
        return {"kind": "success", "text": "No compactable history yet.", "sourceEventSeq": None}
    result = outcome.result
    return {"kind": "success", "text": f"Compacted {len(result['shadowedSeqs'])} history items "
                                       f"(~{result['shadowedTokenCount']} tokens).", "sourceEventSeq": result["summarySeq"]}
