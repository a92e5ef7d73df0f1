"""Promise monitors: runtime context, persistence, observability, projection liveness (spec §15, seed §§2, 14-16).

Like :mod:`properties.promises`, each states what the design PROMISES, stronger than dsh does, and
names the §15 gap where dsh's own behaviour breaks it (a finding, not a divergence). Every monitor
judges only what the protocol shows: op results, the ``surface`` before and after a step, and the
read-only ``projection {usage: true}`` query (cumulative `tokenUsage`, spec 5.2).
"""
from __future__ import annotations

from surfacecheck.properties.monitors import register, registered_in
from surfacecheck.properties.policy_invariants import CLEARED, RUNTIME_CONTEXT_SOURCE, context_text
from surfacecheck.properties.promises import _appended, _ok, _scripts
from surfacecheck.core.trace import Step, Violation

SUMMARY_OUTCOMES = frozenset({"text", "late-cancel", "concurrent"})
"""Script outcomes whose summarizer call returns text, so a `compaction/summary` may record its usage (spec 8.5)."""
UNREADABLE = "message-shape"
"""The refusal rule of a fold that met a message shape dsh cannot read (spec 2.3, §15 G18)."""
USAGE_KEYS = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")


def _nodes(query) -> list[int]:
    surface = query("surface", {})
    nodes = surface.get("nodes") if isinstance(surface, dict) else None
    return nodes if isinstance(nodes, list) else []


def _event(step: Step) -> dict:
    event = step.args.get("event") if step.op == "append" else None
    return event if isinstance(event, dict) else {}


class _Snapshots:
    """Runtime-context snapshots seen in a run (spec 12): seq -> text, from ``pre_step`` results
    (``snapshot`` seq, the text the ``context`` renders) and raw appends of owned `user/message`s."""

    def __init__(self) -> None:
        self.text: dict[int, str | None] = {}

    def follow(self, step: Step, result: dict, current: str | None = None) -> None:
        """Record this step's snapshots. ``current``: the text a ``request_error`` re-entry would carry (a
        runtime that re-projects before a same-step retry reports its ``snapshot`` there; dsh never does)."""
        if step.op == "reset" and _ok(result):
            self.text = {}
        event = _event(step)
        data = event.get("data") if isinstance(event.get("data"), dict) else {}
        source = data.get("source") if isinstance(data.get("source"), dict) else {}
        if event.get("type") == "user/message" and source.get("plugin") == RUNTIME_CONTEXT_SOURCE and _ok(result):
            content = data.get("content")
            block = content[0] if isinstance(content, list) and len(content) == 1 else None
            self.text[result.get("seq")] = block.get("text") if isinstance(block, dict) else None
        snapshot = result.get("snapshot") if step.op in ("pre_step", "request_error") and _ok(result) else None
        if isinstance(snapshot, int) and not isinstance(snapshot, bool):
            self.text[snapshot] = self.wanted(step) if step.op == "pre_step" else current

    def wanted(self, step: Step) -> str | None:
        """The snapshot text this step's ``context`` calls for (spec 12 `project`); None: no context at all."""
        context = step.args.get("context")
        if not isinstance(context, list):
            return None
        return context_text(context) or (CLEARED if self.text else None)

    def newest_visible(self, nodes: list[int]) -> int | None:
        visible = [seq for seq in nodes if seq in self.text]
        return max(visible) if visible else None


def _enters(retained: int | None, ever: bool, text: dict, current: str) -> bool:
    """Spec 12 `project(current)`: does a projection retaining ``retained`` (None: NONE, or NEVER when
    not ``ever``) enter a snapshot for ``current``?"""
    if not ever and current == "":
        return False
    snapshot = current or CLEARED
    return retained is None or text.get(retained) != snapshot


@register("promise-context-resume-equals-live", engine="findings")
class ContextResumeEqualsLive:
    """After a ``reload``, the first ``pre_step {context}`` must decide as the live projection would over the
    same log: live retains the newest snapshot ever entered unless it is shadowed (then none), restore the
    newest still on the surface. The surface before the pre-step is the one seen after the previous step."""

    def __init__(self) -> None:
        self.snapshots = _Snapshots()
        self.before: list[int] = []
        self.resumed = False

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        before, self.before = self.before, _nodes(query)
        if step.op == "reset" and _ok(result):
            self.resumed = False
        judged = step.op == "pre_step" and isinstance(step.args.get("context"), list) and _ok(result)
        violation = self._judge(number, step, result, before) if judged and self.resumed else None
        self.snapshots.follow(step, result)
        if step.op == "reload" and _ok(result):
            self.resumed = True
        elif judged:
            self.resumed = False
        return violation

    def _judge(self, number: int, step: Step, result: dict, before: list[int]) -> Violation | None:
        text, current = self.snapshots.text, context_text(step.args["context"])
        newest = max(text) if text else None
        live = _enters(newest if newest in before else None, bool(text), text, current)
        entered = isinstance(result.get("snapshot"), int)
        if entered == live:
            return None
        restored = self.snapshots.newest_visible(before)
        what = "enters the current runtime context again" if live else "enters nothing"
        return Violation(self.name, f"after reload, pre_step {'entered' if entered else 'did not enter'} a runtime-"
                                    f"context snapshot; a live agent over the same log {what} (live retains snapshot "
                                    f"{newest if newest in before else 'none: the newest was shadowed'}, the resumed "
                                    f"agent restored snapshot {restored})", number,
                         "snapshot entered" if live else "no snapshot", "snapshot entered" if entered else "no snapshot")


@register("promise-runtime-context-one-request", engine="findings")
class RuntimeContextOneRequest:
    """Requests are each ``pre_step {context}`` (the step's first request) and each ``request_error`` answered
    ``retry`` (the same step re-sent, spec 10.3). A request carries the context when the newest visible
    snapshot has the current text; two requests in a row without it break the promise."""

    def __init__(self) -> None:
        self.snapshots = _Snapshots()
        self.current: str | None = None
        self.missed = 0

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        self.snapshots.follow(step, result, self.current)
        if step.op == "reset":
            self.current, self.missed = None, 0
        if step.op == "pre_step" and _ok(result):
            has_context = isinstance(step.args.get("context"), list)
            self.current = self.snapshots.wanted(step) if has_context else None
        elif not (step.op == "request_error" and _ok(result) and result.get("kind") == "retry"):
            return None
        if self.current is None:
            return None
        newest = self.snapshots.newest_visible(_nodes(query))
        if newest is not None and self.snapshots.text[newest] == self.current:
            self.missed = 0
            return None
        self.missed += 1
        if self.missed < 2:
            return None
        return Violation(self.name, f"{step.op}: {self.missed} requests in a row go out without the current runtime "
                                    f"context (the promise allows one after a shadowing)", number, "<= 1",
                         self.missed)


@register("promise-log-reloads", engine="findings")
class LogReloads:
    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        if step.op != "reload" or not isinstance(result, dict) or not isinstance(result.get("error"), dict):
            return None
        error = result["error"]
        return Violation(self.name, f"reload refused the log it accepted live: {error.get('message', '')} (rule "
                                    f"{error.get('rule')}, seq {error.get('seq')})", number, "the log loads",
                         error.get("rule"))


@register("promise-config-errors-reported", engine="findings")
class ConfigErrorsReported:
    """A ``pre_step`` answered ``silent`` swallowed its failure; that is fine only when the same failure
    (message) was reported (``warned``) before in this engine instance (a ``reload`` starts a new one)."""

    def __init__(self) -> None:
        self.reported: set[str] = set()

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        if step.op in ("reset", "reload") and _ok(result):
            self.reported = set()
        if step.op != "pre_step" or not _ok(result) or not isinstance(result.get("failure"), dict):
            return None
        message = str(result["failure"].get("message", ""))
        if result.get("kind") == "warned":
            self.reported.add(message)
        elif result.get("kind") == "silent" and message not in self.reported:
            return Violation(self.name, f"pre_step swallowed a configuration error never reported before: {message}",
                             number, "warned", "silent")
        return None


def _usage(query) -> int | None:
    """Cumulative `tokenUsage` (spec 5.2) summed over its buckets; None when the runtime does not report it."""
    projection = query("projection", {"usage": True})
    usage = projection.get("usage") if isinstance(projection, dict) else None
    if not isinstance(usage, dict):
        return None
    return sum(v for v in (usage.get(k, 0) for k in USAGE_KEYS) if isinstance(v, int) and not isinstance(v, bool))


def _tokens(usage) -> int:
    if isinstance(usage, (list, tuple)):
        return sum(v for v in usage if isinstance(v, int))
    if isinstance(usage, dict):
        return sum(v for v in (usage.get(k, 0) for k in USAGE_KEYS) if isinstance(v, int))
    return 0


@register("promise-compaction-usage-accounted", engine="findings")
class CompactionUsageAccounted:
    """A step that commits `compaction/summary` events must raise cumulative `tokenUsage` by at least their
    usage: read from a raw append's data, else from the summary scripts the step consumed (each
    `compaction/start` consumes one; the committed summaries come from the text-returning ones)."""

    def __init__(self) -> None:
        self.queue: list[dict] = []
        self.usage: int | None = None

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        before, self.usage = self.usage, _usage(query)
        expected = self._spent(step, result)
        if step.op in ("reset", "reload") or before is None or self.usage is None or expected <= 0:
            return None
        if self.usage - before < expected:
            return Violation(self.name, f"{step.op} committed compaction/summary usage of {expected} tokens, but "
                                        f"tokenUsage grew by {self.usage - before}", number,
                             f">= {expected}", self.usage - before)
        return None

    def _spent(self, step: Step, result: dict) -> int:
        if step.op == "configure":
            self.queue = _scripts(step.args) or []
            return 0
        event = _event(step)
        if event:
            data = event.get("data") if isinstance(event.get("data"), dict) else {}
            return _tokens(data.get("usage")) if event.get("type") == "compaction/summary" and _ok(result) else 0
        types = _appended(result)
        starts, summaries = types.count("compaction/start"), types.count("compaction/summary")
        own = _scripts(step.args)
        consumed = (own if own is not None else self.queue)[:starts]
        if own is None:
            self.queue = self.queue[starts:]
        spent = sorted(_tokens(s.get("usage")) for s in consumed if s.get("outcome", "text") in SUMMARY_OUTCOMES)
        return sum(spent[:summaries]) if summaries <= len(spent) else 0


@register("promise-projection-keeps-accepting", engine="findings")
class ProjectionKeepsAccepting:
    """Judged when the projection first answers a null total. A fold stuck on an event whose message shape
    it cannot read (rule ``message-shape``: a retired or malformed live append) is the input's fault and
    belongs to ``promise-log-reloads`` (§15 G18), not to the projection's liveness."""

    def __init__(self) -> None:
        self.stuck = False

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        projection = query("projection", {})
        stuck = isinstance(projection, dict) and "total" in projection and projection["total"] is None
        was, self.stuck = self.stuck, stuck
        error = projection.get("error") if stuck and isinstance(projection.get("error"), dict) else {}
        if not stuck or was or error.get("rule") == UNREADABLE:
            return None
        return Violation(self.name, f"after {step.op} the projection stopped accepting events: "
                                    f"{error.get('message', '')} (rule {error.get('rule')}, seq {error.get('seq')})",
                         number, "a projected total", None)


PROMISES = registered_in(__name__)
"""Every promise monitor of this module, in registration order."""
