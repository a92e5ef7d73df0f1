"""Replay a stored log through every fold of the model, in one pass (spec 2, 3, 4.2, 5).

Data flows one way: events → folds (surface, meter, shadow-price projection, observability) →
a :class:`ReplayResult` that records each replacement with its logged and recomputed prices and
the first rule the log broke. Memory is bounded by the surface, not the log: the only earlier
events kept are those still on the surface (the tool-result rewrite rule compares with them) and
the open step's chunks (the meter prices provider output from them).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .errors import ModelError, SeedError
from .event import ABSENT, METERING_EVENT_TYPES, Event
from .meter import MeterState, fold_meter, measure_state, Measurement
from .projection import Observability, SurfaceProjection, fold_claim, fold_observability
from .session import envelope_problem
from .surface import Surface, next_surface


@dataclass(frozen=True)
class Replacement:
    """One surface replace, as the audit reports it (its JSON shape)."""

    seq: int
    kind: str  # summary | prune | other
    start: int
    end: int
    shadowed_seqs: tuple[int, ...]
    logged_shadow_tokens: int | None
    recomputed_shadow_tokens: int
    replacement_tokens: int
    generation_after: int
    claim_action: str  # consume | unpriced-replace

    def to_json(self) -> dict:
        return {
            "seq": self.seq, "kind": self.kind, "range": [self.start, self.end],
            "shadowed_seqs": list(self.shadowed_seqs), "logged_shadow_tokens": self.logged_shadow_tokens,
            "recomputed_shadow_tokens": self.recomputed_shadow_tokens, "replacement_tokens": self.replacement_tokens,
            "generation_after": self.generation_after,
        }


@dataclass(frozen=True)
class ReplayResult:
    """What a log replay found. `error` is the first broken rule (replay stops there)."""

    events: int
    surface_nodes: tuple[int, ...]
    generation: int
    replacements: tuple[Replacement, ...]
    projection_total: int
    recount_total: int
    fully_metered: bool
    measurement: Measurement | None
    observability: Observability
    error: ModelError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class BoundedLookup:
    """Earlier events the folds may still read: current surface nodes and the open step's chunks.

    Earlier steps' chunks are kept only as (turn, step) for the meter's message, and only those of
    the previous step, so memory stays bounded by the surface (an older citation is still refused
    by the meter). Chunk data of any shape is tolerated (a corrupt log is reported, not crashed on)."""

    def __init__(self) -> None:
        self.nodes: dict[int, Event] = {}
        self.chunks: dict[int, Event] = {}
        self.stale: dict[int, tuple] = {}  # the previous step's chunks: only (turn, step)

    def __call__(self, seq: int) -> Event | None:
        if not isinstance(seq, int):
            return None
        found = self.nodes.get(seq) or self.chunks.get(seq)
        if found is None and seq in self.stale:
            turn, step = self.stale[seq]
            found = Event("assistant/chunk", seq, 0, {"turn": turn, "step": step, "chunk": {}})
        return found

    def remember(self, event: Event, on_surface: bool, shadowed: tuple[int, ...]) -> None:
        """After ``event`` folded: ``on_surface`` when it became a node, ``shadowed`` the nodes it replaced."""
        if event.type == "step/start":
            self.stale = {seq: (_field(chunk.data, "turn"), _field(chunk.data, "step"))
                          for seq, chunk in self.chunks.items()}
            self.chunks.clear()
        elif event.type == "assistant/chunk":
            self.chunks[event.seq] = event
        for seq in shadowed:
            self.nodes.pop(seq, None)
        if on_surface:
            self.nodes[event.seq] = event


def _field(data, key: str):
    return data.get(key) if isinstance(data, dict) else None


def replay(events: Iterable[Event], *, check_shapes: bool = False) -> ReplayResult:
    """Fold every model rule over `events` (a stored log, seq 0 first).

    By default the log is replayed with live-append semantics (spec 1.3: message shapes are not
    checked). With ``check_shapes`` it is replayed the way a reload does (spec 1.5 seed checks, rule
    ``seed``); a log accepted live can fail there (spec §15 G18)."""
    lookup = BoundedLookup()
    surface = Surface()
    meter = MeterState()
    projection = SurfaceProjection()
    observability = Observability()
    replacements: list[Replacement] = []
    previous: Event | None = None
    fully_metered = True
    count = 0
    error: ModelError | None = None
    for event in events:
        try:
            if check_shapes:
                record = {k: v for k, v in event.to_json().items() if v is not ABSENT}
                problem = envelope_problem(record, count)
                if problem is not None:
                    raise SeedError(problem, seq=count)
            surface_after, plan = next_surface(surface, event, count, lookup)
            meter_after = fold_meter(meter, event, lookup)
            step = fold_claim(projection.claim, event)
            observability = fold_observability(observability, event)
        except ModelError as exc:
            if exc.seq is None:
                exc.seq = count
            error = exc
            break
        except (KeyError, TypeError, IndexError, AttributeError) as exc:
            # dsh would throw a TypeError reading this event; name the shape rule a reload states.
            record = {k: v for k, v in event.to_json().items() if v is not ABSENT}
            problem = envelope_problem(record, count) or f"{type(exc).__name__}: {exc}"
            error = ModelError(f"event at seq {count} ({event.type}) has a shape dsh cannot read: {problem}",
                               seq=count, rule="message-shape")
            break
        if plan.kind == "replace":
            metered = previous is not None and previous.type in METERING_EVENT_TYPES
            kind = {"compaction/summary": "summary", "compaction/prune": "prune"}.get(previous.type) if metered else "other"
            shadow_prices = dict(meter.nodes)
            replacements.append(Replacement(
                seq=event.seq, kind=kind or "other", start=plan.start, end=plan.end, shadowed_seqs=plan.shadowed,
                logged_shadow_tokens=previous.data.get("shadowedTokenCount") if metered else None,
                recomputed_shadow_tokens=sum(shadow_prices[seq] for seq in plan.shadowed),
                replacement_tokens=dict(meter_after.nodes)[event.seq],
                generation_after=surface_after.generation, claim_action=step.action,
            ))
            if step.action != "consume":
                fully_metered = False
        surface, meter = surface_after, meter_after
        projection = SurfaceProjection(projection.total + step.delta, step.claim)
        lookup.remember(event, plan.kind != "none", plan.shadowed)
        previous = event
        count += 1
    measurement = None
    if error is None:
        try:
            measurement = measure_state(meter)
        except ModelError as exc:  # pragma: no cover - measure_state has no failure path today
            error = exc
    return ReplayResult(
        events=count, surface_nodes=surface.nodes, generation=surface.generation,
        replacements=tuple(replacements), projection_total=projection.total, recount_total=meter.surface_tokens,
        fully_metered=fully_metered, measurement=measurement, observability=observability, error=error,
    )
