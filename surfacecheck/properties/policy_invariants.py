"""Invariants of the compaction producers and the policy listeners, read from the protocol results:
bracket order (spec 8.2-8.3, 5.1 adjacency), overflow retry only after progress (spec 10.2) and
retries within their budgets (spec 9.2 step 11, 10.2). Registered by importing
``properties.invariants``.
"""
from __future__ import annotations

from surfacecheck.properties.monitors import register
from surfacecheck.core.trace import Step, Violation

COMPACTION_OPS = frozenset({"prune", "compact", "pre_step", "request_error", "manual_compact"})


def _appended(result) -> list[str] | None:
    value = result.get("appended") if isinstance(result, dict) else None
    return value if isinstance(value, list) else None


@register("bracket-order", engine="verify")
class BracketOrder:
    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        types = _appended(result)
        if step.op not in COMPACTION_OPS or types is None or step.args.get("faults"):
            return None
        problem = bracket_problem(types)
        if problem is None:
            return None
        return Violation(self.name, f"{step.op} wrote {types}: {problem}", number,
                         "start -> summary -> checkpoint -> end", types)


def bracket_problem(types: list[str]) -> str | None:
    """The first broken rule of the producers' event order in ``types`` (event types, in order)."""
    open_, after = False, None  # after: the last bracket event inside an open bracket
    for index, kind in enumerate(types):
        if after == "compaction/prune" and kind != "tool/result":
            return f"compaction/prune at position {index - 1} is not immediately followed by its tool/result"
        if after == "compaction/summary" and kind not in ("user/message", "compaction/end"):
            return f"compaction/summary at position {index - 1} is not followed by its checkpoint or the close"
        if after == "checkpoint" and kind != "compaction/end":
            return f"the checkpoint at position {index - 1} is not immediately followed by compaction/end"
        after = None
        if kind == "compaction/start":
            if open_:
                return f"compaction/start at position {index} inside an open bracket"
            open_ = True
        elif kind == "compaction/summary":
            if not open_:
                return f"compaction/summary at position {index} outside a bracket"
            after = kind
        elif kind == "user/message" and index and types[index - 1] == "compaction/summary":
            after = "checkpoint"
        elif kind == "compaction/end":
            if not open_:
                return f"compaction/end at position {index} without compaction/start"
            open_ = False
        elif kind == "compaction/prune":
            after = kind
    if open_:
        return "the op returned with its compaction bracket still open"
    if after == "compaction/summary":
        return "the op ended right after compaction/summary"
    return None


@register("overflow-retry-after-progress", engine="verify")
class OverflowRetryAfterProgress:
    def __init__(self) -> None:
        self.generation = 0

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        before = self.generation
        surface = query("surface", {})
        if isinstance(surface, dict) and "generation" in surface:
            self.generation = surface["generation"]
        if step.op == "request_error" and isinstance(result, dict) and result.get("kind") == "retry" \
                and self.generation <= before:
            return Violation(self.name, f"request_error answered retry but the generation stayed {before} -> "
                                        f"{self.generation} (a result without replacement is not progress)",
                             number, f"> {before}", self.generation)
        return None


@register("retries-within-budget", engine="verify")
class RetriesWithinBudget:
    def __init__(self) -> None:
        self.compaction_retries = 1
        self.overflow_retries = 1
        self.consecutive = 0

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        refused = isinstance(result, dict) and "error" in result  # a refused policy leaves the last in force
        if step.op == "configure" and isinstance(step.args.get("policy"), dict) and not refused:
            self._budget(step.args["policy"])
        if step.op in ("reset", "reload"):
            self.consecutive = 0
        if step.op == "append":
            event = step.args.get("event") or {}
            status = (event.get("data") or {}).get("status") if isinstance(event.get("data"), dict) else None
            if event.get("type") == "assistant/message" or (event.get("type") == "agent/status" and status == "idle"):
                self.consecutive = 0
        types = _appended(result) or []
        starts = types.count("compaction/start")
        if step.op == "pre_step" and starts > self.compaction_retries + 1:
            return Violation(self.name, f"pre_step wrote {starts} compaction brackets; the budget is "
                                        f"compactionRetries + 1 = {self.compaction_retries + 1}", number,
                             self.compaction_retries + 1, starts)
        if step.op == "request_error":
            if starts > 1:
                return Violation(self.name, f"request_error wrote {starts} compaction brackets; overflow recovery "
                                            f"makes exactly one attempt", number, 1, starts)
            if isinstance(result, dict) and result.get("kind") == "retry":
                self.consecutive += 1
                if self.consecutive > self.overflow_retries:
                    return Violation(self.name, f"{self.consecutive} consecutive overflow retries; "
                                                f"maxOverflowRetries is {self.overflow_retries}", number,
                                     self.overflow_retries, self.consecutive)
        return None

    def _budget(self, policy: dict) -> None:
        """The largest budget any route can have (top level or a model policy): an upper bound, so a
        correct runtime never trips it whatever route it resolves."""
        scopes = [policy] + [p for p in policy.get("modelPolicies") or [] if isinstance(p, dict)]
        comp = [s.get("compactionRetries") for s in scopes if isinstance(s.get("compactionRetries"), int)]
        over = [s.get("maxOverflowRetries") for s in scopes if isinstance(s.get("maxOverflowRetries"), int)]
        self.compaction_retries = max(comp + ([1] if "compactionRetries" not in policy else []))
        self.overflow_retries = max(over + ([1] if "maxOverflowRetries" not in policy else []))


RUNTIME_CONTEXT_SOURCE = "@deepseek-ai/dsh-system-prompt"
REQUEST_EVENTS = frozenset({"assistant/chunk", "assistant/message", "request/header", "request/context"})
CONTEXT_HEADER = "Current runtime context. This snapshot supersedes earlier runtime-context snapshots.\n\n"
CLEARED = "Current runtime context: none. Earlier runtime-context snapshots no longer apply."


def context_text(sections: list) -> str:
    """`joinContextSections` (spec 12): '' without text, else the header and the texts."""
    body = "\n\n".join(str(s.get("text", "")) for s in sections if isinstance(s, dict))
    return CONTEXT_HEADER + body if body else ""


@register("runtime-context-reemitted", engine="verify")
class RuntimeContextReemitted:
    """Snapshots are owned `user/message`s (plugin `@deepseek-ai/dsh-system-prompt`). A ``pre_step`` with
    ``context`` makes the RUNTIME responsible: the snapshot it writes (``snapshot`` seq) is judged against the
    surface as it was when that pre-step began, so a snapshot shadowed by the pre-step's own compaction may be
    absent from this request (spec 12 one-request window, §15 G2) and must come back at the next pre-step.
    Without ``context`` the driver's own snapshot appends are judged at the step's first request event."""

    def __init__(self) -> None:
        self.snapshots: dict[int, str | None] = {}
        self.wanted: str | None = None
        self.nodes: list[int] = []
        self.visible = True
        self.due = False
        self.entering = False

    def shown(self, nodes: list[int]) -> bool:
        """The newest owned snapshot on ``nodes`` carries the wanted text (retained and current, spec 12)."""
        visible = [seq for seq in nodes if seq in self.snapshots]
        return bool(visible) and self.snapshots[max(visible)] == self.wanted

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        event = step.args.get("event") if step.op == "append" and isinstance(step.args.get("event"), dict) else {}
        data = event.get("data") if isinstance(event.get("data"), dict) else {}
        kind = event.get("type")
        if step.op == "reset":
            self.__init__()
        runtime_judged = step.op == "pre_step" and isinstance(step.args.get("context"), list)
        if runtime_judged:
            text = context_text(step.args["context"])
            self.wanted = text or (CLEARED if self.snapshots else None)
            self.due = self.wanted is not None and not self.shown(self.nodes)  # the state the candidate saw
            snapshot = result.get("snapshot") if isinstance(result, dict) else None
            if isinstance(snapshot, int) and not isinstance(snapshot, bool):
                self.snapshots[snapshot] = self.wanted
        elif step.op == "pre_step":
            self.due = not self.visible
        source = data.get("source") if isinstance(data.get("source"), dict) else {}
        if kind == "user/message" and source.get("plugin") == RUNTIME_CONTEXT_SOURCE and "error" not in result:
            content = data.get("content") or [{}]
            self.wanted = content[0].get("text") if isinstance(content[0], dict) else None
            self.snapshots[result.get("seq")] = self.wanted
        if self.snapshots or runtime_judged:
            surface = query("surface", {})
            nodes = surface.get("nodes") if isinstance(surface, dict) else None
            self.nodes = list(nodes) if isinstance(nodes, list) else []
            self.visible = self.shown(self.nodes)
        if runtime_judged:
            if self.due and not self.visible and "error" not in result:
                return Violation(self.name, "the runtime-context snapshot was already shadowed or stale when this "
                                            "pre-step began, and the runtime did not enter it back for this step's "
                                            "request", number, self.wanted, result.get("snapshot"))
            self.due = False
            return None
        if kind == "step/start":
            self.entering = True
        elif kind in REQUEST_EVENTS and self.entering:
            self.entering = False  # the step's request goes out now
            if self.due and not self.visible:
                return Violation(self.name, "the step's request goes out without the runtime-context snapshot that "
                                            "was already shadowed before its pre-step", number, self.wanted, None)
        return None

