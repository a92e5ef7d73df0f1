"""The message-role rules of the major model providers, as data, and the check of one request against them.

A request is read as the provider reads it: a leading ``system`` message is set aside (the system prompt is a
separate field for every provider here); a summary message counts as a user turn; a run of ``tool`` messages
sharing one ``packed`` value (or, without that key, every consecutive ``tool`` message) is one user turn, the
way a runtime that packs results sends them.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rules:
    """One provider's rules. ``first_user``: the first message must be a user turn. ``alternate``: user and
    assistant turns must alternate (no two turns of one role in a row). ``calls_after_user``: an assistant turn
    holding calls must come right after a user turn (a tool-result turn counts). The id rules hold for every
    provider here: each tool result comes right after the assistant message holding its call (only results in
    between), every call has its result before the next assistant message, and a request never ends with an
    assistant message whose calls are unanswered. ``says`` is the provider's rule in words."""

    name: str
    first_user: bool
    alternate: bool
    calls_after_user: bool
    says: str


PROVIDERS: dict[str, Rules] = {r.name: r for r in (
    # Anthropic Messages API: the first message must use the user role; consecutive user (or assistant) turns are
    # combined into one turn by the API, so alternation is not an error; every tool_result block must answer a
    # tool_use block of the message right before it, and a tool_use must be answered in the very next message.
    Rules("anthropic", first_user=True, alternate=False, calls_after_user=False,
          says="first message from the user; each tool_result answers a tool_use of the message right before it; "
               "every tool_use answered in the next message (consecutive same-role turns are merged)"),
    # Amazon Bedrock Converse: "a conversation must alternate between user and assistant roles" and must start
    # with a user message; toolResult blocks travel in the user message right after the assistant's toolUse and
    # must answer every toolUse of it.
    Rules("bedrock", first_user=True, alternate=True, calls_after_user=False,
          says="starts with a user message and alternates user/assistant strictly (tool results are one user "
               "message); each toolUse answered by a toolResult in the next message"),
    # OpenAI Chat Completions: no role order is imposed, but a message with role 'tool' must respond to a
    # preceding assistant message with 'tool_calls', and an assistant message with 'tool_calls' must be
    # followed by tool messages answering each tool_call_id.
    Rules("openai", first_user=False, alternate=False, calls_after_user=False,
          says="tool messages respond to the preceding assistant tool_calls; every tool_call_id answered right "
               "after it"),
    # Google Gemini generateContent: a function call turn must come immediately after a user turn or after a
    # function response turn; a function response turn must come immediately after its function call turn, with
    # one response part per call part.
    Rules("gemini", first_user=False, alternate=False, calls_after_user=True,
          says="a function call turn comes right after a user or function response turn; the function response "
               "turn comes right after its call turn and answers every call"),
)}


def _turns(messages: list[dict]) -> list[tuple[str, int]]:
    """``(role, index of its first message)`` per turn: ``user`` or ``assistant``."""
    turns: list[tuple[str, int]] = []
    previous_tool: tuple | None = None  # the packed group of the previous message when it was a tool message
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "tool":
            group = ("packed", m["packed"]) if "packed" in m else ("run",)
            if previous_tool is not None and previous_tool == group:
                continue
            previous_tool = group
            turns.append(("user", i))
            continue
        previous_tool = None
        turns.append(("assistant" if role == "assistant" else "user", i))
    return turns


def problems(messages: list[dict], rules: Rules) -> list[tuple[int, str]]:
    """Every rule ``messages`` (one request, in neutral form) breaks: ``(message index, what is wrong)``."""
    messages = list(messages)
    if messages and messages[0].get("role") == "system":
        messages = messages[1:]
        offset = 1
    else:
        offset = 0
    found: list[tuple[int, str]] = []
    turns = _turns(messages)
    if rules.first_user and turns and (turns[0][0] != "user" or messages[0].get("role") == "tool"):
        found.append((offset, f"{rules.name}: the first message must be a user message"))
    if rules.alternate:
        for (a, _), (b, j) in zip(turns, turns[1:]):
            if a == b:
                found.append((offset + j, f"{rules.name}: two {b} turns in a row (roles must alternate)"))
    if rules.calls_after_user:
        for k, (role, j) in enumerate(turns):
            if role == "assistant" and messages[j].get("calls") and (k == 0 or turns[k - 1][0] != "user"):
                found.append((offset + j, f"{rules.name}: a call turn must come right after a user or tool-result "
                                          "turn"))
    open_calls: dict[str, int] = {}  # calls of the latest assistant message not answered yet
    holder: int | None = None
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "tool":
            cid = m.get("call_id")
            if cid in open_calls:
                del open_calls[cid]
            else:
                found.append((offset + i, (f"{rules.name}: tool result {cid!r} does not answer a call of the "
                                            "assistant message right before it")))
            continue
        if open_calls:
            found.append((offset + holder, (f"{rules.name}: call(s) {sorted(open_calls)} unanswered before the "
                                                "next message")))
        open_calls = {c.get("id"): i for c in m.get("calls") or ()} if role == "assistant" else {}
        holder = i
    if open_calls:
        found.append((offset + holder, f"{rules.name}: the request ends with unanswered call(s) {sorted(open_calls)}"))
    return found
