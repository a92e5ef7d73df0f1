"""The O(1) projections and the shadow-price protocol (seed §15-16; spec 5).

The whole state of the surface projection is a running total plus at most one pending
:class:`Claim`. `compaction/summary` and `compaction/prune` *arm* a claim with the shadowed price;
the immediately following replace of that exact range *consumes* it (delta = replacement −
shadowed); any other event *expires* it; a replace with no claim is *unpriced* (delta 0, spec
§15 G1 drift); a replace meeting a claim for another range is an error.

On top of that fold sit the three observability surfaces of seed §15 (spec 5.2): usage
(`tokenUsage`), pressure (`contextPressure`) and the context breakdown (`contextBreakdown`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .errors import ProjectionClaimError
from .estimate import canonical_header, estimate_system_tokens, estimate_tools_tokens
from .event import METERING_EVENT_TYPES, Event
from .frozen import quick_init
from .seams import active


@quick_init
@dataclass(frozen=True)
class Claim:
    """`ShadowPriceClaim {start, end, tokens}`: the price a metering event says the next replace shadows."""

    start: int
    end: int
    tokens: int


@quick_init
@dataclass(frozen=True)
class ClaimStep:
    """One step of the claim fold: the signed delta, the claim after the event, and what happened."""

    delta: int
    claim: Claim | None
    action: str  # arm | append | consume | unpriced-replace | expire | none


def fold_claim(claim: Claim | None, event: Event) -> ClaimStep:
    """`foldSurfaceProjection(claim, event)` (spec 5.1)."""
    if event.type in METERING_EVENT_TYPES:
        data = event.data
        rng = data["shadowedRange"]
        return ClaimStep(0, Claim(rng["start"], rng["end"], data["shadowedTokenCount"]), "arm")
    if not (event.is_surface_type and (event.is_append or event.replace is not None)):
        return ClaimStep(0, None, "expire" if claim is not None else "none")
    tokens = active().node_price(event)
    if event.is_append:
        return ClaimStep(tokens, None, "append")
    op = event.replace
    if claim is None:
        return ClaimStep(0, None, "unpriced-replace")
    if (claim.start, claim.end) != (op.start, op.end):
        raise ProjectionClaimError(
            f"token surface: replace at seq {event.seq} over range {op.start}-{op.end} has no adjacent shadow price"
            f" (armed claim covers {claim.start}-{claim.end})",
            seq=event.seq,
        )
    return ClaimStep(tokens - claim.tokens, None, "consume")


@quick_init
@dataclass(frozen=True)
class SurfaceProjection:
    """Spec 5 / seed §16 state: the running total and the one pending claim. Nothing per node."""

    total: int = 0
    claim: Claim | None = None


def fold_projection(state: SurfaceProjection, event: Event) -> SurfaceProjection:
    step = active().fold_claim(state.claim, event)
    return SurfaceProjection(state.total + step.delta, step.claim)


# -- usage (`tokenUsage`, stateVersion 1) --------------------------------------------------------
@quick_init
@dataclass(frozen=True)
class Buckets:
    uncached_input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @classmethod
    def of(cls, usage: dict) -> "Buckets":
        return cls(usage.get("inputTokens", 0), usage.get("outputTokens", 0),
                   usage.get("cacheReadTokens", 0), usage.get("cacheWriteTokens", 0))

    def plus(self, other: "Buckets", sign: int = 1) -> "Buckets":
        return Buckets(self.uncached_input + sign * other.uncached_input, self.output + sign * other.output,
                       self.cache_read + sign * other.cache_read, self.cache_write + sign * other.cache_write)


@quick_init
@dataclass(frozen=True)
class TokenUsage:
    """`tokenUsage` (spec 5.2): cumulative billing; a same-(turn, step) resample replaces the previous one.
    `compaction/summary.usage` is never counted (spec §15 G10)."""

    totals: Buckets = Buckets()
    last: tuple | None = None  # (turn, step, Buckets)


def _sampled_usage(event: Event) -> tuple | None:
    data = event.data if isinstance(event.data, dict) else {}
    if event.type == "assistant/chunk" and isinstance(data.get("chunk"), dict) and data["chunk"].get("type") == "usage":
        return data.get("turn"), data.get("step"), data["chunk"]["usage"]
    if event.type == "assistant/message" and data.get("usage") is not None:
        return data.get("turn"), data.get("step"), data["usage"]
    return None


def fold_usage(state: TokenUsage, event: Event) -> TokenUsage:
    sample = _sampled_usage(event)
    if sample is None:
        return state
    turn, step, usage = sample
    buckets = Buckets.of(usage)
    previous = state.last[2] if state.last is not None and state.last[:2] == (turn, step) else None
    if previous is not None and previous == buckets:
        return state
    totals = state.totals.plus(previous, -1) if previous is not None else state.totals
    return TokenUsage(totals.plus(buckets), (turn, step, buckets))


# -- pressure (`contextPressure`, stateVersion 4) ------------------------------------------------
@dataclass(frozen=True)
class ContextPressure:
    """`contextPressure` (spec 5.2): newest sample's input pressure re-projected by the claim-fold total."""

    context_window: int | None = None
    pressure_tokens: int | None = None
    surface_tokens: int = 0
    sampled_surface_tokens: int | None = None
    claim: Claim | None = None

    @property
    def projected_tokens(self) -> int | None:
        if self.pressure_tokens is None or self.sampled_surface_tokens is None:
            return None
        return max(0, self.pressure_tokens + self.surface_tokens - self.sampled_surface_tokens)


def fold_pressure(state: ContextPressure, event: Event) -> ContextPressure:
    step = active().fold_claim(state.claim, event)
    nxt = state
    if event.type == "request/context":
        nxt = replace(nxt, context_window=event.data.get("contextWindow"))
    sample = _sampled_usage(event)
    if sample is not None:
        usage = sample[2]
        pressure = usage.get("inputTokens", 0) + usage.get("cacheReadTokens", 0) + usage.get("cacheWriteTokens", 0)
        # the sample is stamped before the same event's surface delta (spec 5.2)
        nxt = replace(nxt, pressure_tokens=pressure, sampled_surface_tokens=nxt.surface_tokens)
    return replace(nxt, surface_tokens=nxt.surface_tokens + step.delta, claim=step.claim)


# -- composition (`contextBreakdown`, stateVersion 2) --------------------------------------------
@quick_init
@dataclass(frozen=True)
class ContextBreakdown:
    """`contextBreakdown` (spec 5.2): system/tools priced last-wins per header; messages = claim-fold total."""

    system_tokens: int = 0
    tools_tokens: int = 0
    message_tokens: int = 0
    claim: Claim | None = None


def fold_breakdown(state: ContextBreakdown, event: Event) -> ContextBreakdown:
    step = active().fold_claim(state.claim, event)
    system, tools = state.system_tokens, state.tools_tokens
    if event.type == "request/header":
        header = canonical_header(event.data.get("header"))
        system, tools = estimate_system_tokens(header), estimate_tools_tokens(header)
    return ContextBreakdown(system, tools, state.message_tokens + step.delta, step.claim)


@dataclass(frozen=True)
class Observability:
    """The three observability surfaces of seed §15, folded together (spec 5.2)."""

    usage: TokenUsage = TokenUsage()
    pressure: ContextPressure = ContextPressure()
    breakdown: ContextBreakdown = ContextBreakdown()


def fold_observability(state: Observability, event: Event) -> Observability:
    return Observability(fold_usage(state.usage, event), fold_pressure(state.pressure, event),
                         fold_breakdown(state.breakdown, event))


UNIT_SCHEMAS = {"tokenUsage": (), "contextBreakdown": (), "contextPressure": ("contextWindow",)}
"""Each projection unit's zod schema (spec 5.2; token-meter `projectionSchema`, `pressureSchema`, the breakdown's):
every field an integer, non-negative, the ones named here positive. `snapshot()` passes each value through it."""


def schema_refuses(unit: str, value: dict) -> bool:
    """Whether ``unit``'s schema refuses ``value`` (its view, by dsh's field names or the protocol's)."""
    positive = UNIT_SCHEMAS[unit]
    return not all(isinstance(v, int) and not isinstance(v, bool) and (v > 0 if k in positive else v >= 0)
                   for k, v in value.items())
