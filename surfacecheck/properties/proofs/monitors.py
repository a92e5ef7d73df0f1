"""Concrete-trace monitors for the proof obligations (``properties/monitors.py`` registry).

Each monitor re-checks, on one concrete run, the statement an obligation proves symbolically, using
only protocol answers (``surface``, ``cuts``, ``measure``, ``projection``) and the requests of the
run — so a Z3 counterexample, written as a trace, shows the same violation when replayed through the
executable model (or through a deliberately wrong model variant, for a negative control).
"""
from __future__ import annotations

from typing import Any

from surfacecheck.properties.monitors import register
from surfacecheck.core.trace import Step, Violation

from .variants import install as _install_variants

_install_variants()


def _ok(result: Any) -> bool:
    return isinstance(result, dict) and "error" not in result


def retention_point(prices: list[int], retain: int) -> int:
    """Spec 7 step 3 stated as the spec states it: the largest index whose suffix sum reaches the
    budget, 0 when none does (and when the surface is empty)."""
    best = 0
    for j in range(len(prices)):
        if sum(prices[j:]) >= retain:
            best = j
    return best


def cut_legality_problem(nodes: list[int], balanced: list[bool], prices: list[int], retain: int,
                         span: dict | None) -> tuple[str, Any] | None:
    """The first spec 7 promise a ``select_range`` answer breaks: (message, expected)."""
    n = len(nodes)
    R = retention_point(prices, retain)
    nearest = max((c for c in range(1, R + 1) if balanced[c]), default=0)
    expected = None if n == 0 or nearest == 0 else {"start": nodes[0], "end": nodes[nearest - 1]}
    if span is None:
        if expected is not None:
            return (f"null exactly when spec 7 says: null returned, but cut {nearest} (balanced, at or before the "
                    f"retention point {R}) selects {expected}", expected)
        return None
    if span.get("start") not in nodes or span.get("end") not in nodes:
        return f"range {span} names seqs not on the surface", expected
    start, end = nodes.index(span["start"]), nodes.index(span["end"])
    checks = [
        (start == 0, f"range starts at position 0: it starts at position {start}"),
        (0 <= end <= n - 2, f"non-empty and keeps at least one node: the range ends at position {end} of {n}"),
        (balanced[0] and balanced[end + 1], f"both edges balanced: the cut after position {end} is not balanced "
                                            "(it splits a tool call from its result)"),
        (end + 1 <= R, f"cut at or before the retention point: cut {end + 1} is past the retention point {R}"),
        (not any(balanced[c] for c in range(end + 2, R + 1)),
         f"no balanced cut skipped: cut {end + 1} chosen but cut {nearest} is balanced and nearer the retention point"),
    ]
    for held, message in checks:
        if not held:
            return message, expected
    return None


@register("cut-legality", engine="prove")
class CutLegality:
    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        if step.op != "select_range" or not _ok(result):
            return None
        surface, cuts, measure = query("surface", {}), query("cuts", {}), query("measure", {})
        if not (_ok(surface) and _ok(cuts) and _ok(measure)):
            return None
        problem = cut_legality_problem(surface["nodes"], cuts["balanced"], measure["prices"],
                                       step.args.get("retain_tokens", 0), result.get("range"))
        if problem is None:
            return None
        return Violation(self.name, problem[0], number, problem[1], result.get("range"))


def _node_ids(event: dict) -> tuple[list[str], str | None]:
    """(tool-call ids, answered id) of one appended event, read from its data (spec 2.3 shapes)."""
    data = event.get("data") if isinstance(event.get("data"), dict) else {}
    message = data.get("message") if isinstance(data.get("message"), dict) else {}
    content = message.get("content") if isinstance(message.get("content"), list) else []
    if event.get("type") == "assistant/message":
        return [b.get("id") for b in content if isinstance(b, dict) and b.get("type") == "tool-call"], None
    if event.get("type") == "tool/result":
        block = content[0] if content and isinstance(content[0], dict) else {}
        return [], block.get("toolCallId")
    return [], None


class _EventBook:
    """Remembers every appended event by the seq the runtime gave it."""

    def __init__(self) -> None:
        self.events: dict[int, dict] = {}

    def note(self, step: Step, result: dict) -> None:
        if step.op == "reset":
            self.events.clear()
        elif step.op == "append" and _ok(result) and isinstance(result.get("seq"), int):
            self.events[result["seq"]] = step.args.get("event") or {}


class _PairingIds(_EventBook):
    """Spec 3: a count-balanced cut is id-closed (every call before it answered before it)."""

    require_premise = True

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        self.note(step, result)
        surface, cuts = query("surface", {}), query("cuts", {})
        if not (_ok(surface) and _ok(cuts)):
            return None
        calls: list[str] = []
        answered: list[str] = []
        premise = True
        for c, seq in enumerate([None] + list(surface["nodes"])):
            if seq is not None:
                made, answer = _node_ids(self.events.get(seq, {}))
                if answer is not None:
                    premise = premise and answer in calls and answer not in answered
                    answered.append(answer)
                premise = premise and not (set(made) & set(calls)) and len(set(made)) == len(made)
                calls += made
            closed = set(calls) <= set(answered)
            if self.require_premise and not premise:
                return None
            if cuts["balanced"][c] != closed:
                return Violation(self.name, f"cut {c}: count-balanced is {cuts['balanced'][c]} but id-closed is "
                                            f"{closed} (calls {calls}, answered {answered}; premise "
                                            f"{'holds' if premise else 'broken'})", number, closed,
                                 cuts["balanced"][c])
        return None


register("pairing-ids", engine="prove")(_PairingIds)


@register("pairing-ids-unpremised", engine="prove", checks="pairing-ids")
class PairingIdsUnpremised(_PairingIds):
    require_premise = False


def _delta(event: dict) -> int:
    """Spec 3 delta read from an appended event (assistant: its tool calls; tool result: -1)."""
    if event.get("type") == "tool/result":
        return -1
    return len(_node_ids(event)[0]) if event.get("type") == "assistant/message" else 0


@register("incremental-pairing", engine="prove")
class IncrementalPairing(_EventBook):
    """Checks only at the run's own ``cuts`` requests: asking for cuts after every step would refresh
    the runtime's cache and hide a cache that is stale after a replace."""

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        self.note(step, result)
        if step.op != "cuts" or not _ok(result):
            return None
        surface = query("surface", {})
        if not _ok(surface) or any(seq not in self.events for seq in surface["nodes"]):
            return None  # a node this run did not write (a runtime-made checkpoint): no recount here
        running, expected = 0, [True]
        for seq in surface["nodes"]:
            running += _delta(self.events[seq])
            expected.append(running == 0)
        if result.get("balanced") != expected:
            return Violation(self.name, f"cuts {result.get('balanced')} differ from the full fold {expected} of the "
                                        f"surface {surface['nodes']} (generation {surface.get('generation')})",
                             number, expected, result.get("balanced"))
        return None


@register("projection-drift", engine="prove", checks="promise-projection-exact")
class ProjectionDrift:
    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        projection, measure = query("projection", {}), query("measure", {})
        if not (_ok(measure) and isinstance(projection, dict) and projection.get("total") is not None):
            return None
        recount = sum(measure["prices"])
        if projection["total"] != recount:
            return Violation(self.name, f"after {step.op}: projection total {projection['total']} != recount "
                                        f"{recount} (drift {projection['total'] - recount})", number, recount,
                             projection["total"])
        return None


@register("smallest-compactable-span", engine="prove")
class SmallestCompactableSpan:
    smallest_frame = 103

    def __init__(self) -> None:
        self.nodes: list[int] = []
        self.prices: list[int] = []

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        before_nodes, before_prices = self.nodes, self.prices
        surface, measure = query("surface", {}), query("measure", {})
        if _ok(surface) and _ok(measure):
            self.nodes, self.prices = list(surface["nodes"]), list(measure["prices"])
        if step.op != "compact" or not _ok(result) or result.get("kind") != "success":
            return None
        start, end = step.args.get("start"), step.args.get("end")
        if start not in before_nodes or end not in before_nodes:
            return None
        span = sum(before_prices[before_nodes.index(start): before_nodes.index(end) + 1])
        if span <= self.smallest_frame:
            return Violation(self.name, f"compact replaced {start}-{end}, priced {span} <= {self.smallest_frame}: "
                                        "a checkpoint can never be smaller than that", number,
                             f"span > {self.smallest_frame}", span)
        return None


@register("overflow-retry-progress", engine="prove", checks="overflow-retry-after-progress")
class OverflowRetryProgress:
    def __init__(self) -> None:
        self.state: tuple | None = None
        self.retry_states: dict[tuple, int] = {}

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        before = self.state
        surface = query("surface", {})
        if _ok(surface):
            self.state = (tuple(surface["nodes"]), surface.get("generation"))
        if step.op == "reset":
            self.retry_states.clear()
        if step.op != "request_error" or not _ok(result) or result.get("kind") != "retry" or before is None:
            return None
        after = self.state
        if after[1] is not None and before[1] is not None and after[1] > before[1]:
            return None
        first = self.retry_states.setdefault(after, number)
        lasso = (f" (lasso: the state after step {first} repeats)" if first != number else
                 " (lasso: the retry ends in the state it started from)" if after == before else "")
        return Violation(self.name, f"retry without progress: generation {before[1]} -> {after[1]}, surface unchanged"
                                    f"{lasso}; nothing bounds the retries", number, f"generation > {before[1]}",
                         after[1])
