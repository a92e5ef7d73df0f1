"""The benchmark workload: a deterministic, dsh-shaped session log that grows a surface (spec 1-2, 5, 6, 8).

Each turn appends a user message, an assistant message with two tool calls, their `tool/call` +
`tool/result` pairs and a closing assistant message (5 surface nodes, 13 log events), with
`request/header`, `turn/*` and `step/*` around them as dsh writes them. Periodically:

* a **prune** (spec 6): `compaction/prune` arms a shadow price for one old tool result and the
  adjacent `tool/result` replace of that node consumes it;
* a **summary** (spec 8): `compaction/start`, `compaction/summary` arming the shadowed price of an
  older turn's span, the adjacent checkpoint `user/message` replace, `compaction/end`.

Replacements land just before a retained tail of recent turns (spec 7 retention), so the surface
keeps growing (by 3-5 nodes per turn) and a surface of any size can be reached. Every shadowed
price is exact (the claim the O(1) projection consumes equals the recount's removed price, spec
5.1), so all variants must agree on :attr:`Workload.total`.

Message objects come from small template pools and are *shared* between events (events are never
mutated), so a 10^6-node surface fits in memory; event envelopes and their `data` are fresh.
"""
from __future__ import annotations

import random
from collections import deque
from typing import Iterator

from surfacecheck.model.estimate import estimate_message

BASE_TIME = 1_800_000_000_000
PROVIDER, MODEL = "bench", "bench-chat"
PRUNE_EVERY, SUMMARY_EVERY, RETAINED_TURNS = 3, 7, 3
PRUNE_MARKER = "\n\n[... tool result middle pruned ...]\n\n"
CHECKPOINT_PREAMBLE = ("This is an automatically generated checkpoint condensing an earlier span of the conversation "
                       "to free up context.\n\n<compacted-summary>")
_WORDS = ("const", "value", "compute", "module", "export", "return", "result", "ok", "src/mod.ts", "read_file",
          "unused", "review", "build", "log", "line", "check", "surface", "node", "token", "price")


def _text(rng: random.Random, low: int, high: int) -> str:
    words: list[str] = []
    target = rng.randint(low, high)
    while sum(len(w) + 1 for w in words) < target:
        words.append(rng.choice(_WORDS))
    return " ".join(words)


class Templates:
    """Pools of shared message objects, each with its price precomputed (spec 4.1 `estimateMessage`)."""

    def __init__(self, seed: int = 0, pool: int = 8):
        rng = random.Random(seed)
        self.users = [{"content": [{"type": "text", "text": _text(rng, 40, 160)}], "source": {"kind": "user"},
                       "role": "user", "id": f"user-t{i}"} for i in range(pool)]
        self.calls = [[("call-1", "read_file", '{"path":"src/mod%d.ts"}' % i),
                       ("call-2", "grep", '{"pattern":"export","path":"src/mod%d.ts"}' % i)] for i in range(pool)]
        self.callers = [self._assistant(f"assistant-c{i}", _text(rng, 20, 80), self.calls[i]) for i in range(pool)]
        self.closers = [self._assistant(f"assistant-t{i}", _text(rng, 30, 200), ()) for i in range(pool)]
        self.results = [[self._result(call_id, _text(rng, 120, 600)) for call_id, _, _ in self.calls[i]]
                        for i in range(pool)]
        self.pruned = [[self._result(call_id, _text(rng, 30, 60) + PRUNE_MARKER + _text(rng, 20, 40))
                        for call_id, _, _ in self.calls[i]] for i in range(pool)]
        self.checkpoints = [{"content": [{"type": "text", "text": CHECKPOINT_PREAMBLE},
                                         {"type": "text", "text": "## Current Work\n- " + _text(rng, 60, 240)
                                          + "\n</compacted-summary>"}],
                             "source": {"kind": "system"}, "role": "user", "id": f"checkpoint-t{i}"}
                            for i in range(pool)]
        self.pool = pool
        self._prices: dict[int, int] = {}

    @staticmethod
    def _assistant(mid: str, text: str, calls) -> dict:
        content = [{"type": "text", "text": text}]
        content += [{"type": "tool-call", "id": cid, "name": name, "arguments": args} for cid, name, args in calls]
        return {"role": "assistant", "content": content,
                "source": {"kind": "model", "provider": PROVIDER, "model": MODEL}, "id": mid}

    @staticmethod
    def _result(call_id: str, text: str) -> dict:
        return {"source": {"kind": "tool", "callId": call_id},
                "content": [{"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": text}],
                             "isError": False}], "role": "user", "id": f"result-{call_id}"}

    def price(self, message: dict) -> int:
        """The node price of a template message (cached by identity: templates are shared, never mutated)."""
        key = id(message)
        if key not in self._prices:
            self._prices[key] = estimate_message(message)
        return self._prices[key]


class Workload:
    """An endless deterministic dsh log (:meth:`events`), tracking the surface it builds.

    ``surface_size`` and ``total`` (Σ node prices, the recount) are always kept; with
    ``track_surface`` the full node list ``surface`` of ``(seq, price, message)`` is kept too, for
    variants that are bulk-loaded at a size instead of folding the whole prefix.
    """

    def __init__(self, seed: int = 0, *, track_surface: bool = False, pool: int = 8):
        self.templates = Templates(seed, pool)
        self.track_surface = track_surface
        self.surface: list[tuple[int, int, dict]] = []
        self.surface_size = 0
        self.total = 0
        self.seq = 0
        self.turn = 0
        self.appends = 0
        self.replaces = 0
        # per recent turn, its current nodes: [seq, price, message, kind]
        self._turns: deque[list[list]] = deque(maxlen=RETAINED_TURNS + 1)

    # -- the log ------------------------------------------------------------------------------------
    def _event(self, type_: str, data, surface_op=None, sources=None) -> dict:
        event = {"type": type_, "seq": self.seq, "time": BASE_TIME + self.seq, "data": data}
        if sources is not None:
            event["sourceEventSeqs"] = sources
        if surface_op is not None:
            event["surfaceOp"] = surface_op
        self.seq += 1
        return event

    def _append(self, type_: str, data, message: dict, nodes: list, kind: str, sources=None) -> dict:
        event = self._event(type_, data, "append", sources)
        price = self.templates.price(message)
        nodes.append([event["seq"], price, message, kind])
        self.surface_size += 1
        self.total += price
        self.appends += 1
        if self.track_surface:
            self.surface.append((event["seq"], price, message))
        return event

    def _replace(self, type_: str, data, message: dict, span: list, sources: list) -> tuple[dict, list]:
        """The adjacent replace of ``span`` (consecutive current nodes): one fresh node at its position."""
        event = self._event(type_, data, {"op": "replace", "start": span[0][0], "end": span[-1][0]}, sources)
        price = self.templates.price(message)
        removed = sum(node[1] for node in span)
        self.surface_size += 1 - len(span)
        self.total += price - removed
        self.replaces += 1
        if self.track_surface:
            index = len(self.surface) - 1
            while self.surface[index][0] != span[0][0]:
                index -= 1
            self.surface[index:index + len(span)] = [(event["seq"], price, message)]
        return event, [event["seq"], price, message, "replacement"]

    def events(self) -> Iterator[dict]:
        """Yield the log forever (turn after turn); deterministic for a given seed and pool."""
        t = self.templates
        yield self._event("request/header", {"header": {"config": {"provider": PROVIDER, "model": MODEL},
                                                        "system": "You are a coding agent."}, "reason": "initial"})
        while True:
            self.turn += 1
            k, i = self.turn, self.turn % t.pool
            yield self._event("turn/start", {"turn": k})
            if k % PRUNE_EVERY == 0:
                yield from self._prune(k)
            if k % SUMMARY_EVERY == 0:
                yield from self._summary(k)
            nodes: list[list] = []
            self._turns.append(nodes)
            yield self._append("user/message", t.users[i], t.users[i], nodes, "user")
            yield self._event("step/start", {"turn": k, "step": 1})
            caller = t.callers[i]
            usage = {"inputTokens": self.total + 40, "outputTokens": 30}
            yield self._append("assistant/message", {"turn": k, "step": 1, "message": caller, "usage": usage},
                               caller, nodes, "caller")
            for j, (call_id, name, args) in enumerate(t.calls[i]):
                call = self._event("tool/call", {"turn": k, "step": 1, "callId": call_id, "name": name,
                                                 "arguments": args})
                yield call
                result = t.results[i][j]
                yield self._append("tool/result", {"turn": k, "step": 1, "message": result}, result, nodes,
                                   f"result-{j}", [call["seq"]])
            yield self._event("step/end", {"turn": k, "step": 1})
            yield self._event("step/start", {"turn": k, "step": 2})
            closer = t.closers[i]
            usage = {"inputTokens": self.total + 40, "outputTokens": 50}
            yield self._append("assistant/message", {"turn": k, "step": 2, "message": closer, "usage": usage},
                               closer, nodes, "closer")
            yield self._event("step/end", {"turn": k, "step": 2})
            yield self._event("turn/end", {"turn": k, "reason": {"kind": "completed"}})

    def _prune(self, k: int) -> Iterator[dict]:
        """Spec 6: prune the first tool result of the turn before last (`compaction/prune` + adjacent replace)."""
        if len(self._turns) < 2:
            return
        nodes = self._turns[-2]
        index = next((n for n, node in enumerate(nodes) if node[3] == "result-0"), None)
        if index is None:
            return
        node = nodes[index]
        turn = k - 2
        pruned = self.templates.pruned[turn % self.templates.pool][0]
        yield self._event("compaction/prune", {"shadowedRange": {"start": node[0], "end": node[0]},
                                               "shadowedSeqs": [node[0]], "shadowedTokenCount": node[1]})
        event, fresh = self._replace("tool/result", {"turn": turn, "step": 1, "message": pruned}, pruned, [node],
                                     [node[0]])
        nodes[index] = fresh
        yield event

    def _summary(self, k: int) -> Iterator[dict]:
        """Spec 8: summarize the oldest retained turn into one checkpoint (summary arms, checkpoint consumes)."""
        if len(self._turns) < RETAINED_TURNS:
            return
        nodes = self._turns[-RETAINED_TURNS]
        if len(nodes) < 2:
            return
        cid = f"compaction-{self.seq}"
        start = self._event("compaction/start", {"compactionId": cid, "turn": k})
        yield start
        checkpoint = self.templates.checkpoints[k % self.templates.pool]
        shadowed = [node[0] for node in nodes]
        summary = self._event("compaction/summary", {
            "compactionId": cid, "summary": checkpoint["content"][1:], "rawOutput": checkpoint["content"][1:],
            "llmStreamCall": True, "shadowedRange": {"start": shadowed[0], "end": shadowed[-1]},
            "shadowedSeqs": shadowed, "shadowedTokenCount": sum(node[1] for node in nodes),
            "provider": PROVIDER, "model": "bench-summarizer", "maxTokens": 512})
        yield summary
        event, fresh = self._replace("user/message", checkpoint, checkpoint, list(nodes),
                                     [start["seq"], summary["seq"], *shadowed])
        nodes[:] = [fresh]
        yield event
        yield self._event("compaction/end", {"compactionId": cid, "turn": k})

    # -- driving ------------------------------------------------------------------------------------
    def until_size(self, stream: Iterator[dict], size: int) -> Iterator[dict]:
        """Events of ``stream`` until the surface has at least ``size`` nodes (stops right after an append)."""
        while self.surface_size < size:
            yield next(stream)

    def take(self, stream: Iterator[dict], count: int) -> list[dict]:
        """The next ``count`` events."""
        return [next(stream) for _ in range(count)]


def is_append(event: dict) -> bool:
    """A surface append (spec 1.1): what "per append" times."""
    return event.get("surfaceOp") == "append"
