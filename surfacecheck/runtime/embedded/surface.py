"""The incremental surface manager (dsh `SurfaceManager`; spec 1.4, 2.1).

Mutable state: ``nodes`` (surface order of node seqs), ``index`` (seq -> position) and
``generation`` (`replaceGeneration`). :meth:`plan` validates a candidate event against the current
state without mutating it (spec 1.4, in dsh's check order); :meth:`apply` commits a plan: an append
pushes in O(1), a replace splices its positional span and re-indexes only the tail after it.

Override points (``bugs.py``): :meth:`_bump_generation`, :meth:`_splice`, :meth:`_shadowed`,
:meth:`_check_provenance`.
"""
from __future__ import annotations

from typing import Any, Callable

from surfacecheck.model.errors import SurfaceError
from surfacecheck.model.jsvalue import is_nonneg_safe_integer, json_equal

from .events import APPEND, SURFACE_TYPES

MISSING = object()
"""An absent envelope key (``None`` is a present JSON ``null``)."""


class Plan(tuple):
    """``(kind, seq, start, end, start_index, end_index, shadowed)``: a validated, unapplied transition."""

    kind = property(lambda self: self[0])
    seq = property(lambda self: self[1])
    start = property(lambda self: self[2])
    end = property(lambda self: self[3])
    shadowed = property(lambda self: self[6])


def _fail(event: dict, message: str) -> SurfaceError:
    seq = event.get("seq")
    return SurfaceError(message, seq=seq if isinstance(seq, int) else None)


class SurfaceManager:
    """Spec 2.1 state kept incrementally; ``ops`` counts list cells written (cost model)."""

    def __init__(self) -> None:
        self.nodes: list[int] = []
        self.index: dict[int, int] = {}
        self.generation = 0
        self.ops = 0

    # -- planning (spec 1.4; never mutates) ----------------------------------------------------------
    def plan(self, event: dict, expected_seq: int, event_at: Callable[[int], dict | None]) -> Plan:
        seq = event.get("seq")
        if seq != expected_seq or isinstance(seq, bool):
            raise SurfaceError(f"session event seq {seq} is not contiguous; expected {expected_seq}", seq=expected_seq)
        op = self._surface_op_of(event)
        if op is None:
            return Plan(("none", seq, -1, -1, -1, -1, ()))
        if op == APPEND:
            self._check_provenance(event, ())
            return Plan(("append", seq, -1, -1, -1, -1, ()))
        start, end = op
        start_index, end_index = self._range(event, start, end)
        shadowed = self._shadowed(start_index, end_index)
        self._check_provenance(event, shadowed)
        self._check_tool_result_rewrite(event, shadowed, event_at)
        return Plan(("replace", seq, start, end, start_index, end_index, shadowed))

    @staticmethod
    def _surface_op_of(event: dict) -> Any:
        """`surfaceOpOf` (spec 1.4 step 2): None, "append" or (start, end)."""
        kind = event.get("type")
        op = event.get("surfaceOp", MISSING)
        if kind not in SURFACE_TYPES:
            if op is not MISSING:
                raise _fail(event, f'session event "{kind}" is not surface-eligible and cannot carry surfaceOp')
            if "sourceEventSeqs" in event:
                raise _fail(event, f'session event "{kind}" is not surface-eligible and cannot carry sourceEventSeqs')
            return None
        if op is MISSING:
            raise _fail(event, f'session event "{kind}" is surface-eligible and requires a surfaceOp marker')
        if op == APPEND:
            return APPEND
        if not isinstance(op, dict):
            raise _fail(event, f'session event "{kind}" carries an invalid surfaceOp')
        if not (set(op) == {"op", "start", "end"} and op["op"] == "replace"
                and is_nonneg_safe_integer(op["start"]) and is_nonneg_safe_integer(op["end"])):
            raise _fail(event, f'session event "{kind}" carries an invalid replace surfaceOp')
        return (int(op["start"]), int(op["end"]))

    def _range(self, event: dict, start: int, end: int) -> tuple[int, int]:
        """`replacementRange` (spec 1.4 step 4): positions by the index map; start may exceed end numerically."""
        start_index = self.index.get(start, -1)
        if start_index == -1:
            raise _fail(event, f"surface replace: start seq {start} not found in surface")
        end_index = self.index.get(end, -1)
        if end_index == -1:
            raise _fail(event, f"surface replace: end seq {end} not found in surface")
        if start_index > end_index:
            raise _fail(event, f"surface replace: start seq {start} (index {start_index}) is after end seq {end}"
                               f" (index {end_index})")
        return start_index, end_index

    def _shadowed(self, start_index: int, end_index: int) -> tuple[int, ...]:
        """The nodes a replace shadows: the inclusive positional span."""
        return tuple(self.nodes[start_index:end_index + 1])

    def _check_provenance(self, event: dict, shadowed: tuple[int, ...]) -> None:
        """`assertProvenance` (spec 1.4 step 3): dense, unique, earlier, and covering the shadowed span."""
        raw = event.get("sourceEventSeqs", MISSING)
        seq, kind = event.get("seq"), event.get("type")
        sources: set[int] = set()
        if raw is not MISSING:
            if not isinstance(raw, list):
                raise _fail(event, f"sourceEventSeqs on event at seq {seq} must be an array when present")
            if not raw and kind != "assistant/message":
                raise _fail(event, "sourceEventSeqs must not be empty except on assistant/message")
            later = None
            for source in raw:
                if not is_nonneg_safe_integer(source):
                    raise _fail(event, f'session event "{kind}" sourceEventSeqs must densely contain non-negative'
                                       " safe integers")
                sources.add(int(source))
                if later is None and source >= seq:
                    later = int(source)
            if len(sources) != len(raw):
                raise _fail(event, "sourceEventSeqs must not contain duplicates")
            if later is not None:
                raise _fail(event, f"sourceEventSeqs must reference earlier events: {later} >= current seq {seq}")
        missing = [node for node in shadowed if node not in sources]
        if missing:
            raise _fail(event, "surface replace: sourceEventSeqs must include every shadowed surface node; missing "
                        + ", ".join(str(node) for node in missing))

    @staticmethod
    def _check_tool_result_rewrite(event: dict, shadowed: tuple[int, ...], event_at) -> None:
        """`assertToolResultRewrite` (spec 1.4 step 5): a tool/result replace changes one result's content only."""
        if event.get("type") != "tool/result":
            return
        if len(shadowed) != 1:
            raise _fail(event, "tool/result surface replacement must rewrite exactly one current node")
        original = event_at(shadowed[0])
        if original is None or original.get("type") != "tool/result":
            raise _fail(event, "tool/result surface replacement must target a current tool/result")
        if not json_equal(_content_nulled(original.get("data")), _content_nulled(event.get("data"))):
            raise _fail(event, "tool/result surface replacement may change only content")

    # -- applying (spec 2.1) -----------------------------------------------------------------------------
    def apply(self, plan: Plan) -> None:
        kind = plan[0]
        if kind == "append":
            self.index[plan[1]] = len(self.nodes)
            self.nodes.append(plan[1])
            self.ops += 1
        elif kind == "replace":
            self._splice(plan[4], plan[5], plan[1])
            self._bump_generation()

    def _splice(self, start_index: int, end_index: int, seq: int) -> None:
        """`nodes.splice(startIdx, endIdx-startIdx+1, seq)`, then re-index the moved tail."""
        for node in self.nodes[start_index:end_index + 1]:
            del self.index[node]
        self.nodes[start_index:end_index + 1] = [seq]
        for position in range(start_index, len(self.nodes)):
            self.index[self.nodes[position]] = position
        self.ops += len(self.nodes) - start_index + (end_index - start_index + 1)

    def _bump_generation(self) -> None:
        """`replaceGeneration += 1` on every replace (and only then)."""
        self.generation += 1


def _content_nulled(data: Any) -> dict:
    """Tool-result data with `message.content` cut to its first block and that block's content nulled."""
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
