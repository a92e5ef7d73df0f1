"""Seeded bugs of the log level: the surface manager, the pairing cache, the meter, the projection.

``BUGS[name] = (level, section, idea, runtime class)``; each class breaks one rule only.
"""
from __future__ import annotations

from surfacecheck.model.estimate import estimate_header
from surfacecheck.runtime.embedded import EmbeddedRuntime
from surfacecheck.runtime.embedded.meter import IncrementalMeter
from surfacecheck.runtime.embedded.pairing import PairingCache
from surfacecheck.runtime.embedded.projection import ShadowPriceProjection
from surfacecheck.runtime.embedded.session import EmbeddedSession
from surfacecheck.runtime.embedded.surface import SurfaceManager


def _with_surface(surface_cls: type[SurfaceManager]) -> type[EmbeddedSession]:
    class Session(EmbeddedSession):
        def __init__(self) -> None:
            super().__init__()
            self.surface = surface_cls()

    return Session


# -- spec 3: the tool-pairing cache -----------------------------------------------------------------
class OffByOneCutPairing(PairingCache):
    """The flag pushed for a node is computed *before* its delta: every cut reports its predecessor's balance."""

    def _fold(self, balanced, running, nodes, start, event_at):
        out, after = super()._fold(balanced, running, nodes, start, event_at)
        count = len(nodes) - start
        if count:
            fresh = out[len(out) - count:]
            out[len(out) - count:] = [running == 0] + fresh[:-1]
        return out, after


class StalePairing(PairingCache):
    """The cache is only ever extended: a replace (new generation) does not trigger the rebuild."""

    def _needs_rebuild(self, nodes, generation):
        return self.processed > len(nodes) or self.generation == -1


# -- spec 2.1 / 1.4: the surface manager ----------------------------------------------------------------
class AppendBumpsGeneration(SurfaceManager):
    def apply(self, plan):
        super().apply(plan)
        if plan[0] == "append":
            self._bump_generation()


class NoTailReindex(SurfaceManager):
    """A replace splices the node list but re-indexes only the replacement, not the moved tail."""

    def _splice(self, start_index, end_index, seq):
        for node in self.nodes[start_index:end_index + 1]:
            del self.index[node]
        self.nodes[start_index:end_index + 1] = [seq]
        self.index[seq] = start_index


class ReversedRangeAccepted(SurfaceManager):
    """`replacementRange` forgets the start-after-end check (spec 1.4 step 4)."""

    def _range(self, event, start, end):
        try:
            return super()._range(event, start, end)
        except Exception as exc:
            if "is after end seq" not in str(exc):
                raise
            return sorted((self.index[start], self.index[end]))


class UncitedShadowAccepted(SurfaceManager):
    """`assertProvenance` no longer requires every shadowed node to be cited (spec 1.4 step 3)."""

    def _check_provenance(self, event, shadowed):
        super()._check_provenance(event, ())


class RewriteUnchecked(SurfaceManager):
    """`assertToolResultRewrite` is skipped: a tool/result replace may change more than content (spec 1.4 step 5)."""

    @staticmethod
    def _check_tool_result_rewrite(event, shadowed, event_at):
        return None


# -- spec 4.2-4.3: the meter ------------------------------------------------------------------------------
class ReplaceKeepsOldPrice(IncrementalMeter):
    """A replace adds the replacement's price but never subtracts the shadowed span's."""

    def _replace_span(self, seq, tokens, span):
        super()._replace_span(seq, tokens, span)
        self.surface_tokens += span[2]


class StepStartAfterMessages(IncrementalMeter):
    """`stepStart.surfaceTokens` is stamped as zero instead of the surface before the step (spec 4.2)."""

    def _step_start(self, data):
        return (data.get("turn"), data.get("step"), 0)


class AnchorOnlyAboveEstimate(IncrementalMeter):
    """The usage baseline is taken only when the provider's count exceeds the estimate (`>` for `>=`, spec 4.2): a
    usage equal to the estimate anchors as estimated (the meter anchor rule lands it there)."""

    def _anchor_for(self, event, data, header, durable):
        anchor = super()._anchor_for(event, data, header, durable)
        if anchor[2] == "usage" and anchor[3] == estimate_header(header) + anchor[1]:
            return (anchor[0], anchor[1], "estimated", anchor[3])
        return anchor


# -- spec 5.1: the O(1) projection ------------------------------------------------------------------------
class ClaimNeverExpires(ShadowPriceProjection):
    """An intervening event does not expire the armed claim ("immediately before" ignored)."""

    def _expire_claim(self):
        self.ops += 1


class ConsumeIgnoresShadowPrice(ShadowPriceProjection):
    """The adjacent replace adds its price but does not subtract the claimed shadow price."""

    def _consume(self, tokens, claim):
        self.running_total += tokens
        self.claim = None


class UnpricedReplaceCounted(ShadowPriceProjection):
    """A replace with no claim adds its price as if it were an append (spec 5.1: it must be neutral)."""

    def _unpriced_replace(self, tokens):
        self.running_total += tokens
        self.unpriced += 1


class ClaimRangeIgnored(ShadowPriceProjection):
    """A claim is consumed by a replace of *any* range (the range check of spec 5.1 is skipped)."""

    def _fold(self, event):
        claim = self.claim
        op = event.get("surfaceOp")
        if claim is not None and isinstance(op, dict) and op.get("op") == "replace":
            self.claim = (op.get("start"), op.get("end"), claim[2])
        super()._fold(event)


def _runtime(name: str, **hooks) -> type[EmbeddedRuntime]:
    return type(f"Embedded_{name.replace('-', '_')}", (EmbeddedRuntime,), hooks)


BUGS = {
    "off-by-one-cut": ("log", "spec 3; seed §7", "each cut reports the balance of the cut before it",
                       _runtime("off-by-one-cut", pairing_class=OffByOneCutPairing)),
    "pairing-cache-not-rebuilt": ("log", "spec 3 (balanceCache); seed §7",
                                  "the pairing cache is extended but never rebuilt after a replace",
                                  _runtime("pairing-cache-not-rebuilt", pairing_class=StalePairing)),
    "generation-bumped-on-append": ("log", "spec 2.1; seed §11", "replaceGeneration also grows on an append",
                                    _runtime("generation-bumped-on-append",
                                             session_class=_with_surface(AppendBumpsGeneration))),
    "tail-not-reindexed": ("log", "spec 2.1-2.2 (incremental manager)",
                           "a replace leaves stale positions for the nodes after it",
                           _runtime("tail-not-reindexed", session_class=_with_surface(NoTailReindex))),
    "reversed-range-accepted": ("log", "spec 1.4 step 4", "a replace whose start is after its end is accepted",
                                _runtime("reversed-range-accepted",
                                         session_class=_with_surface(ReversedRangeAccepted))),
    "uncited-shadow-accepted": ("log", "spec 1.4 step 3", "a replace need not cite every shadowed node",
                                _runtime("uncited-shadow-accepted",
                                         session_class=_with_surface(UncitedShadowAccepted))),
    "rewrite-unchecked": ("log", "spec 1.4 step 5; seed §5", "a tool/result rewrite may change more than content",
                          _runtime("rewrite-unchecked", session_class=_with_surface(RewriteUnchecked))),
    "replace-keeps-old-price": ("log", "spec 4.2 (surface-fold)", "the meter never subtracts a shadowed span",
                                _runtime("replace-keeps-old-price", meter_class=ReplaceKeepsOldPrice)),
    "step-start-zero": ("log", "spec 4.2-4.3 (usage anchor)", "stepStart surface tokens stamped as zero",
                        _runtime("step-start-zero", meter_class=StepStartAfterMessages)),
    "anchor-strict": ("log", "spec 4.2 (`P >= E`)", "usage equal to the estimate does not anchor as usage",
                      _runtime("anchor-strict", meter_class=AnchorOnlyAboveEstimate)),
    "claim-not-expired": ("log", "spec 5.1; seed §16", "an intervening event does not expire the armed claim",
                          _runtime("claim-not-expired", projection_class=ClaimNeverExpires)),
    "shadow-price-not-subtracted": ("log", "spec 5.1; seed §16", "consuming a claim ignores its shadow price",
                                    _runtime("shadow-price-not-subtracted",
                                             projection_class=ConsumeIgnoresShadowPrice)),
    "unpriced-replace-counted": ("log", "spec 5.1, §15 G1", "a replace without claim is priced like an append",
                                 _runtime("unpriced-replace-counted", projection_class=UnpricedReplaceCounted)),
    "claim-range-ignored": ("log", "spec 5.1 (adjacent claim range)", "a claim is consumed by a replace of any range",
                            _runtime("claim-range-ignored", projection_class=ClaimRangeIgnored)),
}
