"""What every conversation adapter shares, standard library only (it runs inside each runtime's own environment).

:func:`serve` is the JSON-lines loop of ``docs/protocol.md`` at the ``conversation`` level; an adapter gives it a
:class:`Session` factory. :func:`neutral_tokens` is the one neutral measure of a request; :class:`Replies` and
:class:`Summaries` are the scripted model and summarizer (``docs/conversation-protocol.md`` § Scripts).
"""
from __future__ import annotations

import json
import math
import sys
import time
import traceback
from typing import Any, Callable

PROTOCOL = "surfacecheck-runtime/1"
LEVEL = "conversation"
OPS = ("open", "turn", "compact")
TOOL = "fetch"
DONE = {"text": "done"}
REPLY_SLACK = 8
"""A turn stops after ``len(replies) + REPLY_SLACK`` model calls (error ``loop-bound``)."""


class BadArgs(ValueError):
    """A request this peer refuses (answered as a protocol ``bad-args`` error)."""


def _chars(value: Any) -> int:
    return len(value) if isinstance(value, str) else len(json.dumps(value, separators=(",", ":"), sort_keys=True))


def message_tokens(message: dict) -> int:
    """4 plus ``ceil(chars / 4)`` of the text, call names and compact-JSON args."""
    chars = _chars(message.get("text") or "")
    for call in message.get("calls") or ():
        chars += _chars(call.get("name", "")) + _chars(call.get("args", {}))
    return 4 + math.ceil(chars / 4)


def neutral_tokens(messages: list[dict], system: str | None = None) -> int:
    """The neutral size of a request: every message, plus the system prompt as one more message."""
    total = sum(message_tokens(m) for m in messages)
    return total + (message_tokens({"text": system}) if system else 0)


def tool_result(args: dict) -> str:
    """What ``fetch(size, tag)`` returns: the tag, a space, then ``size`` characters."""
    size = int(args.get("size", 0))
    tag = str(args.get("tag", "r"))
    return tag + " " + ("lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]


class Replies:
    """The scripted model's replies, one per model call that does not overflow; ``{"text": "done"}`` after."""

    def __init__(self, replies: list[dict] | None):
        self._left = list(replies or [])
        self.bound = len(self._left) + REPLY_SLACK

    def next(self) -> dict:
        return self._left.pop(0) if self._left else dict(DONE)


class Summaries:
    """The scripted summarizer: ``next(prompt)`` returns ``(outcome, output)`` and records a summarizer step;
    ``fail`` and ``overflow`` raise through ``raise_fail`` / ``raise_overflow`` (the runtime's own exception types)."""

    def __init__(self, script: list[dict] | None, steps: list[dict], window: int | None = None,
                 raise_fail: Callable[[str], BaseException] = RuntimeError,
                 raise_overflow: Callable[[str], BaseException] = RuntimeError):
        self._left, self.steps, self.window = list(script or []), steps, window
        self.raise_fail, self.raise_overflow = raise_fail, raise_overflow
        self.calls = 0

    def next(self, prompt: str) -> str:
        self.calls += 1
        tokens = math.ceil(len(prompt) / 4) + 4
        step = {"kind": "summarizer", "prompt": prompt, "tokens": tokens, "outcome": "text", "output": None}
        self.steps.append(step)
        if self.window is not None and tokens > self.window:
            step["outcome"] = "overflow"
            raise self.raise_overflow(f"summarizer request of {tokens} tokens is above its window of {self.window}")
        item = self._left.pop(0) if self._left else {"text": f"summary #{self.calls}"}
        if "fail" in item:
            step["outcome"] = "fail"
            raise self.raise_fail(str(item["fail"]))
        if item.get("empty"):
            step["outcome"], step["output"] = "empty", ""
            return ""
        if "slow" in item:
            time.sleep(float(item["slow"]))
            step["outcome"] = "slow"
        step["output"] = str(item.get("text", f"summary #{self.calls}"))
        return step["output"]


class Session:
    """One conversation in a runtime; an adapter subclasses it. ``open`` is its constructor's job."""

    def turn(self, args: dict) -> dict:  # pragma: no cover - the adapters implement it
        raise NotImplementedError

    def compact(self, args: dict) -> dict:  # pragma: no cover - the adapters implement it
        raise NotImplementedError


def check_messages(history: Any, where: str = "history") -> list[dict]:
    """Neutral messages, validated (``BadArgs`` naming the index and the reason)."""
    if history is None:
        return []
    if not isinstance(history, list):
        raise BadArgs(f"{where} must be a list of messages")
    for i, m in enumerate(history):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "tool"):
            raise BadArgs(f"{where}[{i}]: role must be system, user, assistant or tool")
        if not isinstance(m.get("text", ""), str):
            raise BadArgs(f"{where}[{i}]: text must be a string")
        if m["role"] == "tool" and not isinstance(m.get("call_id"), str):
            raise BadArgs(f"{where}[{i}]: a tool message needs a string call_id")
        for call in m.get("calls") or ():
            if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not isinstance(call.get("args", {}), dict):
                raise BadArgs(f"{where}[{i}]: each call needs a string id and an object args")
    return history


def check_settings(settings: Any, known: dict[str, Any]) -> dict:
    """The effective settings: ``known`` (name -> default) overlaid with ``settings``; unknown keys refused."""
    if settings is None:
        settings = {}
    if not isinstance(settings, dict):
        raise BadArgs("settings must be an object")
    unknown = sorted(set(settings) - set(known) - {"compaction"})
    if unknown:
        raise BadArgs(f"unknown setting {unknown[0]!r}; known: {', '.join(sorted(known) + ['compaction'])}")
    return {"compaction": True, **known, **settings}


def serve(name: str, version: str, open_session: Callable[[dict], tuple[Session, dict]],
          stdin=None, stdout=None, extra_ops: tuple[str, ...] = ()) -> None:
    """Answer requests until stdin ends. ``open_session(args)`` returns the session and ``open``'s answer.
    ``extra_ops`` (e.g. ``("bench",)``) are further session ops the adapter serves: announced in ``hello`` and
    dispatched, after ``open``, to the session's method of that name."""
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    session_ops = ("turn", "compact") + tuple(extra_ops)
    session: Session | None = None

    def answer(payload: dict) -> None:
        stdout.write(json.dumps(payload, separators=(",", ":")) + "\n")
        stdout.flush()

    for raw in stdin:
        if not raw.strip():
            continue
        try:
            request = json.loads(raw)
            rid, op, args = request.get("id"), request.get("op"), request.get("args") or {}
        except (ValueError, AttributeError):
            answer({"id": None, "error": {"type": "bad-request", "message": "not a JSON object request"}})
            continue
        try:
            if op == "hello":
                result = {"protocol": PROTOCOL, "name": name, "levels": [LEVEL], "ops": list(OPS) + list(extra_ops),
                          "runtime": {"name": name, "version": version}}
            elif op == "open":
                session, result = open_session(args)
            elif op in session_ops:
                if session is None:
                    raise BadArgs(f"{op} before open")
                result = getattr(session, op)(args)
            else:
                answer({"id": rid, "error": {"type": "unknown-op", "message": f"unknown op {op!r}"}})
                continue
        except BadArgs as exc:
            answer({"id": rid, "error": {"type": "bad-args", "message": str(exc)}})
            continue
        except Exception as exc:  # noqa: BLE001 - an adapter bug is reported, never swallowed
            tail = traceback.format_exc(limit=4)
            print(tail, file=sys.stderr, flush=True)
            answer({"id": rid, "error": {"type": "internal", "message": f"{type(exc).__name__}: {exc}"}})
            continue
        answer({"id": rid, "result": result})
