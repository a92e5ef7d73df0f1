"""Google ADK's events compaction as a conversation-level peer (``docs/conversation-protocol.md``).

Runs as a script inside ADK's own environment (``pyenv.py``) and imports only :mod:`peer` (its sibling) and ADK. A
session is one ADK session in an ``InMemorySessionService`` behind one ``Runner(app=App(root_agent=LlmAgent(model=
<scripted>, tools=[fetch]), events_compaction_config=EventsCompactionConfig(summarizer=LlmEventSummarizer(llm=
<scripted summarizer>), ...)))``; each ``turn`` is one ``runner.run_async`` with the user message, so both of ADK's
compaction points are its own: the token-threshold check its ``CompactionRequestProcessor`` runs before every model
call, and the post-invocation ``_run_compaction_for_sliding_window`` (token threshold first, then the sliding
window) the ``Runner`` runs after every invocation that was not aborted.

ADK never deletes a raw event: a compaction appends an event whose ``actions.compaction`` carries
``start_timestamp``, ``end_timestamp`` and ``compacted_content``, and the contents builder (``_get_contents``)
replaces the covered range by that content (role ``model``) when the next request is built. So the neutral
``history`` is what the next request will carry: ``_get_contents`` over the stored events, ADK's own builder. A
compaction step is recorded where the compaction event is appended (``append_event`` of the session service): the
view before and after it.
"""
from __future__ import annotations

import asyncio
import json
import sys
import time
from importlib.metadata import version as package_version

import peer
from google.adk.agents import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.compaction import _latest_prompt_token_count, _run_compaction_for_token_threshold_config
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events.event import Event
from google.adk.flows.llm_flows.contents import _get_contents
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService, Session
from google.genai import errors, types

VERSION = package_version("google-adk")
APP, USER, AGENT = "surfacecheck", "user", "agent"
KNOWN = {"compaction_interval": 3, "overlap_size": 1, "token_threshold": None, "event_retention_size": None,
         "prompt_template": None}
"""``EventsCompactionConfig``'s own field names (its defaults are all None, and it refuses a config with neither
pair, so the adapter's defaults are the sliding window of ADK's documentation sample: ``compaction_interval=3``,
``overlap_size=1``) and ``LlmEventSummarizer``'s ``prompt_template`` (null: the package's default prompt)."""
TOKEN_PATH = "_run_compaction_for_token_threshold_config"
NO_COMPACT = ("ADK 2.13.0 has no public compaction entry: compaction runs only inside Runner.run_async (the "
              "token-threshold check before each model call, the post-invocation compaction after each invocation); "
              "apps/compaction.py's functions are private")


class LoopBound(Exception):
    """The turn reached ``Replies.bound`` model calls."""


def fetch(size: int, tag: str) -> str:
    """Fetch ``size`` characters of text tagged ``tag``."""
    return peer.tool_result({"size": size, "tag": tag})


def overflow_error(message: str) -> errors.ClientError:
    """What the Gemini client raises for a request above the model's window (ADK has no type of its own)."""
    return errors.ClientError(400, {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}})


# -- contents, both ways ----------------------------------------------------------------------------------------
def _summary_key(content: types.Content) -> str:
    return json.dumps([p.text for p in content.parts or ()])


def _response_text(response) -> str:
    if isinstance(response, dict) and set(response) == {"result"} and isinstance(response["result"], str):
        return response["result"]
    return json.dumps(response, separators=(",", ":"), sort_keys=True, default=str)


def to_neutral(contents: list[types.Content], summaries: set[str]) -> list[dict]:
    """ADK contents as neutral messages: a ``user`` content of function responses is one ``tool`` message per
    response with ``"packed": k`` (k: the content's index); a ``model`` content is one assistant message (text and
    calls); a content equal to a compaction's ``compacted_content`` is marked ``"summary": true``."""
    out: list[dict] = []
    for k, content in enumerate(contents):
        parts = [p for p in content.parts or () if not p.thought]
        if content.role == "model":
            item = {"role": "assistant", "text": "".join(p.text or "" for p in parts)}
            calls = [{"id": p.function_call.id, "name": p.function_call.name, "args": dict(p.function_call.args or {})}
                     for p in parts if p.function_call]
            if calls:
                item["calls"] = calls
            if not calls and _summary_key(content) in summaries:
                item["summary"] = True
            out.append(item)
            continue
        if any(p.function_response for p in parts):
            for p in parts:
                if p.function_response:
                    out.append({"role": "tool", "call_id": p.function_response.id or "",
                                "text": _response_text(p.function_response.response), "packed": k})
                elif p.text:
                    out.append({"role": "user", "text": p.text, "packed": k})
            continue
        out.append({"role": "user", "text": "".join(p.text or "" for p in parts)})
    return out


def from_neutral(history: list[dict], start: float) -> list[Event]:
    """Neutral messages as ADK events, 1 ms apart from ``start``: a user message opens a new invocation (ADK's
    sliding window counts invocations); consecutive tool messages (equal ``packed``, when given) share one event."""
    events: list[Event] = []
    names: dict[str, str] = {}
    invocation = Event.new_id()
    group: object = object()
    for i, m in enumerate(history):
        role, text = m["role"], m.get("text") or ""
        if role == "system":
            raise peer.BadArgs(f"history[{i}]: ADK keeps the system prompt in the agent's instruction; use 'system'")
        if role == "tool":
            part = types.Part(function_response=types.FunctionResponse(
                id=m["call_id"], name=names.get(m["call_id"], peer.TOOL), response={"result": text}))
            key = m.get("packed", "consecutive")
            if events and key == group and events[-1].content.role == "user" and \
                    all(p.function_response for p in events[-1].content.parts):
                events[-1].content.parts.append(part)
                continue
            group = key
            events.append(Event(author=AGENT, invocation_id=invocation, timestamp=start + len(events) / 1000,
                                content=types.Content(role="user", parts=[part])))
            continue
        group = object()
        if role == "user":
            invocation = Event.new_id()
            content = types.Content(role="user", parts=[types.Part(text=text)])
            author = USER
        else:
            parts = [types.Part(text=text)] if text or not m.get("calls") else []
            for c in m.get("calls") or ():
                names[c["id"]] = c.get("name", peer.TOOL)
                parts.append(types.Part(function_call=types.FunctionCall(id=c["id"], name=c.get("name", peer.TOOL),
                                                                         args=c.get("args", {}))))
            content, author = types.Content(role="model", parts=parts), AGENT
        events.append(Event(author=author, invocation_id=invocation, timestamp=start + len(events) / 1000,
                            content=content))
    return events


def _system_text(config) -> str | None:
    si = getattr(config, "system_instruction", None) if config is not None else None
    if si is None or isinstance(si, str):
        return si
    parts = si.parts if isinstance(si, types.Content) else si
    return "".join(getattr(p, "text", None) or (p if isinstance(p, str) else "") for p in parts)


# -- the scripted models ----------------------------------------------------------------------------------------
class ScriptedModel(BaseLlm):
    """The agent's model: records each request, answers from ``replies``, reports the request's neutral size as
    ``usage_metadata.prompt_token_count`` (what ADK's token threshold reads)."""

    model: str = "scripted"
    driver: object = None

    async def generate_content_async(self, llm_request, stream=False):
        yield self.driver.model_call(llm_request)


class ScriptedSummarizer(BaseLlm):
    """The summarizer's model: answers ``LlmEventSummarizer``'s one-message request from ``summaries``."""

    model: str = "scripted-summarizer"
    driver: object = None

    async def generate_content_async(self, llm_request, stream=False):
        prompt = "\n\n".join(p.text or "" for c in llm_request.contents for p in c.parts or ())
        text = self.driver.summaries.next(prompt)  # raises on fail / overflow
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


class RecordingSessionService(InMemorySessionService):
    """ADK's in-memory service, unchanged, plus a ``compaction`` step whenever a compaction event is appended."""

    driver: object = None

    async def append_event(self, session: Session, event: Event) -> Event:
        if not (event.actions and event.actions.compaction) or self.driver is None:
            return await super().append_event(session=session, event=event)
        d = self.driver
        events = list(d.stored().events)
        count_before = _latest_prompt_token_count(events, agent_name=AGENT)
        d.summaries_seen.add(_summary_key(event.actions.compaction.compacted_content))
        before = d.view(events)
        result = await super().append_event(session=session, event=event)
        events = list(d.stored().events)
        d.steps.append({"kind": "compaction", "before": before, "after": d.view(events), "cause": _cause(),
                        "count_before": count_before,
                        "count_after": _latest_prompt_token_count(events, agent_name=AGENT)})
        return result


def _cause() -> str:
    """``size`` when the token-threshold path appends (before a model call or after the invocation); else the
    sliding window, a schedule of invocations with no size behind it, shown as ``direct``."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == TOKEN_PATH:
            return "size"
        frame = frame.f_back
    return "direct"


# -- the session ------------------------------------------------------------------------------------------------
class AdkSession(peer.Session):
    def __init__(self, args: dict, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.settings = peer.check_settings(args.get("settings"), KNOWN)
        self.system = args.get("system")
        if self.system is not None and not isinstance(self.system, str):
            raise peer.BadArgs("system must be a string or null")
        history = from_neutral(peer.check_messages(args.get("history")), time.time() - 1000.0)
        self.steps: list[dict] = []
        self.summaries_seen: set[str] = set()
        self._begin({})
        self.config = self._config()
        self.agent = LlmAgent(name=AGENT, model=ScriptedModel(driver=self), instruction=self.system or "",
                              tools=[fetch])
        self.app = App(name=APP, root_agent=self.agent, events_compaction_config=self.config)
        self.service = RecordingSessionService()
        self.runner = Runner(app=self.app, session_service=self.service)
        self.session = self._run(self.service.create_session(app_name=APP, user_id=USER))
        for event in history:
            self._run(self.service.append_event(session=self.session, event=event))
        self.service.driver = self

    def _config(self) -> EventsCompactionConfig | None:
        st = self.settings
        if not st["compaction"]:
            return None
        summarizer = LlmEventSummarizer(llm=ScriptedSummarizer(driver=self), prompt_template=st["prompt_template"])
        try:
            return EventsCompactionConfig(summarizer=summarizer, **{k: st[k] for k in KNOWN if k != "prompt_template"})
        except (ValueError, TypeError) as exc:
            raise peer.BadArgs(f"EventsCompactionConfig refused the settings: {exc}") from None

    def trigger(self) -> dict | None:
        """ADK's token threshold (``prompt_token_count < token_threshold`` does not compact: it compacts once the
        latest reported count reaches it); null without one: the sliding window counts invocations, no size."""
        if self.config is None or self.config.token_threshold is None:
            return None
        return {"kind": "tokens", "value": self.config.token_threshold, "counter": "runtime", "reaches": True}

    # helpers ------------------------------------------------------------------------------------------------------
    def _run(self, coro):
        return self.loop.run_until_complete(coro)

    def stored(self) -> Session:
        return self.service.sessions[APP][USER][self.session.id]

    def view(self, events: list[Event]) -> list[dict]:
        """What the next request will carry: ADK's own contents builder over the events."""
        return to_neutral(_get_contents(None, events, AGENT), self.summaries_seen)

    def _begin(self, args: dict) -> None:
        self.steps = []
        self.replies = peer.Replies(args.get("replies"))
        self.summaries = peer.Summaries(args.get("summaries"), self.steps, args.get("summarizer_window"),
                                        raise_fail=RuntimeError, raise_overflow=overflow_error)
        self.overflow_above = args.get("overflow_above")
        self.calls = 0

    def model_call(self, llm_request) -> LlmResponse:
        system = _system_text(llm_request.config)
        messages = to_neutral(list(llm_request.contents), self.summaries_seen)
        size = peer.neutral_tokens(messages, system)
        step = {"kind": "request", "system": system, "messages": messages, "overflow": False, "tokens": size}
        self.calls += 1
        if self.calls > self.replies.bound:
            raise LoopBound(f"more than {self.replies.bound} model calls in one turn")
        self.steps.append(step)
        if self.overflow_above is not None and size > self.overflow_above:
            step["overflow"] = True
            raise overflow_error(f"request of {size} tokens is above the window of {self.overflow_above}")
        reply = self.replies.next()
        parts = [types.Part(text=reply["text"])] if reply.get("text") else []
        for c in reply.get("calls") or ():
            parts.append(types.Part(function_call=types.FunctionCall(id=c["id"], name=c.get("name", peer.TOOL),
                                                                     args=c.get("args", {}))))
        usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=size, candidates_token_count=8,
                                                           total_token_count=size + 8)
        return LlmResponse(content=types.Content(role="model", parts=parts or [types.Part(text="")]),
                           usage_metadata=usage)

    def _error(self, exc: BaseException) -> None:
        chain, seen = [], exc
        while seen is not None and seen not in chain:
            chain.append(seen)
            seen = seen.__cause__ or seen.__context__
        bound = next((e for e in chain if isinstance(e, LoopBound)), None)
        if bound is not None:
            self.steps.append({"kind": "error", "type": "loop-bound", "message": str(bound), "typed": False})
            return
        self.steps.append({"kind": "error", "type": type(exc).__name__, "message": str(exc), "typed": False})

    def _answer(self) -> dict:
        return {"steps": self.steps, "history": self.view(list(self.stored().events))}

    # ops ----------------------------------------------------------------------------------------------------------
    def turn(self, args: dict) -> dict:
        unknown = sorted(set(args) - {"user", "replies", "summaries", "overflow_above", "summarizer_window"})
        if unknown:
            raise peer.BadArgs(f"unknown argument {unknown[0]!r}")
        if not isinstance(args.get("user"), str):
            raise peer.BadArgs("turn needs a string user")
        self._begin(args)
        message = types.Content(role="user", parts=[types.Part(text=args["user"])])

        async def invocation() -> None:
            async for _ in self.runner.run_async(user_id=USER, session_id=self.session.id, new_message=message):
                pass

        try:
            self._run(invocation())
        except Exception as exc:  # noqa: BLE001 - every failure is a step
            self._error(exc)
        return self._answer()

    def compact(self, args: dict) -> dict:
        raise peer.BadArgs(NO_COMPACT)


class Peer:
    """The process's one event loop and its current session."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.session: AdkSession | None = None

    def open(self, args: dict):
        self.session = AdkSession(args, self.loop)
        return self.session, {"settings": self.session.settings, "trigger": self.session.trigger()}

    def bench(self, args: dict) -> dict:
        return self.loop.run_until_complete(bench(args))


def _bench_event(i: int, start: float) -> Event:
    """One of the bench's events: user / model with a call / function response, about 90 characters each."""
    kind, at = i % 3, start + i / 1000
    if kind == 0:
        return Event(author=USER, invocation_id=f"i{i}", timestamp=at,
                     content=types.Content(role="user", parts=[types.Part(text=f"question {i} " + "x" * 80)]))
    if kind == 1:
        call = types.FunctionCall(id=f"c{i}", name=peer.TOOL, args={"size": 80, "tag": f"t{i}"})
        return Event(author=AGENT, invocation_id=f"i{i - 1}", timestamp=at,
                     content=types.Content(role="model", parts=[types.Part(function_call=call)]),
                     usage_metadata=types.GenerateContentResponseUsageMetadata(prompt_token_count=10 * i))
    response = types.FunctionResponse(id=f"c{i - 1}", name=peer.TOOL,
                                      response={"result": peer.tool_result({"size": 80, "tag": f"t{i - 1}"})})
    return Event(author=AGENT, invocation_id=f"i{i - 2}", timestamp=at,
                 content=types.Content(role="user", parts=[types.Part(function_response=response)]))


async def bench(args: dict) -> dict:
    """Seconds per appended event of what ADK runs before every model call on a session of ``n`` events: the
    token-threshold check (``_run_compaction_for_token_threshold_config``, the ``CompactionRequestProcessor``'s
    body, with a threshold the session never reaches, so it never summarizes) then the contents builder
    (``_get_contents``, the ``contents`` request processor's body). Timed in process with ``time.perf_counter``."""
    sizes, repeats = args.get("sizes", [100, 1000, 10000]), args.get("repeats", 20)
    if not (isinstance(sizes, list) and all(isinstance(n, int) and n >= 0 for n in sizes)):
        raise peer.BadArgs("sizes must be a list of non-negative integers")
    if not isinstance(repeats, int) or repeats < 1:
        raise peer.BadArgs("repeats must be a positive integer")
    config = EventsCompactionConfig(summarizer=LlmEventSummarizer(llm=ScriptedSummarizer()),
                                    token_threshold=10**12, event_retention_size=2)
    agent = LlmAgent(name=AGENT, model=ScriptedModel(), tools=[fetch])
    points = []
    for n in sizes:
        start = time.time() - 10_000.0
        session = Session(id="bench", app_name=APP, user_id=USER, events=[_bench_event(i, start) for i in range(n)])
        spent = 0.0
        for r in range(repeats):
            session.events.append(_bench_event(n + r, start))
            t0 = time.perf_counter()
            await _run_compaction_for_token_threshold_config(config=config, session=session, session_service=None,
                                                             agent=agent, agent_name=AGENT)
            _get_contents(None, session.events, AGENT)
            spent += time.perf_counter() - t0
        points.append({"messages": n, "seconds_per_append": spent / repeats})
    return {"points": points}


def main() -> None:
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing ADK prints may reach the protocol stream
    p = Peer()
    peer.serve("adk", VERSION, p.open, stdout=out, extra_ops={"bench": p.bench})


if __name__ == "__main__":
    main()
