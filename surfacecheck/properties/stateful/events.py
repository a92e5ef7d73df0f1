"""Builders and Hypothesis strategies for realistic dsh events (spec 1.1-1.2 shapes).

The machines append what dsh itself writes: user prompts, assistant messages (text, tool calls
with ids, provider usage) inside `step/start`/`step/end`, `tool/call` + `tool/result` pairs that
cite their call (`sourceEventSeqs`), `request/header` envelopes, log-only events, and the two
metering producers: `compaction/prune` + single-node `tool/result` rewrite (spec 6) and
`compaction/summary` + checkpoint `user/message` replace (spec 8.2 step 13), each carrying a
shadow price (spec 5.1).
"""
from __future__ import annotations

import functools

from hypothesis import strategies as st

from surfacecheck.runtime.dsh_vocabulary import vocabulary

from surfacecheck.model.runtime_context import CLEARED, CONTEXT_HEADER, RUNTIME_CONTEXT_SOURCE
from surfacecheck.model.summarizer import PREAMBLE

from .words import WordTexts

PROVIDER = "prov"
MODELS = ("mod", "mod-b")
OVERFLOW_CODE = "CONTEXT_WINDOW_EXCEEDED"

SHORT, LONG = (1, 60), (40, 160)
texts = WordTexts(SHORT)
long_texts = WordTexts(LONG)
any_texts = WordTexts(SHORT, LONG)


def content_of(body: str | list) -> list[dict]:
    """A message's content: a text alone, or already a list of blocks (text, image, reasoning)."""
    return [{"type": "text", "text": body}] if isinstance(body, str) else list(body)


def image_block(size: int) -> dict:
    """An image attachment block as dsh's loop enters it (the corpus' shape); the estimator prices it by its JSON
    (spec 4.1's default arm), the pruner keeps it in place (spec 6)."""
    return {"type": "image", "attachment": {"attachmentId": f"sha256:{size:064x}", "mediaType": "image/png",
                                            "width": 1, "height": 1, "bytes": size}}


def user_message(text: str | list, ident: str, source: dict | None = None) -> dict:
    return {"type": "user/message", "data": {"id": ident, "role": "user", "content": content_of(text),
                                             "source": source or {"kind": "user"}}, "surfaceOp": "append"}


def event_price(event: dict) -> int:
    """What the model's meter prices a surface event's node at (spec 4.1)."""
    from surfacecheck.model.event import Event
    from surfacecheck.model.meter import node_price

    return node_price(Event.from_json({**event, "seq": 0, "time": 0}))


def prompt_price(text: str) -> int:
    """What the model's meter prices a user/message of ``text`` at (spec 4.1: ceil(chars / 4) + the block and role
    overheads)."""
    return event_price(user_message(text, "priced"))


@functools.cache
def least_prompt_price() -> int:
    """The price of an empty prompt: the least a user/message adds to the total."""
    return prompt_price("")


def priced_user_text(tokens: int) -> str | None:
    """A prompt's text such that its user/message node is priced exactly ``tokens``; None below the price of an
    empty prompt."""
    if tokens < least_prompt_price():
        return None
    text = "p" * (4 * (tokens - least_prompt_price()))
    return text if prompt_price(text) == tokens else None


def assistant_message(turn: int, step: int, ident: str, text: str | None, call_ids: list[str],
                      usage: dict | None = None, model: str = MODELS[0], reasoning: str | None = None) -> dict:
    content = [] if reasoning is None else [{"type": "reasoning", "text": reasoning}]
    content += [] if text is None else [{"type": "text", "text": text}]
    content += [{"type": "tool-call", "id": cid, "name": "read", "arguments": '{"path":"%s"}' % cid} for cid in call_ids]
    data = {"turn": turn, "step": step, "message": {
        "id": ident, "role": "assistant", "content": content,
        "source": {"kind": "model", "provider": PROVIDER, "model": model}}}
    if usage is not None:
        data["usage"] = usage
    return {"type": "assistant/message", "data": data, "surfaceOp": "append"}


def tool_call(turn: int, step: int, call_id: str) -> dict:
    return {"type": "tool/call", "data": {"turn": turn, "step": step, "callId": call_id, "name": "read",
                                          "arguments": '{"path":"%s"}' % call_id}}


def tool_result(turn: int, step: int, ident: str, call_id: str, text: str | list, call_seq: int) -> dict:
    return {"type": "tool/result", "data": {"turn": turn, "step": step, "message": {
        "id": ident, "role": "user", "source": {"kind": "tool", "callId": call_id},
        "content": [{"type": "tool-result", "toolCallId": call_id, "content": content_of(text),
                     "isError": False}]}}, "surfaceOp": "append", "sourceEventSeqs": [call_seq]}


def rewritten_result(original: dict, text: str, seq: int) -> dict:
    """The pruner's single-node rewrite (spec 6): same data, only the inner content changed."""
    data = original["data"]
    message = data["message"]
    block = message["content"][0]
    new = {**data, "message": {**message, "content": [{**block, "content": [{"type": "text", "text": text}]}]}}
    return {"type": "tool/result", "data": new, "surfaceOp": {"op": "replace", "start": seq, "end": seq},
            "sourceEventSeqs": [seq]}


TOOLS = ([], [{"name": "read", "description": "Read a file", "parameters": {"type": "object", "properties": {
    "path": {"type": "string"}}}}])
"""The request's tool schemas: none, or one (spec 4.1: the meter prices them, an empty list costs nothing)."""


def header(model: str = MODELS[0], system: str | None = None, reason: str = "initial", tools: list | None = None) -> dict:
    head: dict = {"config": {"provider": PROVIDER, "model": model}}
    if system:
        head["system"] = system
    if tools is not None:
        head["tools"] = tools
    return {"type": "request/header", "data": {"header": head, "reason": reason}}


def metering(kind: str, start: int, end: int, shadowed: list[int], tokens: int, compaction_id: str = "c") -> dict:
    """`compaction/prune` or `compaction/summary`: arms a shadow-price claim (spec 5.1)."""
    data = {"shadowedRange": {"start": start, "end": end}, "shadowedSeqs": shadowed, "shadowedTokenCount": tokens}
    if kind == "compaction/summary":
        data = {"compactionId": compaction_id, "summary": [{"type": "text", "text": "s"}], **data,
                "provider": PROVIDER, "model": "summarizer"}
    return {"type": kind, "data": data}


def checkpoint(ident: str, summary: str, start: int, end: int, cites: list[int], compaction_id: str = "c") -> dict:
    """The compaction checkpoint (spec 8.2 step 9/13): framed summary replacing ``start..end``."""
    content = [{"type": "text", "text": PREAMBLE + "\n\n<compacted-summary>"}, {"type": "text", "text": summary},
               {"type": "text", "text": "</compacted-summary>"}]
    return {"type": "user/message", "data": {"id": ident, "role": "user", "content": content,
                                             "source": {"kind": "plugin", "plugin": "compact",
                                                        "compactionId": compaction_id}},
            "surfaceOp": {"op": "replace", "start": start, "end": end}, "sourceEventSeqs": cites}


def context_text(sections: tuple[str, ...]) -> str:
    """`joinContextSections` / CLEARED (spec 12)."""
    if not sections:
        return CLEARED
    return CONTEXT_HEADER + "\n\n".join(sections)


def context_snapshot(text: str, ident: str) -> dict:
    """The runtime-context snapshot the loop enters after `step/start` (spec 12, D9)."""
    return {"type": "user/message", "data": {"id": ident, "role": "user", "content": [{"type": "text", "text": text}],
                                             "source": {"kind": "plugin", "plugin": RUNTIME_CONTEXT_SOURCE}},
            "surfaceOp": "append"}


LOG_ONLY = (
    ("agent/status", {"status": "busy"}),
    ("request/context", {"provider": PROVIDER, "model": MODELS[0], "contextWindow": 4000}),
    ("agent/inbox/spliced", {"target": "pending", "start": 0, "inserted": []}),
)

WRITTEN_BY_RULES = frozenset({
    "user/message", "assistant/message", "assistant/chunk", "tool/call", "tool/result", "turn/start", "turn/end",
    "step/start", "step/end", "request/header", "request/context", "agent/inbox/spliced", "compaction/start",
    "compaction/prune", "compaction/summary", "compaction/end", "command/run", "command/done", "session/end-seed"})
"""The event types the machines' own rules write, or the runtime under test writes itself (``/compact``'s
command bracket, a reload's seed marker)."""

OTHER_TYPES = tuple(t for t in vocabulary().events if t not in WRITTEN_BY_RULES)
"""Every other event type dsh's read path knows (its vocabulary): events of other plugins, which the
compaction path reads past (spec 2: not surface events); each is appended as a log-only event."""


usage_strategy = st.fixed_dictionaries({"inputTokens": st.integers(0, 3000), "outputTokens": st.integers(0, 200)},
                                       optional={"cacheReadTokens": st.integers(0, 500),
                                                 "cacheWriteTokens": st.integers(0, 500)})
"""Provider usage (spec 4.2, 5.2): every bucket the meter and the usage and pressure units read."""

mixed_bodies = st.lists(st.one_of(any_texts, st.integers(1, 400).map(image_block)), min_size=2, max_size=4).filter(
    lambda blocks: any(isinstance(block, str) for block in blocks)).map(
    lambda blocks: [{"type": "text", "text": b} if isinstance(b, str) else b for b in blocks])
"""A content list of several blocks, texts and images (at least one text): the pruner cuts across block edges and
keeps images in place (spec 6); the estimator prices images by their JSON (spec 4.1)."""
bodies = st.integers(0, 5).flatmap(lambda k: mixed_bodies if k == 0 else any_texts)
"""A user prompt's or a tool result's content: mostly one text, sometimes several blocks."""

WINDOWS = (None, 4000, 8000, 1000)
"""`request/context.contextWindow`: None is a record without one (the adapter advertises none, spec 4.4)."""


def request_context(window: int | None, model: str = MODELS[0]) -> dict:
    """`request/context` (spec 4.4): log-only, read only by the `contextPressure` unit (spec 5.2)."""
    data: dict = {"provider": PROVIDER, "model": model}
    if window is not None:
        data["contextWindow"] = window
    return {"type": "request/context", "data": data}


def chunk(turn: int, step: int, body: dict) -> dict:
    """One `assistant/chunk` (log-only): a streamed piece of the step's provider output."""
    return {"type": "assistant/chunk", "data": {"turn": turn, "step": step, "chunk": body}}


def stream_chunks(text: str, reasoning: str | None, usage: dict | None, finish: str) -> list[dict]:
    """What the loop logs while a response streams (the corpus' order): each block as start, deltas, end; then the
    usage chunk, then finish. Priced by the meter only through an `assistant/message` citing them (spec 4.2)."""
    bodies: list[dict] = []
    blocks = ([("reasoning", reasoning)] if reasoning is not None else []) + [("text", text)]
    for index, (kind, body) in enumerate(blocks):
        half = len(body) // 2
        bodies += [{"type": "block-start", "index": index, "blockType": kind},
                   {"type": f"{kind}-delta", "index": index, "text": body[:half]},
                   {"type": f"{kind}-delta", "index": index, "text": body[half:]},
                   {"type": "block-end", "index": index, "block": {"type": kind, "text": body}}]
    if usage is not None:
        bodies.append({"type": "usage", "usage": usage})
    bodies.append({"type": "finish", "reason": {"kind": finish}})
    return bodies

good_summaries = st.one_of(
    st.builds(lambda r: {"outcome": "text", "ratio": r}, st.sampled_from((0.05, 0.1, 0.2))),
    st.builds(lambda t: {"outcome": "text", "text": t}, texts),
)
odd_summaries = st.one_of(
    st.builds(lambda r: {"outcome": "text", "ratio": r}, st.sampled_from((1.0, 1.5))),
    st.sampled_from([{"outcome": o} for o in ("failure", "empty", "image", "truncated", "cancel", "agent-cancel",
                                              "late-cancel")]),
)


def weighted(common, rare, odds: int = 4):
    """``common`` about ``odds`` times as often as ``rare`` (both stay reachable for the shrinker)."""
    return st.integers(0, odds).flatmap(lambda k: rare if k == 0 else common)


summary_scripts = weighted(good_summaries, odd_summaries, 3)
rarely = st.integers(0, 7).map(lambda k: k == 0)


CONCURRENT = ("append", "log-only", "replace")
"""What another producer writes while a summary runs (spec 8.2 step 12): a surface append, a log-only event, or a
replacement of the last node."""

faults = st.fixed_dictionaries({}, optional={
    "fail_appends": st.lists(st.sampled_from(("compaction/summary", "checkpoint", "compaction/end", "error-close")),
                             min_size=1, max_size=2, unique=True),
    "flush_fails": st.booleans(), "cancel_during_flush": st.booleans()})
"""The outside world failing an append of the transaction or the durability flush (spec 8.3, 11.2)."""


def with_concurrent(script: dict, concurrent: str | None, nodes: list[int], fresh) -> dict:
    """``script`` with another producer's writes while it runs (``concurrent`` one of :data:`CONCURRENT`)."""
    script = dict(script)
    if concurrent == "append":
        script["concurrent"] = [["user/message", user_message("meanwhile", fresh("u"))["data"], "append"]]
    elif concurrent == "log-only":
        script["concurrent"] = [["agent/status", {"status": "busy"}, None]]
    elif concurrent == "replace" and nodes:
        last = nodes[-1]
        script["concurrent"] = [["user/message", user_message("rewritten", fresh("u"))["data"],
                                 {"op": "replace", "start": last, "end": last}]]
    return script
