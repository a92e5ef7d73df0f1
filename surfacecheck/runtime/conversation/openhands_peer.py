"""The OpenHands SDK adapter of the conversation level (``docs/conversation-protocol.md``).

Runs as a script in OpenHands' own environment (Python >= 3.12, ``pyenv.py``) and imports only ``peer`` (its
sibling) and OpenHands. A session is one ``LocalConversation`` (``openhands.sdk.Conversation``) of an ``Agent``
whose LLM is scripted, with one tool (``fetch``) and, unless compaction is off, an ``LLMSummarizingCondenser``
whose LLM is the scripted summarizer. Both LLMs subclass the package's own fake, ``openhands.sdk.testing.TestLLM``,
answering from the protocol's scripts instead of a fixed queue and recording each call's input.

OpenHands' own code runs everything that matters: ``Conversation.send_message`` + ``Conversation.run`` (the agent
loop: ``Agent.step`` -> ``prepare_llm_messages`` -> ``RollingCondenser.condense`` over the conversation's cached
``View`` -> ``LLMConvertibleEvent.events_to_messages`` -> the LLM; a returned ``Condensation`` is emitted as an
event and applied by ``View.append_event``; ``LLMContextWindowExceedError`` becomes a ``CondensationRequest``),
and ``Conversation.condense()`` for a direct compaction. The adapter only builds the initial history as events
(``ConversationState.append_event``: ``MessageEvent``, ``ActionEvent`` + ``ObservationEvent``, and a
``Condensation`` with a summary and nothing forgotten for a summary message) and records what happened from the
conversation's callback and the two LLMs.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from importlib import metadata

import peer
from openhands.sdk import Agent, Conversation
from openhands.sdk.context.condenser import LLMSummarizingCondenser
from openhands.sdk.context.condenser.base import NoCondensationAvailableException
from openhands.sdk.context.condenser.utils import get_total_token_count
from openhands.sdk.context.view import View
from openhands.sdk.event import (
    ActionEvent,
    Condensation,
    LLMConvertibleEvent,
    MessageEvent,
    ObservationEvent,
)
from openhands.sdk.event.conversation_error import ConversationErrorEvent
from openhands.sdk.llm import Message, MessageToolCall, TextContent
from openhands.sdk.llm.exceptions import LLMContextWindowExceedError
from openhands.sdk.testing import TestLLM
from openhands.sdk.tool import (
    Action,
    Observation,
    Tool,
    ToolDefinition,
    ToolExecutor,
    register_tool,
)
from pydantic import Field

VERSION = metadata.version("openhands-sdk")
FIELDS = LLMSummarizingCondenser.model_fields
KNOWN = {name: FIELDS[name].default for name in ("max_size", "max_tokens", "keep_first", "minimum_progress",
                                                 "hard_context_reset_max_retries",
                                                 "hard_context_reset_context_scaling")}
KNOWN["max_input_tokens"] = None  # the agent LLM's own limit, which the condenser's token trigger also obeys
TYPED = (NoCondensationAvailableException, LLMContextWindowExceedError)
"""OpenHands' "cannot condense" type and its context-overflow type."""


class LoopBound(Exception):
    """The turn reached its bound of model calls (``peer.Replies.bound``)."""


# -- the one tool ---------------------------------------------------------------------------------------------------
class FetchAction(Action):
    size: int = Field(default=0, description="how many characters")
    tag: str = Field(default="r", description="the tag the result starts with")


class FetchObservation(Observation):
    pass


class FetchExecutor(ToolExecutor):
    def __call__(self, action: FetchAction, conversation=None) -> FetchObservation:
        return FetchObservation.from_text(text=peer.tool_result({"size": action.size, "tag": action.tag}))


class FetchTool(ToolDefinition[FetchAction, FetchObservation]):
    @classmethod
    def create(cls, conv_state=None, **params):
        return [cls(description="Fetch `size` characters tagged `tag`.", action_type=FetchAction,
                    observation_type=FetchObservation, executor=FetchExecutor())]


register_tool(peer.TOOL, FetchTool)


# -- messages, both ways --------------------------------------------------------------------------------------------
def _texts(message: Message) -> list[str]:
    return [c.text for c in message.content if isinstance(c, TextContent)]


def _args(call: MessageToolCall) -> dict:
    try:
        value = json.loads(call.arguments or "{}")
    except ValueError:
        return {"raw": call.arguments}
    return value if isinstance(value, dict) else {"value": value}


def to_neutral(messages: list[Message], summaries: set[str]) -> tuple[str | None, list[dict]]:
    """OpenHands messages as neutral ones: the leading system message apart; a user message OpenHands merged from
    several plain user turns (``_can_merge_user_messages``: e.g. a summary and the next request) is one neutral
    message per part with ``"packed": k`` (k: its index among OpenHands' messages); a part whose text is a summary
    a condensation wrote carries ``"summary": true``."""
    system = None
    if messages and messages[0].role == "system":
        system, messages = "".join(_texts(messages[0])), messages[1:]
    out: list[dict] = []
    for k, m in enumerate(messages):
        texts = _texts(m)
        if m.role == "assistant":
            item: dict = {"role": "assistant", "text": "".join(texts)}
            if m.tool_calls:
                item["calls"] = [{"id": c.id, "name": c.name, "args": _args(c)} for c in m.tool_calls]
            out.append(item)
        elif m.role == "tool":
            out.append({"role": "tool", "call_id": m.tool_call_id, "text": "".join(texts)})
        elif m.role == "user" and len(texts) > 1:
            out.extend({"role": "user", "text": t, "packed": k, **({"summary": True} if t in summaries else {})}
                       for t in texts)
        else:
            item = {"role": m.role, "text": "".join(texts)}
            if m.role == "user" and item["text"] in summaries:
                item["summary"] = True
            out.append(item)
    return (system or None), out


def events_neutral(events: list, summaries: set[str]) -> list[dict]:
    """A view's events as the neutral history the agent would send (OpenHands' own ``events_to_messages``)."""
    return to_neutral(LLMConvertibleEvent.events_to_messages(list(events)), summaries)[1]


def history_events(history: list[dict], summaries: set[str], start: int) -> list:
    """Neutral messages as OpenHands events, in order. A summary message is OpenHands' own summary form: a
    ``Condensation`` forgetting nothing whose summary lands at its position (``summary_offset``)."""
    events: list = []
    actions: dict[str, str] = {}
    for i, m in enumerate(history):
        text = m.get("text") or ""
        if m.get("summary"):
            summaries.add(text)
            # the view so far: ``start`` events, then one per event here (a summary event for each summary)
            events.append(Condensation(summary=text, summary_offset=start + len(events),
                                       llm_response_id=f"initial-{i}"))
        elif m["role"] == "assistant" and m.get("calls"):
            for j, c in enumerate(m["calls"]):
                args = c.get("args") or {}
                action = FetchAction(size=int(args.get("size", 0)), tag=str(args.get("tag", "r"))) \
                    if c.get("name", peer.TOOL) == peer.TOOL else None
                event = ActionEvent(thought=[TextContent(text=text)] if j == 0 and text else [], action=action,
                                    tool_name=c.get("name", peer.TOOL), tool_call_id=c["id"],
                                    tool_call=MessageToolCall(id=c["id"], name=c.get("name", peer.TOOL),
                                                              arguments=json.dumps(args), origin="completion"),
                                    llm_response_id=f"history-{i}")
                actions[c["id"]] = event.id
                events.append(event)
        elif m["role"] == "tool":
            events.append(ObservationEvent(observation=FetchObservation.from_text(text=text), tool_name=peer.TOOL,
                                           tool_call_id=m["call_id"], action_id=actions.get(m["call_id"], "none")))
        else:
            source = "agent" if m["role"] == "assistant" else "user"
            events.append(MessageEvent(source=source, llm_message=Message(role=m["role"],
                                                                          content=[TextContent(text=text)])))
    return events


# -- the scripted LLMs ----------------------------------------------------------------------------------------------
class ScriptedAgentLLM(TestLLM):
    """The agent's LLM: answers from the session's ``replies``; records every request as sent."""

    def completion(self, messages, tools=None, add_security_risk_prediction=False, **kwargs):
        s = SESSION[0]
        system, neutral = to_neutral(list(messages), s.summaries)
        size = peer.neutral_tokens(neutral, system)
        tokens = None
        if s.counts_tokens:
            tokens = self.get_token_count(list(messages), tools=list(tools or []) or None,
                                          add_security_risk_prediction=add_security_risk_prediction)
        step = {"kind": "request", "system": system, "messages": neutral, "overflow": False, "tokens": tokens}
        s.steps.append(step)
        s.model_calls += 1
        if s.model_calls > s.replies.bound:
            raise LoopBound(f"more than {s.replies.bound} model calls in one turn")
        if s.overflow_above is not None and size > s.overflow_above:
            step["overflow"] = True
            s.overflowed = True
            raise LLMContextWindowExceedError(f"request of {size} neutral tokens is above {s.overflow_above}")
        reply = s.replies.next()
        calls = [MessageToolCall(id=c["id"], name=c.get("name", peer.TOOL), arguments=json.dumps(c.get("args", {})),
                                 origin="completion") for c in reply.get("calls") or ()]
        self._scripted_responses.append(Message(role="assistant", content=[TextContent(text=reply.get("text", ""))],
                                                tool_calls=calls or None))
        return super().completion(messages, tools=tools, **kwargs)


class ScriptedSummarizerLLM(TestLLM):
    """The condenser's LLM: answers from the session's ``summaries``; its whole input is the summarizer step's
    prompt (OpenHands' system message of rules, then the user message of forgotten events)."""

    def completion(self, messages, tools=None, **kwargs):
        prompt = "\n\n".join("\n".join(_texts(m)) for m in messages)
        output = SESSION[0].summaries_script.next(prompt)  # raises on fail / overflow
        self._scripted_responses.append(Message(role="assistant", content=[TextContent(text=output)]))
        return super().completion(messages, tools=tools, **kwargs)


# -- the session ----------------------------------------------------------------------------------------------------
class OpenHandsSession(peer.Session):
    def __init__(self, args: dict):
        self.settings = peer.check_settings(args.get("settings"), KNOWN)
        self.system = args.get("system")
        if self.system is not None and not isinstance(self.system, str):
            raise peer.BadArgs("system must be a string or null")
        history = peer.check_messages(args.get("history"))
        self.summaries: set[str] = set()
        self.steps: list[dict] = []
        self._begin({})
        st = self.settings
        max_input = st["max_input_tokens"]
        if max_input is not None and (not isinstance(max_input, int) or isinstance(max_input, bool) or max_input <= 0):
            raise peer.BadArgs("max_input_tokens must be a positive integer or null")
        self.agent_llm = ScriptedAgentLLM.from_messages([], usage_id="agent", max_input_tokens=max_input)
        self.condenser = None
        if st["compaction"]:
            own = {k: st[k] for k in KNOWN if k != "max_input_tokens"}
            try:
                self.condenser = LLMSummarizingCondenser(
                    llm=ScriptedSummarizerLLM.from_messages([], usage_id="condenser"), **own)
            except (ValueError, TypeError) as exc:
                raise peer.BadArgs(f"LLMSummarizingCondenser refused the settings: {exc}") from None
        self.counts_tokens = self.condenser is not None and (st["max_tokens"] is not None or max_input is not None)
        agent = Agent(llm=self.agent_llm, tools=[Tool(name=peer.TOOL)], condenser=self.condenser,
                      system_prompt=self.system or "", include_default_tools=[])
        self.mirror = View()  # the view as the callback sees it, kept by OpenHands' own View.append_event
        self.conversation = Conversation(agent=agent, workspace=workspace(),
                                         visualizer=None, stuck_detection=False, callbacks=[self._on_event],
                                         max_iteration_per_run=10_000)
        # OpenHands writes the system prompt event when the agent gets ready (lazily, on the first send_message);
        # the initial history must follow it, so the agent is made ready now
        self.conversation._ensure_agent_ready()
        state = self.conversation.state
        for event in history_events(history, self.summaries, len(state.view.events)):
            state.append_event(event)
            self.mirror.append_event(event)

    def trigger(self) -> dict | None:
        """OpenHands' own counts: events of the view (the system prompt event is one; the neutral history has one
        message fewer) above ``max_size``, or the agent LLM's token count above ``max_tokens`` /
        ``max_input_tokens`` (the smaller; a ``tokens`` trigger shown first, as the stricter one in practice)."""
        if self.condenser is None:
            return None
        limits = [v for v in (self.settings["max_tokens"], self.settings["max_input_tokens"]) if v is not None]
        if limits:
            return {"kind": "tokens", "value": min(limits), "counter": "runtime"}
        return {"kind": "messages", "value": self.settings["max_size"] - 1, "counter": "runtime"}

    # recording ---------------------------------------------------------------------------------------------------
    def _on_event(self, event) -> None:
        """Every event the conversation emits (OpenHands calls its callbacks in order): the mirror view follows;
        a ``Condensation`` is a compaction step (before and after the mirror's ``append_event``). Its cause is
        ``overflow`` after the scripted model refused a request, ``direct`` when it answers a pending
        ``CondensationRequest`` otherwise, else ``size``."""
        before = list(self.mirror.events)
        requested = self.mirror.unhandled_condensation_request
        self.mirror.append_event(event)
        if not isinstance(event, Condensation):
            return
        if event.summary is not None:
            self.summaries.add(event.summary)
        # OpenHands' own reason: a CondensationRequest (the agent's, after LLMContextWindowExceedError, or one
        # Conversation.condense() left pending when it found nothing to condense) or the size check
        cause = "overflow" if self.overflowed else "direct" if self.direct or requested else "size"
        self.overflowed = False
        self.steps.append({"kind": "compaction", "before": events_neutral(before, self.summaries),
                           "after": events_neutral(self.mirror.events, self.summaries), "cause": cause,
                           "count_before": self._count(before), "count_after": self._count(self.mirror.events)})

    def _count(self, events: list) -> int:
        """The trigger's own count: the agent LLM's token count of the events (``get_total_token_count``, what
        the condenser compares) with a token limit, else the number of view events."""
        return get_total_token_count(events, self.agent_llm) if self.counts_tokens else len(events)

    def _begin(self, args: dict) -> None:
        self.steps = []
        self.replies = peer.Replies(args.get("replies"))
        self.summaries_script = peer.Summaries(args.get("summaries"), self.steps, args.get("summarizer_window"),
                                               raise_fail=RuntimeError, raise_overflow=LLMContextWindowExceedError)
        self.overflow_above = args.get("overflow_above")
        self.model_calls = 0
        self.overflowed = False
        self.direct = None

    def _error(self, exc: BaseException) -> None:
        chain, seen = [], exc
        while seen is not None and seen not in chain:
            chain.append(seen)
            seen = getattr(seen, "original_exception", None) or seen.__cause__ or seen.__context__
        bound = next((e for e in chain if isinstance(e, LoopBound)), None)
        if bound is not None:
            self.steps.append({"kind": "error", "type": "loop-bound", "message": str(bound), "typed": False})
            return
        root = next((e for e in chain if isinstance(e, TYPED)), chain[-1] if len(chain) > 1 else exc)
        self.steps.append({"kind": "error", "type": type(root).__name__, "message": str(root),
                           "typed": isinstance(root, TYPED)})

    def _answer(self) -> dict:
        return {"steps": self.steps, "history": events_neutral(self.conversation.state.view.events, self.summaries)}

    # ops ---------------------------------------------------------------------------------------------------------
    def turn(self, args: dict) -> dict:
        unknown = sorted(set(args) - {"user", "replies", "summaries", "overflow_above", "summarizer_window"})
        if unknown:
            raise peer.BadArgs(f"unknown argument {unknown[0]!r}")
        if not isinstance(args.get("user"), str):
            raise peer.BadArgs("turn needs a string 'user'")
        self._begin(args)
        errors = len([e for e in self.conversation.state.events if isinstance(e, ConversationErrorEvent)])
        try:
            self.conversation.send_message(args["user"])
            self.conversation.run()
        except Exception as exc:  # noqa: BLE001 - every failure is a step, never a crash
            self._error(exc)
            return self._answer()
        late = [e for e in self.conversation.state.events if isinstance(e, ConversationErrorEvent)][errors:]
        for e in late:  # a run that stopped without raising (e.g. MaxIterationsReached)
            self.steps.append({"kind": "error", "type": e.code, "message": e.detail, "typed": False})
        return self._answer()

    def compact(self, args: dict) -> dict:
        """``Conversation.condense()``: OpenHands' own forced condensation (a ``CondensationRequest``, then one
        agent step, which condenses instead of calling the model when a condensation is available)."""
        unknown = sorted(set(args) - {"summaries", "summarizer_window"})
        if unknown:
            raise peer.BadArgs(f"unknown argument {unknown[0]!r}")
        self._begin(args)
        if self.condenser is None:
            return self._answer()
        self.direct = "direct"
        try:
            self.conversation.condense()
        except Exception as exc:  # noqa: BLE001
            self._error(exc)
        return self._answer()


SESSION: list[OpenHandsSession] = []
WORKSPACE: list[tempfile.TemporaryDirectory] = []


def workspace() -> str:
    """One empty working folder for every session of this process (the fetch tool never touches it), removed when
    the process ends."""
    if not WORKSPACE:
        WORKSPACE.append(tempfile.TemporaryDirectory(prefix="surfacecheck-openhands-"))
    return WORKSPACE[0].name


def open_session(args: dict):
    session = OpenHandsSession(args)
    SESSION[:] = [session]
    return session, {"settings": session.settings, "trigger": session.trigger()}


# -- bench ----------------------------------------------------------------------------------------------------------
def bench(args: dict) -> dict:
    """Seconds per appended event of the condenser's trigger check as it runs before every model call: the
    conversation's cached view takes the new event (``View.append_event``, what ``ConversationState.view`` does on
    a linear append), then ``condensation_requirement(view, agent_llm)`` (``RollingCondenser.condense``'s first
    call; it never condenses here). ``from_events_seconds`` is the same with the view rebuilt by
    ``View.from_events`` over all events (what ``rebuild_view`` and older releases run)."""
    sizes, repeats = args.get("sizes", [100, 1000, 10000]), args.get("repeats", 20)
    if not (isinstance(sizes, list) and all(isinstance(n, int) and n >= 0 for n in sizes)):
        raise peer.BadArgs("sizes must be a list of non-negative integers")
    if not isinstance(repeats, int) or repeats < 1:
        raise peer.BadArgs("repeats must be a positive integer")
    settings = dict(args.get("settings") or {})
    settings.setdefault("max_size", 10 ** 9)  # never condenses: only the check is timed
    condenser = LLMSummarizingCondenser(llm=ScriptedSummarizerLLM.from_messages([]),
                                        **{k: v for k, v in settings.items() if k in KNOWN and k != "max_input_tokens"})
    agent_llm = ScriptedAgentLLM.from_messages([])

    def neutral(i: int) -> dict:
        kind = i % 3
        if kind == 0:
            return {"role": "user", "text": f"question {i} " + "x" * 80}
        if kind == 1:
            return {"role": "assistant", "text": "", "calls": [{"id": f"c{i}", "name": peer.TOOL,
                                                                 "args": {"size": 80, "tag": f"t{i}"}}]}
        return {"role": "tool", "call_id": f"c{i - 1}", "text": peer.tool_result({"size": 80, "tag": f"t{i}"})}

    points = []
    for n in sizes:
        events = history_events([neutral(i) for i in range(n + repeats + 1)], set(), 0)
        base, extra = events[:n], events[n:]
        view = View.from_events(base)
        incremental = rebuilt = 0.0
        for r in range(repeats):
            start = time.perf_counter()
            view.append_event(extra[r])
            condenser.condensation_requirement(view, agent_llm=agent_llm)
            incremental += time.perf_counter() - start
            start = time.perf_counter()
            condenser.condensation_requirement(View.from_events(events[: n + r + 1]), agent_llm=agent_llm)
            rebuilt += time.perf_counter() - start
        points.append({"messages": n, "seconds_per_append": incremental / repeats,
                       "from_events_seconds": rebuilt / repeats})
    return {"points": points}


def main() -> None:
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing OpenHands prints may reach the protocol stream
    peer.serve("openhands", VERSION, open_session, stdout=out, extra_ops={"bench": bench})


if __name__ == "__main__":
    main()
