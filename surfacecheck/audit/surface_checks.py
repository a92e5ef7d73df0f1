"""Surface-metadata checks (spec 1.4), one rule id per failure, and the tool-pairing count (spec 3).

`plan_event` runs dsh's checks in dsh's order through the model's own functions
(`model.surface`) but, unlike `planSurfaceEvent`, does not stop at the first failure: it turns
each refusal into a finding and says how to continue (the *effective* event the folds see), so a
corrupted log yields the finding at the offending seq and as few knock-on findings as possible.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, replace
from typing import Callable

from surfacecheck.model.errors import SurfaceError
from surfacecheck.model.event import ABSENT, APPEND, Event
from surfacecheck.model.pairing import event_delta
from surfacecheck.model.surface import (Surface, SurfacePlan, assert_provenance, assert_tool_result_rewrite, replacement_range,
                           surface_op_of)

from .findings import AuditIssue, finding

EventAt = Callable[[int], "Event | None"]


def rewritten(event: Event, **changes) -> Event:
    """A copy of `event` with other surface metadata (the cached canonical key is dropped)."""
    return replace(event, _key="", **changes)


def _surface_op_rule(message: str) -> str:
    """Spec 1.4 step 2: which `surfaceOpOf` refusal this is."""
    if "cannot carry" in message:
        return "surface-op-forbidden"
    if "requires a surfaceOp" in message:
        return "surface-op-missing"
    return "surface-op-invalid"


def _range_rule(message: str) -> str:
    return "replace-range-reversed" if "is after end seq" in message else "replace-range-missing"


def _provenance_rule(message: str) -> str:
    return "provenance-missing-shadowed" if "must include every shadowed" in message else "provenance-invalid"


@dataclass(frozen=True)
class PlannedEvent:
    """The surface plan dsh would apply (best effort after a refusal), the event the folds should
    see instead of the logged one, and the findings."""

    plan: SurfacePlan
    effective: Event
    findings: tuple[AuditIssue, ...]


def _op_text(op) -> str:
    return "absent" if op is ABSENT else repr(op)


def plan_event(surface: Surface, event: Event, event_at: EventAt) -> PlannedEvent:
    """`planSurfaceEvent` (spec 1.4 steps 2-5) for an event whose seq is already checked."""
    found: list[AuditIssue] = []
    seq = event.seq
    try:
        op = surface_op_of(event)
    except SurfaceError as exc:
        rule_id = _surface_op_rule(exc.message)
        if rule_id == "surface-op-forbidden":
            found.append(finding(rule_id, seq, f"{exc.message}; expected no surface metadata, observed surfaceOp "
                                 f"{_op_text(event.surface_op)}, sourceEventSeqs {_op_text(event.source_event_seqs)}"))
            stripped = rewritten(event, surface_op=ABSENT, source_event_seqs=ABSENT)
            return PlannedEvent(SurfacePlan("none", seq), stripped, tuple(found))
        if rule_id == "surface-op-missing":
            found.append(finding(rule_id, seq, f"{exc.message}; expected 'append' or a replace marker, observed none "
                                 "(audited as an append)"))
            event = rewritten(event, surface_op=APPEND)
            op = APPEND
        else:
            found.append(finding(rule_id, seq, f"{exc.message}; expected 'append' or exactly {{op:'replace', start, "
                                 f"end}} with non-negative integers, observed {_op_text(event.surface_op)} "
                                 "(no surface effect audited)"))
            return PlannedEvent(SurfacePlan("none", seq), rewritten(event, surface_op=ABSENT), tuple(found))
    if op is None:
        return PlannedEvent(SurfacePlan("none", seq), event, ())
    if op == APPEND:
        found.extend(_provenance(event, ()))
        return PlannedEvent(SurfacePlan("append", seq), event, tuple(found))
    try:
        start_index, end_index, shadowed = replacement_range(surface, event, op)
    except SurfaceError as exc:
        want = ("start at or before end on the surface" if _range_rule(exc.message) == "replace-range-reversed"
                else "start and end seqs on the current surface")
        found.append(finding(_range_rule(exc.message), seq, f"{exc.message}; expected {want}, observed range "
                             f"{op.start}-{op.end} over the {len(surface.nodes)} nodes {_nodes_text(surface.nodes)} "
                             "(no surface effect audited)"))
        return PlannedEvent(SurfacePlan("none", seq), rewritten(event, surface_op=ABSENT), tuple(found))
    found.extend(_provenance(event, shadowed))
    try:
        assert_tool_result_rewrite(event, shadowed, event_at)
    except SurfaceError as exc:
        target = event_at(shadowed[0]) if len(shadowed) == 1 else None
        observed = f"{len(shadowed)} shadowed nodes {list(shadowed)}" + (
            f", a {target.type}" if target is not None and len(shadowed) == 1 else "")
        found.append(finding("tool-result-rewrite", seq, f"{exc.message}; expected one current tool/result whose "
                             f"data differs only in content, observed {observed}"))
    plan = SurfacePlan("replace", seq, op.start, op.end, start_index, end_index, shadowed)
    return PlannedEvent(plan, event, tuple(found))


def _nodes_text(nodes: tuple[int, ...]) -> str:
    shown = ", ".join(str(n) for n in nodes[:12])
    return f"[{shown}{', ...' if len(nodes) > 12 else ''}]"


def _provenance(event: Event, shadowed: tuple[int, ...]) -> list[AuditIssue]:
    try:
        assert_provenance(event, shadowed)
    except SurfaceError as exc:
        rule_id = _provenance_rule(exc.message)
        if rule_id == "provenance-missing-shadowed":
            cited = list(event.sources)
            return [finding(rule_id, event.seq, f"{exc.message}; expected sourceEventSeqs to cite {list(shadowed)}, "
                                                f"observed {cited}")]
        return [finding(rule_id, event.seq, f"{exc.message}; expected an array of distinct, earlier, non-negative "
                                            "integer seqs (non-empty except on assistant/message), observed "
                                            f"{_op_text(event.source_event_seqs)}")]
    return []


# -- the tool-pairing count (spec 3) --------------------------------------------------------------
def _hashable(value):
    return value if isinstance(value, (str, int, float, bool, type(None))) else json.dumps(value, default=str)


def call_ids(event: Event) -> list:
    """Tool-call ids an assistant message opens (spec 1.6 scan; spec 3 counts them)."""
    content = event.data["message"]["content"]
    return [_hashable(block.get("id")) for block in content
            if isinstance(block, dict) and block.get("type") == "tool-call"]


def result_call_id(event: Event):
    """The call id a tool/result answers: `message.source.callId` (spec 1.6)."""
    source = event.data["message"].get("source")
    return _hashable(source.get("callId")) if isinstance(source, dict) else None


class Pairing:
    """Spec 3 per-node deltas over the current surface plus the open call ids (for the warning)."""

    def __init__(self) -> None:
        self.delta: dict[int, int] = {}
        self.opens: dict[int, list] = {}
        self.answers: dict[int, object] = {}
        self.open_count = 0
        self.open_ids: Counter = Counter()

    def balanced(self, nodes: tuple[int, ...]) -> list[bool]:
        """`cutBalanced` for the N+1 cuts of `nodes` (spec 3)."""
        out, running = [True], 0
        for seq in nodes:
            running += self.delta.get(seq, 0)
            out.append(running == 0)
        return out

    def append(self, event: Event) -> list[AuditIssue]:
        found: list[AuditIssue] = []
        delta = event_delta(event)
        if event.type == "tool/result":
            call = result_call_id(event)
            if self.open_count <= 0:
                found.append(finding("orphan-tool-result", event.seq, "tool-pairing balance: tool/result at surface "
                                     f"seq {event.seq} has no matching tool-call (corrupt surface); expected an open "
                                     f"tool call before it on the surface, observed 0 open calls (call id {call!r})"))
                delta = 0  # audited as neutral so later cuts are not all reported
            elif self.open_ids[call] <= 0:
                open_ids = sorted(str(k) for k, v in self.open_ids.items() if v > 0)
                found.append(finding("tool-result-unknown-call", event.seq, f"tool/result call id: expected one of "
                                     f"the open calls {open_ids}, observed {call!r}; dsh pairs by count, so it "
                                     "accepts it"))
            self.answers[event.seq] = call
            if self.open_ids[call] > 0:
                self.open_ids[call] -= 1
        elif event.type == "assistant/message":
            ids = call_ids(event)
            self.opens[event.seq] = ids
            self.open_ids.update(ids)
        self.delta[event.seq] = delta
        self.open_count += delta
        return found

    def replace(self, event: Event, shadowed: tuple[int, ...], nodes_after: tuple[int, ...]) -> None:
        for seq in shadowed:
            self.delta.pop(seq, None)
            self.opens.pop(seq, None)
            self.answers.pop(seq, None)
        self.delta[event.seq] = event_delta(event)
        if event.type == "assistant/message":
            self.opens[event.seq] = call_ids(event)
        elif event.type == "tool/result":
            self.answers[event.seq] = result_call_id(event)
        self.open_count = sum(self.delta.get(seq, 0) for seq in nodes_after)
        self.open_ids = Counter()
        for seq in nodes_after:  # a new generation: rebuild (spec 3 "rebuild per generation")
            self.open_ids.update(self.opens.get(seq, ()))
            answered = self.answers.get(seq, ABSENT)
            if answered is not ABSENT and self.open_ids[answered] > 0:
                self.open_ids[answered] -= 1
