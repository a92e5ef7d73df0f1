"""LangChain's messages in the neutral form, both ways, and its trigger settings from JSON: what the adapters over
LangChain's message types share (``langchain_peer.py``, ``deepagents_peer.py``). Standard library, ``peer`` and
``langchain_core`` only: it runs inside each of those runtimes' own environments, imported as a sibling.
"""
from __future__ import annotations

from typing import Any

import peer
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.errors import GraphRecursionError

PROVIDER = "scripted"
"""The agent model's ``response_metadata["model_provider"]`` and both models' LangSmith ``ls_provider``: the two
must agree for ``SummarizationMiddleware._should_summarize_based_on_reported_tokens`` (and the usage-metadata
scaling of ``count_tokens_approximately``) to use the reported usage, as with one real provider."""
TYPED = (ContextOverflowError,)
"""LangChain's one documented failure type for a request above the context window (deepagents raises it too, when
the input "still does not fit after recovery"); it has no "cannot compact" type of its own."""


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


class ScriptedSession(peer.Session):
    """What a session over a LangChain agent loop does per model call and per op, whatever builds the agent: the
    scripted agent model (:meth:`model_call`, each request recorded as sent), the op's scripts (:meth:`begin`) and
    its error step (:meth:`error`). A subclass says what the runtime itself counted for the request
    (:meth:`request_tokens`) and sets ``ids`` (:class:`Ids`)."""

    def request_tokens(self, messages: list[BaseMessage]) -> int | None:  # pragma: no cover - the adapters say
        raise NotImplementedError

    def model_call(self, messages: list[BaseMessage]) -> AIMessage:
        system = None
        if messages and isinstance(messages[0], SystemMessage):
            system, messages = text_of(messages[0]), messages[1:]
        neutral = [to_neutral(m) for m in messages]
        size = peer.neutral_tokens(neutral, system)
        step = {"kind": "request", "system": system, "messages": neutral, "overflow": False,
                "tokens": self.request_tokens(messages)}
        self.steps.append(step)
        if self.overflow_above is not None and size > self.overflow_above:
            step["overflow"] = True
            raise ContextOverflowError(f"request of {size} tokens is above the window of {self.overflow_above}")
        self.calls += 1
        if self.calls > self.replies.bound:
            raise LoopBound(f"more than {self.replies.bound} model calls in one turn")
        reply = self.replies.next()
        calls = [{"name": c.get("name", peer.TOOL), "args": c.get("args", {}), "id": c["id"], "type": "tool_call"}
                 for c in reply.get("calls") or ()]
        return AIMessage(reply.get("text", ""), tool_calls=calls, id=self.ids(),
                         usage_metadata={"input_tokens": size, "output_tokens": 8, "total_tokens": size + 8},
                         response_metadata={"model_provider": PROVIDER, "model_name": "scripted"})

    def begin(self, args: dict, script_keys: tuple[str, ...]) -> None:
        unknown = sorted(set(args) - set(script_keys))
        if unknown:
            raise peer.BadArgs(f"unknown argument {unknown[0]!r}")
        self.steps = []
        self.summaries = peer.Summaries(args.get("summaries"), self.steps, args.get("summarizer_window"),
                                        raise_fail=RuntimeError, raise_overflow=ContextOverflowError)
        self.replies = peer.Replies(args.get("replies"))
        self.overflow_above = args.get("overflow_above")
        self.calls = 0

    def error(self, exc: BaseException) -> None:
        if isinstance(exc, (LoopBound, GraphRecursionError)):
            self.steps.append({"kind": "error", "type": "loop-bound", "message": str(exc), "typed": False})
        else:
            self.steps.append({"kind": "error", "type": type(exc).__name__, "message": str(exc),
                               "typed": isinstance(exc, TYPED)})
