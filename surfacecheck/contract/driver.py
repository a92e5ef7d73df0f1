"""Run conversation requests on a runtime and keep the :class:`~.session.Session` the promises judge.

The search's state machine and ``replay`` both drive a runtime through :class:`Driver`, so a witness replays
exactly as it was found. :func:`label` tells each step in the contract's words ("turn 2: user asks 'find the bug';
model calls fetch×2 (900, 12 chars); summarizer fails"), from the request and its answer.

A protocol error answer (``bad-args``, ``internal``, ``loop-bound``) is no step of the runtime: the exchange is
kept with ``{"error": {...}}`` and the history as it was (the runtime answered nothing else), and the session
goes no further (:attr:`Driver.halted`). A runtime that hangs or dies raises
:class:`~surfacecheck.core.protocol.RuntimeUnavailable` out of every method.
"""
from __future__ import annotations

from collections import Counter

from surfacecheck.core.protocol import ProtocolError, Runtime

from .session import Exchange, Session

DEFAULT_PROVIDERS = {"langchain": "openai", "strands": "bedrock", "reference": "anthropic", "gemini": "gemini",
                     "ai": "openai", "adk": "gemini", "deepagents": "anthropic", "dsh": "openai", "embedded": "openai",
                     "model": "openai", "openhands": "openai"}
"""Whose role rules apply by default: each framework's default provider family (deepagents: create_deep_agent's
default Anthropic model; openhands: its LLM defaults to OpenAI's gpt-5.6 and sends Chat Completions messages; dsh and the model reproducing it: DeepSeek's API, which speaks OpenAI's chat format)."""
FALLBACK_PROVIDER = "anthropic"


def default_provider(spec: str) -> str:
    """The provider whose role rules apply by default: langchain -> openai, strands -> bedrock, else anthropic."""
    return DEFAULT_PROVIDERS.get(spec.split(":", 1)[0], FALLBACK_PROVIDER)


class Driver:
    """One session on ``runtime``: :meth:`open` first, then :meth:`run` per ``turn`` or ``compact``."""

    def __init__(self, runtime: Runtime, spec: str, provider: str):
        self.runtime, self.spec, self.provider = runtime, spec, provider
        self.session: Session | None = None
        self.halted: dict | None = None  # the protocol error that ended the session
        self.number = 0  # trace steps so far
        self.turns = 0

    def open(self, args: dict) -> dict:
        """``open`` (step 1); :class:`ProtocolError` when the runtime refuses the settings or history."""
        answer = self.runtime.call("open", args)
        self.number, self.turns, self.halted = 1, 0, None
        self.session = Session(runtime=self.spec, settings=dict(answer.get("settings") or {}),
                               trigger=answer.get("trigger"), system=args.get("system"),
                               initial=tuple(args.get("history") or ()), provider=self.provider)
        return answer

    def run(self, op: str, args: dict) -> Exchange:
        """One ``turn`` or ``compact``, appended to the session as an :class:`Exchange`."""
        assert self.session is not None, "open first"
        self.number += 1
        self.turns += op == "turn"
        try:
            answer = self.runtime.call(op, args)
        except ProtocolError as exc:
            before = self.session.history_before(len(self.session.exchanges))
            answer = {"error": exc.to_json(), "steps": [], "history": before}
            self.halted = exc.to_json()
        exchange = Exchange(self.number, op, args, answer)
        self.session = self.session.then(exchange)
        return exchange


def _messages(n: int) -> str:
    return f"{n} message{'' if n == 1 else 's'}"


def _quote(text: str, limit: int = 40) -> str:
    text = " ".join(str(text).split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _kinds(messages) -> str:
    count = Counter(m.get("role") for m in messages)
    calls = sum(len(m.get("calls") or ()) for m in messages)
    parts = [f"{n} {role}" for role, n in count.items()]
    extra = [f"{calls} call{'s' if calls > 1 else ''}"] if calls else []
    extra += [f"{n} summar{'ies' if n > 1 else 'y'}"] if (n := sum(1 for m in messages if m.get("summary"))) else []
    return ", ".join(parts + extra)


def describe_settings(settings: dict) -> str:
    if not settings:
        return "the runtime's defaults"
    return ", ".join(f"{k}={v}" for k, v in settings.items())


def open_label(args: dict, answer: dict | None = None) -> str:
    history = args.get("history") or []
    said = [f"open with {describe_settings(args.get('settings') or {})}",
            f"system {_quote(args['system'])}" if args.get("system") else "no system prompt",
            f"history of {_messages(len(history))} ({_kinds(history)})" if history else "empty history"]
    trigger = (answer or {}).get("trigger")
    if trigger:
        said.append(f"compacts at {trigger.get('kind')} {trigger.get('value')}")
    elif answer is not None:
        said.append("never compacts by size")
    return "; ".join(said)


def _summarizer_words(args: dict, answer: dict | None) -> list[str]:
    steps = (answer or {}).get("steps") or []
    outcomes = [s.get("outcome") for s in steps if s.get("kind") == "summarizer"]
    if answer is None:
        script = args.get("summaries") or []
        return [f"summarizer scripted: {', '.join(next(iter(i)) for i in script)}"] if script else []
    words = {"text": "answers", "fail": "fails", "empty": "answers empty", "slow": "answers slowly",
             "overflow": "overflows its window"}
    return [f"summarizer {', then '.join(words.get(o, str(o)) for o in outcomes)}"] if outcomes else []


def _answer_words(answer: dict | None) -> list[str]:
    if answer is None:
        return []
    if "error" in answer:
        err = answer["error"]
        return [f"runtime refuses: {err.get('type')}: {_quote(err.get('message', ''), 60)}"]
    steps = answer.get("steps") or []
    words = []
    compactions = [s for s in steps if s.get("kind") == "compaction"]
    for c in compactions:
        words.append(f"compacts ({c.get('cause')}) {len(c.get('before') or [])} -> "
                     f"{_messages(len(c.get('after') or []))}")
    errors = [s for s in steps if s.get("kind") == "error"]
    for e in errors:
        words.append(f"ends in {'typed ' if e.get('typed') else ''}error {e.get('type')}")
    words.append(f"history {_messages(len(answer.get('history') or []))}")
    return words


def turn_label(number: int, args: dict, answer: dict | None = None) -> str:
    said = [f"turn {number}: user asks {_quote(args.get('user', ''))}"]
    for reply in args.get("replies") or ():
        if reply.get("calls"):
            sizes = ", ".join(str(c.get("args", {}).get("size", "?")) for c in reply["calls"])
            said.append(f"model calls fetch×{len(reply['calls'])} ({sizes} chars)")
        else:
            said.append(f"model answers {_quote(reply.get('text', ''), 24)}")
    if not args.get("replies"):
        said.append("model answers 'done'")
    if "overflow_above" in args:
        said.append(f"model overflows above {args['overflow_above']} tokens")
    if "summarizer_window" in args:
        said.append(f"summarizer window {args['summarizer_window']} tokens")
    return "; ".join(said + _summarizer_words(args, answer) + _answer_words(answer))


def compact_label(number: int, args: dict, answer: dict | None = None) -> str:
    said = [f"compact {number}: compaction called directly"]
    if "summarizer_window" in args:
        said.append(f"summarizer window {args['summarizer_window']} tokens")
    return "; ".join(said + _summarizer_words(args, answer) + _answer_words(answer))


def label(op: str, ordinal: int, args: dict, answer: dict | None = None) -> str:
    """The step's story: ``open``, the ``ordinal``-th ``turn``, or the ``ordinal``-th direct ``compact``."""
    if op == "open":
        return open_label(args, answer)
    return turn_label(ordinal, args, answer) if op == "turn" else compact_label(ordinal, args, answer)


def largest_history(session: Session) -> int:
    """The most messages the session's history held: the initial one or any answer's."""
    sizes = [len(session.initial)] + [len(e.answer.get("history") or []) for e in session.exchanges]
    return max(sizes)
