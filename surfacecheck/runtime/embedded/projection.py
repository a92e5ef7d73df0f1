"""The O(1) shadow-price projection (spec 5.1; seed §§15-16), built the production way.

State is a running total plus at most one pending claim ``(start, end, tokens)`` — nothing per
node. `compaction/summary` and `compaction/prune` *arm* the claim; the very next event, if it is a
replace of exactly that range, *consumes* it (delta = replacement price - claimed shadow price);
any other event *expires* it; a replace with no claim is *unpriced* (delta 0, spec §15 G1 drift);
a replace meeting a claim for another range is an error (`shadow-claim-mismatch`).

Override points for seeded bugs (``bugs.py``): :meth:`_arm`, :meth:`_expire_claim`,
:meth:`_consume`, :meth:`_unpriced_replace`, :meth:`_append`.
"""
from __future__ import annotations

from surfacecheck.model.errors import ProjectionClaimError

from .events import APPEND, METERING_TYPES, price_event, surface_op


class ShadowPriceProjection:
    """`foldSurfaceProjection` as a mutable O(1) fold. ``ops`` counts state cells touched (cost model)."""

    __slots__ = ("running_total", "claim", "unpriced", "ops", "error", "__dict__")

    def __init__(self) -> None:
        self.running_total = 0
        self.claim: tuple[int, int, int] | None = None
        self.unpriced = 0
        self.ops = 0
        self.error: ProjectionClaimError | None = None

    @property
    def total(self) -> int | None:
        """The projected surface total; ``None`` once the claim fold has thrown (it is stuck, spec 4.2)."""
        return None if self.error is not None else self.running_total

    @property
    def metered(self) -> bool:
        """Every replace so far consumed an adjacent claim (the projection equals the recount, spec 5.1)."""
        return self.unpriced == 0

    def observe(self, event: dict) -> None:
        """Fold one event (spec 5.1). Raises ProjectionClaimError (state untouched) on a mismatched claim;
        after a failure the projection is stuck and every later event fails again (spec 4.2 transactional)."""
        if self.error is not None:
            raise self.error
        try:
            self._fold(event)
        except (KeyError, TypeError, IndexError, AttributeError) as exc:  # a shape dsh cannot read: stuck
            self.error = exc
            raise

    def _fold(self, event: dict) -> None:
        kind = event.get("type")
        if kind in METERING_TYPES:
            data = event["data"]
            rng = data["shadowedRange"]
            self._arm(rng["start"], rng["end"], data["shadowedTokenCount"])
            return
        op = surface_op(event)
        if op is None:
            self._expire_claim()
            return
        tokens = price_event(event)
        if op == APPEND:
            self._append(tokens)
            return
        claim = self.claim
        if claim is None:
            self._unpriced_replace(tokens)
            return
        if (claim[0], claim[1]) != op:
            self.error = ProjectionClaimError(
                f"token surface: replace at seq {event.get('seq')} over range {op[0]}-{op[1]} has no adjacent shadow"
                f" price (armed claim covers {claim[0]}-{claim[1]})",
                seq=event.get("seq"),
            )
            raise self.error
        self._consume(tokens, claim)

    # -- transitions (override points) ----------------------------------------------------------
    def _arm(self, start: int, end: int, tokens: int) -> None:
        """A metering event arms (or overwrites) the one pending claim."""
        self.claim = (start, end, tokens)
        self.ops += 1

    def _expire_claim(self) -> None:
        """Any event that is not the adjacent replace drops the claim ("immediately before" is literal)."""
        self.claim = None
        self.ops += 1

    def _append(self, tokens: int) -> None:
        """An append adds its price and expires the claim."""
        self.running_total += tokens
        self._expire_claim()

    def _consume(self, tokens: int, claim: tuple[int, int, int]) -> None:
        """The adjacent replace of the claimed range: delta = replacement - shadowed price."""
        self.running_total += tokens - claim[2]
        self.claim = None
        self.ops += 2

    def _unpriced_replace(self, tokens: int) -> None:
        """No claim: delta 0 (the running total drifts by shadowed - replacement, spec §15 G1)."""
        self.unpriced += 1
        self.ops += 1
