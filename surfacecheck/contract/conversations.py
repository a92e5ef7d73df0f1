"""Hypothesis strategies for neutral conversations and the scripts of one request (``docs/conversation-protocol.md``).

:func:`histories` draws an initial history in the shapes compaction gets wrong: many turns, parallel tool calls,
consecutive tool-calling assistant messages, huge and tiny tool results, a call still pending at the tail, a
system message inside the list, earlier summaries. :func:`turn_scripts` draws one ``turn`` (the user's text, the
scripted model's replies, sometimes an overflow limit, the summarizer's script) and :func:`summarizer_scripts`
one summarizer script. Call ids and tags are not drawn: :func:`number_calls` gives them in order, so the ids of a
session never collide and a shrunk example keeps reading ``c1, c2, ...``.

Everything shrinks towards the small and plain: no history, one short text reply, a summarizer that answers.
"""
from __future__ import annotations

from hypothesis import strategies as st

from surfacecheck.runtime.conversation.peer import TOOL, tool_result

SIZES = (0, 12, 80, 400, 900, 3000, 12000)
"""Tool result sizes (characters): tiny to huge against triggers of hundreds to low thousands of tokens."""
USER_TEXTS = ("find the bug", "summarise the log", "what changed?", "fix the test", "read the config",
              "why is it slow?", "list the files")
REPLY_TEXTS = ("ok", "The bug is in the parser.", "Done: three files changed.", "I read it. " * 20)
SYSTEM_TEXTS = ("You are terse.", "You are a careful engineer. Always cite the file you read.")
SUMMARY_TEXTS = ("Here is a summary of the conversation so far: the user asked for a fix; fetch returned the log.",
                 "Here is a summary: nothing yet.")
SLOW_SECONDS = 0.05
"""The longest pause a slow summarizer takes (the search stays fast)."""

sizes = st.sampled_from(SIZES)
user_texts = st.sampled_from(USER_TEXTS)


def _call(size: int) -> dict:
    return {"name": TOOL, "args": {"size": size}}


def _calls(max_calls: int = 3):
    """1 to ``max_calls`` parallel ``fetch`` calls (unnumbered)."""
    return st.lists(sizes.map(_call), min_size=1, max_size=max_calls)


# blocks: short runs of messages that belong together; tool results stand for their calls (numbered later)
_user = user_texts.map(lambda t: [{"role": "user", "text": t}])
_text_reply = st.sampled_from(REPLY_TEXTS).map(lambda t: [{"role": "assistant", "text": t}])


def _answered(calls: list[dict]) -> list[dict]:
    return [{"role": "assistant", "text": "", "calls": calls}] + [{"role": "tool", "for": i} for i in range(len(calls))]


_tool_round = _calls().map(_answered)
_consecutive = st.lists(_calls(2), min_size=2, max_size=3).map(lambda rounds: [m for c in rounds for m in _answered(c)])
_summary = st.sampled_from(SUMMARY_TEXTS).map(lambda t: [{"role": "user", "text": t, "summary": True}])
_inner_system = st.sampled_from(SYSTEM_TEXTS).map(lambda t: [{"role": "system", "text": t}])
_exchange = st.tuples(_user, st.one_of(_text_reply, _tool_round, _consecutive), _text_reply | st.just([])).map(
    lambda parts: [m for part in parts for m in part])
_block = st.one_of(_exchange, _user, _text_reply, _tool_round, _consecutive, _summary, _inner_system)


def number_calls(messages: list[dict], first: int = 1) -> tuple[list[dict], int]:
    """``messages`` with every call given an id ``c<n>`` and a tag ``t<n>`` (from ``first`` on) and every tool
    result (``{"role": "tool", "for": i}``: the i-th call of the assistant message before it) its call id and
    text; returns them and the next number."""
    out, n, last_calls = [], first, []
    for message in messages:
        message = dict(message)
        if message.get("calls"):
            calls = []
            for call in message["calls"]:
                args = {**call.get("args", {}), "tag": f"t{n}"}
                calls.append({"id": f"c{n}", "name": call.get("name", TOOL), "args": args})
                n += 1
            message["calls"], last_calls = calls, calls
        if message.get("role") == "tool" and "for" in message:
            call = last_calls[message.pop("for")]
            message = {"role": "tool", "call_id": call["id"], "text": tool_result(call["args"])}
        out.append(message)
    return out, n


def histories(max_blocks: int = 6):
    """An initial history (neutral messages, numbered), often empty; a pending call at the tail sometimes."""
    body = st.lists(_block, max_size=max_blocks).map(lambda blocks: [m for b in blocks for m in b])
    tail = st.one_of(st.just([]), _calls().map(lambda calls: [{"role": "assistant", "text": "", "calls": calls}]))
    return st.tuples(body, tail).map(lambda parts: number_calls(parts[0] + parts[1])[0])


def summarizer_items():
    """One summarizer answer: a text (most often), a failure, an empty answer, rarely a slow text."""
    return st.one_of(
        st.sampled_from(("Summary: the user wants a fix; the log was read.", "Here is a summary: "
                         "the parser fails on empty input.")).map(lambda t: {"text": t}),
        st.just({"fail": "summarizer unavailable"}),
        st.just({"empty": True}),
        st.floats(0.0, SLOW_SECONDS).map(lambda s: {"slow": round(s, 3), "text": "Summary after a pause."}),
    )


def summarizer_scripts(max_items: int = 2):
    """A summarizer script: 0 to ``max_items`` answers (exhausted: ``summary #k``)."""
    return st.lists(summarizer_items(), max_size=max_items)


def replies(max_replies: int = 3):
    """The scripted model's replies (unnumbered): a text, or 1 to 3 ``fetch`` calls with sizes."""
    reply = st.one_of(st.sampled_from(REPLY_TEXTS).map(lambda t: {"text": t}), _calls().map(lambda c: {"calls": c}))
    return st.lists(reply, max_size=max_replies)


def turn_scripts():
    """One ``turn``'s args, calls unnumbered (:func:`number_replies`): user text, replies, the summarizer's script,
    sometimes ``overflow_above`` and rarely ``summarizer_window``."""
    return st.fixed_dictionaries(
        {"user": user_texts, "replies": replies(), "summaries": summarizer_scripts()},
        optional={"overflow_above": st.integers(200, 4000), "summarizer_window": st.integers(100, 3000)},
    )


def compact_scripts():
    """One direct ``compact``'s args: the summarizer's script, rarely a summarizer window."""
    return st.fixed_dictionaries({"summaries": summarizer_scripts()},
                                 optional={"summarizer_window": st.integers(100, 3000)})


def number_replies(args: dict, first: int) -> tuple[dict, int]:
    """``args`` with the replies' calls numbered from ``first`` (ids ``c<n>``, tags ``t<n>``); the next number."""
    out, n = [], first
    for reply in args.get("replies") or ():
        if reply.get("calls"):
            [message], n = number_calls([{"role": "assistant", "calls": reply["calls"]}], n)
            reply = {"calls": message["calls"]}
        out.append(reply)
    return {**args, "replies": out}, n
