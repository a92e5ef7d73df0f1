"""Reading a conversation session: its steps in order, what a compaction removed and kept, the summaries and their
summarizer calls, and the sizes the promises compare (``docs/conversation-protocol.md`` § Operations).

Everything here is a pure function of the recorded answers, so every promise reads a session the same way.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from surfacecheck.runtime.conversation.peer import neutral_tokens

from .session import Exchange, Session

TEXT_OUTCOMES = ("text", "slow")
"""Summarizer outcomes that answered text (a slow call still answers)."""


def steps(exchange: Exchange) -> list[dict]:
    return [s for s in exchange.answer.get("steps", ()) if isinstance(s, dict)]


def walk(session: Session) -> Iterator[tuple[Exchange, int, dict]]:
    """Every step of the session: ``(exchange, index in its steps, step)``, in order."""
    for exchange in session.exchanges:
        for i, step in enumerate(steps(exchange)):
            yield exchange, i, step


def is_summary(message: dict) -> bool:
    return bool(message.get("summary"))


def text(message: dict) -> str:
    return message.get("text") or ""


def same_message(a: dict, b: dict) -> bool:
    """Equal in everything the contract looks at: role, text, calls (ids, names, args, order) and call_id."""
    keys = ("role", "text", "calls", "call_id")
    return all((a.get(k) or None) == (b.get(k) or None) for k in keys)


def lead(compaction: dict) -> int:
    """How many messages open ``after`` as the summary block: the leading summary messages, what the compaction
    wrote in front of what it kept (a summary further in was kept with the tail). An old summary that ends the
    block and, with everything after it, is ``before``'s own tail verbatim was kept, not written (a runtime that
    keeps the last message, an earlier summary, behind its new one)."""
    after = list(compaction.get("after") or ())
    before = list(compaction.get("before") or ())
    old = {text(m) for m in before if is_summary(m)}
    n = next((i for i, m in enumerate(after) if not is_summary(m)), len(after))
    while n > 0 and text(after[n - 1]) in old and len(after) - n + 1 <= len(before) and all(
            same_message(a, b) for a, b in zip(after[n - 1:], before[len(before) - (len(after) - n + 1):])):
        n -= 1
    return n


def kept(compaction: dict) -> list[dict]:
    """What a compaction keeps: ``after`` without its leading summary block."""
    return list(compaction.get("after") or ())[lead(compaction):]


def kept_count(compaction: dict) -> int:
    """How many messages of ``before`` a compaction claims to keep."""
    return min(len(compaction.get("before") or ()), len(kept(compaction)))


def removed(compaction: dict) -> list[dict]:
    """The messages of ``before`` outside the kept suffix."""
    before = list(compaction.get("before") or ())
    return before[:len(before) - kept_count(compaction)]


def new_summaries(compaction: dict) -> list[dict]:
    """The summary messages of ``after`` that were not already summaries in ``before`` (a kept old summary is not
    this compaction's)."""
    old = {text(m) for m in compaction.get("before") or () if is_summary(m)}
    return [m for m in compaction.get("after") or () if is_summary(m) and text(m) not in old]


@dataclass(frozen=True)
class Compaction:
    """A compaction step with the summarizer steps that came right before it (since the previous request or
    compaction of its exchange)."""

    exchange: Exchange
    index: int
    step: dict
    summarizer: tuple[dict, ...]

    @property
    def cause(self) -> str:
        return str(self.step.get("cause"))

    @property
    def outputs(self) -> list[str]:
        """The texts the summarizer answered for this compaction, in order (empty answers left out)."""
        return [s.get("output") for s in self.summarizer
                if s.get("outcome") in TEXT_OUTCOMES and isinstance(s.get("output"), str) and s.get("output")]


def compactions(session: Session) -> Iterator[Compaction]:
    for exchange in session.exchanges:
        pending: list[dict] = []
        for i, step in enumerate(steps(exchange)):
            kind = step.get("kind")
            if kind == "summarizer":
                pending.append(step)
            elif kind == "compaction":
                yield Compaction(exchange, i, step, tuple(pending))
                pending = []
            elif kind == "request":
                pending = []


def summarizer_attempts(exchange: Exchange) -> list[list[dict]]:
    """The summarizer steps of an exchange grouped by attempt: a run ends at a compaction, a request, an error or
    the end of the exchange."""
    attempts: list[list[dict]] = []
    run: list[dict] = []
    for step in steps(exchange):
        if step.get("kind") == "summarizer":
            run.append(step)
        elif run:
            attempts.append(run)
            run = []
    if run:
        attempts.append(run)
    return attempts


def request_size(session: Session, request: dict) -> int:
    """A request's size in the trigger's count: the runtime's own when its trigger counts so and it reported one,
    else the neutral size (``peer.neutral_tokens``); a ``messages`` trigger counts messages."""
    trigger = session.trigger or {}
    messages = list(request.get("messages") or ())
    if trigger.get("kind") == "messages":
        return len(messages)
    if trigger.get("counter") == "runtime" and isinstance(request.get("tokens"), int):
        return request["tokens"]
    return neutral_tokens(messages, request.get("system"))


def history_size(session: Session, messages: list[dict], runtime_count: int | None) -> int:
    """A history's size in the trigger's count (the runtime's ``count_*`` when it gave one)."""
    trigger = session.trigger or {}
    if trigger.get("kind") == "messages":
        return len(messages)
    if runtime_count is not None:
        return runtime_count
    return neutral_tokens(messages, session.system)


def ends_in_typed_error(exchange: Exchange) -> bool:
    found = steps(exchange)
    return bool(found) and found[-1].get("kind") == "error" and found[-1].get("typed") is True


def typed_error_before_request(exchange: Exchange, index: int) -> bool:
    """Whether a typed error step comes after step ``index`` before the next request of the exchange."""
    for step in steps(exchange)[index + 1:]:
        if step.get("kind") == "request":
            return False
        if step.get("kind") == "error" and step.get("typed") is True:
            return True
    return False


def next_request(exchange: Exchange, index: int) -> dict | None:
    return next((s for s in steps(exchange)[index + 1:] if s.get("kind") == "request"), None)


def brief(messages, limit: int = 6) -> tuple:
    """Messages as a breach shows them: at most ``limit``, each text cut to 120 characters."""
    shown = []
    for m in list(messages)[:limit]:
        m = dict(m)
        if len(text(m)) > 120:
            m["text"] = text(m)[:117] + "..."
        shown.append(m)
    return tuple(shown)
