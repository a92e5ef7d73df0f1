"""`TokenMeter.measure()`: the policy's view of pressure (seed §3; spec 4.2-4.4).

The meter keeps every surface node's price (no claims: it always knows per-node prices), the
latest logged header, the open step's starting surface price, and an *anchor* set by each
`assistant/message`. `measure` combines them (spec 4.3). This is deliberately not the O(1)
projection of spec 5 (spec 0.1 fact 3); :mod:`model.projection` is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from .errors import TokenMeterError
from .estimate import ROLE_OVERHEAD, canonical_header, estimate_content, estimate_header, estimate_message
from .event import Event
from .frozen import quick_init
from .seams import active
from .surface import derive_event_message


# -- assembling provider output from chunks (dsh-llm `BlockAssembler`) ---------------------------
def assemble_blocks(chunks: Iterable[dict]) -> list[dict]:
    """`BlockAssembler.blocks()`: closed blocks win, open ones are assembled from deltas; a
    `max-tokens` finish drops tool calls. Used to price the provider-side assistant output (spec 4.2)."""
    partials: dict[int, dict] = {}
    order: list[int] = []
    finish: dict = {"kind": "stop"}

    def ensure(index: int, block_type: str) -> dict:
        if index not in partials:
            partials[index] = {"blockType": block_type, "text": "", "args": "", "id": None, "name": None, "block": None}
            order.append(index)
        return partials[index]

    for chunk in chunks:
        kind = chunk.get("type")
        if kind == "block-start":
            ensure(chunk["index"], chunk["blockType"])
        elif kind in ("text-delta", "reasoning-delta"):
            partial = ensure(chunk["index"], "text" if kind == "text-delta" else "reasoning")
            if partial["block"] is None:
                partial["text"] += chunk["text"]
        elif kind == "tool-call-delta":
            partial = ensure(chunk["index"], "tool-call")
            if partial["block"] is None:
                partial["id"] = chunk.get("id")
                if chunk.get("name"):
                    partial["name"] = chunk["name"]
                partial["args"] += chunk.get("argumentsDelta", "")
        elif kind == "block-end":
            partial = ensure(chunk["index"], chunk["block"]["type"])
            if partial["block"] is None:
                partial["block"] = chunk["block"]
        elif kind == "finish":
            finish = chunk.get("reason") or {"kind": "stop"}

    def assemble(index: int) -> dict:
        partial = partials[index]
        if partial["block"] is not None:
            return partial["block"]
        if partial["blockType"] in ("text", "reasoning"):
            return {"type": partial["blockType"], "text": partial["text"]}
        if partial["blockType"] == "tool-call":
            return {"type": "tool-call", "id": partial["id"] or f"call-{index}", "name": partial["name"] or "",
                    "arguments": partial["args"]}
        raise TokenMeterError(f'cannot assemble incomplete block of type "{partial["blockType"]}"')

    blocks = [assemble(index) for index in order]
    if finish.get("kind") == "max-tokens":
        blocks = [block for block in blocks if block.get("type") != "tool-call"]
    return blocks


def usage_tokens(usage: dict) -> int:
    """`usageTokens`: input + cacheRead + cacheWrite + output (reasoning not added) — spec 4.2 `P`."""
    return (
        usage.get("inputTokens", 0)
        + usage.get("cacheReadTokens", 0)
        + usage.get("cacheWriteTokens", 0)
        + usage.get("outputTokens", 0)
    )


# -- state -------------------------------------------------------------------------------------
@quick_init
@dataclass(frozen=True)
class StepStart:
    turn: Any
    step: Any
    surface_tokens: int


@quick_init
@dataclass(frozen=True)
class Baseline:
    """`TokenMeasurementBaseline`: kind `usage` | `estimated` | `none`."""

    kind: str
    tokens: int


@quick_init
@dataclass(frozen=True)
class Anchor:
    header: dict | None
    surface_tokens: int
    baseline: Baseline


@quick_init
@dataclass(frozen=True)
class MeterState:
    """Spec 4.2 `ReplayState`: priced surface `(seq, tokens)`, header, open step, anchor."""

    consumed: int = 0
    header: dict | None = None
    nodes: tuple[tuple[int, int], ...] = ()
    surface_tokens: int = 0
    step_start: StepStart | None = None
    anchor: Anchor | None = None


@quick_init
@dataclass(frozen=True)
class Measurement:
    """`TokenMeasurement` (spec 4.3)."""

    log_revision: int
    baseline: Baseline
    surface_delta_tokens: int
    total_tokens: int
    surface_tokens: int
    nodes: tuple[tuple[int, int], ...]

    @property
    def seqs(self) -> tuple[int, ...]:
        return tuple(seq for seq, _ in self.nodes)

    @property
    def prices(self) -> tuple[int, ...]:
        return tuple(price for _, price in self.nodes)


_last_priced: tuple = (None, None, None, 0)  # (event, derive, estimate, price): three folds price one event in turn


def node_price(event: Event) -> int:
    """A surface node's price: `estimateMessage` of its derived message, 0 when it derives none (spec 4.2). An
    event is a frozen value, so its price is a function of it: the last event priced is answered again without
    a recount (three folds price each surface event in turn), unless the derivation or the estimate in force was
    patched since (as `_anchor_matches`, keyed by the functions too)."""
    global _last_priced
    last, derive, estimate, tokens = _last_priced
    if last is event and derive is derive_event_message and estimate is estimate_message:
        return tokens
    message = derive_event_message(event)
    tokens = 0 if message is None else estimate_message(message)
    _last_priced = (event, derive_event_message, estimate_message, tokens)
    return tokens


def fold_surface_tokens(nodes: tuple[tuple[int, int], ...], event: Event) -> tuple[int, tuple, int]:
    """`foldSurfaceTokens` (spec 4.2): (event price, new nodes, signed delta). Never uses claims."""
    tokens = active().node_price(event)
    if event.is_append:
        return tokens, nodes + ((event.seq, tokens),), tokens
    op = event.replace
    seqs = [seq for seq, _ in nodes]
    start = seqs.index(op.start) if op and op.start in seqs else -1
    end = seqs.index(op.end) if op and op.end in seqs else -1
    if start == -1 or end == -1 or start > end:
        a, b = (op.start, op.end) if op else (event.surface_op, event.surface_op)
        raise TokenMeterError(f"token surface: replace at seq {event.seq} has invalid current range {a}-{b}", seq=event.seq)
    removed = sum(price for _, price in nodes[start : end + 1])
    return tokens, nodes[:start] + ((event.seq, tokens),) + nodes[end + 1 :], tokens - removed


def _provider_assistant_tokens(event: Event, durable_tokens: int, event_at: Callable[[int], Event | None]) -> int:
    """`_estimateProviderAssistant` (spec 4.2): price the cited chunks as the provider saw them."""
    if not isinstance(event.source_event_seqs, list):
        return durable_tokens
    seen: set[int] = set()
    chunks = []
    prefix = f"token meter: assistant/message at seq {event.seq}"
    for seq in event.source_event_seqs:
        if seq >= event.seq:
            raise TokenMeterError(f"{prefix} source seq {seq} is not earlier", seq=event.seq)
        if seq in seen:
            raise TokenMeterError(f"{prefix} repeats source seq {seq}", seq=event.seq)
        seen.add(seq)
        source = event_at(seq)
        if source is None or source.type != "assistant/chunk":
            raise TokenMeterError(f"{prefix} source seq {seq} is not assistant/chunk", seq=event.seq)
        if source.data.get("turn") != event.data.get("turn") or source.data.get("step") != event.data.get("step"):
            raise TokenMeterError(f"{prefix} source seq {seq} belongs to another step", seq=event.seq)
        chunks.append(source.data["chunk"])
    blocks = assemble_blocks(chunks)
    return 0 if not blocks else estimate_content(blocks) + ROLE_OVERHEAD


def fold_meter(state: MeterState, event: Event, event_at: Callable[[int], Event | None]) -> MeterState:
    """`TokenMeter._foldEvent` (spec 4.2): transactional — all fallible work before the new state."""
    header, step_start, anchor = state.header, state.step_start, state.anchor
    data = event.data if isinstance(event.data, dict) else {}
    if event.type == "request/header":
        header = canonical_header(data.get("header"))
    elif event.type == "step/start":
        if state.step_start is not None:
            raise TokenMeterError(
                f"token meter: step/start at seq {event.seq} arrived before turn {state.step_start.turn}/step "
                f"{state.step_start.step} ended",
                seq=event.seq,
            )
        step_start = StepStart(data.get("turn"), data.get("step"), state.surface_tokens)
    elif event.type == "step/end":
        open_step = state.step_start
        if open_step is None or open_step.turn != data.get("turn") or open_step.step != data.get("step"):
            raise TokenMeterError(f"token meter: step/end at seq {event.seq} has no matching step/start event", seq=event.seq)
        step_start = None

    nodes, surface_tokens, event_tokens = state.nodes, state.surface_tokens, 0
    if event.is_surface_type and (event.is_append or event.replace is not None):
        event_tokens, nodes, delta = fold_surface_tokens(state.nodes, event)
        surface_tokens += delta

    if event.type == "assistant/message":
        open_step = state.step_start
        if open_step is None or open_step.turn != data.get("turn") or open_step.step != data.get("step"):
            raise TokenMeterError(
                f"token meter: assistant/message at seq {event.seq} has no matching step/start event", seq=event.seq
            )
        if data.get("usage") is not None and header is not None:
            provider = _provider_assistant_tokens(event, event_tokens, event_at)
            anchor_surface = open_step.surface_tokens + provider
            p = usage_tokens(data["usage"])
            e = estimate_header(header) + anchor_surface
            baseline = Baseline("usage", p) if p >= e else Baseline("estimated", e)
        else:
            anchor_surface = open_step.surface_tokens + event_tokens
            baseline = Baseline("estimated", estimate_header(header) + anchor_surface)
        anchor = Anchor(header, anchor_surface, baseline)

    return MeterState(state.consumed + 1, header, nodes, surface_tokens, step_start, anchor)


def measure_state(state: MeterState, request_header: dict | None = None) -> Measurement:
    """`measure(session, requestHeader?)` assembly (spec 4.3)."""
    header = state.header if request_header is None else canonical_header(request_header)
    anchor = state.anchor
    if anchor is not None and _anchor_matches(anchor, header):
        baseline, delta = anchor.baseline, state.surface_tokens - anchor.surface_tokens
    elif header is None and state.surface_tokens == 0:
        baseline, delta = Baseline("none", 0), 0
    else:
        baseline, delta = Baseline("estimated", estimate_header(header) + state.surface_tokens), 0
    return Measurement(
        log_revision=state.consumed,
        baseline=baseline,
        surface_delta_tokens=delta,
        total_tokens=max(0, baseline.tokens + delta),
        surface_tokens=state.surface_tokens,
        nodes=state.nodes,
    )


_last_match: tuple = (None, None, None, False)  # (anchor, header, seams, answer) of the last comparison


def _anchor_matches(anchor: Anchor, header: dict | None) -> bool:
    """`optionalHeaderEquals(anchor.header, header)`, remembered for the last anchor and header objects compared:
    both are immutable values (spec 1.1) that stay the same across many measures (a step's), while
    `headerEquals` walks configs, markers, system and tools each time. Keyed by identity, and by the
    seams in force, so another `header_equals` (an explorer variant) is never answered from the memo."""
    global _last_match
    last_anchor, last_header, last_seams, answer = _last_match
    seams = active()
    if last_anchor is anchor and last_header is header and last_seams is seams:
        return answer
    answer = _optional_header_equals(anchor.header, header)
    _last_match = (anchor, header, seams, answer)
    return answer


def _optional_header_equals(left: dict | None, right: dict | None) -> bool:
    """`optionalHeaderEquals` (spec 4.3). The anchor's header is usually the very header the meter holds: a
    JSON value (spec 1.3 step 1 refuses NaN, the one value `===` finds unequal to itself) equals itself."""
    if left is None or right is None:
        return left is right
    return left is right or active().header_equals(left, right)


def replay_meter(events, event_at: Callable[[int], Event | None] | None = None) -> MeterState:
    """Fold the meter over a log from seq 0 (what the first `measure()` does, spec 4.2 `_sync`)."""
    log = events if isinstance(events, (list, tuple)) else list(events)
    lookup = event_at or (lambda seq: log[seq] if 0 <= seq < len(log) else None)
    state, fold = MeterState(), active().fold_meter
    for event in log:
        state = fold(state, event, lookup)
    return state


def measure(session, request_header: dict | None = None) -> Measurement:
    """`TokenMeter.measure(session)` over a :class:`~model.session.Session` (recount from seq 0: clarity first)."""
    return measure_state(active().replay_meter(session.log, session.event_at), request_header)
