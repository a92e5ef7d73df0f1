"""Real dsh-shaped events for symbolic surface nodes, priced exactly by the model (spec 2.3, 4.1).

A proof's counterexample names node *kinds* (user message, assistant message with k tool calls, tool
result) and *prices*; this module writes the events dsh would log for them, padding text so that the
model's own ``node_price`` gives the symbolic price. The price floor of each kind and its pairing
delta are read from the model (``node_price``, ``event_delta``) rather than restated here.
"""
from __future__ import annotations

from surfacecheck.model.event import Event
from surfacecheck.core.trace import Step

USER, ASSISTANT, RESULT = 0, 1, 2
KIND_NAMES = {USER: "user", ASSISTANT: "assistant", RESULT: "tool-result"}
MAX_CALLS = 3
PROVIDER, MODEL = "prov", "mod"
MAX_PRICE = 1_000_000


def _pad(units: int) -> str:
    """A text of ``4 * units`` UTF-16 units: ``ceil(len/4) = units`` tokens (spec 4.1)."""
    return ("lorem ipsum dolor sit amet " * (units // 6 + 1))[: 4 * units]


def user_data(pad: int, ident: str) -> dict:
    return {"content": [{"type": "text", "text": _pad(pad)}], "source": {"kind": "user"}, "role": "user", "id": ident}


def assistant_data(calls: tuple[str, ...], pad: int, ident: str, turn: int = 1, step: int = 1) -> dict:
    """k tool calls (the first one's arguments padded by ``pad`` tokens) or, with no call, one text block."""
    if calls:
        content = [{"type": "tool-call", "id": cid, "name": "read", "arguments": "{}"} for cid in calls]
        if pad:
            content[0]["arguments"] = '{"q":"' + "x" * (4 * pad - 4) + '"}'  # 4*pad+4 units: pad+1 tokens
    else:
        content = [{"type": "text", "text": _pad(pad)}]
    return {"turn": turn, "step": step, "message": {
        "role": "assistant", "content": content,
        "source": {"kind": "model", "provider": PROVIDER, "model": MODEL}, "id": ident}}


def result_data(call_id: str, pad: int, ident: str, turn: int = 1, step: int = 1) -> dict:
    return {"turn": turn, "step": step, "message": {
        "source": {"kind": "tool", "callId": call_id},
        "content": [{"type": "tool-result", "toolCallId": call_id,
                     "content": [{"type": "text", "text": _pad(pad)}], "isError": False}],
        "role": "user", "id": ident}}


def node_data(kind: int, calls: int, pad: int, ident: str, call_ids: tuple[str, ...] = (), answer: str = "c0",
              turn: int = 1, step: int = 1) -> tuple[str, dict]:
    """(event type, data) for one node of a symbolic surface."""
    if kind == USER:
        return "user/message", user_data(pad, ident)
    if kind == ASSISTANT:
        ids = call_ids or tuple(f"{ident}-call{j}" for j in range(calls))
        return "assistant/message", assistant_data(ids[:calls], pad, ident, turn, step)
    return "tool/result", result_data(answer, pad, ident, turn, step)


def _event(type_: str, data: dict) -> Event:
    return Event(type_, 0, 0, data, "append")


def base_price(kind: int, calls: int) -> int:
    """The model's price of the node with no padding; padding adds exactly one token per unit."""
    from surfacecheck.model.meter import node_price

    return node_price(_event(*node_data(kind, calls, 0, "probe")))


def min_price(kind: int, calls: int) -> int:
    """The smallest price the concretizer realizes: text nodes keep at least one padding unit."""
    return base_price(kind, calls) + (1 if (kind != ASSISTANT or calls == 0) else 0)


def delta_table() -> dict[tuple[int, int], int]:
    """Spec 3 ``eventDelta`` per (kind, calls), read from the model's ``event_delta`` seam in force."""
    from surfacecheck.model.seams import active

    table, event_delta = {}, active().event_delta
    for kind in (USER, ASSISTANT, RESULT):
        for calls in range(MAX_CALLS + 1) if kind == ASSISTANT else (0,):
            table[(kind, calls)] = event_delta(_event(*node_data(kind, calls, 1, "probe")))
    return table


def realize(kind: int, calls: int, price: int, ident: str, **kw) -> tuple[str, dict]:
    """The event for a node of ``price`` tokens; checked against the model's ``node_price``."""
    from surfacecheck.model.meter import node_price

    pad = price - base_price(kind, calls)
    if pad < 0 or (pad == 0 and price < min_price(kind, calls)):
        raise ValueError(f"price {price} below the floor {min_price(kind, calls)} of a {KIND_NAMES[kind]} node")
    type_, data = node_data(kind, calls, pad, ident, **kw)
    got = node_price(_event(type_, data))
    if got != price:
        raise AssertionError(f"concretizer priced a {KIND_NAMES[kind]} node at {got}, wanted {price}")
    return type_, data


def append_step(type_: str, data: dict, label: str, surface_op=None, sources=None) -> Step:
    """A protocol ``append`` request for one dsh event."""
    event: dict = {"type": type_, "data": data}
    if surface_op is not None:
        event["surfaceOp"] = surface_op
    if sources is not None:
        event["sourceEventSeqs"] = list(sources)
    return Step("append", {"event": event}, label)


class NodeWriter:
    """Writes protocol steps for surface nodes inside turn 1, tracking seqs, the open step and the
    unanswered call ids. Each assistant message opens its own step (the meter requires it, spec 4.2);
    a tool result answers the given id or, by default, the oldest unanswered call."""

    def __init__(self) -> None:
        self.steps: list[Step] = [append_step("turn/start", {"turn": 1}, "turn/start: turn 1 opens")]
        self.seqs: list[int] = []
        self.open_step: int | None = None
        self.pending: list[str] = []
        self.count = 0

    def event(self, step: Step) -> int:
        """Append any event step; returns its seq (steps are numbered from seq 0, reset aside)."""
        self.steps.append(step)
        return len(self.steps) - 1

    def node(self, kind: int, calls: int, price: int, answer: str | None = None, call_ids=()) -> int:
        if kind == ASSISTANT:
            if self.open_step is not None:
                self.event(append_step("step/end", {"turn": 1, "step": self.open_step}, f"step/end: step {self.open_step}"))
            self.open_step = (self.open_step or 0) + 1
            self.event(append_step("step/start", {"turn": 1, "step": self.open_step}, f"step/start: step {self.open_step}"))
        if kind == RESULT and answer is None:
            answer = self.pending.pop(0) if self.pending else "unmatched"
        index, self.count = self.count, self.count + 1
        type_, data = realize(kind, calls, price, f"n{index}", call_ids=tuple(call_ids), answer=answer or "none",
                              step=self.open_step or 1)
        if kind == ASSISTANT:
            self.pending += [block["id"] for block in data["message"]["content"] if block["type"] == "tool-call"]
        label = (f"{type_} node {index}: {KIND_NAMES[kind]}" + (f" with {calls} tool calls" if kind == ASSISTANT else "")
                 + f", price {price}")
        seq = self.event(append_step(type_, data, label, surface_op="append"))
        self.seqs.append(seq)
        return seq


def surface_steps(kinds, calls, prices, answers=None, call_ids=None) -> tuple[list[Step], list[int]]:
    """Protocol steps writing a surface of the given nodes inside turn 1; returns (steps, node seqs)."""
    writer = NodeWriter()
    for i, (kind, k, price) in enumerate(zip(kinds, calls, prices)):
        writer.node(kind, k, price, answers[i] if answers else None, call_ids[i] if call_ids else ())
    return writer.steps, writer.seqs
