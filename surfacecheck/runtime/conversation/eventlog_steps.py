"""The conversation steps one policy op of dsh's event-log protocol produced, read from the events it wrote.

:class:`Feed` turns the conversation's summarizer script into dsh summary scripts (``docs/protocol.md`` § level
``compaction``): ``{"text"}`` and ``{"slow"}`` → outcome ``text`` with that text (dsh's summarizer has no clock
here: a slow answer is not slowed down), ``{"fail"}`` → ``failure``, ``{"empty"}`` → ``empty``, past its end
``{"text": "summary #k"}``, and a call whose input is above ``summarizer_window`` → ``failure`` (the overflow
error, which consumes no answer). Each ``compaction/start`` an op writes consumes the next script (spec 8.2 step
6).

:class:`StepReader` runs one op (``pre_step``, ``request_error``, ``manual_compact``) and reads back dsh's own
units of rewriting (spec 6, 8): one pruning pass (its ``compaction/prune`` + ``tool/result`` replace pairs) is one
``compaction`` step; each bracket ``compaction/start`` … ``compaction/end`` is one ``summarizer`` step and, when
its checkpoint landed, one ``compaction`` step. Counts are dsh's: ``measure().totalTokens`` before the op, then
each rewrite moves it by the new nodes' prices minus the shadowed nodes' (spec 4.2-4.3: a node's price is
``estimateMessage`` of its derived message, the shadowed ones' sum is the logged ``shadowedTokenCount``).
"""
from __future__ import annotations

from typing import Any

from surfacecheck.model.estimate import estimate_message
from surfacecheck.model.surface import derive_event_message

from . import eventlog_shapes as shapes

DEFAULTS = 8
"""Default scripts passed after the conversation's own (no op runs more than a few brackets: spec 9.2 step 11)."""
NOT_REACHED = ("changed before summarization began",)
"""A bracket that ended with this error never called its summarizer (spec 8.2 step 7)."""


class Feed:
    """The exchange's summarizer script, consumed across the ops it spans, one answer per summarizer call.

    ``overflows`` are the calls (numbered from 0 in the exchange) whose input is above the exchange's
    ``summarizer_window``: such a call raises the overflow error and consumes no answer (``peer.Summaries``); dsh
    sees a summarizer failure. The bridge learns them by running the exchange (see
    :meth:`.eventlog.EventLogConversation._exchange`)."""

    def __init__(self, items: list[dict] | None, window: Any = None, overflows: frozenset = frozenset()):
        self.items, self.overflows = list(items or []), overflows
        self.window = window if isinstance(window, int) and not isinstance(window, bool) else None
        self.calls = 0  # summarizer calls so far
        self.used = 0  # answers consumed so far
        self.steps: dict[int, dict] = {}  # call number -> its summarizer step

    def _plan(self, count: int) -> list[tuple[int, dict | None]]:
        """The next ``count`` calls: ``(call number, answer)``, the answer None for an overflowing call."""
        plan, used = [], self.used
        for k in range(self.calls, self.calls + count):
            if k in self.overflows:
                plan.append((k, None))
                continue
            plan.append((k, self.items[used] if used < len(self.items) else {"text": f"summary #{k + 1}"}))
            used += 1
        return plan

    def scripts(self) -> list[dict]:
        """dsh summary scripts for the calls to come."""
        out = []
        for _, item in self._plan(max(len(self.items) - self.used, 0) + len(self.overflows) + DEFAULTS):
            if item is None or "fail" in item:
                out.append({"outcome": "failure"})
            elif item.get("empty"):
                out.append({"outcome": "empty"})
            else:
                out.append({"outcome": "text", "text": str(item.get("text", ""))})
        return out

    def take(self) -> tuple[int, dict | None]:
        """The next call: its number and answer (None: it overflows)."""
        [(k, item)] = self._plan(1)
        self.calls += 1
        self.used += item is not None
        return k, item

    def over_window(self) -> int | None:
        """The first call whose recorded input is above the window and was not made to overflow, or None."""
        if self.window is None:
            return None
        return next((k for k, step in sorted(self.steps.items())
                     if k not in self.overflows and step["tokens"] > self.window), None)


def outcome_of(item: dict | None) -> tuple[str, str | None]:
    if item is None:
        return "overflow", None
    if "fail" in item:
        return "fail", None
    if item.get("empty"):
        return "empty", ""
    return ("slow" if "slow" in item else "text"), str(item.get("text", ""))


class StepReader:
    """Runs ops on the bridge's runtime and appends their steps to ``steps``."""

    def __init__(self, bridge: Any, steps: list[dict], feed: Feed):
        """``bridge``: the :class:`.eventlog.EventLogConversation` whose runtime the ops run on."""
        self.bridge, self.steps, self.feed = bridge, steps, feed

    def run(self, op: str, args: dict, cause: str) -> dict:
        """Run ``op`` (a ``pre_step``'s ``step``/``claimed`` are entered after the listener, as the op itself
        enters them: ``docs/protocol.md`` § runtime context at ``pre_step``) and record its steps."""
        b = self.bridge
        marker, claimed = args.pop("step", None), args.pop("claimed", None)
        start, nodes, count = len(b._sync()), b._nodes(), b._measure()
        result = b._op(op, {**args, "summaries": self.feed.scripts()})
        written = b._sync()[start:]
        self._read(written, nodes, count, cause)
        if marker is not None:  # spec 13 step 7: step/start, then the claimed batch
            b._append("step/start", marker)
            for message in claimed or ():
                b._append("user/message", message, surfaceOp="append")
        return result

    def _read(self, written: list, nodes: list[int], count: int | None, cause: str) -> None:
        pass_from: list[int] | None = None  # the surface before the current pruning pass
        bracket: dict | None = None
        for event in written:
            data = event.data if isinstance(event.data, dict) else {}
            if event.type == "compaction/prune" and pass_from is None:
                pass_from = nodes
            elif event.type not in ("compaction/prune", "tool/result") and pass_from is not None:
                count = self._compaction(pass_from, nodes, cause, count)
                pass_from = None
            if event.type == "compaction/start":
                call, item = self.feed.take()
                bracket = {"call": call, "item": item, "nodes": nodes, "shadowed": None}
            elif event.type == "compaction/summary" and bracket is not None:
                bracket["shadowed"] = tuple(data.get("shadowedSeqs") or ())
            if event.is_surface_type:
                nodes = shapes.splice(nodes, event)
            if event.type == "compaction/end" and bracket is not None:
                self._summarizer(bracket, data.get("error"), cause)
                if nodes != bracket["nodes"]:
                    count = self._compaction(bracket["nodes"], nodes, cause, count)
                bracket = None
        if pass_from is not None:
            self._compaction(pass_from, nodes, cause, count)
        if nodes != self.bridge._nodes():
            raise shapes.BridgeError(f"the bridge's surface {nodes} is not {self.bridge.name}'s {self.bridge._nodes()}")

    def _compaction(self, before: list[int], after: list[int], cause: str, count: int | None) -> int | None:
        """A compaction step from ``before`` to ``after``; returns dsh's count after it: the count before, minus
        the shadowed nodes' prices, plus the new nodes' (spec 4.2-4.3: node price = ``estimateMessage`` of its
        derived message, 0 when it derives none)."""
        log = self.bridge.log
        gone = [seq for seq in before if seq not in after]
        new = [seq for seq in after if seq not in before]
        after_count = None if count is None else \
            count - sum(_price(log, seq) for seq in gone) + sum(_price(log, seq) for seq in new)
        self.steps.append({"kind": "compaction", "before": shapes.messages_of(log, before),
                           "after": shapes.messages_of(log, after), "cause": cause,
                           "count_before": count, "count_after": after_count})
        return after_count

    def _summarizer(self, bracket: dict, error: Any, cause: str) -> None:
        """The bracket's summarizer call: its input is the span's messages (from ``compaction/summary``'s
        ``shadowedSeqs``; for a bracket that failed, dsh's own selection over the unchanged surface: retain 0 for
        overflow and ``/compact``, the policy's retention for pressure, spec 7, 9.2, 10.2, 11.2)."""
        if isinstance(error, str) and any(words in error for words in NOT_REACHED):
            return
        b = self.bridge
        shadowed = bracket["shadowed"]
        if shadowed is None:
            retain = shapes.retain(b.settings) if cause == "size" else 0
            found = (b._op("select_range", {"retain_tokens": retain}) or {}).get("range")
            nodes = bracket["nodes"]
            shadowed = () if not found else tuple(nodes[nodes.index(found["start"]):nodes.index(found["end"]) + 1])
        prompt = shapes.summarizer_prompt(b.log_view(), shadowed)
        outcome, output = outcome_of(bracket["item"])
        step = {"kind": "summarizer", "prompt": prompt, "tokens": shapes.prompt_tokens(prompt), "outcome": outcome,
                "output": output}
        self.steps.append(step)
        self.feed.steps[bracket["call"]] = step


def _price(log: list, seq: int) -> int:
    message = derive_event_message(log[seq])
    return 0 if message is None else estimate_message(message)
