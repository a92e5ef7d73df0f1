"""deepagents' compaction as a conversation-level peer (``docs/conversation-protocol.md``).

Runs as a script inside deepagents' own environment (``pyenv.py``) and imports :mod:`peer` as a sibling module; it
never imports surfacecheck. The agent is deepagents' own ``create_deep_agent`` over a scripted model with one tool,
``fetch``, and one caller middleware: deepagents' ``SummarizationMiddleware`` (``StateBackend``), which replaces
the default one of the same name, subclassed only to record what its ``wrap_model_call`` did. Every ``turn`` runs
on ONE thread of an ``InMemorySaver``: the session is deepagents' checkpointed state, so raw messages stay in state,
``_summarization_event`` holds the last summary and its cutoff, and summaries chain across turns. The ``history``
of an answer is what the next model call sees: ``[summary] + messages[cutoff_index:]``
(``SummarizationMiddleware._apply_event_to_messages``).

Settings (deepagents' own words): ``trigger``, ``keep``, ``trim_tokens_to_summarize``, ``summary_prompt``,
``truncate_args_settings`` are ``SummarizationMiddleware``'s arguments (JSON lists for its tuples);
``max_input_tokens`` is both models' profile entry (needed by ``"fraction"``, and deepagents' input budget).
Defaults are read from the installed ``__init__`` signature; ``summary_prompt`` null is deepagents' default prompt.
``compaction: false`` puts a no-op middleware of the same name in the default one's slot (``create_deep_agent``
always adds a ``SummarizationMiddleware`` of its own otherwise). ``compact`` is ``bad-args``: deepagents has no
direct compaction entry (see :meth:`DeepAgentsSession.compact`).
"""
from __future__ import annotations

import inspect
import sys
import time
from importlib.metadata import version as package_version
from typing import Annotated, Any

import peer
from lc_messages import (PROVIDER, Ids, ScriptedSession, from_neutral, size_pair, text_of,
                         to_neutral, trigger_from_json)
from deepagents import create_deep_agent
from deepagents.backends import StateBackend
from deepagents.middleware import summarization as da_summarization
from deepagents.middleware.summarization import (
    SUMMARIZATION_EVENT_KEY,
    SummarizationMiddleware,
)
from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver

THREAD = "session"
"""The one thread id every op of a session runs on."""

_SIGNATURE = inspect.signature(SummarizationMiddleware.__init__).parameters
DA_DEFAULTS = {key: _SIGNATURE[key].default
               for key in ("trigger", "keep", "trim_tokens_to_summarize", "summary_prompt", "truncate_args_settings")}
KNOWN = {
    "trigger": DA_DEFAULTS["trigger"],
    "keep": list(DA_DEFAULTS["keep"]),
    "trim_tokens_to_summarize": DA_DEFAULTS["trim_tokens_to_summarize"],
    "truncate_args_settings": DA_DEFAULTS["truncate_args_settings"],
    "max_input_tokens": None,
    "summary_prompt": None,
}



# -- the scripted model -----------------------------------------------------------------------------------------
class ScriptedModel(BaseChatModel):
    """One scripted chat model for both roles. A summary call is told apart the way LangChain marks it: the run's
    metadata carries ``lc_source: "summarization"`` (``langchain.agents.middleware.summarization._summary_config``,
    which deepagents' middleware calls through). deepagents' own default summarizes with the agent's model, so a
    summary call reaching the agent model is answered by the summarizer script too."""

    driver: Any = None

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _get_ls_params(self, stop=None, **kwargs):
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = PROVIDER
        return params

    def bind_tools(self, tools, **kwargs):
        return self

    def with_retry(self, **kwargs):
        """LangChain's own retry (its attempts, its retryable errors), without the waits between attempts."""
        return super().with_retry(**{**kwargs, "wait_exponential_jitter": False})

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        metadata = getattr(run_manager, "metadata", None) or {}
        if metadata.get("lc_source") == "summarization":
            text = self.driver.summaries.next("\n\n".join(text_of(m) for m in messages))
            return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])
        return ChatResult(generations=[ChatGeneration(message=self.driver.model_call(list(messages)))])


# -- the recording middleware -----------------------------------------------------------------------------------
class RecordingSummarization(SummarizationMiddleware):
    """deepagents' middleware, unchanged, plus a ``compaction`` step whenever its ``wrap_model_call`` summarizes.
    Its ``name`` is deepagents' public one, so ``create_deep_agent`` puts it in the default's slot."""

    driver: Any = None

    @property
    def name(self) -> str:
        return "SummarizationMiddleware"

    def wrap_model_call(self, request, handler):
        driver = self.driver
        if driver is None:
            return super().wrap_model_call(request, handler)
        driver.last_request = request
        driver.in_wrap, driver.partitioned = True, None

        def counted(sent):
            driver.pending_tokens = self._count_tokens(sent.messages, sent.system_message, sent.tools)
            driver.last_request = sent
            return handler(sent)

        try:
            return super().wrap_model_call(request, counted)
        finally:
            driver.in_wrap = False

    def _partition_messages(self, conversation_messages, cutoff_index):
        summarize, keep = super()._partition_messages(conversation_messages, cutoff_index)
        if self.driver is not None and self.driver.in_wrap:
            self.driver.partitioned = (list(conversation_messages), list(keep))
        return summarize, keep

    def _build_new_messages_with_path(self, summary, file_path):
        new = super()._build_new_messages_with_path(summary, file_path)
        driver = self.driver
        if driver is not None and driver.in_wrap and driver.partitioned is not None:
            before, keep = driver.partitioned
            driver.partitioned = None
            driver.record_compaction(before, [*new, *keep], driver.last_cause(), driver.last_request)
        return new


_clip_overflow_tail = da_summarization._clip_overflow_tail


def _recording_clip(messages, *args, **kwargs):
    """deepagents' ``_clip_overflow_tail``, unchanged, recorded as a compaction when it rewrites the request."""
    clipped, replacements = _clip_overflow_tail(messages, *args, **kwargs)
    driver = SESSION[0] if SESSION else None
    if driver is not None and driver.in_wrap and [to_neutral(m) for m in clipped] != [to_neutral(m) for m in messages]:
        driver.record_compaction(list(messages), list(clipped), "overflow", driver.last_request)
    return clipped, replacements


da_summarization._clip_overflow_tail = _recording_clip


class NoSummarization(AgentMiddleware):
    """Takes the default ``SummarizationMiddleware``'s slot (by name) when compaction is off."""

    @property
    def name(self) -> str:
        return "SummarizationMiddleware"


# -- settings ---------------------------------------------------------------------------------------------------
def da_truncate(value: Any) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise peer.BadArgs("truncate_args_settings must be null or an object")
    return {k: (size_pair(v, f"truncate_args_settings.{k}") if k in ("trigger", "keep") and v is not None else v)
            for k, v in value.items()}


def protocol_trigger(mw: SummarizationMiddleware | None, max_input: int | None) -> dict | None:
    """The first clause deepagents checks, its ``tokens`` entry before ``messages`` before ``fraction``; a fraction
    is shown as the tokens it stands for. The count is deepagents' (system prompt and tool schemas included).
    Without a trigger deepagents still summarizes when the model raises a context-overflow error: kind
    ``overflow``."""
    if mw is None:
        return None
    if not mw._lc_helper._trigger_clauses:
        return {"kind": "overflow", "value": None, "counter": "runtime"}
    clause = mw._lc_helper._trigger_clauses[0]
    if "tokens" in clause:
        return {"kind": "tokens", "value": int(clause["tokens"]), "counter": "runtime", "reaches": True}
    if "messages" in clause:
        return {"kind": "messages", "value": int(clause["messages"]), "counter": "runtime", "reaches": True}
    threshold = max(1, int(max_input * clause["fraction"])) if max_input else None
    return {"kind": "tokens", "value": threshold, "counter": "runtime", "reaches": True}


def build_middleware(settings: dict, summarizer: ScriptedModel, driver: Any) -> RecordingSummarization | None:
    if not settings["compaction"]:
        return None
    kwargs = {"backend": StateBackend(), "trigger": trigger_from_json(settings["trigger"]),
              "keep": size_pair(settings["keep"], "keep"), "trim_tokens_to_summarize": settings["trim_tokens_to_summarize"],
              "truncate_args_settings": da_truncate(settings["truncate_args_settings"])}
    if settings["summary_prompt"] is not None:
        kwargs["summary_prompt"] = settings["summary_prompt"]
    try:
        mw = RecordingSummarization(summarizer, **kwargs)
    except (ValueError, TypeError) as exc:
        raise peer.BadArgs(f"SummarizationMiddleware refused the settings: {exc}") from None
    mw.driver = driver
    return mw


# -- the session ------------------------------------------------------------------------------------------------
class DeepAgentsSession(ScriptedSession):
    def __init__(self, args: dict):
        self.settings = peer.check_settings(args.get("settings"), KNOWN)
        max_input = self.settings["max_input_tokens"]
        if max_input is not None and (not isinstance(max_input, int) or isinstance(max_input, bool) or max_input <= 0):
            raise peer.BadArgs("max_input_tokens must be a positive integer or null")
        self.system = args.get("system")
        if self.system is not None and not isinstance(self.system, str):
            raise peer.BadArgs("system must be a string or null")
        self.ids = Ids()
        self.initial = [from_neutral(m, self.ids) for m in peer.check_messages(args.get("history"))]
        self.seeded = False
        self.steps: list[dict] = []
        self.summaries = peer.Summaries(None, self.steps)
        self.replies = peer.Replies(None)
        self.overflow_above: int | None = None
        self.calls = 0
        self.in_wrap, self.partitioned, self.last_request, self.pending_tokens = False, None, None, None
        self.config = {"configurable": {"thread_id": THREAD}}
        profile = {"max_input_tokens": max_input} if max_input is not None else None
        self.model = ScriptedModel(driver=self, profile=profile)
        self.mw = build_middleware(self.settings, ScriptedModel(driver=self, profile=profile), self)
        ids = self.ids

        @tool
        def fetch(size: int, tag: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
            """Fetch `size` characters tagged `tag`."""
            return ToolMessage(peer.tool_result({"size": size, "tag": tag}), tool_call_id=tool_call_id, id=ids())

        self.agent = create_deep_agent(model=self.model, tools=[fetch], system_prompt=self.system,
                                       middleware=[self.mw if self.mw is not None else NoSummarization()],
                                       checkpointer=InMemorySaver())

    def answer_open(self) -> dict:
        return {"settings": dict(self.settings), "trigger": protocol_trigger(self.mw, self.settings["max_input_tokens"])}

    # what the runtime holds
    def state(self) -> dict:
        return dict(self.agent.get_state(self.config).values or {})

    def view(self, state: dict | None = None) -> list[BaseMessage]:
        """What the next model call sees: deepagents' summary plus the raw messages from its cutoff."""
        if not self.seeded:
            return list(self.initial)
        state = self.state() if state is None else state
        messages = list(state.get("messages") or [])
        return SummarizationMiddleware._apply_event_to_messages(messages, state.get(SUMMARIZATION_EVENT_KEY))

    # recording
    def count(self, messages: list[BaseMessage], request) -> int | None:
        if self.mw is None or request is None:
            return None
        return self.mw._count_tokens(messages, request.system_message, request.tools)

    def last_cause(self) -> str:
        request = next((s for s in reversed(self.steps) if s["kind"] in ("request", "compaction")), None)
        return "overflow" if request is not None and request["kind"] == "request" and request["overflow"] else "size"

    def record_compaction(self, before: list, after: list, cause: str, request) -> None:
        self.steps.append({"kind": "compaction", "before": [to_neutral(m) for m in before],
                           "after": [to_neutral(m) for m in after], "cause": cause,
                           "count_before": self.count(before, request), "count_after": self.count(after, request)})

    def request_tokens(self, messages: list[BaseMessage]) -> int | None:
        """deepagents' own count of the request, taken as the middleware sent it (``counted`` above)."""
        tokens, self.pending_tokens = self.pending_tokens, None
        return tokens

    def _answer(self) -> dict:
        return {"steps": self.steps, "history": [to_neutral(m) for m in self.view()]}

    def turn(self, args: dict) -> dict:
        self.begin(args, ("user", "replies", "summaries", "overflow_above", "summarizer_window"))
        if not isinstance(args.get("user"), str):
            raise peer.BadArgs("turn needs a string user")
        new = [] if self.seeded else list(self.initial)
        new.append(HumanMessage(args["user"], id=self.ids()))
        self.seeded = True
        config = {**self.config, "recursion_limit": 4 * self.replies.bound + 16}
        try:
            self.agent.invoke({"messages": new}, config=config)
        except Exception as exc:  # noqa: BLE001 - every failure is a step
            self.error(exc)
        return self._answer()

    def compact(self, args: dict) -> dict:
        """Not available: deepagents 0.7.32 has no direct compaction entry. Its manual compaction is
        ``SummarizationToolMiddleware``'s ``compact_conversation`` tool, which runs only as a tool call inside a graph
        run (a model's call, or a client that injects one): its ``StateBackend`` offload refuses to run outside a
        graph, and the summarization event it writes is private state that ``update_state`` does not take."""
        raise peer.BadArgs("deepagents has no direct compaction: its manual compaction is the compact_conversation "
                           "tool (SummarizationToolMiddleware), which runs only as a tool call inside a graph run")


SESSION: list[DeepAgentsSession] = []


def open_session(args: dict) -> tuple[DeepAgentsSession, dict]:
    session = DeepAgentsSession(args)
    SESSION[:] = [session]
    return session, session.answer_open()


# -- bench ------------------------------------------------------------------------------------------------------
def bench(args: dict) -> dict:
    """Seconds deepagents' own trigger check takes after one message is appended to a history of ``n`` messages:
    what ``wrap_model_call`` runs before every model call (the effective view, ``_count_tokens`` over system prompt,
    messages and tool schemas, ``_should_summarize`` or ``_over_budget``), with the system prompt and tools of a
    real request of the open session (a default session with ``trigger=("tokens", 4000)`` when none is open)."""
    sizes, repeats = args.get("sizes", [100, 1000, 10000]), args.get("repeats", 20)
    if not (isinstance(sizes, list) and all(isinstance(n, int) and n >= 0 for n in sizes)):
        raise peer.BadArgs("sizes must be a list of non-negative integers")
    if not isinstance(repeats, int) or repeats < 1:
        raise peer.BadArgs("repeats must be a positive integer")
    session = SESSION[0] if SESSION and SESSION[0].mw is not None else None
    if session is None or session.last_request is None:  # a probe session of its own captures a real request
        settings = dict(session.settings) if session is not None else {"trigger": ["tokens", 4000]}
        session = DeepAgentsSession({"settings": settings})
        session.turn({"user": "hello"})
    mw, request = session.mw, session.last_request
    ids = Ids()

    def message(i: int) -> BaseMessage:
        kind = i % 3
        if kind == 0:
            return HumanMessage(f"question {i} " + "x" * 80, id=ids())
        if kind == 1:
            return AIMessage("", tool_calls=[{"name": peer.TOOL, "args": {"size": 80, "tag": f"t{i}"},
                                              "id": f"c{i}", "type": "tool_call"}], id=ids(),
                             usage_metadata={"input_tokens": 10, "output_tokens": 8, "total_tokens": 18},
                             response_metadata={"model_provider": PROVIDER})
        return ToolMessage(peer.tool_result({"size": 80, "tag": f"t{i}"}), tool_call_id=f"c{i - 1}", id=ids())

    points = []
    for n in sizes:
        history = [message(i) for i in range(n)]
        spent = 0.0
        for r in range(repeats):
            history.append(message(n + r))
            timed = request.override(messages=history)
            start = time.perf_counter()
            effective = mw._get_effective_messages(timed)
            total = mw._count_tokens(effective, timed.system_message, timed.tools)
            truncated, modified = mw._truncate_args(effective, total)
            if modified:
                total = mw._count_tokens(truncated, timed.system_message, timed.tools)
            mw._should_summarize(truncated, total) or mw._over_budget(timed, total)
            spent += time.perf_counter() - start
        points.append({"messages": n, "seconds_per_append": spent / repeats})
    return {"points": points}


if __name__ == "__main__":
    peer.serve("deepagents", package_version("deepagents"), open_session, extra_ops={"bench": bench})
    sys.exit(0)
