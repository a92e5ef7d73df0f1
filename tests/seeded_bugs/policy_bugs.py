"""Seeded bugs of the policy level: the pressure / overflow engine and its range selection.

``BUGS[name] = (level, section, idea, runtime class)``; each class breaks one rule only. They plug
in through the runtime's ``engine_class`` hook (the engine's ``_compactor`` is its selection seam) or,
for runtime context, its ``context_class`` hook.
"""
from __future__ import annotations

from dataclasses import replace

from surfacecheck.model.errors import CompactionError
from surfacecheck.runtime.embedded import EmbeddedRuntime
from surfacecheck.runtime.embedded.compaction import NO_FAULTS, Compactor
from surfacecheck.runtime.embedded.context import ContextRetention
from surfacecheck.runtime.embedded.policy import Engine
from surfacecheck.runtime.embedded.transaction import Transaction


class RetryWithoutProgress(Engine):
    """Overflow recovery retries the step even when the generation did not advance (seed §12: only after progress)."""

    @staticmethod
    def retry_allowed(advanced, aborted, error):
        return not aborted


class ThresholdInclusive(Engine):
    """The pressure listener treats a total *on* the threshold as below it (`<=` for `<`, spec 9.2): found only
    when a total lands exactly on the threshold (the policy machine's boundary rule puts it there)."""

    @staticmethod
    def below_threshold(total, threshold):
        return total <= threshold


class RetriesUncounted(Engine):
    """A granted overflow retry is never counted, so `maxOverflowRetries` never stops recovery (spec 10.2)."""

    def request_error(self, code, scripts, faults=None, aborted=False):
        outcome, retry = super().request_error(code, scripts, **({} if faults is None else {"faults": faults}),
                                               aborted=aborted)
        if retry:
            self.retries -= 1
        return outcome, retry


class OverflowBudgetExclusive(Engine):
    """Recovery runs once more than `maxOverflowRetries` allows (`>` for `>=`, spec 10.2): found only when the count
    reaches the budget (the overflow budget rule takes it there)."""

    @staticmethod
    def budget_spent(retries, budget):
        return retries > budget


class CountNeverCleared(Engine):
    """Neither an idle status nor an assistant message clears the overflow count (spec 10.2): once the budget is
    spent, recovery never runs again in the engine's life."""

    def observe(self, event):
        return None


class UnbalancedKeep(Compactor):
    @staticmethod
    def balanced_keep(keep, balanced):
        return keep


class UnbalancedRange(Engine):
    """Pressure / overflow range selection skips the head-ward move to a balanced cut (spec 7 step 4)."""

    def _compactor(self):
        return UnbalancedKeep(self.rt)


class TailOnlyRetention(Compactor):
    @staticmethod
    def retention_index(prices, retain_tokens):
        return max(len(prices) - 1, 0)


class RetentionIgnored(Engine):
    """The retention walk ignores the retain budget and keeps only the newest node (spec 7 step 3, 9.2)."""

    def _compactor(self):
        return TailOnlyRetention(self.rt)


class PruneOnTheThreshold(Compactor):
    def prune(self, config, faults=NO_FAULTS):
        return super().prune(replace(config, threshold_chars=config.threshold_chars - 1), faults)


class PruneThresholdExclusive(Engine):
    """A tool result whose text is exactly `thresholdChars` code points is pruned (`<` for `<=`, spec 6 step 1):
    found only when a result lands on the threshold (the policy machine's prune boundary rule puts it there)."""

    def _compactor(self):
        return PruneOnTheThreshold(self.rt)


class BudgetStrictWalk(Compactor):
    @staticmethod
    def retention_index(prices, retain_tokens):
        accumulated, keep = 0, len(prices)
        for index in range(len(prices) - 1, -1, -1):
            accumulated += prices[index]
            keep = index
            if accumulated > retain_tokens:
                break
        return keep


class RetentionBudgetExclusive(Engine):
    """The retention walk stops only past the budget (`>` for `>=`, spec 7 step 3), keeping one node more when the
    tail's prices sum exactly to `retainTokens` (the retention boundary rule puts them there)."""

    def _compactor(self):
        return BudgetStrictWalk(self.rt)


class ShrinkRuleInclusive(Transaction):
    """A checkpoint priced exactly at the span it shadows is committed (`>` for `>=`, spec 8.2 step 10): found only
    when a summary's framed price lands on the span's (the shrink boundary rule puts it there)."""

    @staticmethod
    def shrink_rule(framed, shadowed_tokens):
        if framed > shadowed_tokens:
            raise CompactionError(f"summary is not smaller than the shadowed content ({framed} estimated framed "
                                  f"tokens >= {shadowed_tokens})")


class ShadowingIgnored(ContextRetention):
    """A replacement citing the retained snapshot does not clear it, so a shadowed snapshot still counts as
    retained and is never re-emitted (spec 12 "Live": `retained = null` on a citing replacement; seed §14)."""

    @staticmethod
    def shadowed(event, seq):
        return False


def _runtime(name: str, engine: type[Engine] = Engine, **attrs) -> type[EmbeddedRuntime]:
    return type(f"Embedded_{name.replace('-', '_')}", (EmbeddedRuntime,), {"engine_class": engine, **attrs})


BUGS = {
    "retry-without-progress": ("policy", "spec 10.2; seed §12 (S12)", "overflow retry granted without progress",
                               _runtime("retry-without-progress", RetryWithoutProgress)),
    "threshold-inclusive": ("policy", "spec 9.2 (`total < threshold`)", "a total on the threshold counts as below it",
                            _runtime("threshold-inclusive", ThresholdInclusive)),
    "overflow-retries-uncounted": ("policy", "spec 10.2 (maxOverflowRetries)", "granted retries are never counted",
                                   _runtime("overflow-retries-uncounted", RetriesUncounted)),
    "overflow-budget-exclusive": ("policy", "spec 10.2 (`retries >= maxOverflowRetries`)",
                                  "recovery runs once more than the budget allows",
                                  _runtime("overflow-budget-exclusive", OverflowBudgetExclusive)),
    "overflow-count-never-cleared": ("policy", "spec 10.2 (idle, assistant/message clear the count)",
                                     "the overflow count is never cleared",
                                     _runtime("overflow-count-never-cleared", CountNeverCleared)),
    "unbalanced-range": ("policy", "spec 7 step 4; seed §7", "the selected range may end at an unbalanced cut",
                         _runtime("unbalanced-range", UnbalancedRange)),
    "retention-ignored": ("policy", "spec 7 step 3, 9.2; seed §6", "the retention walk ignores the retain budget",
                          _runtime("retention-ignored", RetentionIgnored)),
    "prune-threshold-exclusive": ("policy", "spec 6 step 1 (`total <= thresholdChars`)",
                                  "a result of exactly thresholdChars code points is pruned",
                                  _runtime("prune-threshold-exclusive", PruneThresholdExclusive)),
    "retention-budget-exclusive": ("policy", "spec 7 step 3 (`acc >= retainTokens`)",
                                   "the retention walk passes a tail summing exactly to the budget",
                                   _runtime("retention-budget-exclusive", RetentionBudgetExclusive)),
    "shrink-rule-inclusive": ("policy", "spec 8.2 step 10 (`framed >= shadowed`)",
                              "a checkpoint priced exactly at its span is committed",
                              _runtime("shrink-rule-inclusive", transaction_class=ShrinkRuleInclusive)),
    "runtime-context-not-reemitted": ("policy", "spec 12 (live rule, one-request window); seed §14",
                                      "a snapshot shadowed by a replacement is never re-emitted",
                                      _runtime("runtime-context-not-reemitted", context_class=ShadowingIgnored)),
}
