"""Each promise's premise: whether a recorded session gave the promise something to judge.

A promise that found no breach holds only where its premise occurred: ``contract-summarizer-used`` says nothing
about a session whose compactions never produced a summary. The search counts, per promise, the sessions whose
premise occurred (:func:`exercised`); the matrix calls a promise *held* on a runtime only when that count is above
zero, and otherwise *not exercised*, with the premise below as the reason. Each premise mirrors the first guard of
its check in :mod:`.promises`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import shapes
from .session import Session
from .shapes import compactions, steps, walk


def _any_compaction(session: Session) -> bool:
    return any(True for _ in compactions(session))


def _request_after_compaction(session: Session) -> bool:
    seen = False
    for _, _, step in walk(session):
        seen = seen or step.get("kind") == "compaction"
        if seen and step.get("kind") == "request":
            return True
    return False


def _turn_request_after_compaction(session: Session) -> bool:
    for exchange in session.exchanges:
        if exchange.op != "turn":
            continue
        kinds = [step.get("kind") for step in steps(exchange)]
        if "compaction" in kinds and "request" in kinds[kinds.index("compaction"):]:
            return True
    return False


def _system_after_compaction(session: Session) -> bool:
    return bool(session.system) and _request_after_compaction(session)


def _shrink_expected(session: Session) -> bool:
    return _any_compaction(session) or any(step.get("kind") == "request" and step.get("overflow")
                                           for _, _, step in walk(session))


def _request_after_trigger_compaction(session: Session) -> bool:
    return any(c.cause in ("size", "overflow") and shapes.next_request(c.exchange, c.index) is not None
               for c in compactions(session))


def _new_summary(session: Session) -> bool:
    return any(shapes.new_summaries(c.step) for c in compactions(session))


def _summarizer_with_window(session: Session) -> bool:
    trigger = session.trigger or {}
    for exchange in session.exchanges:
        window = exchange.args.get("summarizer_window")
        if window is None and trigger.get("kind") == "tokens":
            window = trigger.get("value")
        if isinstance(window, int) and any(step.get("kind") == "summarizer" for step in steps(exchange)):
            return True
    return False


def _two_summaries(session: Session) -> bool:
    return sum(len(shapes.new_summaries(c.step)) for c in compactions(session)) >= 2


def _off_with_requests(session: Session) -> bool:
    requests = sum(step.get("kind") == "request" for _, _, step in walk(session))
    return session.settings.get("compaction") is False and requests >= 2


def _size_rule_live(session: Session) -> bool:
    trigger = session.trigger
    if trigger is None:
        return any(True for _, _, step in walk(session) if step.get("kind") == "request")
    return trigger.get("kind") in ("tokens", "messages") and isinstance(trigger.get("value"), int) \
        and any(True for _, _, step in walk(session) if step.get("kind") == "request")


@dataclass(frozen=True)
class Premise:
    """What a session must contain for ``promise`` to be judged, said in the contract's words."""

    promise: str
    says: str
    occurred: Callable[[Session], bool]


PREMISES: dict[str, Premise] = {p.promise: p for p in (
    Premise("contract-no-orphan-created", "a compaction happened", _any_compaction),
    Premise("contract-tail-verbatim", "a compaction happened", _any_compaction),
    Premise("contract-prompt-verbatim", "a turn compacted and then called the model", _turn_request_after_compaction),
    Premise("contract-system-kept", "a request with a system prompt followed a compaction", _system_after_compaction),
    Premise("contract-progress", "a compaction happened or a request overflowed", _shrink_expected),
    Premise("contract-fits-after", "a size or overflow compaction was followed by a request",
            _request_after_trigger_compaction),
    Premise("contract-summary-covers-removed", "a compaction wrote a summary", _new_summary),
    Premise("contract-summarizer-used", "a compaction wrote a summary", _new_summary),
    Premise("contract-summarizer-input-fits", "the summarizer was called with a known window", _summarizer_with_window),
    Premise("contract-summary-not-nested", "two summaries were written in one session", _two_summaries),
    Premise("contract-roles-valid", "a request followed a compaction", _request_after_compaction),
    Premise("contract-disabled-means-disabled", "compaction was off and the model was called twice",
            _off_with_requests),
    Premise("contract-under-threshold-noop", "the model was called under a size trigger (or with none)",
            _size_rule_live),
)}


def exercised(session: Session) -> frozenset[str]:
    """The promises whose premise occurred in ``session``."""
    return frozenset(p.promise for p in PREMISES.values() if p.occurred(session))
