"""LangChain's messages in the neutral form, both ways, and its trigger settings from JSON: what the adapters over
LangChain's message types share (``langchain_peer.py``, ``deepagents_peer.py``). Standard library, ``peer`` and
``langchain_core`` only: it runs inside each of those runtimes' own environments, imported as a sibling.
"""
from __future__ import annotations

from typing import Any

import peer
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage


class LoopBound(Exception):
    """The turn reached ``Replies.bound`` model calls."""


# -- messages ---------------------------------------------------------------------------------------------------
def text_of(message: BaseMessage) -> str:
    return message.content if isinstance(message.content, str) else message.text


def to_neutral(message: BaseMessage) -> dict:
    if isinstance(message, SystemMessage):
        return {"role": "system", "text": text_of(message)}
    if isinstance(message, HumanMessage):
        out = {"role": "user", "text": text_of(message)}
        if message.additional_kwargs.get("lc_source") == "summarization":  # the middleware's summary mark
            out["summary"] = True
        return out
    if isinstance(message, AIMessage):
        out = {"role": "assistant", "text": text_of(message)}
        if message.tool_calls:
            out["calls"] = [{"id": c.get("id"), "name": c["name"], "args": c.get("args", {})} for c in message.tool_calls]
        return out
    if isinstance(message, ToolMessage):
        return {"role": "tool", "call_id": message.tool_call_id, "text": text_of(message)}
    return {"role": getattr(message, "type", "unknown"), "text": text_of(message)}


class Ids:
    """Stable message ids for a session: ``m1``, ``m2``, ... in creation order (never a random uuid, and never a
    reused one, which LangGraph's ``add_messages`` would treat as a replacement)."""

    def __init__(self):
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"m{self.n}"


def from_neutral(message: dict, ids: Ids) -> BaseMessage:
    role, text = message["role"], message.get("text") or ""
    if role == "system":
        return SystemMessage(text, id=ids())
    if role == "user":
        extra = {"lc_source": "summarization"} if message.get("summary") else {}
        return HumanMessage(text, id=ids(), additional_kwargs=extra)
    if role == "assistant":
        calls = [{"name": c.get("name", peer.TOOL), "args": c.get("args", {}), "id": c["id"], "type": "tool_call"}
                 for c in message.get("calls") or ()]
        return AIMessage(text, tool_calls=calls, id=ids())
    return ToolMessage(text, tool_call_id=message["call_id"], id=ids())


def size_pair(value: Any, where: str) -> tuple:
    if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)):
        raise peer.BadArgs(f"{where} must be a [kind, value] pair like [\"tokens\", 4000]")
    return (value[0], value[1])


def trigger_from_json(value: Any) -> Any:
    """JSON -> ``SummarizationMiddleware``'s ``trigger``: null, a pair, a clause object, or a list of those."""
    if value is None or isinstance(value, dict):
        return value
    if isinstance(value, list) and value and isinstance(value[0], str):
        return size_pair(value, "trigger")
    if isinstance(value, list):
        return [item if isinstance(item, dict) else size_pair(item, f"trigger[{i}]") for i, item in enumerate(value)]
    raise peer.BadArgs("trigger must be null, a [kind, value] pair, a clause object or a list of those")
