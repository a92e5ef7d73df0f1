"""dsh's event shapes, both ways, for the conversation bridge over the event-log protocol (:mod:`.eventlog`).

Neutral messages (``docs/conversation-protocol.md``) become the events dsh's agent loop writes (spec 1.2 and the
model's loop, :mod:`surfacecheck.model.agent`): a user prompt is a ``user/message`` whose ``data`` is the message
(``source {kind: user}``); an assistant reply is ``assistant/message {turn, step, message, usage}`` whose content
holds a ``text`` block and one ``tool-call`` block per call (``arguments``: the compact JSON of the args); a tool
result is ``tool/call {turn, step, callId, name, arguments}`` then ``tool/result {turn, step, message}`` citing it
(``sourceEventSeqs: [callSeq]``), its message ``{role: user, source {kind: tool, callId}, content: [{type:
tool-result, toolCallId, content: [text]}]}``. Back again, each surface node's derived message (spec 2.3,
``model.surface.derive_event_message``) is one neutral message; a compaction checkpoint (``source {kind: plugin,
plugin: compact}``, spec 8.2 step 9, ``model.summarizer.is_checkpoint``) is a user message with ``summary: true``.
Text blocks of one message are joined with a newline.
"""
from __future__ import annotations

import json
import math
from typing import Any

from surfacecheck.model.event import Event
from surfacecheck.model.summarizer import CHECKPOINT_PLUGIN, is_checkpoint, summarization_input, summary_request
from surfacecheck.model.surface import derive_event_message

from .peer import BadArgs, TOOL

PROVIDER, MODEL = "scripted", "scripted-chat"
FETCH_SCHEMA = {"name": TOOL, "description": "Fetch size characters of text tagged tag.",
                "parameters": {"type": "object", "properties": {"size": {"type": "integer"},
                                                                "tag": {"type": "string"}}}}
OVERFLOW_CODE = "CONTEXT_WINDOW_EXCEEDED"
"""The failure code dsh's overflow listener acts on (spec 10.2)."""


class BridgeError(RuntimeError):
    """The wrapped runtime answered what dsh never answers (a refusal of the bridge's own events, a surface that is
    not the one its events fold to): a bridge bug, answered as a protocol ``internal`` error."""


def header(system: str | None) -> dict:
    """The ``request/header`` envelope (spec 1.2): the route, the system prompt, the one tool's schema."""
    head: dict[str, Any] = {"config": {"provider": PROVIDER, "model": MODEL}}
    if system:
        head["system"] = system
    head["tools"] = [FETCH_SCHEMA]
    return head


# -- neutral -> dsh ----------------------------------------------------------------------------------------------
def user_data(text: str, ident: str, summary: bool = False) -> dict:
    """A ``user/message``'s data; a summary of an earlier compaction carries the checkpoint source (spec 8.2)."""
    source = {"kind": "plugin", "plugin": CHECKPOINT_PLUGIN, "compactionId": ident} if summary else {"kind": "user"}
    return {"content": [{"type": "text", "text": text}], "source": source, "role": "user", "id": ident}


def arguments(args: Any) -> str:
    return json.dumps(args if args is not None else {}, separators=(",", ":"))


def assistant_blocks(text: str, calls: list[dict]) -> list[dict]:
    blocks = [{"type": "text", "text": text}] if text else []
    return blocks + [{"type": "tool-call", "id": str(c.get("id")), "name": str(c.get("name") or TOOL),
                      "arguments": arguments(c.get("args"))} for c in calls]


def assistant_data(turn: int, step: int, blocks: list[dict], ident: str, usage: dict | None) -> dict:
    data = {"turn": turn, "step": step, "message": {"role": "assistant", "content": blocks,
                                                    "source": {"kind": "model", "provider": PROVIDER, "model": MODEL},
                                                    "id": ident}}
    if usage is not None:
        data["usage"] = usage
    return data


def tool_call_data(turn: int, step: int, call_id: str, name: str, args: str) -> dict:
    return {"turn": turn, "step": step, "callId": call_id, "name": name, "arguments": args}


def tool_result_data(turn: int, step: int, call_id: str, text: str, ident: str) -> dict:
    return {"turn": turn, "step": step, "message": {
        "source": {"kind": "tool", "callId": call_id},
        "content": [{"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": text}],
                     "isError": False}], "role": "user", "id": ident}}


# -- dsh -> neutral ----------------------------------------------------------------------------------------------
def _texts(blocks: list) -> str:
    return "\n".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")


def _args(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return text


def neutral(message: dict) -> dict:
    """One derived dsh message (spec 2.3) as a neutral message."""
    content = message.get("content") or []
    source = message.get("source") or {}
    if message.get("role") == "assistant":
        out: dict[str, Any] = {"role": "assistant", "text": _texts(content)}
        calls = [{"id": b.get("id"), "name": b.get("name"), "args": _args(b.get("arguments"))}
                 for b in content if b.get("type") == "tool-call"]
        if calls:
            out["calls"] = calls
        return out
    if source.get("kind") == "tool":
        block = next((b for b in content if b.get("type") == "tool-result"), {})
        return {"role": "tool", "call_id": block.get("toolCallId", source.get("callId")),
                "text": _texts(block.get("content") or [])}
    out = {"role": "user", "text": _texts(content)}
    if is_checkpoint(message):
        out["summary"] = True
    return out


def messages_of(log: list[Event], nodes: list[int]) -> list[dict]:
    """The surface ``nodes`` as neutral messages (nodes that derive nothing, spec 2.3, are left out)."""
    derived = (derive_event_message(log[seq]) for seq in nodes)
    return [neutral(m) for m in derived if m is not None]


def splice(nodes: list[int], event: Event) -> list[int]:
    """The surface after ``event`` (spec 2.1): ``append`` pushes its seq; ``replace {start, end}`` splices the
    positional span from ``start`` to ``end`` for it."""
    if not event.is_surface_type:
        return nodes
    op = event.replace
    if op is None:
        return nodes + [event.seq]
    i, j = nodes.index(op.start), nodes.index(op.end)
    return nodes[:i] + [event.seq] + nodes[j + 1:]


def as_text(messages: list[dict], system: str | None, tools: Any = None) -> str:
    """A request as text (a summarizer's input): system, tools, then each neutral message on its lines."""
    lines = [f"[system] {system}"] if system else []
    if tools:
        lines.append(f"[tools] {json.dumps(tools, separators=(',', ':'))}")
    for m in messages:
        tag = m["role"] if m["role"] != "tool" else f"tool {m.get('call_id')}"
        lines.append(f"[{tag}] {m.get('text', '')}")
        for c in m.get("calls") or ():
            lines.append(f"  call {c.get('id')} {c.get('name')} {json.dumps(c.get('args'), separators=(',', ':'))}")
    return "\n".join(lines)


def summarizer_prompt(session, shadowed: tuple[int, ...]) -> str:
    """The summarizer's input for a span (spec 8.2 step 7, 8.5): the logged header's system and tools, the
    shadowed nodes' messages, then the summary instruction. ``session`` is a :class:`model.session.Session` over
    the runtime's own events (only read); the instruction is the model's stand-in for dsh's fixed template."""
    request = summary_request(summarization_input(session, shadowed), PROVIDER, MODEL, 0, "")
    return as_text([neutral(m) for m in request["messages"]], request.get("system"), request.get("tools"))


def prompt_tokens(prompt: str) -> int:
    """The scripted summarizer's count of its input (``peer.Summaries``)."""
    return math.ceil(len(prompt) / 4) + 4


# -- settings -> policy (spec 9.1, 6) ----------------------------------------------------------------------------
KNOWN = {"thresholdRatio": 0.8, "retainRatio": 0.16, "retainTokens": None, "compactionRetries": 1,
         "maxOverflowRetries": 1, "maxTokens": 8192, "contextWindow": 128000, "toolResultPruner": None}
"""dsh's defaults (spec 9.1, Appendix A); ``contextWindow``: the route's capacity, 128 000 as the spec's worked
example's route (spec 10.4); ``toolResultPruner``: none composed (the pruner is optional, spec 9.2 step 3)."""


def policy_of(settings: dict) -> dict:
    """``configure``'s policy: the set ``BasicCompactionConfig`` keys, ``auto`` from ``compaction``, the pruner and
    the window (a ``retainTokens`` given replaces the default ``retainRatio``: they exclude each other, spec 9.1)."""
    policy = {k: v for k, v in settings.items() if k not in ("compaction", "retainRatio") and v is not None}
    if settings.get("retainRatio") is not None and settings.get("retainTokens") is None:
        policy["retainRatio"] = settings["retainRatio"]
    policy["auto"] = bool(settings.get("compaction", True))
    return policy


def effective(raw: dict) -> dict:
    """The effective settings (dsh's defaults filled in); ``BadArgs`` for an unknown key."""
    if not isinstance(raw, dict):
        raise BadArgs("settings must be an object")
    unknown = sorted(set(raw) - set(KNOWN) - {"compaction"})
    if unknown:
        raise BadArgs(f"unknown setting {unknown[0]!r}; known: {', '.join(sorted(KNOWN) + ['compaction'])}")
    settings = {"compaction": True, **KNOWN, **raw}
    if "retainTokens" in raw and raw["retainTokens"] is not None and "retainRatio" not in raw:
        settings["retainRatio"] = None
    return settings


def threshold(settings: dict) -> int:
    """``thresholdTokens = floor(contextWindow × thresholdRatio)`` (spec 9.1 ``resolveCompactSpec``)."""
    return math.floor(settings["contextWindow"] * settings["thresholdRatio"])


def retain(settings: dict) -> int:
    """``retainTokens ?? floor(contextWindow × retainRatio)`` (spec 9.1)."""
    if settings.get("retainTokens") is not None:
        return settings["retainTokens"]
    return math.floor(settings["contextWindow"] * settings["retainRatio"])
