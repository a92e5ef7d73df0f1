"""A conversation session as the contract reads it: what was opened, then each request and its answer, in order.

History in, breaches out (:mod:`.promises`): a :class:`Session` is an immutable record of what a runtime did, built
by whoever drove it (the search, a replay, a test); the promises never call a runtime.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Exchange:
    """One request after ``open`` (``turn`` or ``compact``), its args, and the runtime's answer
    (``{"steps": [...], "history": [...]}``; ``docs/conversation-protocol.md``). ``number`` is its trace step."""

    number: int
    op: str
    args: dict
    answer: dict


@dataclass(frozen=True)
class Session:
    """``open``'s args and answer, the provider whose role rules apply, and every exchange since."""

    runtime: str
    settings: dict  # the effective settings ``open`` echoed
    trigger: dict | None  # ``{"kind", "value", "counter"}`` or None (never compacts by size)
    system: str | None
    initial: tuple = ()  # the history ``open`` was given
    provider: str = "anthropic"
    exchanges: tuple[Exchange, ...] = field(default_factory=tuple)

    def then(self, exchange: Exchange) -> "Session":
        return replace(self, exchanges=self.exchanges + (exchange,))

    def history_before(self, index: int) -> list[dict]:
        """The session's history before exchange ``index`` (the last answer's history, or the initial one)."""
        return list(self.exchanges[index - 1].answer.get("history", [])) if index > 0 else list(self.initial)


@dataclass(frozen=True)
class Breach:
    """One broken promise, as data: which promise, at which trace step, what was expected and observed, and the
    messages in question (neutral form). ``message`` says it in one line, in the contract's words."""

    promise: str
    step: int
    message: str
    expected: Any = None
    observed: Any = None
    messages: tuple = ()

    def to_json(self) -> dict:
        return {"property": self.promise, "step": self.step, "message": self.message,
                "expected": self.expected, "observed": self.observed, "messages": list(self.messages)}
