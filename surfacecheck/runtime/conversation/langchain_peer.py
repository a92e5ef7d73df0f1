"""LangChain's compaction as a conversation-level peer (``docs/conversation-protocol.md``).

Runs as a script inside LangChain's own environment (``pyenv.py``) and imports :mod:`peer` as a sibling module; it
never imports surfacecheck. The agent loop is LangChain's own ``create_agent`` with one middleware, a
``SummarizationMiddleware`` subclass that only records what its ``before_model`` did. The agent model and the
summarizer are scripted chat models (``peer.Replies`` / ``peer.Summaries``).

Settings (LangChain's own words): ``trigger``, ``keep``, ``trim_tokens_to_summarize``, ``summary_prompt`` are
``SummarizationMiddleware``'s arguments (JSON lists for its tuples: ``["tokens", 4000]``, a list of such, or a
clause object ``{"tokens": 4000, "messages": 10}``); ``max_input_tokens`` is the models' profile entry (needed by
``"fraction"``). Defaults are read from the installed ``__init__`` signature; ``summary_prompt`` null means the
package's default prompt.
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
from langchain.agents import create_agent
from langchain.agents.middleware.summarization import SummarizationMiddleware
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver

_SIGNATURE = inspect.signature(SummarizationMiddleware.__init__).parameters
LC_DEFAULTS = {key: _SIGNATURE[key].default for key in ("trigger", "keep", "trim_tokens_to_summarize", "summary_prompt")}
DEFAULT_PROMPT = LC_DEFAULTS["summary_prompt"]
KNOWN = {
    "trigger": LC_DEFAULTS["trigger"],
    "keep": list(LC_DEFAULTS["keep"]),
    "trim_tokens_to_summarize": LC_DEFAULTS["trim_tokens_to_summarize"],
    "max_input_tokens": None,
    "summary_prompt": None,
}



# -- scripted models --------------------------------------------------------------------------------------------
class _Scripted(BaseChatModel):
    driver: Any = None

    def _get_ls_params(self, stop=None, **kwargs):
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = PROVIDER
        return params

    def bind_tools(self, tools, **kwargs):  # noqa: ARG002 - the script decides the calls
        return self


class ScriptedAgentModel(_Scripted):
    @property
    def _llm_type(self) -> str:
        return "scripted-agent"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.driver.model_call(list(messages)))])


class ScriptedSummarizer(_Scripted):
    @property
    def _llm_type(self) -> str:
        return "scripted-summarizer"

    def with_retry(self, **kwargs):
        """LangChain's own retry (its attempts, its retryable errors), without the waits between attempts: a
        scripted failure is not a rate limit, and a search runs thousands of them."""
        return super().with_retry(**{**kwargs, "wait_exponential_jitter": False})

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        prompt = "\n\n".join(text_of(m) for m in messages)
        text = self.driver.summaries.next(prompt)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


class RecordingSummarization(SummarizationMiddleware):
    """LangChain's middleware, unchanged, plus a ``compaction`` step whenever its ``before_model`` rewrites."""

    driver: Any = None
    cause = "size"

    def before_model(self, state, runtime):
        before = list(state["messages"])
        count_before = self.token_counter(before)
        update = super().before_model(state, runtime)
        if update is not None and self.driver is not None:
            after = list(update["messages"][1:])  # after RemoveMessage(REMOVE_ALL_MESSAGES)
            self.driver.steps.append({
                "kind": "compaction", "before": [to_neutral(m) for m in before],
                "after": [to_neutral(m) for m in after], "cause": self.cause,
                "count_before": count_before, "count_after": self.token_counter(after)})
        return update


# -- settings ---------------------------------------------------------------------------------------------------
def protocol_trigger(mw: SummarizationMiddleware | None, max_input: int | None) -> dict | None:
    """The protocol's trigger: the first clause LangChain would check, its ``tokens`` entry before ``messages``
    before ``fraction`` (a fraction is shown as the tokens it stands for). Other clauses are not shown."""
    if mw is None or not mw._trigger_clauses:  # noqa: SLF001
        return None
    clause = mw._trigger_clauses[0]  # noqa: SLF001
    if "tokens" in clause:
        return {"kind": "tokens", "value": int(clause["tokens"]), "counter": "runtime", "reaches": True}
    if "messages" in clause:
        return {"kind": "messages", "value": int(clause["messages"]), "counter": "runtime", "reaches": True}
    threshold = max(1, int(max_input * clause["fraction"])) if max_input else None
    return {"kind": "tokens", "value": threshold, "counter": "runtime", "reaches": True}


def build_middleware(settings: dict, driver: Any) -> RecordingSummarization | None:
    if not settings["compaction"]:
        return None
    profile = {"max_input_tokens": settings["max_input_tokens"]} if settings["max_input_tokens"] is not None else None
    summarizer = ScriptedSummarizer(driver=driver, profile=profile)
    kwargs = {"trigger": trigger_from_json(settings["trigger"]), "keep": size_pair(settings["keep"], "keep"),
              "trim_tokens_to_summarize": settings["trim_tokens_to_summarize"]}
    if settings["summary_prompt"] is not None:
        kwargs["summary_prompt"] = settings["summary_prompt"]
    try:
        mw = RecordingSummarization(summarizer, **kwargs)
    except (ValueError, TypeError) as exc:
        raise peer.BadArgs(f"SummarizationMiddleware refused the settings: {exc}") from None
    mw.driver = driver
    return mw


# -- the session ------------------------------------------------------------------------------------------------
class LangChainSession(ScriptedSession):
    def __init__(self, args: dict):
        self.settings = peer.check_settings(args.get("settings"), KNOWN)
        max_input = self.settings["max_input_tokens"]
        if max_input is not None and (not isinstance(max_input, int) or isinstance(max_input, bool) or max_input <= 0):
            raise peer.BadArgs("max_input_tokens must be a positive integer or null")
        self.system = args.get("system")
        if self.system is not None and not isinstance(self.system, str):
            raise peer.BadArgs("system must be a string or null")
        self.ids = Ids()
        self.history = [from_neutral(m, self.ids) for m in peer.check_messages(args.get("history"))]
        self.steps: list[dict] = []
        self.summaries = peer.Summaries(None, self.steps)
        self.replies = peer.Replies(None)
        self.overflow_above: int | None = None
        self.calls = 0
        self.mw = build_middleware(self.settings, self)
        profile = {"max_input_tokens": max_input} if max_input is not None else None
        self.model = ScriptedAgentModel(driver=self, profile=profile)
        self.turns = 0

        ids = self.ids

        @tool
        def fetch(size: int, tag: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
            """Fetch `size` characters tagged `tag`."""
            return ToolMessage(peer.tool_result({"size": size, "tag": tag}), tool_call_id=tool_call_id, id=ids())

        self.agent = create_agent(model=self.model, tools=[fetch], middleware=[self.mw] if self.mw else [],
                                  system_prompt=self.system, checkpointer=InMemorySaver())

    def answer_open(self) -> dict:
        effective = dict(self.settings)
        return {"settings": effective, "trigger": protocol_trigger(self.mw, self.settings["max_input_tokens"])}

    # the scripted agent model
    def request_tokens(self, messages: list[BaseMessage]) -> int:
        """The middleware's ``token_counter`` over the request without its system prompt (what the trigger reads)."""
        counter = self.mw.token_counter if self.mw else None
        if counter is None:
            from langchain_core.messages.utils import count_tokens_approximately as counter
        return counter(messages)

    def _answer(self) -> dict:
        return {"steps": self.steps, "history": [to_neutral(m) for m in self.history]}

    def turn(self, args: dict) -> dict:
        self.begin(args, ("user", "replies", "summaries", "overflow_above", "summarizer_window"))
        if not isinstance(args.get("user"), str):
            raise peer.BadArgs("turn needs a string user")
        if self.mw is not None:
            self.mw.cause = "size"
        self.turns += 1
        config = {"configurable": {"thread_id": f"turn-{self.turns}"},
                  "recursion_limit": 4 * self.replies.bound + 16}
        messages = [*self.history, HumanMessage(args["user"], id=self.ids())]
        try:
            result = self.agent.invoke({"messages": messages}, config=config)
            self.history = list(result["messages"])
        except Exception as exc:  # noqa: BLE001 - every failure is a step
            self.error(exc)
            state = self.agent.get_state(config)
            self.history = list((state.values or {}).get("messages") or messages)
        return self._answer()

    def compact(self, args: dict) -> dict:
        self.begin(args, ("summaries", "summarizer_window"))
        if self.mw is None:
            return self._answer()
        self.mw.cause = "direct"
        try:
            update = self.mw.before_model({"messages": list(self.history)}, None)
            if update is not None:
                self.history = list(update["messages"][1:])
        except Exception as exc:  # noqa: BLE001
            self.error(exc)
        return self._answer()


SESSION: list[LangChainSession] = []


def open_session(args: dict) -> tuple[LangChainSession, dict]:
    session = LangChainSession(args)
    SESSION[:] = [session]
    return session, session.answer_open()


# -- bench ------------------------------------------------------------------------------------------------------
def bench(args: dict) -> dict:
    """Seconds LangChain's own trigger check takes (``before_model``'s ``token_counter`` then ``_should_summarize``)
    after one message is appended to a history of ``n`` messages; the open session's middleware when it has one,
    else the package defaults with ``trigger=("tokens", 4000)``."""
    sizes, repeats = args.get("sizes", [100, 1000, 10000]), args.get("repeats", 20)
    if not (isinstance(sizes, list) and all(isinstance(n, int) and n >= 0 for n in sizes)):
        raise peer.BadArgs("sizes must be a list of non-negative integers")
    if not isinstance(repeats, int) or repeats < 1:
        raise peer.BadArgs("repeats must be a positive integer")
    mw = SESSION[0].mw if SESSION and SESSION[0].mw is not None else None
    if mw is None:
        mw = SummarizationMiddleware(ScriptedSummarizer(), trigger=("tokens", 4000))
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
            start = time.perf_counter()
            total = mw.token_counter(history)
            mw._should_summarize(history, total)  # noqa: SLF001 - exactly what before_model runs
            spent += time.perf_counter() - start
        points.append({"messages": n, "seconds_per_append": spent / repeats})
    return {"points": points}


if __name__ == "__main__":
    peer.serve("langchain", package_version("langchain"), open_session, extra_ops={"bench": bench})
    sys.exit(0)
