"""Promise monitors: what the design PROMISES, stated stronger than what dsh does (spec §15, §0.2).

The standard invariants (``properties/invariants.py``, ``policy_invariants.py``) encode dsh's actual
behaviour and hold on the model. These monitors state the design's promises instead; where dsh's
own behaviour breaks one, the model breaks it too, and the violation is a FINDING about dsh (a
``defect`` or a ``tradeoff``, registered in ``properties/findings.json``), not a divergence.

Every monitor is registered under a name starting ``promise-`` and names the §15 gap it exposes.
"""
from __future__ import annotations

import re

from surfacecheck.properties.monitors import register, registered_in
from surfacecheck.properties.policy_invariants import CLEARED, RUNTIME_CONTEXT_SOURCE, context_text
from surfacecheck.core.trace import Step, Violation

SHRINK_FLOOR = 103
"""Framing costs 98 tokens and the smallest summary block 5 (§15 G7): no span priced <= 103 shrinks."""
_NOT_SMALLER = re.compile(
    r"summary is not smaller than the shadowed content \((\d+) estimated framed tokens >= (\d+)\)")
AUTOMATIC_OPS = frozenset({"compact", "pre_step", "request_error"})


def _ok(result) -> bool:
    return isinstance(result, dict) and "error" not in result and "__crash__" not in result


def _appended(result) -> list[str]:
    value = result.get("appended") if isinstance(result, dict) else None
    return value if isinstance(value, list) else []


def _failure_message(result) -> str:
    failure = result.get("failure") if isinstance(result, dict) else None
    return str(failure.get("message", "")) if isinstance(failure, dict) else ""


def _checkpoints(types: list[str]) -> int:
    """Checkpoints written: a `user/message` right after `compaction/summary` (spec 8.2 steps 13-14)."""
    return sum(1 for i, kind in enumerate(types)
               if kind == "user/message" and i and types[i - 1] == "compaction/summary")


def _scripts(args: dict) -> list[dict] | None:
    """The op's own summary scripts (``summaries`` / ``summary``), or None when it uses the standing queue."""
    if isinstance(args.get("summaries"), list):
        return [s for s in args["summaries"] if isinstance(s, dict)]
    if isinstance(args.get("summary"), dict):
        return [args["summary"]]
    return None


def _total(query) -> int | None:
    measure = query("measure", {})
    return measure.get("total") if _ok(measure) and isinstance(measure.get("total"), int) else None


@register("promise-projection-exact", engine="findings")
class ProjectionExact:
    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        projection = query("projection", {})
        total = projection.get("total") if isinstance(projection, dict) else None
        measure = query("measure", {})
        if not isinstance(total, int) or not _ok(measure) or not isinstance(measure.get("prices"), list):
            return None
        recount = sum(measure["prices"])
        if total != recount:
            return Violation(self.name, f"after {step.op}: the projection says {total} tokens but the surface "
                                        f"recounts to {recount} (drift {total - recount})", number, recount, total)
        return None


@register("promise-compaction-progress", engine="findings")
class CompactionProgress:
    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        found = _NOT_SMALLER.search(_failure_message(result))
        if found is None or int(found.group(2)) > SHRINK_FLOOR:
            return None
        return Violation(self.name, f"{step.op}: a compaction started over a span priced {found.group(2)} tokens, "
                                    f"at or under the shrink floor {SHRINK_FLOOR}; it can never land",
                         number, f"a span priced > {SHRINK_FLOOR}", int(found.group(2)))


@register("promise-cancellation-respected", engine="findings")
class CancellationRespected:
    def __init__(self) -> None:
        self.queue: list[dict] = []

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        if step.op == "configure":
            self.queue = _scripts(step.args) or []
            return None
        types = _appended(result)
        starts = types.count("compaction/start")
        own = _scripts(step.args)
        consumed = (own if own is not None else self.queue)[:starts]
        if own is None:
            self.queue = self.queue[starts:]
        if step.op not in AUTOMATIC_OPS or step.args.get("manual") or not _ok(result):
            return None
        cancelled = bool(step.args.get("aborted")) or any(s.get("outcome") == "late-cancel" for s in consumed)
        if cancelled and _checkpoints(types):
            return Violation(self.name, f"{step.op}: the compaction's signal was aborted while it summarized, yet "
                                        f"its checkpoint committed (generation {result.get('generation')})",
                             number, "no checkpoint after cancellation", types)
        return None


@register("promise-retry-after-real-progress", engine="findings")
class RetryAfterRealProgress:
    def __init__(self) -> None:
        self.window: int | None = None

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        if step.op == "configure" and _ok(result):
            policy = step.args.get("policy") if isinstance(step.args.get("policy"), dict) else {}
            window = step.args.get("context_window", policy.get("contextWindow"))
            self.window = window if isinstance(window, int) else None
            return None
        if step.op != "request_error" or not _ok(result) or result.get("kind") != "retry" or self.window is None:
            return None
        types = _appended(result)
        if "compaction/prune" not in types or _checkpoints(types):
            return None
        total = _total(query)
        if total is not None and total > self.window:
            return Violation(self.name, f"request_error authorized a retry on pruning alone, but the request "
                                        f"still measures {total} tokens over the {self.window}-token window",
                             number, f"<= {self.window}", total)
        return None


@register("promise-pressure-relieved", engine="findings")
class PressureRelieved:
    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        if step.op != "pre_step" or not _ok(result) or "compaction/start" not in _appended(result):
            return None
        message = _failure_message(result)
        if "still above threshold" in message:
            return Violation(self.name, f"pre_step ran {_appended(result).count('compaction/start')} summaries and "
                                        f"left the pressure unrelieved: {message}", number,
                             "below threshold", message)
        return None


@register("promise-runtime-context-never-lost", engine="findings")
class RuntimeContextNeverLost:
    def __init__(self) -> None:
        self.snapshots: dict[int, str | None] = {}

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        if step.op == "reset":
            self.snapshots = {}
        event = step.args.get("event") if step.op == "append" and isinstance(step.args.get("event"), dict) else {}
        data = event.get("data") if isinstance(event.get("data"), dict) else {}
        source = data.get("source") if isinstance(data.get("source"), dict) else {}
        if event.get("type") == "user/message" and source.get("plugin") == RUNTIME_CONTEXT_SOURCE and _ok(result):
            content = data.get("content") or [{}]
            self.snapshots[result.get("seq")] = content[0].get("text") if isinstance(content[0], dict) else None
        if step.op != "pre_step" or not isinstance(step.args.get("context"), list) or not _ok(result):
            return None
        wanted = context_text(step.args["context"]) or (CLEARED if self.snapshots else None)
        snapshot = result.get("snapshot")
        if isinstance(snapshot, int) and not isinstance(snapshot, bool):
            self.snapshots[snapshot] = wanted
        if wanted is None:
            return None
        surface = query("surface", {})
        nodes = surface.get("nodes") if isinstance(surface, dict) and isinstance(surface.get("nodes"), list) else []
        visible = [seq for seq in nodes if seq in self.snapshots]
        if visible and self.snapshots[max(visible)] == wanted:
            return None
        return Violation(self.name, "this step's request goes out without the current runtime context on the "
                                    "surface (its snapshot was shadowed and not entered again)", number, wanted,
                         max(visible) if visible else None)


@register("promise-cancellation-honest", engine="findings")
class CancellationHonest:
    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        if step.op not in ("compact", "manual_compact") or not _ok(result):
            return None
        said = result.get("code") if step.op == "manual_compact" else result.get("kind")
        if said in ("aborted", "cancelled") and _checkpoints(_appended(result)):
            return Violation(self.name, f"{step.op} answered {said!r} but its checkpoint committed (generation "
                                        f"{result.get('generation')})", number, "no checkpoint", _appended(result))
        return None


@register("promise-lock-respected", engine="findings")
class LockRespected:
    def __init__(self) -> None:
        self.open = False

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        if step.op == "reset" and _ok(result):
            self.open = False
            return None
        event = step.args.get("event") if step.op == "append" and isinstance(step.args.get("event"), dict) else {}
        types = [event.get("type")] if event and _ok(result) else _appended(result)
        was_open = self.open
        for kind in types:
            if kind == "compaction/start":
                self.open = True
            elif kind in ("compaction/end", "session/end-seed"):
                self.open = False
        if was_open and step.op != "append" and "compaction/prune" in types:
            return Violation(self.name, f"{step.op} pruned while a compaction bracket was still open (the durable "
                                        f"compaction lock)", number, "no replacement under the lock", types)
        return None


PROMISES = registered_in(__name__)
"""Every promise monitor of this module, in registration order."""
