"""What the policy would have done at this point of the log (spec 7, 9, 10.2, 11.2).

Selection: `selectCompactableRange` (spec 7) over the audit's priced surface with the retain budget
of the path that compacted — pressure: the policy's `retainTokens` (spec 9.1-9.2 step 11);
overflow recovery and `/compact`: 0 (spec 10.2, 11.2 step 3). Pressure qualification: a pressure
prune or summary needs `measure().totalTokens >= threshold` (spec 9.2 steps 8 and 10, seed S5.a:
no opportunistic pruning), and one pre-step makes at most `compactionRetries + 1` attempts
(spec 9.2 step 11).
"""
from __future__ import annotations

from typing import Any

from surfacecheck.model.config import CompactSpec, RuntimePolicy, resolve_compact_spec, resolve_target_policy
from surfacecheck.model.errors import ModelError
from surfacecheck.model.region import retention_index

from .brackets import UNCHECKED, Bracket, field
from .findings import AuditIssue, finding


def pressure_spec(policy: RuntimePolicy, header_config: Any, logged_window: Any) -> tuple[CompactSpec | None, str]:
    """`resolveCompactSpec` for the routed target (spec 9.1); (None, why) when it cannot be known."""
    provider, model = field(header_config, "provider"), field(header_config, "model")
    if not provider or not model or not isinstance(provider, str) or not isinstance(model, str):
        return None, "no routed target"
    target = resolve_target_policy(policy.compaction, provider, model)
    window = policy.context_window if policy.context_window is not None else logged_window
    if window is None:
        return None, "no context window known"
    try:
        spec = resolve_compact_spec(target, window)
    except ModelError as exc:
        return None, exc.message
    return spec, f"window {window}, policy {target.key}"


def select(nodes: tuple[int, ...], prices: dict[int, int], balanced: list[bool], retain: int):
    """`selectCompactableRange` (spec 7): (start, end) or None."""
    if not nodes:
        return None
    keep = retention_index(tuple(prices.get(seq, 0) for seq in nodes), retain)
    if keep == 0:
        return None
    while keep > 0 and not balanced[keep]:
        keep -= 1
    return None if keep == 0 else (nodes[0], nodes[keep - 1])


def selection_mismatch(seq: int, bracket: Bracket) -> list[AuditIssue]:
    """Compare the summary's `shadowedRange` with the selection made at the bracket's start."""
    if bracket.expected == UNCHECKED or bracket.summary_range == bracket.expected:
        return []
    expected = "no compactable range" if bracket.expected is None else "range %s-%s" % bracket.expected
    observed = "range %s-%s" % bracket.summary_range
    return [finding("selection-mismatch", seq, f"{bracket.mode} compaction {bracket.compaction_id!r} "
                    f"(start seq {bracket.start_seq}): {bracket.why}; expected {expected}, observed {observed}")]


class PressureWatch:
    """Pressure attempts of the current pre-step and whether a prune chain is running."""

    def __init__(self) -> None:
        self.attempts = 0

    def step_started(self) -> None:
        self.attempts = 0

    def qualify(self, seq: int, what: str, total: int | None, spec: CompactSpec | None) -> list[AuditIssue]:
        """Spec 9.2 steps 8/10: pressure prunes or summarizes only at or above the threshold."""
        if spec is None or total is None or total >= spec.threshold_tokens:
            return []
        return [finding("pressure-below-threshold", seq, f"pressure {what}: expected measure() at least the "
                        f"threshold {spec.threshold_tokens}, observed {total} tokens (no opportunistic compaction, "
                        "spec 9.2 steps 8 and 10)")]

    def attempt(self, seq: int, spec: CompactSpec | None) -> list[AuditIssue]:
        """Spec 9.2 step 11: at most compactionRetries + 1 summaries per pre-step."""
        self.attempts += 1
        if spec is None or self.attempts <= spec.compaction_retries + 1:
            return []
        return [finding("pressure-attempts-exceeded", seq, f"pressure compactions in one pre-step: expected at most "
                        f"compactionRetries + 1 = {spec.compaction_retries + 1}, observed attempt {self.attempts}")]
