"""The compaction contract's promises (``docs/contract.md``), each stated once: its id, its meaning (read from the
property catalogue, the one list of meanings) and its check, ``Session -> Iterable[Breach]``.

Every check reads only the recorded session (history in, breaches out); :func:`judge` runs them all in catalogue
order. A ``direct`` compaction (the ``compact`` op) is judged by every promise except ``under-threshold-noop`` and
``fits-after``: no trigger crossing stands behind it.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from surfacecheck.core.catalogue import PROPERTIES
from surfacecheck.runtime.conversation.peer import neutral_tokens

from . import shapes
from .roles import PROVIDERS, problems
from .session import Breach, Session
from .shapes import brief, compactions, is_summary, steps, text, walk

SECTION = "contract"
MAX_COMPACTIONS = 2
MAX_SUMMARIZER_CALLS = 3
"""Between two consecutive requests: at most this many compactions and summarizer calls (``contract-progress``)."""


def _orphans(messages: list[dict]) -> set[tuple[str, str]]:
    """``("result", id)`` for a tool result with no call of that id in an earlier assistant message; ``("call",
    id)`` for a call, in an assistant message before the last one, with no result anywhere after it."""
    found: set[tuple[str, str]] = set()
    called: set = set()
    last_assistant = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    for i, m in enumerate(messages):
        if m.get("role") == "tool" and m.get("call_id") not in called:
            found.add(("result", m.get("call_id")))
        if m.get("role") == "assistant":
            for call in m.get("calls") or ():
                called.add(call.get("id"))
                answered = any(n.get("role") == "tool" and n.get("call_id") == call.get("id") for n in messages[i + 1:])
                if i < last_assistant and not answered:
                    found.add(("call", call.get("id")))
    return found


def _unanswered(messages: list[dict]) -> set[tuple[str, str]]:
    """``("call", id)`` for every call with no result after it, the last assistant message's included: a call
    the input leaves open is the input's, whatever the runtime appends after it."""
    return {("call", call.get("id")) for i, m in enumerate(messages) if m.get("role") == "assistant"
            for call in m.get("calls") or ()
            if not any(n.get("role") == "tool" and n.get("call_id") == call.get("id") for n in messages[i + 1:])}


def _input_orphans(messages: list[dict]) -> set[tuple[str, str]]:
    return _orphans(messages) | _unanswered(messages)


def no_orphan_created(session: Session) -> Iterable[Breach]:
    for c in compactions(session):
        already = _input_orphans(list(c.step.get("before") or ()))
        after = list(c.step.get("after") or ())
        new = sorted(_orphans(after) - already)
        if new:
            yield Breach("contract-no-orphan-created", c.exchange.number,
                         f"a {c.cause} compaction leaves {len(new)} orphan(s): {new}",
                         expected="every tool result after its call and every earlier call answered",
                         observed=[f"{kind} {cid}" for kind, cid in new], messages=brief(after))
    for index, exchange in enumerate(session.exchanges):
        # an orphan a request carries is a breach unless the session's history had it before this exchange
        already = _input_orphans(session.history_before(index))
        for step in steps(exchange):
            new = sorted(_orphans(list(step.get("messages") or ())) - already) if step.get("kind") == "request" else ()
            if new:
                yield Breach("contract-no-orphan-created", exchange.number,
                             f"a request carries {len(new)} orphan(s): {new}",
                             expected="every tool result after its call and every earlier call answered",
                             observed=[f"{kind} {cid}" for kind, cid in new], messages=brief(step.get("messages")))


def tail_verbatim(session: Session) -> Iterable[Breach]:
    for c in compactions(session):
        before = list(c.step.get("before") or ())
        kept = shapes.kept(c.step)
        if len(kept) > len(before):
            yield Breach("contract-tail-verbatim", c.exchange.number,
                         f"a compaction keeps {len(kept)} messages of a history of {len(before)}",
                         expected=f"at most {len(before)} kept messages", observed=len(kept), messages=brief(kept))
            continue
        suffix = before[len(before) - len(kept):]
        for k, (was, now) in enumerate(zip(suffix, kept)):
            if not shapes.same_message(was, now):
                yield Breach("contract-tail-verbatim", c.exchange.number,
                             f"kept message {k} of the tail is not the message it keeps",
                             expected=was, observed=now, messages=brief([was, now]))
                break


def prompt_verbatim(session: Session) -> Iterable[Breach]:
    for exchange in session.exchanges:
        user = exchange.args.get("user")
        if exchange.op != "turn" or not isinstance(user, str):
            continue
        for step in steps(exchange):
            if step.get("kind") != "request":
                continue
            messages = list(step.get("messages") or ())
            if not any((m.get("role") == "user" and not is_summary(m) and text(m) == user)
                       or (is_summary(m) and user in text(m)) for m in messages):
                yield Breach("contract-prompt-verbatim", exchange.number,
                             "a request of the turn does not carry the turn's user text",
                             expected=user, observed=[text(m) for m in messages if m.get("role") == "user"],
                             messages=brief(messages))
                break


def system_kept(session: Session) -> Iterable[Breach]:
    if not session.system:
        return
    for exchange, _, step in walk(session):
        if step.get("kind") != "request":
            continue
        messages = list(step.get("messages") or ())
        in_list = bool(messages) and messages[0].get("role") == "system" and text(messages[0]) == session.system
        if step.get("system") != session.system and not (step.get("system") is None and in_list):
            yield Breach("contract-system-kept", exchange.number, "a request does not carry the system prompt",
                         expected=session.system,
                         observed={"system": step.get("system"), "first message": messages[0] if messages else None},
                         messages=brief(messages[:1]))
            return


def progress(session: Session) -> Iterable[Breach]:
    for c in compactions(session):
        if shapes.ends_in_typed_error(c.exchange):
            continue
        before, after = list(c.step.get("before") or ()), list(c.step.get("after") or ())
        sizes = [("neutral", neutral_tokens(before), neutral_tokens(after))]
        if isinstance(c.step.get("count_before"), int) and isinstance(c.step.get("count_after"), int):
            sizes.append(("runtime", c.step["count_before"], c.step["count_after"]))
        for count, was, now in sizes:
            if now >= was:
                yield Breach("contract-progress", c.exchange.number,
                             f"a {c.cause} compaction does not shrink the history ({count} count {was} -> {now})",
                             expected=f"{count} count below {was}", observed=now, messages=brief(after))
                break
    for exchange in session.exchanges:
        found, summarizer, reported, previous = 0, 0, False, None
        for step in steps(exchange):
            kind = step.get("kind")
            found += kind == "compaction"
            summarizer += kind == "summarizer"
            if not reported and (found > MAX_COMPACTIONS or summarizer > MAX_SUMMARIZER_CALLS):
                reported = True  # once per stretch between two requests
                yield Breach("contract-progress", exchange.number,
                             f"{found} compactions and {summarizer} summarizer calls between two requests",
                             expected=f"at most {MAX_COMPACTIONS} compactions and {MAX_SUMMARIZER_CALLS} "
                                      "summarizer calls", observed={"compactions": found, "summarizer": summarizer})
            if kind == "request":
                found, summarizer, reported = 0, 0, False
                size = neutral_tokens(list(step.get("messages") or ()), step.get("system"))
                if step.get("overflow") and previous is not None and size >= previous:
                    yield Breach("contract-progress", exchange.number,
                                 "an overflowing request is retried without shrinking",
                                 expected=f"a retry below {previous} tokens", observed=size,
                                 messages=brief(step.get("messages")))
                previous = size if step.get("overflow") else None


def fits_after(session: Session) -> Iterable[Breach]:
    trigger = session.trigger or {}
    for c in compactions(session):
        if c.cause not in ("size", "overflow") or shapes.typed_error_before_request(c.exchange, c.index):
            continue
        request = shapes.next_request(c.exchange, c.index)
        if request is None:
            continue
        if c.cause == "overflow" and request.get("overflow"):
            yield Breach("contract-fits-after", c.exchange.number,
                         "the request after an overflow compaction overflows again",
                         expected="a request that does not overflow", observed="overflow",
                         messages=brief(request.get("messages")))
        counted = trigger.get("kind") in ("tokens", "messages") and isinstance(trigger.get("value"), int)
        if c.cause == "size" and counted:
            size = shapes.request_size(session, request)
            if size > trigger["value"] or (trigger.get("reaches") and size == trigger["value"]):
                yield Breach("contract-fits-after", c.exchange.number,
                             f"the request after a size compaction is {size}, over the trigger {trigger['value']}",
                             expected=f"{'under' if trigger.get('reaches') else 'at most'} {trigger['value']} "
                                      f"({trigger['kind']})", observed=size,
                             messages=brief(request.get("messages")))


def summary_covers_removed(session: Session) -> Iterable[Breach]:
    for c in compactions(session):
        summaries = shapes.new_summaries(c.step)
        if not summaries:
            continue
        prompts = "\n".join(str(s.get("prompt") or "") for s in c.summarizer)
        missing = [m for m in shapes.removed(c.step) if text(m) and text(m) not in prompts]
        if missing:
            yield Breach("contract-summary-covers-removed", c.exchange.number,
                         f"{len(missing)} removed message(s) never reached the summarizer",
                         expected="every removed text inside the summarizer's input",
                         observed=[text(m)[:80] for m in missing], messages=brief(missing))
        outputs = c.outputs
        carried = [o for o in outputs if any(o in text(m) for m in summaries)]
        # a summary that carries no output at all is summarizer-used's breach; here: the last output, not a stale one
        if outputs and carried and not any(outputs[-1] in text(m) for m in c.step.get("after") or ()):
            yield Breach("contract-summary-covers-removed", c.exchange.number,
                         "the summarizer's last output is not in the history after the compaction",
                         expected=outputs[-1], observed=[text(m) for m in summaries], messages=brief(summaries))


def summarizer_used(session: Session) -> Iterable[Breach]:
    for c in compactions(session):
        outputs = c.outputs
        if not outputs and c.summarizer:
            continue  # a failed or empty summarizer is judged by progress and fits-after
        for m in shapes.new_summaries(c.step):
            if not any(o in text(m) for o in outputs):
                yield Breach("contract-summarizer-used", c.exchange.number,
                             "a summary message carries no summarizer output of its compaction",
                             expected=outputs or "a summarizer call behind the summary", observed=text(m),
                             messages=brief([m]))


def summarizer_input_fits(session: Session) -> Iterable[Breach]:
    trigger = session.trigger or {}
    for exchange in session.exchanges:
        window = exchange.args.get("summarizer_window")
        if window is None and trigger.get("kind") == "tokens":
            window = trigger.get("value")
        if not isinstance(window, int):
            continue
        for attempt in shapes.summarizer_attempts(exchange):
            last = attempt[-1]
            if isinstance(last.get("tokens"), int) and last["tokens"] > window:
                yield Breach("contract-summarizer-input-fits", exchange.number,
                             f"the summarizer is sent {last['tokens']} tokens, over its window of {window}",
                             expected=f"at most {window}", observed=last["tokens"])


def _framings(session: Session) -> tuple[set[str], set[str], dict[str, list[str]]]:
    """The summaries' texts, their framing prefixes (the summary text before the summarizer output) and, by
    summary text, the outputs it carries."""
    texts, prefixes, outputs = set(), set(), {}
    for c in compactions(session):
        for m in shapes.new_summaries(c.step):
            texts.add(text(m))
            for o in c.outputs:
                at = text(m).find(o)
                if at >= 0:
                    outputs.setdefault(text(m), []).append(o)
                if at > 0:
                    prefixes.add(text(m)[:at])
    return texts, prefixes, outputs


def summary_not_nested(session: Session) -> Iterable[Breach]:
    texts, prefixes, outputs = _framings(session)
    seen: set[str] = set()
    for exchange, _, step in walk(session):
        lists = [step.get("messages")] if step.get("kind") == "request" else \
            [step.get("after")] if step.get("kind") == "compaction" else []
        for messages in lists:
            for m in messages or ():
                body = text(m)
                if not is_summary(m) or body in seen:
                    continue
                frame = body  # the summary's own framing: its text with the summarizer's answers cut out
                for o in sorted(outputs.get(body, ()), key=len, reverse=True):
                    frame = frame.replace(o, "\0")
                # another summary inside this one: one that carries an output (a framing alone, left by an empty
                # answer, is every summary's prefix and wraps nothing)
                inner = [p for p in prefixes if frame.count(p) > 1] or \
                        [t for t in texts if t != body and t and t in frame and any(outputs.get(t, ()))]
                if inner:
                    seen.add(body)
                    yield Breach("contract-summary-not-nested", exchange.number,
                                 "a summary message wraps another summary",
                                 expected="one summary framing per summary message", observed=body[:200],
                                 messages=brief([m]))


def _input(session: Session, exchange) -> list[dict]:
    """What the caller handed the runtime for ``exchange``: the history before it, and a turn's user message."""
    index = session.exchanges.index(exchange)
    given = session.history_before(index)
    if exchange.op == "turn" and isinstance(exchange.args.get("user"), str):
        given = given + [{"role": "user", "text": exchange.args["user"]}]
    return given


def _introduced(found: list[tuple[int, str]], given: list[dict], rules) -> list[tuple[int, str]]:
    """The problems of a request beyond those its input already had (counted by what is wrong): a runtime is not
    blamed for a history it was handed."""
    left = Counter(what for _, what in problems(given, rules))
    kept = []
    for where, what in found:
        if left[what] > 0:
            left[what] -= 1
        else:
            kept.append((where, what))
    return kept


def roles_valid(session: Session) -> Iterable[Breach]:
    rules = PROVIDERS.get(session.provider)
    if rules is None:
        raise ValueError(f"unknown provider {session.provider!r}; known: {', '.join(PROVIDERS)}")
    for exchange, _, step in walk(session):
        if step.get("kind") != "request":
            continue
        messages = list(step.get("messages") or ())
        found = _introduced(problems(messages, rules), _input(session, exchange), rules)
        if found:
            where, what = found[0]
            yield Breach("contract-roles-valid", exchange.number, what, expected=rules.says,
                         observed=[f"message {i}: {w}" for i, w in found],
                         messages=brief(messages[max(0, where - 1):where + 2]))


def disabled_means_disabled(session: Session) -> Iterable[Breach]:
    if session.settings.get("compaction") is not False:
        return
    previous: list[dict] | None = None
    for index, exchange in enumerate(session.exchanges):
        before = session.history_before(index)
        for step in steps(exchange):
            if step.get("kind") == "compaction":
                yield Breach("contract-disabled-means-disabled", exchange.number,
                             f"a {step.get('cause')} compaction with compaction turned off",
                             expected="no compaction", observed=step.get("cause"), messages=brief(step.get("after")))
            if step.get("kind") == "request":
                messages = list(step.get("messages") or ())
                if previous is not None and not _extends(messages, previous):
                    yield Breach("contract-disabled-means-disabled", exchange.number,
                                 "a request does not extend the request before it",
                                 expected=f"the previous {len(previous)} messages first", observed=len(messages),
                                 messages=brief(messages))
                previous = messages
        history = list(exchange.answer.get("history") or ())
        if not _extends(history, before):
            yield Breach("contract-disabled-means-disabled", exchange.number,
                         "the history is rewritten with compaction turned off",
                         expected=f"the {len(before)} messages before first", observed=len(history),
                         messages=brief(history))


def _extends(messages: list[dict], prefix: list[dict]) -> bool:
    return len(messages) >= len(prefix) and all(shapes.same_message(a, b) for a, b in zip(prefix, messages))


def under_threshold_noop(session: Session) -> Iterable[Breach]:
    trigger = session.trigger
    for c in compactions(session):
        if c.cause != "size":
            continue
        if trigger is None:
            yield Breach("contract-under-threshold-noop", c.exchange.number,
                         "a size compaction in a session with no trigger", expected="no size compaction",
                         observed="size", messages=brief(c.step.get("after")))
            continue
        if not isinstance(trigger.get("value"), int) or trigger.get("kind") not in ("tokens", "messages"):
            continue
        count = c.step.get("count_before") if isinstance(c.step.get("count_before"), int) else None
        size = shapes.history_size(session, list(c.step.get("before") or ()), count)
        if size < trigger["value"] or (size == trigger["value"] and not trigger.get("reaches")):
            reaches = "at least" if trigger.get("reaches") else "over"
            yield Breach("contract-under-threshold-noop", c.exchange.number,
                         f"a size compaction at {size}, under the trigger {trigger['value']}",
                         expected=f"{reaches} {trigger['value']} ({trigger['kind']})", observed=size,
                         messages=brief(c.step.get("before")))


CHECKS: dict[str, Callable[[Session], Iterable[Breach]]] = {
    "contract-no-orphan-created": no_orphan_created,
    "contract-tail-verbatim": tail_verbatim,
    "contract-prompt-verbatim": prompt_verbatim,
    "contract-system-kept": system_kept,
    "contract-progress": progress,
    "contract-fits-after": fits_after,
    "contract-summary-covers-removed": summary_covers_removed,
    "contract-summarizer-used": summarizer_used,
    "contract-summarizer-input-fits": summarizer_input_fits,
    "contract-summary-not-nested": summary_not_nested,
    "contract-roles-valid": roles_valid,
    "contract-disabled-means-disabled": disabled_means_disabled,
    "contract-under-threshold-noop": under_threshold_noop,
}


@dataclass(frozen=True)
class Promise:
    """One promise: its catalogue id and meaning, and its check."""

    id: str
    meaning: str
    check: Callable[[Session], Iterable[Breach]]


PROMISES: tuple[Promise, ...] = tuple(Promise(p.id, p.meaning, CHECKS[p.id]) for p in PROPERTIES
                                      if p.section == SECTION)
"""Every promise, in catalogue order, its meaning the catalogue's."""
if {p.id for p in PROMISES} != set(CHECKS):
    raise ValueError("the contract's checks and the catalogue's contract section differ")


def judge(session: Session, only: Iterable[str] | None = None) -> list[Breach]:
    """Every breach of the session, promise by promise in catalogue order (``only`` these ids when given)."""
    wanted = None if only is None else set(only)
    return [b for p in PROMISES if wanted is None or p.id in wanted for b in p.check(session)]
