"""The property catalogue: every property the suite checks, once, under one id.

A property is a rule of the spec (or a promise the design makes beyond what dsh does) stated once: its id, the
spec / seed section it states, the protocol level it needs (``log``, ``compaction``, ``policy``, or
``conversation`` for the runtime-neutral compaction contract of ``docs/contract.md``), its kind and its meaning in
one line. Engines check properties (verify's monitors, the audit's rules, the explorer's safety
and progress checks, the proof obligations, the findings search) and name what they check by this id, so a rule
checked by five engines is one row of :func:`surfacecheck.catalogue_table.coverage_table`, not five names.

Kinds: an ``invariant`` holds for any correct runtime (dsh included); a ``promise`` states what the design
promises, stronger than what dsh does (a violation is a finding about dsh, spec §15); a ``contract`` is a rule
of the log format or of the policy's writes that a recorded log must keep (the audit reads it off the log).
"""
from __future__ import annotations

from dataclasses import dataclass

from surfacecheck.core.protocol import ANNOUNCEABLE, CONVERSATION, LEVELS

INVARIANT, PROMISE, CONTRACT = "invariant", "promise", "contract"
KINDS = (INVARIANT, PROMISE, CONTRACT)


@dataclass(frozen=True)
class Property:
    """One property: ``id`` (stable: trace headers and findings name it), the ``section`` it states, the lowest
    protocol ``level`` it needs, its ``kind`` and its ``meaning``."""

    id: str
    section: str
    level: str
    kind: str
    meaning: str

    def __post_init__(self) -> None:
        if self.level not in ANNOUNCEABLE or self.kind not in KINDS:
            raise ValueError(f"property {self.id!r}: level {self.level!r} or kind {self.kind!r} unknown")


PROPERTIES: tuple[Property, ...] = (
    # -- invariants, in the order verify checks them (the first violation of a step is the one reported) --------
    Property('generation-counts-replaces', 'spec 2.1; seed §11', 'log', 'invariant',
             'replaceGeneration starts at 0, grows by exactly one per replace and never otherwise'),
    Property('projection-equals-recount', 'spec 5.1, 5.2 (D4); seed §15-16', 'log', 'invariant',
             'on a fully metered history the O(1) projection total equals the recount of the surface'),
    Property('pairing-balanced-at-replacement-edges', 'spec 3, 7; seed §7', 'compaction', 'invariant',
             'a runtime-made replacement of a span sits between balanced cuts; a one-node rewrite keeps its edge '
             'cuts as they were'),
    Property('summaries-smaller', 'spec 8.2 steps 9-10 (shrink rule); seed §6, §9', 'compaction', 'invariant',
             'every checkpoint the runtime writes is strictly cheaper than the span it shadows'),
    Property('bracket-order', 'spec 8.2-8.3, 5.1 (adjacency); seed §9', 'compaction', 'invariant',
             'compaction/start -> [summary -> checkpoint] -> compaction/end, closed within the op; every '
             'compaction/prune is immediately followed by its tool/result rewrite'),
    Property('overflow-retry-after-progress', 'spec 10.2; seed §12 (S12)', 'policy', 'invariant',
             'request_error answers retry only when replaceGeneration advanced'),
    Property('retries-within-budget', 'spec 9.2 step 11, 10.2; seed §1, §12', 'policy', 'invariant',
             'at most compactionRetries+1 summaries per pressure check, one per overflow recovery, and at most '
             'maxOverflowRetries consecutive overflow retries'),
    Property('runtime-context-reemitted', 'spec 12 (one-request window), 13 steps 4-7; seed §14',
             'policy', 'invariant',
             "a runtime-context snapshot already shadowed (or stale) when a step's pre-step starts is back on the "
             "surface by that step's request; one shadowed during the pre-step may miss that request"),
    Property('cut-legality', 'spec 7 steps 1-5, spec 3; seed §6-7', 'compaction', 'invariant',
             'select_range returns the head-anchored range ending at the nearest balanced cut at or before the '
             'retention point, keeping at least one node; null exactly when spec 7 says'),
    Property('pairing-ids', 'spec 3; seed §7', 'log', 'invariant',
             'when every result answers an earlier open call with a unique id, a count-balanced cut is exactly an '
             'id-closed cut'),
    Property('incremental-pairing', 'spec 3 (balanceCache); seed §7', 'log', 'invariant',
             'every cuts answer equals the full pairing fold of the current surface from scratch'),
    Property('smallest-compactable-span', 'spec 8.2 steps 9-10; seed §8', 'compaction', 'invariant',
             'no compact request replaces a span priced 103 tokens or less (the 98-token frame plus the smallest '
             'summary block is never smaller)'),
    Property('pressure-bounded-response', 'spec 9.2-9.3', 'policy', 'invariant',
             'a pre-step over the threshold compacts, prunes or records a failure unless nothing is compactable'),
    Property('no-orphan-tool-result', 'spec 3', 'compaction', 'invariant',
             'the tool-pairing count of the surface never goes below zero (no result without its call)'),
    Property('model-error-free', 'spec 9-11 (operations)', 'policy', 'invariant',
             'a policy operation the agent may legally request is not refused by the model'),
    # -- promises: what the design promises, stronger than what dsh does (spec §15) -----------------------
    Property('promise-projection-exact', 'spec 5.1-5.2, D4; §15 G1', 'log', 'promise',
             'the O(1) projection equals the recount of the surface after every event, metered or not (dsh: an '
             'unclaimed replace folds with delta 0 and drifts)'),
    Property('promise-compaction-progress', 'spec 8.2 steps 9-10, 7; §15 G7', 'compaction', 'promise',
             'the runtime never starts a compaction of a span no summary can shrink (dsh selects spans priced <= '
             "103 tokens and fails 'summary is not smaller')"),
    Property('promise-cancellation-respected', 'spec 8.2 step 11, 9.2, 10.2; §15 G12', 'compaction', 'promise',
             'an automatic compaction whose signal was aborted while it summarized commits no checkpoint (dsh: '
             "owner 'current-turn' never checks the signal)"),
    Property('promise-retry-after-real-progress', 'spec 10.2, 6; §15 G16', 'policy', 'promise',
             'an overflow retry authorized by pruning alone leaves a request that fits the context window (dsh '
             'accepts any prune-only generation advance as progress)'),
    Property('promise-pressure-relieved', 'spec 9.2 steps 8-11, 9.4, 4.3; §15 G4, G14', 'policy', 'promise',
             'a pre-step that spends summarizer calls on pressure leaves the session below its threshold (dsh: '
             'envelope- or tail-dominated pressure re-summarizes every step)'),
    Property('promise-runtime-context-never-lost', 'spec 12, 13 steps 4-7; §15 G2', 'policy', 'promise',
             "every step's request carries the current runtime context verbatim (dsh: a snapshot shadowed by that "
             "step's own pre-step compaction misses one request)"),
    Property('promise-cancellation-honest', 'spec 8.2 step 11, 11.1-11.2; §15 G11', 'compaction', 'promise',
             'a compaction reported cancelled or aborted committed no checkpoint (dsh: a caller abort during the '
             'flush wins although the checkpoint committed and was flushed)'),
    Property('promise-lock-respected', 'spec 8.1 (durable lock), 10.2; §15 G8', 'compaction', 'promise',
             'nothing is replaced while a compaction bracket is open (dsh: overflow recovery prunes before '
             'compactRegion checks the lock)'),
    Property('promise-context-resume-equals-live', 'seed §14; spec 12 (constructor vs live), 1.5; §15 G3',
             'policy', 'promise',
             'a resumed agent projects the same runtime context from a log as a live agent would (dsh: the '
             'constructor restores the newest VISIBLE snapshot, the live rule clears on shadowing)'),
    Property('promise-runtime-context-one-request', 'seed §14 (one conditional window); spec 12, 10.3; §15 G2',
             'policy', 'promise',
             'weak form: every request carries the current runtime context except at most ONE request after it is '
             'shadowed (dsh: same-step overflow retries never re-project it)'),
    Property('promise-log-reloads', 'seed §9-10 (durable log); spec 1.3, 1.5, 1.7; §15 G18', 'policy', 'promise',
             'a log the session accepted live loads again (dsh: append skips the message-shape checks that seed '
             'and persistence load apply)'),
    Property('promise-config-errors-reported', 'seed §2; spec 9.1-9.3; §15 G15', 'policy', 'promise',
             'every configuration error the pressure policy meets is reported at least once (dsh: warn-once is '
             'keyed by provider/model only, so a second cause stays silent)'),
    Property('promise-compaction-usage-accounted', 'seed §15 (usage surface), §10; spec 5.2, 8.2, 8.5; §15 G10',
             'compaction', 'promise',
             "a compaction's own model usage is accounted in tokenUsage (dsh: only assistant/chunk and "
             'assistant/message usage count; compaction/summary.usage is ignored)'),
    Property('promise-projection-keeps-accepting', 'seed §16; spec 5.1, 1.3 step 8, 6; §15 G17', 'log', 'promise',
             'the O(1) projection keeps accepting every event the session commits (dsh: a prune claim left armed '
             'by a vetoed replacement makes the next replace throw; the cell is stuck)'),
    Property('promise-pairing-by-id', 'seed §7; spec 3, 6, 7, 8.2', 'compaction', 'promise',
             'no compaction (prune or summary) leaves a tool call unanswered or a tool result orphaned on the '
             'surface, judged by call ids (dsh cuts by a count, spec 3)'),
    Property('promise-projection-nonnegative', 'seed §15-16; spec 5.1-5.2; §15 G1', 'log', 'promise',
             'the O(1) surface projection (contextBreakdown.messageTokens) never goes below 0 (dsh: an unpriced '
             'larger replace, then a claimed compaction of it, drives it negative)'),
    Property('promise-measure-conservative', 'seed S4.a-b; spec 4.3, 9.2, 13; §15 G13', 'policy', 'promise',
             "the measurement a pre-step's pressure decision uses is never below the price of the request that "
             'step sends (dsh: the entering batch is invisible at pre-step)'),
    Property('promise-measure-tight', 'seed §3; spec 4.2-4.3; §15 G9a', 'log', 'promise',
             'measure() exceeds the price of the request it describes by at most what the provider itself reported'
             " beyond the heuristic (dsh: a usage anchor counts the anchor step's entered messages twice)"),
    Property('promise-measure-slack-bounded', 'seed §3; spec 4.2-4.3; §15 G9a', 'log', 'promise',
             'the established bound: 0 <= measure() - request price <= max(0, provider excess) + max(0, batch '
             'entered in the anchor step before its request) (holds on dsh)'),
    Property('promise-measure-covers-usage', 'seed §3; spec 4.2-4.3, 10.3; §15 G9b, G19', 'log', 'promise',
             'right after an assistant/message whose provider usage is P, measure() is at least P (dsh: after an '
             'in-step overflow compaction the stale stepStart under-counts)'),
    Property('promise-prompt-verbatim', 'seed §12; spec 7, 10.2-10.3, 13; §15 G2b', 'policy', 'promise',
             'a prompt the user just entered reaches the model verbatim in at least one request it answers (dsh: '
             'overflow retain-0 may summarize it before any answer)'),
    Property('promise-span-compactable', 'seed §6, §12; spec 7 steps 3-4, 10.2; §15 G5, D12', 'policy', 'promise',
             'when a request overflows, a surface priced above the shrink floor has a compactable range (dsh: the '
             'newest node and a lone tool unit are indivisible)'),
    Property('promise-pressure-update-constant', 'seed §16; spec 4.2, 5.1; D4', 'log', 'promise',
             'the pressure update a runtime does per appended event touches O(1) cells (judged on a `bench` '
             "answer's ops_per_append at two or more sizes)"),
    # -- the compaction contract (docs/contract.md): promises any agent runtime keeps, read off a conversation ----
    Property('contract-no-orphan-created', 'contract', 'conversation', 'promise',
             'no compaction (and no request) leaves a tool result before its call or a call without its result, '
             'unless that same orphan was already there before the compaction'),
    Property('contract-tail-verbatim', 'contract', 'conversation', 'promise',
             'the messages a compaction keeps are a suffix of the history before it, each unchanged and in order'),
    Property('contract-prompt-verbatim', 'contract', 'conversation', 'promise',
             "every request of a turn carries the turn's user text verbatim (as a user message or inside a summary)"),
    Property('contract-system-kept', 'contract', 'conversation', 'promise',
             'every request carries the session\'s system prompt unchanged'),
    Property('contract-progress', 'contract', 'conversation', 'promise',
             'each compaction shrinks the history (or the exchange ends in a typed error); at most 2 compactions and '
             '3 summarizer calls between two requests; no overflow retry without a shrink'),
    Property('contract-fits-after', 'contract', 'conversation', 'promise',
             'the request after a size compaction is under the trigger and the one after an overflow compaction '
             'does not overflow (or a typed error follows)'),
    Property('contract-summary-covers-removed', 'contract', 'conversation', 'promise',
             "every message a summarizing compaction removes reaches the summarizer's input, and the summarizer's "
             'last output reaches the history'),
    Property('contract-summarizer-used', 'contract', 'conversation', 'promise',
             'a summary message carries the text a summarizer call of its compaction answered, not a constant'),
    Property('contract-summarizer-input-fits', 'contract', 'conversation', 'promise',
             "the last summarizer call of each compaction attempt fits the summarizer's window"),
    Property('contract-summary-not-nested', 'contract', 'conversation', 'promise',
             "no summary message wraps another summary's framing (summaries do not nest)"),
    Property('contract-roles-valid', 'contract', 'conversation', 'promise',
             "every request obeys its provider's message-role rules (first message, alternation, tool results "
             'right after their calls, no unanswered call)'),
    Property('contract-disabled-means-disabled', 'contract', 'conversation', 'promise',
             'with compaction off nothing is ever compacted: every history and every request extends the one before'),
    Property('contract-under-threshold-noop', 'contract', 'conversation', 'promise',
             'no size compaction while the history is under the trigger (nor any when the runtime has no trigger)'),
    # -- contracts of the log and of the policy's writes (the audit reads them off a recorded log) -------------
    Property("seq-contiguity", "spec 1.4 step 1, 1.7", "log", "contract", "an event's seq is the next one"),
    Property("seq-gap-uncommitted", "spec 1.7", "log", "contract",
             "no seq gap without a later turn/end (dsh's scanner drops the rest of the log as an uncommitted tail)"),
    Property("torn-tail", "spec 1.7", "log", "contract",
             "the final record is terminated (dsh ignores an unterminated one and truncates it on repair)"),
    Property("surface-op-missing", "spec 1.4 step 2", "log", "contract",
             "every user/message, assistant/message and tool/result carries a surfaceOp"),
    Property("surface-op-forbidden", "spec 1.4 step 2", "log", "contract",
             "no other event type carries surfaceOp or sourceEventSeqs"),
    Property("surface-op-invalid", "spec 1.4 step 2", "log", "contract", "every surfaceOp is well formed"),
    Property("replace-range-missing", "spec 1.4 step 4", "log", "contract",
             "a replace names start and end seqs on the current surface"),
    Property("replace-range-reversed", "spec 1.4 step 4", "log", "contract",
             "a replace's start does not lie after its end on the surface"),
    Property("provenance-invalid", "spec 1.4 step 3", "log", "contract",
             "sourceEventSeqs are well formed, distinct, earlier, and present where required"),
    Property("provenance-missing-shadowed", "spec 1.4 step 3", "log", "contract",
             "a replace cites every node it shadows"),
    Property("tool-result-rewrite", "spec 1.4 step 5", "log", "contract",
             "a tool/result replace spans exactly one tool/result node and changes only its content"),
    Property("meter-fold", "spec 4.2", "log", "contract",
             "the token meter folds every event (step brackets and chunk citations intact)"),
    Property("shadow-price-mismatch", "spec 5.1", "log", "contract",
             "an armed shadow price names the range of the replace right after it"),
    Property("shadow-price-wrong", "spec 5.1, 8.2 step 7", "log", "contract",
             "a shadow price (shadowedTokenCount) equals the recomputed price of the range it shadows"),
    Property("shadowed-seqs-wrong", "spec 1.8, 8.2 step 7", "log", "contract",
             "a metering event's shadowedSeqs are the surface nodes its shadowedRange spans"),
    Property("checkpoint-source", "spec 8.2 step 9, 1.8", "compaction", "contract",
             "a checkpoint replacement carries the compact checkpoint source of its bracket"),
    Property("checkpoint-unbracketed", "spec 1.8, §15 G1", "compaction", "contract",
             "a compact-sourced replacement lies inside a compaction bracket (the optional compaction invariant)"),
    Property("lock-overlap", "spec 8.1 step 4, 1.5", "compaction", "contract",
             "no compaction activity while an earlier compaction/start is unmatched (and no later session/end-seed)"),
    Property("lock-orphaned", "spec 8.3, 1.5", "compaction", "contract",
             "every compaction/start is matched by a compaction/end (an unmatched one is crash evidence)"),
    Property("selection-mismatch", "spec 7, 9.2 step 11, 10.2, 11.2 step 3", "policy", "contract",
             "an automatic (or /compact) compaction replaces the range the policy's selection gives"),
    Property("pressure-below-threshold", "spec 9.2 steps 8, 10", "policy", "contract",
             "no pressure prune or compaction while measure() is below the threshold (no opportunistic compaction)"),
)
"""Every property, invariants first in verify's order, then promises, the conversation contract's promises, then
the log's contracts."""

CATALOGUE: dict[str, Property] = {p.id: p for p in PROPERTIES}
if len(CATALOGUE) != len(PROPERTIES):
    raise ValueError("a property id is listed twice")


def lookup(property_id: str) -> Property:
    """The property ``property_id``; ``KeyError`` naming the known ids otherwise."""
    try:
        return CATALOGUE[property_id]
    except KeyError:
        raise KeyError(f"unknown property {property_id!r}; known: {', '.join(CATALOGUE)}") from None


def at_level(level: str, kinds: tuple[str, ...] = (INVARIANT, PROMISE)) -> tuple[Property, ...]:
    """The properties of ``kinds`` a run at ``level`` can check (their level at or below it), in catalogue order.
    The ``conversation`` level stands apart: it reaches its own properties only, and the log levels never reach it."""
    return tuple(p for p in PROPERTIES if p.kind in kinds and _reaches(level, p.level))


def _reaches(level: str, needed: str) -> bool:
    if CONVERSATION in (level, needed):
        return level == needed
    return LEVELS.index(needed) <= LEVELS.index(level)
