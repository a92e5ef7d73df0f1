"""Safety: the stateful issue's invariants, checked on every explored state and transition.

Per transition the model ran (:mod:`.oracle`), on its *real* events:

* ``generation-counts-replaces`` (spec 2.1): the generation grows by exactly the replaces written;
* ``pairing-balanced-at-replacement-edges`` (spec 3, 7): a multi-node or checkpoint replacement
  sits between balanced cuts;
* ``summaries-smaller`` (spec 8.2 step 10): a checkpoint is priced below the nodes it shadows;
* ``projection-equals-recount`` (spec 5.1-5.2): every replacement here is claimed, so the O(1)
  shadow-price projection equals the recount of the surface after the transition;
* ``bracket-order`` (spec 8.3): each `compaction/start` is closed by exactly one
  `compaction/end` of the same id, summaries inside it, and no live lock remains;
* ``overflow-retry-after-progress`` (spec 10.2, seed §12): a retry needs a generation advance;
* ``retries-within-budget`` (spec 9.2 step 11, 10.2): at most ``compactionRetries + 1``
  summaries per pressure check, one per overflow, ``maxOverflowRetries`` retries per step.

Per state (:func:`check_state`): ``no-orphan-tool-result`` — no tool result without its
call on the surface (spec 3: the count never goes below zero). ``model-error-free``: a model
operation refused or raised where the world's agent made a legal request.
"""
from __future__ import annotations

from surfacecheck.model.seams import active
from surfacecheck.model.projection import SurfaceProjection, fold_projection
from surfacecheck.model.region import inspect_entry_state, lock_is_live

from .concrete import SURFACE_TYPES, TOOL_DELTA
from .prefix import resume

SAFETY_PROPERTIES = (
    "generation-counts-replaces", "projection-equals-recount", "pairing-balanced-at-replacement-edges", "summaries-smaller",
    "bracket-order", "overflow-retry-after-progress", "retries-within-budget",
    "no-orphan-tool-result", "model-error-free",
)


def _balanced(codes: list[str], index: int) -> bool:
    return sum(TOOL_DELTA.get(code, 0) for code in codes[:index]) == 0


def _replace_op(event):
    op = event.surface_op
    return op if isinstance(op, dict) and op.get("op") == "replace" else None


def check_outcome(op, before, seqs, surf, after, retry, overflow_state, settings) -> list[tuple[str, str]]:
    """The invariants of one model-run transition; a list of ``(property, message)``."""
    found: list[tuple[str, str]] = []
    new = after.log[len(before.log):]
    replaces = [e for e in new if e.type in SURFACE_TYPES and _replace_op(e)]
    if after.generation - before.generation != len(replaces):
        found.append(("generation-counts-replaces", f"{op}: generation {before.generation} -> {after.generation} "
                                                    f"with {len(replaces)} replaces written"))
    codes, nodes = list(surf), list(seqs)
    from .concrete import classify

    for event in new:
        if event.type not in SURFACE_TYPES:
            continue
        marker = _replace_op(event)
        if marker is None:
            codes.append(classify(event))
            nodes.append(event.seq)
            continue
        if marker["start"] not in nodes or marker["end"] not in nodes:
            found.append(("pairing-balanced-at-replacement-edges", f"{op}: replace {marker} outside the surface"))
            break
        i, j = nodes.index(marker["start"]), nodes.index(marker["end"])
        checkpoint = classify(event).startswith("K")
        if (j > i or checkpoint) and not (_balanced(codes, i) and _balanced(codes, j + 1)):
            found.append(("pairing-balanced-at-replacement-edges",
                          f"{op}: replacement at seq {event.seq} of surface positions {i}..{j} ({codes[i:j + 1]}) "
                          "does not sit between balanced cuts"))
        if checkpoint:
            node_price = active().node_price
            shadowed = sum(node_price(after.log[s]) for s in nodes[i:j + 1])
            if node_price(event) >= shadowed:
                found.append(("summaries-smaller", f"{op}: checkpoint at seq {event.seq} costs {node_price(event)} "
                                                   f"tokens, not less than the {shadowed} it shadows"))
        codes[i:j + 1], nodes[i:j + 1] = [classify(event)], [event.seq]
    found += _brackets(op, new, after)
    node_price = active().node_price
    projected, recount = _projection(before, after), sum(node_price(after.log[seq]) for seq in after.nodes)
    if projected != recount:
        found.append(("projection-equals-recount", f"{op}: projection total {projected} differs from the "
                                                   f"recount {recount} of the surface"))
    if op == "overflow" and retry and after.generation <= before.generation:
        found.append(("overflow-retry-after-progress",
                      f"overflow: retry authorized at generation {after.generation} without a replacement"))
    starts = sum(1 for e in new if e.type == "compaction/start")
    budget = {"pressure": settings.compaction_retries + 1, "overflow": 1, "manual": 1}.get(op, 0)
    if starts > budget:
        found.append(("retries-within-budget", f"{op}: {starts} summaries, budget {budget}"))
    if overflow_state.retries > settings.max_overflow_retries:
        found.append(("retries-within-budget", f"overflow retries {overflow_state.retries} > "
                                                       f"maxOverflowRetries {settings.max_overflow_retries}"))
    return found


_PROJECTED: dict[int, tuple] = {}


def _projection(before, after) -> int:
    """The spec 5.1 claim fold over ``after``'s log, resumed from the longest prefix already folded
    (:mod:`.prefix`); only γ's part is recorded (a run's own events are new every time)."""
    return resume(after.log, _PROJECTED, SurfaceProjection, fold_projection, keep=len(before.log)).total


def _brackets(op, new, after) -> list[tuple[str, str]]:
    open_id = None
    for event in new:
        if event.type == "compaction/start":
            if open_id is not None:
                return [("bracket-order", f"{op}: compaction/start at seq {event.seq} inside an open bracket")]
            open_id = event.data.get("compactionId")
        elif event.type == "compaction/end":
            if open_id is None or event.data.get("compactionId") != open_id:
                return [("bracket-order", f"{op}: compaction/end at seq {event.seq} closes no open bracket")]
            open_id = None
        elif event.type == "compaction/summary" and open_id is None:
            return [("bracket-order", f"{op}: compaction/summary at seq {event.seq} outside a bracket")]
    if open_id is not None or lock_is_live(inspect_entry_state(after)):
        return [("bracket-order", f"{op}: the compaction lock is still live after the operation")]
    return []


def check_state(surf: tuple, ret: int) -> list[tuple[str, str]]:
    """Invariants of one abstract state (cheap: codes only)."""
    count = 0
    for index, code in enumerate(surf):
        count += TOOL_DELTA.get(code, 0)
        if count < 0:
            return [("no-orphan-tool-result", f"surface position {index} ({code}) is a tool result "
                                                      "with no open call before it")]
    return []
