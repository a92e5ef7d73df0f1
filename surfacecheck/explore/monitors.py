"""Replay monitors for explore's progress properties (registered in ``properties/monitors.py``).

The explorer checks progress on the whole graph; a counterexample trace is a finite witness of
it (a lasso unrolled once, or a too-long path), and these monitors re-check that witness step by
step when ``surfacecheck replay`` runs the trace, against any runtime:

* ``explore-no-compaction-loop`` (spec 10.2, seed §12): a ``request_error`` that answers
  ``retry`` without a generation advance closes a loop (the same request overflows again);
* ``pressure-bounded-response`` (spec 9.2-9.3): a ``pre_step`` over the threshold that
  neither compacts, prunes nor warns, while a compactable range exists;
* ``explore-runtime-context-reemitted`` (spec 12 one-request window, seed §14): the latest
  runtime-context snapshot is missing from the surface when two consecutive steps' requests go out.
"""
from __future__ import annotations

import math

from surfacecheck.properties.monitors import register
from surfacecheck.core.trace import Step, Violation

from surfacecheck.model.runtime_context import CLEARED, RUNTIME_CONTEXT_SOURCE, join_context_sections


def _ok(result) -> bool:
    return isinstance(result, dict) and "error" not in result


def _event(step: Step) -> dict:
    event = step.args.get("event") if step.op == "append" else None
    return event if isinstance(event, dict) else {}


@register("explore-no-compaction-loop", engine="explore", checks="overflow-retry-after-progress")
class NoCompactionLoop:
    def __init__(self) -> None:
        self.generation = 0

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        before = self.generation
        surface = query("surface", {})
        if _ok(surface):
            self.generation = surface.get("generation", before)
        if step.op == "request_error" and _ok(result) and result.get("kind") == "retry" and self.generation <= before:
            return Violation(self.name, f"request_error answered retry at generation {self.generation} without a "
                                        "replacement: the retried request overflows again (a compaction loop)",
                             number, f"generation > {before}", self.generation)
        return None


@register("pressure-bounded-response", engine="explore")
class PressureBoundedResponse:
    def __init__(self) -> None:
        self.total, self.routed = None, False
        self.threshold, self.retain = None, None

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        before = self.total
        measure = query("measure", {})
        self.total = measure.get("total") if _ok(measure) else None
        if step.op == "configure":
            policy = step.args.get("policy") or {}
            window = step.args.get("context_window", policy.get("contextWindow"))
            if isinstance(window, int) and window > 0:
                self.threshold = math.floor(window * policy.get("thresholdRatio", 0.8))
                self.retain = policy.get("retainTokens", math.floor(window * policy.get("retainRatio", 0.16)))
        elif step.op == "append" and _event(step).get("type") == "request/header":
            self.routed = True
        elif step.op == "pre_step" and _ok(result) and result.get("kind") == "noop" and self.routed:
            if self.threshold is not None and before is not None and before >= self.threshold:
                span = query("select_range", {"retain_tokens": self.retain})
                if _ok(span) and span.get("range") is not None:
                    return Violation(self.name, f"pre-step at {before} tokens (threshold {self.threshold}) did "
                                                f"nothing although range {span['range']} is compactable",
                                     number, "compacted, pruned or warned", result.get("kind"))
        return None


@register("explore-runtime-context-reemitted", engine="explore", checks="runtime-context-reemitted")
class RuntimeContextReemitted:
    """The window is one step: a snapshot shadowed *during* a step's pre-step or overflow recovery may
    be missing from that step's requests (spec 12, §15 G2); one already missing when the pre-step
    starts must be back by the step's request. A ``pre_step {context}`` makes the runtime responsible
    (it writes the snapshot, result ``snapshot``): judged right after that pre-step, against the surface
    as it was when the pre-step began; driver-appended snapshots are judged at the step's first request."""

    def __init__(self) -> None:
        self.snapshots: dict[int, str] = {}
        self.wanted = None
        self.nodes: list = []  # the surface after the previous request
        self.visible = True  # after the previous step
        self.due = False  # missing when this step's pre-step started
        self.entering = False

    def _shown(self) -> bool:
        shown = [seq for seq in self.nodes if seq in self.snapshots]
        return self.wanted is None or (bool(shown) and self.snapshots[max(shown)] == self.wanted)

    def _visible(self, query) -> bool:
        if self.wanted is None and not self.snapshots:
            return True
        surface = query("surface", {})
        self.nodes = surface.get("nodes", []) if _ok(surface) else []
        return self._shown()

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        event = _event(step)
        kind = event.get("type")
        data = event.get("data") if isinstance(event.get("data"), dict) else {}
        context = step.args.get("context") if step.op == "pre_step" else None
        judged = isinstance(context, list) and _ok(result)
        if step.op == "pre_step":
            self.due = not self.visible
        if judged:  # spec 12: the wanted text is the step's own runtime context (CLEARED once any existed)
            text = join_context_sections(context)
            self.wanted = text or (CLEARED if self.snapshots else None)
            self.due = not self._shown()  # the surface the runtime's candidate saw
            seq = result.get("snapshot")
            if isinstance(seq, int) and not isinstance(seq, bool):
                self.snapshots[seq] = self.wanted
        if kind == "user/message" and _ok(result):
            source = data.get("source") or {}
            if source.get("kind") == "plugin" and source.get("plugin") == RUNTIME_CONTEXT_SOURCE:
                text = ((data.get("content") or [{}])[0] or {}).get("text")
                self.snapshots[result.get("seq")] = text
                self.wanted = text
        self.visible = self._visible(query)
        if judged:
            due, self.due, self.entering = self.due, False, False
            if due and not self.visible:
                return Violation(self.name, "the runtime-context snapshot was already missing when this pre-step "
                                            "began and the runtime did not re-emit it for the step's request",
                                 number, self.wanted, result.get("snapshot"))
            return None
        if kind == "step/start":
            self.entering = True
        elif kind in ("assistant/chunk", "request/header", "request/context") and self.entering:
            self.entering = False  # the step's request goes out now
            if self.due and not self.visible:
                return Violation(self.name, "the step's request goes out without the runtime-context snapshot that "
                                            "was already shadowed before its pre-step (not re-emitted)",
                                 number, self.wanted, None)
        return None


@register("no-orphan-tool-result", engine="explore")
class NoOrphanToolResult:
    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        cuts = query("cuts", {})
        if isinstance(cuts, dict) and "error" in cuts and cuts["error"].get("rule") == "tool-pairing":
            return Violation(self.name, f"after {step.op}: {cuts['error'].get('message')}", number, "count >= 0",
                             cuts["error"])
        return None


@register("model-error-free", engine="explore")
class ModelErrorFree:
    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        if step.op in ("pre_step", "request_error", "manual_compact", "prune", "reload") and isinstance(result, dict) \
                and "error" in result:
            return Violation(self.name, f"{step.op} refused: {result['error'].get('message')}", number, None,
                             result["error"])
        return None
