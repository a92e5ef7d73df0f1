"""The audit rule table: stable ids, severity, the spec section each rule enforces, and what it means.

Ids are a contract (tests and CI gates match on them). ``error`` means dsh (or its optional
invariant companions, spec 1.8) would refuse the log or compute something else; ``warning`` means
the spec explains the behaviour as a known gap or tolerance (spec §15, 1.3, 1.7).
"""
from __future__ import annotations

from dataclasses import dataclass

ERROR, WARNING = "error", "warning"


@dataclass(frozen=True)
class Rule:
    """An audit rule: its id, severity, and what breaking it looks like on a log (``spec``, ``meaning``); it checks
    the catalogue property ``property``."""

    id: str
    severity: str
    spec: str
    meaning: str

    @property
    def property(self) -> str:
        return CHECKS.get(self.id, self.id)


_TABLE = (
    # -- the envelope and the surface fold (spec 1.4, 2) --------------------------------------------
    ("seq-contiguity", ERROR, "1.4 step 1, 1.7", "an event's seq is not the next one"),
    ("seq-gap-uncommitted", WARNING, "1.7",
     "a seq gap with no later turn/end: dsh's scanner drops the rest of the log as an uncommitted tail"),
    ("torn-tail", WARNING, "1.7", "an unterminated final record: dsh ignores it and truncates it on repair"),
    ("surface-op-missing", ERROR, "1.4 step 2", "a user/message, assistant/message or tool/result carries no surfaceOp"),
    ("surface-op-forbidden", ERROR, "1.4 step 2", "another event type carries surfaceOp or sourceEventSeqs"),
    ("surface-op-invalid", ERROR, "1.4 step 2", "a malformed surfaceOp"),
    ("replace-range-missing", ERROR, "1.4 step 4", "a replace names a start or end seq not on the current surface"),
    ("replace-range-reversed", ERROR, "1.4 step 4", "a replace's start lies after its end on the surface"),
    ("provenance-invalid", ERROR, "1.4 step 3",
     "sourceEventSeqs malformed, duplicated, not earlier, or empty where not allowed"),
    ("provenance-missing-shadowed", ERROR, "1.4 step 3", "a replace does not cite every node it shadows"),
    ("tool-result-rewrite", ERROR, "1.4 step 5",
     "a tool/result replace that spans other than one tool/result node or changes more than content"),
    ("message-shape", WARNING, "1.3, 2.3, 15 G18",
     "a surface event whose message dsh cannot derive: accepted by live append, refused on reload; "
     "price- and pairing-based checks pause while it is on the surface"),
    # -- tool pairing (spec 3) -----------------------------------------------------------------------
    ("orphan-tool-result", ERROR, "3", "a tool/result with no open tool call before it on the surface"),
    ("tool-result-unknown-call", WARNING, "3",
     "a tool/result whose call id matches no open call (the count-based pairing of dsh accepts it)"),
    ("cut-unbalanced", ERROR, "3, 8.1 step 2",
     "a replacement range whose leading or trailing cut splits a tool call from its result"),
    # -- the meter and the shadow-price protocol (spec 4.2, 5) ---------------------------------------
    ("meter-fold", ERROR, "4.2", "the token meter cannot fold this event (step bracket or chunk citation broken)"),
    ("shadow-price-mismatch", ERROR, "5.1",
     "an armed shadow price names another range than the replace right after it"),
    ("shadow-price-wrong", ERROR, "5.1, 8.2 step 7",
     "a shadow price (shadowedTokenCount) differs from the recomputed price of the range it shadows"),
    ("shadowed-seqs-wrong", ERROR, "1.8, 8.2 step 7",
     "a metering event's shadowedSeqs differ from the surface nodes its shadowedRange spans"),
    ("projection-drift", WARNING, "5.1, 15 G1",
     "a replace with no adjacent shadow price: the O(1) projection drifts by the shadowed minus replacement price"),
    # -- the compaction transaction (spec 8, 1.8) ----------------------------------------------------
    ("bracket-order", ERROR, "8.2 step 13-14, 8.3, 1.8",
     "a compaction bracket not in the order start, summary, replace (right after the summary), end"),
    ("summary-not-smaller", ERROR, "8.2 step 10", "a checkpoint priced at or above the span it replaces"),
    ("checkpoint-source", ERROR, "8.2 step 9, 1.8",
     "a checkpoint replacement without the compact checkpoint source of its bracket"),
    ("checkpoint-unbracketed", WARNING, "1.8, 15 G1",
     "a compact-sourced replacement outside any compaction bracket (the optional compaction invariant refuses it)"),
    ("lock-overlap", ERROR, "8.1 step 4, 1.5",
     "compaction activity while an earlier compaction/start is still unmatched (and no later session/end-seed)"),
    ("lock-orphaned", WARNING, "8.3, 1.5", "a compaction/start never matched by a compaction/end (crash evidence)"),
    # -- policy (spec 7, 9, 10, 11, 12) --------------------------------------------------------------
    ("selection-mismatch", ERROR, "7, 9.2 step 11, 10.2, 11.2 step 3",
     "an automatic (or /compact) compaction whose range differs from what the policy's selection gives"),
    ("pressure-below-threshold", ERROR, "9.2 steps 8, 10",
     "a pressure prune or compaction while measure() was below the threshold (no opportunistic compaction)"),
    ("pressure-attempts-exceeded", ERROR, "9.2 step 11",
     "more than compactionRetries + 1 pressure compactions in one pre-step"),
    ("retry-without-progress", ERROR, "10.2",
     "a step retried after a context-overflow failure with no surface replacement in between"),
    ("overflow-retries-exceeded", ERROR, "10.2",
     "more overflow retries than maxOverflowRetries before a reset"),
    ("runtime-context-gap", WARNING, "12, 15 G2",
     "a request derived while the latest runtime-context snapshot was shadowed (the one-request window)"),
)

CHECKS = {
    # audit ids that a committed file or a CI gate pins, and the catalogue property each checks on a log
    "summary-not-smaller": "summaries-smaller",
    "retry-without-progress": "overflow-retry-after-progress",
    "overflow-retries-exceeded": "retries-within-budget",
    "pressure-attempts-exceeded": "retries-within-budget",
    "cut-unbalanced": "pairing-balanced-at-replacement-edges",
    "orphan-tool-result": "no-orphan-tool-result",
    "projection-drift": "promise-projection-exact",
    "runtime-context-gap": "promise-runtime-context-never-lost",
    "tool-result-unknown-call": "promise-pairing-by-id",
    "message-shape": "promise-log-reloads",
}
"""Rule id -> catalogue id where they differ; every other rule's id is its catalogue id."""

RULES: dict[str, Rule] = {row[0]: Rule(*row) for row in _TABLE}


def rule(rule_id: str) -> Rule:
    """The rule with this id (KeyError for an unknown id: a typo is a bug, not a finding)."""
    return RULES[rule_id]
