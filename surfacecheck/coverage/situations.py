"""What a log shows: the named situations the suite claims to reach ("sometimes" properties), and the
situations each audit rule judges.

A *sometimes-witness* is a situation that must be reached at least once, or the run proves little about the
path behind it (stateright's ``sometimes``, TLC's action coverage): a second-generation checkpoint, a prune that
relieved pressure and one that did not, an overflow retry that succeeded and one that ran out of budget, each
``/compact`` result, a bracket closed with an error, the shrink-floor refusal, a runtime-context re-emission,
a reload's ``session/end-seed``. Each is found from the events alone (spec words in the comments), so the same
scan serves the scenario logs, the corpus and the logs the real runtime writes in ``e2e``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

OVERFLOW = "CONTEXT_WINDOW_EXCEEDED"
RUNTIME_CONTEXT_PLUGIN = "@deepseek-ai/dsh-system-prompt"  # spec 12: the owned snapshot's source
SHRINK_FLOOR = "summary is not smaller than the shadowed content"  # spec 8.2 step 10


def surface_op(op: Any) -> str | None:
    """``"append"`` / ``"replace"`` / None from a surfaceOp as logged (``"append"``, ``{op: "replace", ...}``) or
    as the model holds it (a ``model.event.Replace``)."""
    if isinstance(op, str):
        return op
    if isinstance(op, dict):
        return op.get("op")
    return "replace" if hasattr(op, "start") and hasattr(op, "end") else None


def parts(event: Any) -> tuple[str, int | None, dict, str | None, list]:
    """``(type, seq, data, surfaceOp kind, sourceEventSeqs)`` of a model Event or a raw record."""
    if isinstance(event, dict):
        kind, seq, data = str(event.get("type")), event.get("seq"), event.get("data") or {}
        op, sources = event.get("surfaceOp"), event.get("sourceEventSeqs")
    else:
        kind, seq, data = str(getattr(event, "type", "")), getattr(event, "seq", None), getattr(event, "data", None) or {}
        op, sources = getattr(event, "surface_op", None), getattr(event, "source_event_seqs", None)
    sources = sources if isinstance(sources, (list, tuple)) else []
    return kind, seq, data if isinstance(data, dict) else {}, surface_op(op), list(sources)


def _source(data: dict) -> dict:
    source = data.get("source")
    return source if isinstance(source, dict) else {}


def _checkpoint(kind: str, data: dict, op: str | None) -> bool:
    """A checkpoint: a user/message replacement whose source is the compact plugin (spec 8.2 step 9)."""
    source = _source(data)
    return kind == "user/message" and op == "replace" and source.get("kind") == "plugin" \
        and source.get("plugin") == "compact"


def _runtime_context(kind: str, data: dict) -> bool:
    source = _source(data)
    return kind == "user/message" and source.get("kind") == "plugin" and source.get("plugin") == RUNTIME_CONTEXT_PLUGIN


def step_failure(data: dict) -> dict | None:
    """The failure of an ``assistant/chunk`` ``finish {kind: error, failure}`` (spec 10.1), else None."""
    chunk = data.get("chunk") if isinstance(data.get("chunk"), dict) else {}
    reason = chunk.get("reason") if chunk.get("type") == "finish" and isinstance(chunk.get("reason"), dict) else {}
    if reason.get("kind") != "error":
        return None
    failure = reason.get("failure")
    return failure if isinstance(failure, dict) else {"message": str(failure)}


def _failure_code(data: dict) -> str | None:
    return (step_failure(data) or {}).get("code")


WITNESSES: dict[str, str] = {
    "second-generation-checkpoint": "a second checkpoint replaces a head span that holds the first (spec 8, generation 2)",
    "prune-sufficed": "a pressure prune after which no summary was needed in that pre-step (spec 9.2 steps 8-9)",
    "prune-insufficient": "a prune followed by a summary bracket in the same pre-step (spec 9.2 steps 9-11)",
    "summary-committed": "a compaction bracket closed without error after its checkpoint (spec 8.2 step 14)",
    "overflow-retry-succeeded": "a CONTEXT_WINDOW_EXCEEDED step retried to an assistant message (spec 10.2)",
    "overflow-out-of-budget": "a turn ended with CONTEXT_WINDOW_EXCEEDED: no retry left (spec 10.2)",
    "compact-compacted": "/compact compacted history (command/done success with sourceEventSeq, spec 11)",
    "compact-nothing": "/compact found no compactable history (command/done success, no source, spec 11)",
    "compact-error": "/compact answered an error (usage, cancelled, busy; spec 11)",
    "bracket-failed": "a compaction bracket closed with an error (spec 8.3)",
    "shrink-floor-refusal": "a summary refused because it was not smaller than the span (spec 8.2 step 10)",
    "runtime-context-reemission": "the runtime context re-sent after a replacement shadowed its snapshot (spec 12)",
    "reload-end-seed": "a reload appended session/end-seed (spec 1.5)",
}
"""The situations ``check --strict`` requires to be reached at least once (id -> what it is, in spec words)."""


def witnesses(events: Iterable[Any]) -> dict[str, int]:
    """``{witness id: first seq where it shows}`` for one log (ids absent: not reached in this log)."""
    found: dict[str, int] = {}

    def hit(name: str, seq: int | None) -> None:
        if name not in found and seq is not None:
            found[name] = seq

    checkpoints = 0
    pruned_at = None  # seq of the first prune of the current pre-step, until its step starts
    overflow_in_turn = False
    snapshot_seq = None
    snapshot_shadowed = False
    for event in events:
        kind, seq, data, op, sources = parts(event)
        if _checkpoint(kind, data, op):
            checkpoints += 1
            if checkpoints == 2:
                hit("second-generation-checkpoint", seq)
        if kind == "compaction/prune" and pruned_at is None:
            pruned_at = seq
        elif kind == "compaction/start" and pruned_at is not None:
            hit("prune-insufficient", pruned_at)
            pruned_at = None
        elif kind in ("step/start", "request/header") and pruned_at is not None:  # the pre-step is over
            hit("prune-sufficed", pruned_at)
            pruned_at = None
        elif kind == "compaction/end":
            error = data.get("error")
            if error:
                hit("bracket-failed", seq)
                if SHRINK_FLOOR in str(error):
                    hit("shrink-floor-refusal", seq)
            else:
                hit("summary-committed", seq)
        elif kind == "assistant/chunk" and _failure_code(data) == OVERFLOW:
            overflow_in_turn = True
        elif kind == "assistant/message" and overflow_in_turn:
            hit("overflow-retry-succeeded", seq)
            overflow_in_turn = False
        elif kind == "turn/end":
            reason = data.get("reason") if isinstance(data.get("reason"), dict) else {}
            error = reason.get("error") if isinstance(reason.get("error"), dict) else {}
            if error.get("code") == OVERFLOW:
                hit("overflow-out-of-budget", seq)
            overflow_in_turn = False
        elif kind == "command/done":
            if data.get("kind") == "success":
                hit("compact-compacted" if data.get("sourceEventSeq") is not None else "compact-nothing", seq)
            elif data.get("kind") == "error":
                hit("compact-error", seq)
        elif kind == "session/end-seed":
            hit("reload-end-seed", seq)
        if _runtime_context(kind, data):
            if snapshot_shadowed:
                hit("runtime-context-reemission", seq)
            snapshot_seq, snapshot_shadowed = seq, False
        elif op == "replace" and snapshot_seq is not None and snapshot_seq in sources:
            snapshot_shadowed = True
    return found


# -- the situations each audit rule judges -------------------------------------------------------------
def _surface(kind, data, op):
    return kind in ("user/message", "assistant/message", "tool/result")


def _replace(kind, data, op):
    return op == "replace"


def _priced(kind, data, op):
    return kind in ("compaction/summary", "compaction/prune")


def _pressure(kind, data, op):
    return kind == "compaction/prune" or (kind == "compaction/start" and data.get("turn") is not None)


def _every(kind, data, op):
    return True


def _tool_append(kind, data, op):
    return kind == "tool/result" and op == "append"


def _overflow(kind, data, op):
    return kind == "assistant/chunk" and _failure_code(data) == OVERFLOW


def _start(kind, data, op):
    return kind == "compaction/start"


JUDGES: dict[str, Callable[[str, dict, str | None], bool]] = {
    "seq-contiguity": _every, "seq-gap-uncommitted": _every, "torn-tail": _every, "meter-fold": _every,
    "surface-op-missing": _surface, "message-shape": _surface,
    "surface-op-forbidden": lambda k, d, o: not _surface(k, d, o),
    "surface-op-invalid": lambda k, d, o: o is not None,
    "replace-range-missing": _replace, "replace-range-reversed": _replace, "provenance-invalid": _replace,
    "provenance-missing-shadowed": _replace, "cut-unbalanced": _replace, "projection-drift": _replace,
    "tool-result-rewrite": lambda k, d, o: k == "tool/result" and o == "replace",
    "orphan-tool-result": _tool_append, "tool-result-unknown-call": _tool_append,
    "shadow-price-mismatch": _priced, "shadow-price-wrong": _priced, "shadowed-seqs-wrong": _priced,
    "bracket-order": lambda k, d, o: k.startswith("compaction/") and k != "compaction/prune",
    "summary-not-smaller": _checkpoint, "checkpoint-source": _checkpoint, "checkpoint-unbracketed": _checkpoint,
    "lock-overlap": _start, "lock-orphaned": _start, "selection-mismatch": _start,
    "pressure-below-threshold": _pressure, "pressure-attempts-exceeded": _pressure,
    "retry-without-progress": _overflow, "overflow-retries-exceeded": _overflow,
    "runtime-context-gap": lambda k, d, o: k == "request/header",
}
"""Audit rule id -> the events it judges: a rule is *exercised* by a log that holds one (every rule of
``surfacecheck.audit.rules.RULES`` has an entry; a test holds the two tables together)."""


def judged(events: Iterable[Any]) -> dict[str, int]:
    """``{rule id: events of this log the rule judged}``, and ``{"type:<event type>": count}``."""
    counts: dict[str, int] = {}
    for event in events:
        kind, _seq, data, op, _sources = parts(event)
        counts[f"type:{kind}"] = counts.get(f"type:{kind}", 0) + 1
        for rule, judges in JUDGES.items():
            if judges(kind, data, op):
                counts[rule] = counts.get(rule, 0) + 1
    return counts
