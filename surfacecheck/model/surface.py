"""The surface fold: which log events the model sees, in order (seed §2-3; spec 1.4, 2).

State is an immutable :class:`Surface` ``(nodes, generation)``. Every event is first *planned*
(validated against the current surface, spec 1.4, never mutating) and then *applied* (spec 2.1).
``fold_surface`` replays a whole log from seq 0 (dsh ``foldSurface``); ``next_surface`` is the
incremental step the live :class:`~model.session.Session` takes per append (dsh ``SurfaceManager``).
Both use the same plan, and the tests check they agree on every corpus log.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from .errors import SurfaceError
from .event import ABSENT, APPEND, Event, Replace
from .frozen import quick_init
from .jsvalue import is_nonneg_safe_integer, json_equal

EventAt = Callable[[int], "Event | None"]
"""Looks an earlier event up by seq (the tool-result rewrite rule compares with the original)."""


@quick_init
@dataclass(frozen=True)
class Surface:
    """Spec 2.1 state: surface order of node seqs and the monotone `replaceGeneration`."""

    nodes: tuple[int, ...] = ()
    generation: int = 0

    def index_of(self, seq: int) -> int:
        """Position of a node on the surface, -1 when absent (`nodes.indexOf`)."""
        try:
            return self.nodes.index(seq)
        except ValueError:
            return -1


@quick_init
@dataclass(frozen=True)
class SurfacePlan:
    """A validated transition not yet applied: `append`, `replace` (with its span) or `none`."""

    kind: str
    seq: int
    start: int = -1
    end: int = -1
    start_index: int = -1
    end_index: int = -1
    shadowed: tuple[int, ...] = ()


@dataclass(frozen=True)
class SurfaceReplacement:
    """One replace seen by the full fold (dsh `SurfaceFoldReplacement`)."""

    seq: int
    start: int
    end: int
    shadowed: tuple[int, ...]


def _fail(event: Event, message: str) -> SurfaceError:
    return SurfaceError(message, seq=event.seq if isinstance(event.seq, int) else None)


def surface_op_of(event: Event) -> Any:
    """`surfaceOpOf` (spec 1.4 step 2): the event's op, `None` for a non-surface event."""
    if not event.is_surface_type:
        if event.surface_op is not ABSENT:
            raise _fail(event, f'session event "{event.type}" is not surface-eligible and cannot carry surfaceOp')
        if event.source_event_seqs is not ABSENT:
            raise _fail(event, f'session event "{event.type}" is not surface-eligible and cannot carry sourceEventSeqs')
        return None
    op = event.surface_op
    if op is ABSENT:
        raise _fail(event, f'session event "{event.type}" is surface-eligible and requires a surfaceOp marker')
    if op == APPEND:
        return APPEND
    if not isinstance(op, dict):
        raise _fail(event, f'session event "{event.type}" carries an invalid surfaceOp')
    if not (
        set(op) == {"op", "start", "end"}
        and op["op"] == "replace"
        and is_nonneg_safe_integer(op["start"])
        and is_nonneg_safe_integer(op["end"])
    ):
        raise _fail(event, f'session event "{event.type}" carries an invalid replace surfaceOp')
    return Replace(int(op["start"]), int(op["end"]))


def assert_provenance(event: Event, shadowed: Sequence[int]) -> None:
    """`assertProvenance` (spec 1.4 step 3): sources are dense, unique, earlier, and cover the span."""
    raw = event.source_event_seqs
    sources: set[int] = set()
    if raw is not ABSENT:
        if not isinstance(raw, (list, tuple)):
            raise _fail(event, f"sourceEventSeqs on event at seq {event.seq} must be an array when present")
        if len(raw) == 0 and event.type != "assistant/message":
            raise _fail(event, "sourceEventSeqs must not be empty except on assistant/message")
        non_earlier = None
        for source in raw:
            if not is_nonneg_safe_integer(source):
                raise _fail(
                    event, f'session event "{event.type}" sourceEventSeqs must densely contain non-negative safe integers'
                )
            sources.add(int(source))
            if non_earlier is None and source >= event.seq:
                non_earlier = int(source)
        if len(sources) != len(raw):
            raise _fail(event, "sourceEventSeqs must not contain duplicates")
        if non_earlier is not None:
            raise _fail(event, f"sourceEventSeqs must reference earlier events: {non_earlier} >= current seq {event.seq}")
    missing = [seq for seq in shadowed if seq not in sources]
    if missing:
        raise _fail(
            event,
            "surface replace: sourceEventSeqs must include every shadowed surface node; missing "
            + ", ".join(str(seq) for seq in missing),
        )


def replacement_range(surface: Surface, event: Event, op: Replace) -> tuple[int, int, tuple[int, ...]]:
    """`replacementRange` (spec 1.4 step 4): positional span; start may exceed end numerically."""
    start_index = surface.index_of(op.start)
    if start_index == -1:
        raise _fail(event, f"surface replace: start seq {op.start} not found in surface")
    end_index = surface.index_of(op.end)
    if end_index == -1:
        raise _fail(event, f"surface replace: end seq {op.end} not found in surface")
    if start_index > end_index:
        raise _fail(
            event,
            f"surface replace: start seq {op.start} (index {start_index}) is after end seq {op.end} (index {end_index})",
        )
    return start_index, end_index, surface.nodes[start_index : end_index + 1]


def _content_nulled(data: Any) -> Any:
    """Tool-result data with `message.content` reduced to its first block with `content: null`."""
    record = dict(data) if isinstance(data, dict) else {}
    message = record.get("message")
    message = dict(message) if isinstance(message, dict) else {}
    content = message.get("content")
    first = content[0] if isinstance(content, list) and content else None
    block = dict(first) if isinstance(first, dict) else {}
    block["content"] = None
    message["content"] = [block]
    record["message"] = message
    return record


def assert_tool_result_rewrite(event: Event, shadowed: Sequence[int], event_at: EventAt) -> None:
    """`assertToolResultRewrite` (spec 1.4 step 5): a tool/result replace rewrites one result's content only."""
    if event.type != "tool/result":
        return
    if len(shadowed) != 1:
        raise _fail(event, "tool/result surface replacement must rewrite exactly one current node")
    original = event_at(shadowed[0])
    if original is None or original.type != "tool/result":
        raise _fail(event, "tool/result surface replacement must target a current tool/result")
    if not json_equal(_content_nulled(original.data), _content_nulled(event.data)):
        raise _fail(event, "tool/result surface replacement may change only content")


def plan_surface_event(surface: Surface, event: Event, expected_seq: int, event_at: EventAt) -> SurfacePlan:
    """`planSurfaceEvent` (spec 1.4): contiguity, marker, range, provenance, tool-result rule — in dsh's order."""
    if event.seq != expected_seq or isinstance(event.seq, bool):
        raise SurfaceError(f"session event seq {event.seq} is not contiguous; expected {expected_seq}", seq=expected_seq)
    op = surface_op_of(event)
    if op is None:
        return SurfacePlan("none", event.seq)
    if op == APPEND:
        assert_provenance(event, ())
        return SurfacePlan("append", event.seq)
    start_index, end_index, shadowed = replacement_range(surface, event, op)
    assert_provenance(event, shadowed)
    assert_tool_result_rewrite(event, shadowed, event_at)
    return SurfacePlan("replace", event.seq, op.start, op.end, start_index, end_index, shadowed)


def apply_plan(surface: Surface, plan: SurfacePlan) -> Surface:
    """Spec 2.1: append pushes the seq; replace splices the span for the new seq and bumps the generation."""
    if plan.kind == "append":
        return Surface(surface.nodes + (plan.seq,), surface.generation)
    if plan.kind == "replace":
        nodes = surface.nodes[: plan.start_index] + (plan.seq,) + surface.nodes[plan.end_index + 1 :]
        return Surface(nodes, surface.generation + 1)
    return surface


def next_surface(surface: Surface, event: Event, expected_seq: int, event_at: EventAt) -> tuple[Surface, SurfacePlan]:
    """One incremental step (dsh `SurfaceManager.validateNext` + commit)."""
    plan = plan_surface_event(surface, event, expected_seq, event_at)
    return apply_plan(surface, plan), plan


@dataclass(frozen=True)
class SurfaceFold:
    """`foldSurface` result: final surface plus the replacement history (spec 2.2)."""

    surface: Surface
    replacements: tuple[SurfaceReplacement, ...]


def fold_surface(events: Sequence[Event] | Iterable[Event]) -> SurfaceFold:
    """`foldSurface(events)` (spec 2.2): replay a complete log from seq 0; raises SurfaceError on the first bad event."""
    log = events if isinstance(events, (list, tuple)) else list(events)

    def event_at(seq: int) -> Event | None:
        return log[seq] if 0 <= seq < len(log) else None

    surface = Surface()
    replacements: list[SurfaceReplacement] = []
    for index, event in enumerate(log):
        surface, plan = next_surface(surface, event, index, event_at)
        if plan.kind == "replace":
            replacements.append(SurfaceReplacement(plan.seq, plan.start, plan.end, plan.shadowed))
    return SurfaceFold(surface, tuple(replacements))


def derive_event_message(event: Event) -> dict | None:
    """`deriveEventMessage` (spec 2.3): user data verbatim; assistant message unless content is empty; tool message."""
    if event.type == "user/message":
        return event.data
    if event.type == "assistant/message":
        message = event.data["message"]
        return None if len(message["content"]) == 0 else message
    if event.type == "tool/result":
        return event.data["message"]
    return None
