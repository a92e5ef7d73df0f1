"""Seeded bugs of the compaction level: range selection and the locked compaction transaction.

``BUGS[name] = (level, section, idea, runtime class)``; each class replaces ONE method of the
embedded :class:`~surfacecheck.runtime.embedded.compaction.Compactor` or
:class:`~surfacecheck.runtime.embedded.transaction.Transaction`, plugged in through the runtime's
``compaction_class`` / ``transaction_class`` hooks. ``verify --level compaction`` finds each one.
"""
from __future__ import annotations

from surfacecheck.runtime.embedded import EmbeddedRuntime
from surfacecheck.runtime.embedded.compaction import Compactor
from surfacecheck.runtime.embedded.transaction import Transaction


class ErrorCloseSkipped(Transaction):
    """A failure after `compaction/start` is never closed: no error `compaction/end`, so the bracket stays
    open and the session lock stays live (spec 8.3 "exactly one close attempt"; seed §9)."""

    def close_on_failure(self, failure, lifecycle):
        return failure, False


class ShrinkRuleSkipped(Transaction):
    """The shrink rule is not enforced: a checkpoint priced at or above the span it shadows is committed
    (spec 8.2 step 10 summary-not-smaller; seed §6)."""

    @staticmethod
    def shrink_rule(framed, shadowed_tokens):
        return None


class SpanOnlyStability(Transaction):
    """Automatic compaction checks only the selected span for stability, not the whole surface, so another
    producer's append during the summary does not abort it (spec 8.2 step 12: automatic = whole surface)."""

    def assert_stable(self, manual, selection, before, selected):
        super().assert_stable(True, selection, before, selected)


class CutTowardTail(Compactor):
    """The retention walk stops one node late: the cut moves one node toward the tail, so the retain budget is
    no longer kept whole (spec 7 step 3)."""

    @staticmethod
    def retention_index(prices, retain_tokens):
        keep = Compactor.retention_index(prices, retain_tokens)
        return min(keep + 1, max(len(prices) - 1, 0))


def _runtime(name: str, **attrs) -> type[EmbeddedRuntime]:
    return type(f"Embedded_{name.replace('-', '_')}", (EmbeddedRuntime,), attrs)


BUGS = {
    "error-close-skipped": ("compaction", "spec 8.3; seed §9", "a failed compaction is never closed",
                            _runtime("error-close-skipped", transaction_class=ErrorCloseSkipped)),
    "shrink-rule-skipped": ("compaction", "spec 8.2 step 10; seed §6",
                            "a checkpoint priced at or above its span is accepted",
                            _runtime("shrink-rule-skipped", transaction_class=ShrinkRuleSkipped)),
    "span-only-stability": ("compaction", "spec 8.2 step 12; seed §9",
                            "automatic compaction ignores a concurrent change outside the selected span",
                            _runtime("span-only-stability", transaction_class=SpanOnlyStability)),
    "cut-toward-tail": ("compaction", "spec 7 step 3; seed §6", "the cut is moved one node toward the tail",
                        _runtime("cut-toward-tail", compaction_class=CutTowardTail)),
}
