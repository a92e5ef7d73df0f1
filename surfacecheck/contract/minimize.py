"""Make a witness smaller after Hypothesis has shrunk it: fewer messages, steps and characters, the same promise.

Hypothesis shrinks the choices that drew an example; a conversation's size lives in what those choices built (an
initial history of twenty messages, a turn of six replies, a tool result of 8,000 characters). :func:`minimize`
works on the witness itself, as delta debugging does: it tries one reduction at a time — drop a step, drop a
message of the initial history (a call with its results), drop a reply or a scripted summary, halve a size — replays
the candidate on the same runtime, and keeps it when the same promise still breaks and the witness is smaller
(most messages held, then steps, then characters). It stops when no reduction helps or its budget ends.
"""
from __future__ import annotations

import copy
import itertools
import json
import time
from collections import Counter
from typing import Iterator

from surfacecheck.core.protocol import ProtocolError, Runtime
from surfacecheck.core.trace import Step

from .driver import Driver, label
from .machine import Judge, Witness
from .roles import PROVIDERS, problems

MAX_RUNS = 160
TAILS = (1, 2, 3, 4, 6, 8, 12)
"""With a settings overlay, the initial history is cut to its last so many messages."""


def size(witness: Witness) -> tuple[int, int, int]:
    """What "smaller" compares: the most messages a history held, the steps, the characters of the steps' args."""
    return (witness.messages, len(witness.steps),
            sum(len(json.dumps(s.args, separators=(",", ":"))) for s in witness.steps))


def replay(runtime: Runtime, spec: str, provider: str, steps: list[Step], promise: str,
           judge: Judge) -> Witness | None:
    """Run ``steps`` afresh; the witness when ``promise`` still breaks, else None (``RuntimeUnavailable`` passes)."""
    driver = Driver(runtime, spec, provider)
    try:
        opened = driver.open(steps[0].args)
    except ProtocolError:
        return None
    ran = [Step("open", steps[0].args, label("open", 1, steps[0].args, opened))]
    compacts = 0
    for step in steps[1:]:
        if driver.halted is not None:
            break
        exchange = driver.run(step.op, step.args)
        compacts += step.op == "compact"
        ordinal = driver.turns if step.op == "turn" else compacts
        ran.append(Step(step.op, step.args, label(step.op, ordinal, step.args, exchange.answer)))
    breaches = [b for b in judge(driver.session) if b.promise == promise]
    if not breaches:
        return None
    return Witness(ran, min(breaches, key=lambda b: b.step), driver.session)


def _new_overlay(was: Step, now: Step, tried: set[str]) -> str | None:
    """The settings ``now`` adds to ``was`` (as a key) when it only adds settings and was not tried, else None."""
    before, after = was.args.get("settings") or {}, now.args.get("settings") or {}
    if {k: v for k, v in was.args.items() if k != "settings"} != {k: v for k, v in now.args.items() if k != "settings"}:
        return None
    added = {k: v for k, v in after.items() if before.get(k) != v}
    if not added or any(k not in after for k in before):
        return None
    key = json.dumps(added, sort_keys=True)
    return None if key in tried else key


def _problems(history: list[dict], provider: str) -> Counter:
    """What is wrong with an initial history by ``provider``'s role rules (an orphan result, a leading assistant
    message...), counted: a reduction may not add to it."""
    rules = PROVIDERS.get(provider)
    found = Counter(what for _, what in problems(history, rules)) if rules is not None else Counter()
    if history and history[0].get("role") != "user":  # a conversation begins with its user, whatever the provider
        found["the history does not begin with a user message"] += 1
    return found


def _without_message(history: list[dict], index: int) -> list[dict]:
    """``history`` without message ``index``; an assistant message takes the results of its calls with it."""
    gone = history[index]
    ids = {c.get("id") for c in gone.get("calls") or ()}
    return [m for i, m in enumerate(history)
            if i != index and not (ids and m.get("role") == "tool" and m.get("call_id") in ids)]


def _halved(value: dict) -> dict | None:
    """A copy of a call's ``args`` with ``size`` halved (None when it is already small)."""
    if isinstance(value.get("size"), int) and value["size"] > 8:
        return {**value, "size": value["size"] // 2}
    return None


def folded(witness: Witness) -> Iterator[list[Step]]:
    """The witness with its first k exchanges folded into ``open``: the history they left becomes the initial one
    (fewer steps, and the messages they built open to cuts)."""
    steps, session = witness.steps, witness.session
    for k in range(min(len(steps) - 1, len(session.exchanges)), 0, -1):
        answer = session.exchanges[k - 1].answer
        if "error" in answer or not isinstance(answer.get("history"), list):
            continue
        opened = {**steps[0].args, "history": answer["history"]}
        yield [Step("open", opened)] + steps[k + 1:]


def candidates(steps: list[Step], overlays: list[dict] = ()) -> Iterator[list[Step]]:
    """Each one-step reduction of ``steps``, the biggest cuts first. An overlay (settings that keep little) comes
    with the history cut to its last few messages: on its own it is no smaller, but it opens the way to cuts the
    defaults forbid."""
    for i in range(len(steps) - 1, 0, -1):  # drop a whole step (never the open)
        yield steps[:i] + steps[i + 1:]
    opened = steps[0].args
    history = list(opened.get("history") or ())
    for i in range(len(history)):
        yield [Step("open", {**opened, "history": _without_message(history, i)})] + steps[1:]
    for i in range(len(history) - 1):  # a user/assistant exchange at once (alternation survives)
        yield [Step("open", {**opened, "history": _without_message(_without_message(history, i + 1), i)})] + steps[1:]
    for overlay in overlays:
        settings = dict(opened.get("settings") or {})
        if all(settings.get(k) == v for k, v in overlay.items()):
            continue
        yield [Step("open", {**opened, "settings": {**settings, **overlay}})] + steps[1:]
        for last in TAILS:  # the history's last few messages only, the rest cut at once
            if last < len(history):
                yield [Step("open", {**opened, "settings": {**settings, **overlay},
                                     "history": history[-last:]})] + steps[1:]
    if opened.get("system"):
        yield [Step("open", {k: v for k, v in opened.items() if k != "system"})] + steps[1:]
    if opened.get("settings"):
        for key in opened["settings"]:
            trimmed = {k: v for k, v in opened["settings"].items() if k != key}
            yield [Step("open", {**opened, "settings": trimmed})] + steps[1:]
    for i, step in enumerate(steps[1:], start=1):
        for key in ("replies", "summaries"):
            items = list(step.args.get(key) or ())
            for j in range(len(items) - 1, -1, -1):
                yield steps[:i] + [Step(step.op, {**step.args, key: items[:j] + items[j + 1:]})] + steps[i + 1:]
    for i, step in enumerate(steps[1:], start=1):  # halve the size of a scripted tool call
        for j, reply in enumerate(step.args.get("replies") or ()):
            for k, call in enumerate(reply.get("calls") or ()):
                smaller = _halved(call.get("args") or {})
                if smaller is not None:
                    args = copy.deepcopy(step.args)
                    args["replies"][j]["calls"][k]["args"] = smaller
                    yield steps[:i] + [Step(step.op, args)] + steps[i + 1:]
    for i, message in enumerate(history):  # halve a long text of the initial history
        if len(message.get("text") or "") > 16:
            shorter = dict(message, text=message["text"][: len(message["text"]) // 2])
            yield [Step("open", {**opened, "history": history[:i] + [shorter] + history[i + 1:]})] + steps[1:]


def minimize(runtime: Runtime, spec: str, provider: str, witness: Witness, judge: Judge, *,
             deadline: float | None = None, max_runs: int = MAX_RUNS, overlays: list[dict] = ()) -> tuple[Witness, int]:
    """The smallest witness of the same promise found by one-step reductions, and the replays it took."""
    best, runs, promise = witness, 0, witness.breach.promise
    allowed = _problems(witness.steps[0].args.get("history") or [], provider)
    tried: set[str] = set()
    improved = True
    while improved:
        improved = False
        for candidate in itertools.chain(candidates(best.steps, overlays), folded(best)):
            if _problems(candidate[0].args.get("history") or [], provider) - allowed:
                continue  # a cut that makes the initial history malformed is no witness of the runtime's
            if runs >= max_runs or (deadline is not None and time.monotonic() > deadline):
                return best, runs
            runs += 1
            found = replay(runtime, spec, provider, candidate, promise, judge)
            overlay = _new_overlay(best.steps[0], candidate[0], tried)
            if found is not None and (size(found) < size(best) or (overlay and size(found) <= size(best))):
                if overlay:
                    tried.add(overlay)  # an overlay that shrinks nothing yet is taken once, never again
                best, improved = found, True
                break
    return best, runs
