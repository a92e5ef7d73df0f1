"""The Strands Agents adapter of the conversation level (``docs/conversation-protocol.md``).

Runs as a script in Strands' own environment (``pyenv.py``) and imports only ``peer`` (its sibling) and Strands.
A session keeps Strands' own message list and one conversation manager across turns; each ``turn`` builds
``Agent(model=<scripted>, messages=<the list>, conversation_manager=<the manager>, tools=[fetch], ...)`` and calls
``agent(user)``, so the retry after ``ContextWindowOverflowException`` (``Agent._execute_event_loop_cycle``), the
end-of-invocation ``apply_management`` and the proactive ``BeforeModelCallEvent`` hook are Strands' own.

The summarizer: by default Strands' summarizing manager calls the agent's own model (``agent.aux_model`` is the
model when none is set) through ``model.stream(messages, tool_specs=None, system_prompt=<summarization prompt>)``;
the scripted model tells such a call from an agent call by ``tool_specs is None`` together with the summarization
system prompt (every agent call carries the ``fetch`` tool spec). With ``summarization_agent: true`` the manager is
given a separate ``Agent`` over a summarizer-only scripted model instead.
"""
from __future__ import annotations

import asyncio
import copy
import inspect
import json
import math
import sys
import time
from importlib import metadata

import peer
from strands import Agent, tool
from strands.agent.conversation_manager import (
    NullConversationManager,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
)
from strands.agent.conversation_manager.compression.context_compression import DEFAULT_SUMMARIZATION_PROMPT
from strands.agent.conversation_manager.conversation_manager import DEFAULT_COMPRESSION_THRESHOLD
from strands.event_loop.event_loop import _estimate_input_tokens
from strands.hooks.events import BeforeModelCallEvent
from strands.models._defaults import DEFAULT_CONTEXT_WINDOW_LIMIT
from strands.models.model import Model, _estimate_tokens_with_heuristic
from strands.types.exceptions import ContextWindowOverflowException

VERSION = metadata.version("strands-agents")
MANAGERS = {"summarizing": SummarizingConversationManager, "sliding_window": SlidingWindowConversationManager,
            "null": NullConversationManager}
SUMMARIZE_REQUEST = "Please summarize this conversation."


class LoopBound(Exception):
    """The turn reached its bound of model calls (``peer.Replies.bound``)."""


# -- the one tool ---------------------------------------------------------------------------------------------------
@tool
def fetch(size: int, tag: str) -> str:
    """Fetch ``size`` characters of text tagged ``tag``.

    Args:
        size: how many characters
        tag: the tag the result starts with
    """
    return peer.tool_result({"size": size, "tag": tag})


# -- messages, both ways --------------------------------------------------------------------------------------------
def _result_text(result: dict) -> str:
    parts = []
    for item in result.get("content", []):
        if "text" in item:
            parts.append(item["text"])
        elif "json" in item:
            parts.append(json.dumps(item["json"], separators=(",", ":"), sort_keys=True))
    return "".join(parts)


def _summary_key(message: dict) -> str:
    return json.dumps(message.get("content"), sort_keys=True, default=str)


def to_neutral(messages: list[dict], summaries: set[str] | None = None) -> list[dict]:
    """Strands messages as neutral ones: a user message of ``toolResult`` blocks becomes one ``tool`` message per
    result with ``"packed": k`` (k: the index of the Strands message they share); a summary carries
    ``"summary": true``: a message the manager produced as its ``_summary_message`` (known by its tracking id, or,
    in a request, where Strands strips everything but role and content, by its content)."""
    out: list[dict] = []
    for k, m in enumerate(messages):
        content = m.get("content") or []
        if m.get("role") == "assistant":
            text = "".join(b["text"] for b in content if "text" in b)
            item: dict = {"role": "assistant", "text": text}
            calls = [{"id": b["toolUse"]["toolUseId"], "name": b["toolUse"]["name"],
                      "args": b["toolUse"].get("input") or {}} for b in content if "toolUse" in b]
            if calls:
                item["calls"] = calls
            out.append(item)
            continue
        if any("toolResult" in b for b in content):
            for b in content:
                if "toolResult" in b:
                    out.append({"role": "tool", "call_id": b["toolResult"].get("toolUseId", ""),
                                "text": _result_text(b["toolResult"]), "packed": k})
                elif "text" in b:
                    out.append({"role": "user", "text": b["text"], "packed": k})
            continue
        item = {"role": "user", "text": "".join(b["text"] for b in content if "text" in b)}
        if summaries and (m.get("tracking_id") in summaries or _summary_key(m) in summaries):
            item["summary"] = True
        out.append(item)
    return out


def from_neutral(history: list[dict]) -> list[dict]:
    """Neutral messages as Strands ones: consecutive ``tool`` messages (with equal ``packed``, when given) share one
    user message of ``toolResult`` blocks; an assistant's text and calls share one message."""
    out: list[dict] = []
    group_key = object()
    for i, m in enumerate(history):
        role = m["role"]
        if role == "system":
            raise peer.BadArgs(f"history[{i}]: Strands keeps the system prompt outside its messages; use 'system'")
        if role == "tool":
            block = {"toolResult": {"toolUseId": m["call_id"], "status": "success",
                                    "content": [{"text": m.get("text", "")}]}}
            key = m.get("packed", "consecutive")
            if out and out[-1]["role"] == "user" and group_key == key and \
                    all("toolResult" in b for b in out[-1]["content"]):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
            group_key = key
            continue
        group_key = object()
        if role == "user":
            out.append({"role": "user", "content": [{"text": m.get("text", "")}]})
        else:
            content: list[dict] = []
            calls = m.get("calls") or []
            if m.get("text") or not calls:
                content.append({"text": m.get("text", "")})
            for c in calls:
                content.append({"toolUse": {"toolUseId": c["id"], "name": c.get("name", peer.TOOL),
                                            "input": c.get("args", {})}})
            out.append({"role": "assistant", "content": content})
    return out


def as_text(messages: list[dict], system: str | None) -> str:
    """A request as text (the summarizer's prompt): the system prompt, then each neutral message on its lines."""
    lines = [f"[system] {system}"] if system else []
    for m in messages:
        tag = m["role"] if m["role"] != "tool" else f"tool {m['call_id']}"
        lines.append(f"[{tag}] {m.get('text', '')}")
        for c in m.get("calls") or ():
            lines.append(f"  call {c['id']} {c['name']} {json.dumps(c['args'], separators=(',', ':'), sort_keys=True)}")
    return "\n".join(lines)


# -- the scripted model ---------------------------------------------------------------------------------------------
def _events(reply: dict, input_tokens: int):
    yield {"messageStart": {"role": "assistant"}}
    if reply.get("text"):
        yield {"contentBlockStart": {"start": {}}}
        yield {"contentBlockDelta": {"delta": {"text": reply["text"]}}}
        yield {"contentBlockStop": {}}
    for call in reply.get("calls") or ():
        yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": call["id"], "name": call.get("name", "fetch")}}}}
        yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(call.get("args", {}))}}}}
        yield {"contentBlockStop": {}}
    yield {"messageStop": {"stopReason": "tool_use" if reply.get("calls") else "end_turn"}}
    yield {"metadata": {"usage": {"inputTokens": input_tokens, "outputTokens": 8, "totalTokens": input_tokens + 8},
                        "metrics": {"latencyMs": 1}}}


class ScriptedModel(Model):
    """The scripted model of ``docs/conversation-protocol.md`` § Scripts, as a Strands ``Model``."""

    def __init__(self, session: "StrandsSession", summarizer_only: bool = False):
        self.session, self.summarizer_only = session, summarizer_only
        self.config = {"model_id": "scripted", "context_window_limit": session.settings.get("context_window_limit")}

    def update_config(self, **model_config):
        self.config.update(model_config)

    def get_config(self):
        return self.config

    async def structured_output(self, output_model, prompt, system_prompt=None, **kwargs):  # pragma: no cover
        raise NotImplementedError("the scripted model has no structured output")
        yield {}

    async def stream(self, messages, tool_specs=None, system_prompt=None, **kwargs):
        s = self.session
        neutral = to_neutral(messages, s.summary_ids)
        if self.summarizer_only or (tool_specs is None and system_prompt == s.summarization_prompt):
            output = s.summaries.next(as_text(neutral, system_prompt))  # raises on fail / overflow
            for event in _events({"text": output} if output else {}, 0):
                yield event
            return
        size = peer.neutral_tokens(neutral, system_prompt)
        step = {"kind": "request", "system": system_prompt, "messages": neutral, "overflow": False,
                "tokens": await self.count_tokens(messages, tool_specs, system_prompt)}
        s.model_calls += 1
        if s.model_calls > s.replies.bound:
            raise LoopBound(f"{s.replies.bound} model calls in one turn")
        s.steps.append(step)
        if s.overflow_above is not None and size > s.overflow_above:
            step["overflow"] = True
            raise ContextWindowOverflowException(f"request of {size} neutral tokens is above {s.overflow_above}")
        for event in _events(s.replies.next(), size):
            yield event


# -- the session ----------------------------------------------------------------------------------------------------
def _defaults(cls, *names: str) -> dict:
    params = inspect.signature(cls.__init__).parameters
    return {n: params[n].default for n in names}


def known_settings(manager: str) -> dict:
    """The settings ``manager`` takes, with the installed package's own defaults."""
    common = {"manager": "summarizing", "context_window_limit": None}
    if manager == "summarizing":
        return {**common, **_defaults(SummarizingConversationManager, "summary_ratio", "preserve_recent_messages",
                                      "summarization_system_prompt", "pin_first", "proactive_compression"),
                "summarization_agent": False}
    if manager == "sliding_window":
        return {**common, **_defaults(SlidingWindowConversationManager, "window_size", "should_truncate_results",
                                      "per_turn", "pin_first", "proactive_compression")}
    if manager == "null":
        return common
    raise peer.BadArgs(f"unknown manager {manager!r}; known: {', '.join(MANAGERS)}")


def threshold_of(setting) -> float | None:
    if setting is True:
        return DEFAULT_COMPRESSION_THRESHOLD
    if isinstance(setting, dict):
        return setting.get("compression_threshold", DEFAULT_COMPRESSION_THRESHOLD)
    return None


class StrandsSession(peer.Session):
    def __init__(self, args: dict):
        raw = args.get("settings") or {}
        if not isinstance(raw, dict):
            raise peer.BadArgs("settings must be an object")
        self.settings = peer.check_settings(raw, known_settings(raw.get("manager", "summarizing")))
        self.system = args.get("system")
        if self.system is not None and not isinstance(self.system, str):
            raise peer.BadArgs("system must be a string or null")
        self.messages = from_neutral(peer.check_messages(args.get("history")))
        self.summary_ids: set[str] = set()
        self.steps: list[dict] = []
        self._new_turn({})
        self.manager = self._build_manager()
        self._wrap(self.manager)

    # settings -> Strands' manager
    def _build_manager(self):
        st = dict(self.settings)
        name = st.pop("manager")
        st.pop("context_window_limit")
        self.summarization_prompt = None
        if not st.pop("compaction") or name == "null":
            return NullConversationManager()
        try:
            if name == "summarizing":
                if st.pop("summarization_agent"):
                    st["summarization_agent"] = Agent(model=ScriptedModel(self, summarizer_only=True),
                                                      callback_handler=None)
                manager = SummarizingConversationManager(**st)
                self.summarization_prompt = (manager.summarization_system_prompt
                                             if manager.summarization_system_prompt is not None
                                             else DEFAULT_SUMMARIZATION_PROMPT)
                return manager
            return SlidingWindowConversationManager(**st)
        except (ValueError, TypeError) as exc:
            raise peer.BadArgs(f"Strands refused the settings: {exc}") from None

    def trigger(self):
        st = self.settings
        if not st["compaction"] or st["manager"] == "null":
            return None
        threshold = threshold_of(st.get("proactive_compression"))
        if threshold is not None:
            window = st.get("context_window_limit") or DEFAULT_CONTEXT_WINDOW_LIMIT
            return {"kind": "tokens", "value": math.ceil(threshold * window), "counter": "runtime", "reaches": True}
        if st["manager"] == "sliding_window":
            return {"kind": "messages", "value": st["window_size"], "counter": "runtime"}
        return {"kind": "overflow", "value": None, "counter": "runtime"}

    # recording ---------------------------------------------------------------------------------------------------
    def _count(self, messages: list[dict]) -> int:
        return _estimate_tokens_with_heuristic(messages, None, self.system)

    def _wrap(self, manager) -> None:
        """Record a compaction step whenever the manager rewrites the history (outermost call only: the sliding
        window's ``apply_management`` calls ``reduce_context``)."""
        depth = [0]

        def recorded(method, cause_of):
            def wrapper(agent, *a, **kw):
                depth[0] += 1
                before = copy.deepcopy(agent.messages)
                try:
                    return method(agent, *a, **kw)
                finally:
                    depth[0] -= 1
                    if depth[0] == 0:
                        summary = getattr(manager, "_summary_message", None)
                        if summary is not None and summary.get("tracking_id"):
                            self.summary_ids.update((summary["tracking_id"], _summary_key(summary)))
                        old, new = to_neutral(before, self.summary_ids), to_neutral(agent.messages, self.summary_ids)
                        if old != new:
                            self.steps.append({"kind": "compaction", "before": old, "after": new,
                                               "cause": self.direct or cause_of(a, kw),
                                               "count_before": self._count(before),
                                               "count_after": self._count(agent.messages)})
            return wrapper

        def reduce_cause(a, kw):
            return "overflow" if (kw.get("e") if "e" in kw else (a[0] if a else None)) is not None else "size"

        manager.reduce_context = recorded(manager.reduce_context, reduce_cause)
        manager.apply_management = recorded(manager.apply_management, lambda a, kw: "size")

    def _new_turn(self, args: dict) -> None:
        self.steps = []
        self.replies = peer.Replies(args.get("replies"))
        self.summaries = peer.Summaries(args.get("summaries"), self.steps, args.get("summarizer_window"),
                                        raise_fail=RuntimeError, raise_overflow=ContextWindowOverflowException)
        self.overflow_above = args.get("overflow_above")
        self.model_calls = 0
        self.direct = None

    def _agent(self) -> Agent:
        return Agent(model=ScriptedModel(self), messages=self.messages, conversation_manager=self.manager,
                     tools=[fetch], system_prompt=self.system, callback_handler=None)

    def _error(self, exc: BaseException) -> None:
        chain, seen = [], exc
        while seen is not None and seen not in chain:
            chain.append(seen)
            seen = getattr(seen, "original_exception", None) or seen.__cause__ or seen.__context__
        bound = next((e for e in chain if isinstance(e, LoopBound)), None)
        if bound is not None:
            self.steps.append({"kind": "error", "type": "loop-bound", "message": str(bound), "typed": False})
            return
        self.steps.append({"kind": "error", "type": type(exc).__name__, "message": str(exc),
                           "typed": isinstance(exc, ContextWindowOverflowException)})

    def _answer(self) -> dict:
        return {"steps": self.steps, "history": to_neutral(self.messages, self.summary_ids)}

    # ops ---------------------------------------------------------------------------------------------------------
    def turn(self, args: dict) -> dict:
        user = args.get("user")
        if not isinstance(user, str):
            raise peer.BadArgs("turn needs a string 'user'")
        self._new_turn(args)
        agent = self._agent()
        try:
            agent(user)
        except Exception as exc:  # noqa: BLE001 - every failure is a step, never a crash
            self._error(exc)
        self.messages = agent.messages
        return self._answer()

    def compact(self, args: dict) -> dict:
        """``reduce_context(agent)`` once, on an agent over the session's history; ``overflow: true`` passes a
        ``ContextWindowOverflowException`` as ``e`` (Strands' reactive path) instead of none (its proactive one)."""
        self._new_turn(args)
        self.direct = "direct"
        agent = self._agent()
        try:
            if args.get("overflow"):
                agent.conversation_manager.reduce_context(agent, e=ContextWindowOverflowException("compact"))
            else:
                agent.conversation_manager.reduce_context(agent)
        except Exception as exc:  # noqa: BLE001
            self._error(exc)
        self.messages = agent.messages
        return self._answer()

    def bench(self, args: dict) -> dict:
        """Seconds per append of Strands' own per-append management on histories of n messages: the manager's
        ``apply_management`` (run after every invocation; before every model call with ``per_turn``), the
        projection of the next request's input tokens (``_estimate_input_tokens``, run before every model call)
        and the proactive threshold hook fed with it (a no-op when proactive compression is off). The history is
        restored (untimed) before each repeat, so a trimming manager is timed on n messages every time."""
        sizes = args.get("sizes") or [100, 1000, 10000]
        repeats = int(args.get("repeats", 20))
        if not isinstance(sizes, list) or not all(isinstance(n, int) and n >= 0 for n in sizes) or repeats < 1:
            raise peer.BadArgs("bench needs sizes (a list of non-negative integers) and repeats >= 1")
        points = []
        manager = self._build_manager()  # a fresh one, so the session's state is untouched
        for n in sizes:
            base = []
            for i in range(n):
                if i % 2 == 0:
                    base.append({"role": "user", "content": [{"text": f"question {i} " + "x" * 40}]})
                else:
                    base.append({"role": "assistant", "content": [{"text": f"answer {i} " + "y" * 40}],
                                 "metadata": {"usage": {"inputTokens": 20 * i, "outputTokens": 8,
                                                        "totalTokens": 20 * i + 8}}})
            agent = Agent(model=ScriptedModel(self), messages=list(base), conversation_manager=manager,
                          tools=[fetch], system_prompt=self.system, callback_handler=None)

            async def measure() -> float:
                total = 0.0
                for _ in range(repeats):
                    agent.messages[:] = base
                    t0 = time.perf_counter()
                    manager.apply_management(agent)
                    projected = await _estimate_input_tokens(agent)
                    manager._on_before_model_call_threshold(
                        BeforeModelCallEvent(agent=agent, invocation_state={}, projected_input_tokens=projected))
                    total += time.perf_counter() - t0
                return total / repeats

            points.append({"messages": n, "seconds_per_append": asyncio.run(measure())})
        return {"points": points}


def bench(args: dict) -> dict:
    """``bench`` needs no open session: it times a fresh manager built from ``args.settings`` (default: the
    package's defaults)."""
    return StrandsSession({"settings": args.get("settings")}).bench(args)


def open_session(args: dict):
    session = StrandsSession(args)
    return session, {"settings": session.settings, "trigger": session.trigger()}


def main() -> None:
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing Strands prints may reach the protocol stream
    peer.serve("strands", VERSION, open_session, stdout=out, extra_ops={"bench": bench})


if __name__ == "__main__":
    main()
