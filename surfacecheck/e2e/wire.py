"""Two design promises judged on the WIRE: the provider requests the real runtime actually sent.

The scripted server records every request (``RunResult.requests``: ``{index, path, headers, body, compact,
turn, reply, status}``, ``body`` the OpenAI chat-completions JSON). The log scan (``promises.scan_findings``)
judges the session log through the model; this judges the bytes the provider received, so it depends on
neither the model nor the log reader:

* ``promise-pairing-by-id`` (seed §7; finding S7): in every non-compact request, every assistant
  ``tool_calls[].id`` has a later ``tool`` message with that ``tool_call_id``, and every ``tool`` message
  answers an earlier, still unanswered assistant tool call *by id* (a count that balances is not enough);
* ``promise-prompt-verbatim`` (seed §12; §15 G2b): every prompt the script sends (each turn's ``prompt``)
  appears verbatim as a user message in at least one non-compact request the server answered with 200. A
  prompt seen only by the summarizer (a compact request), or only in requests that failed (an overflow
  400), never reached the model verbatim. Judged only when the model answered some request after the
  prompt's turn began: a prompt followed by no answered request at all (the runtime gave up on the turn and
  the script ended) was not replaced by anything the model saw (:func:`unanswered_prompts`, noted).
* ``promise-runtime-context-never-lost`` / ``promise-runtime-context-one-request`` (seed §14; §15 G2 and its
  overflow variant): once a request has carried the runtime-context snapshot (a user message starting
  ``Current runtime context.``, dsh-system-prompt's rendering), every later non-compact request carries one
  too; a request without it breaks the first promise, two in a row the second (:func:`context_violations`).
  An e2e script's runtime context is constant (its config has one ``runtimeContext`` switch), so any
  snapshot is the current one.

:func:`wire_checks` returns one violation per request (pairing) or per turn (prompt): ``{promise, request,
turn, message, observed, expected}``; ``promises.wire_on`` classes each against ``properties/findings.json`` as
the log scan does.
"""
from __future__ import annotations

from typing import Any, Iterable

PAIRING = "promise-pairing-by-id"
PROMPT = "promise-prompt-verbatim"
CONTEXT_LOST = "promise-runtime-context-never-lost"
CONTEXT_WINDOW = "promise-runtime-context-one-request"
CONTEXT_PREFIX = "Current runtime context."


def _script_turns(script: Any) -> list[dict]:
    doc = script.to_json() if hasattr(script, "to_json") else script
    return list((doc or {}).get("turns") or [])


def _messages(request: dict) -> list[dict]:
    body = request.get("body")
    messages = body.get("messages") if isinstance(body, dict) else None
    return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []


def message_text(message: dict) -> str:
    """A message's text: its string content, or its text parts joined (OpenAI content-part arrays)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def carries_prompt(request: dict, prompt: str) -> bool:
    """Whether the request holds a user message whose text is exactly ``prompt`` (or a text part that is)."""
    for m in _messages(request):
        if m.get("role") != "user":
            continue
        content = m.get("content")
        parts = [p.get("text") for p in content if isinstance(p, dict)] if isinstance(content, list) else []
        if message_text(m) == prompt or prompt in parts:
            return True
    return False


def unpaired(messages: Iterable[dict]) -> tuple[list[str], list[dict]]:
    """``(unanswered call ids, orphan results)`` of one message list, matched by id in order: a ``tool``
    message answers the open assistant call with its ``tool_call_id``; an orphan is ``{position, id}``."""
    open_calls: dict[str, int] = {}
    order: list[str] = []
    orphans: list[dict] = []
    for position, m in enumerate(messages):
        if m.get("role") == "assistant":
            for call in m.get("tool_calls") or []:
                cid = str(call.get("id")) if isinstance(call, dict) else str(call)
                open_calls[cid] = open_calls.get(cid, 0) + 1
                order.append(cid)
        elif m.get("role") == "tool":
            cid = m.get("tool_call_id")
            if isinstance(cid, str) and open_calls.get(cid, 0) > 0:
                open_calls[cid] -= 1
            else:
                orphans.append({"position": position, "id": cid})
    unanswered = [cid for cid in dict.fromkeys(order) if open_calls.get(cid, 0) > 0]
    return unanswered, orphans


def _shape(messages: list[dict]) -> list[str]:
    """The request's messages in short: ``role`` plus the call ids / tool_call_id (what pairing reads)."""
    out = []
    for m in messages:
        role = str(m.get("role"))
        if role == "assistant" and m.get("tool_calls"):
            out.append("assistant(" + ",".join(str(c.get("id")) for c in m["tool_calls"] if isinstance(c, dict)) + ")")
        elif role == "tool":
            out.append(f"tool({m.get('tool_call_id')})")
        else:
            out.append(role)
    return out


def pairing_violations(requests: list[dict]) -> list[dict]:
    """Every non-compact request whose tool calls and results do not pair by id."""
    found = []
    for r in requests:
        if r.get("compact"):
            continue
        messages = _messages(r)
        unanswered, orphans = unpaired(messages)
        if not unanswered and not orphans:
            continue
        calls = sum(len(m.get("tool_calls") or []) for m in messages if m.get("role") == "assistant")
        results = sum(1 for m in messages if m.get("role") == "tool")
        found.append({
            "promise": PAIRING, "request": r.get("index"), "turn": r.get("turn"),
            "message": f"request {r.get('index')} sent call(s) {unanswered} with no later tool result and "
                       f"result(s) {[o['id'] for o in orphans]} answering no earlier call, by id "
                       f"({calls} calls, {results} results{': the counts balance' if calls == results else ''})",
            "observed": {"unanswered": unanswered, "orphans": orphans, "messages": _shape(messages)},
            "expected": {"unanswered": [], "orphans": []}})
    return found


def _answered_after(requests: list[dict], turn: int) -> list[dict]:
    """The non-compact requests answered with 200 from the prompt's turn on (the runner sends a turn's prompt
    after announcing the turn, so every request tagged with that turn or a later one comes after it)."""
    return [r for r in requests if not r.get("compact") and r.get("status") == 200
            and isinstance(r.get("turn"), int) and r["turn"] >= turn]


def unanswered_prompts(script: Any, requests: list[dict]) -> list[int]:
    """Turns whose prompt no answered request carries because no request was answered after it at all (the
    runtime gave up on the turn, e.g. an overflow whose recovery failed, and the script ended): the prompt was
    never replaced by anything the model saw, so these are not judged (noted by the caller)."""
    out = []
    for turn, spec in enumerate(_script_turns(script)):
        prompt = spec.get("prompt")
        if isinstance(prompt, str) and prompt and not _answered_after(requests, turn) and not any(
                not r.get("compact") and r.get("status") == 200 and carries_prompt(r, prompt) for r in requests):
            out.append(turn)
    return out


def prompt_violations(script: Any, requests: list[dict]) -> list[dict]:
    """Every scripted prompt that no answered (200) non-compact request carries verbatim although the model
    answered requests after it was entered (so those requests went without it: G2b's shape)."""
    found = []
    for turn, spec in enumerate(_script_turns(script)):
        prompt = spec.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            continue
        carrying = [r for r in requests if carries_prompt(r, prompt)]
        if any(not r.get("compact") and r.get("status") == 200 for r in carrying):
            continue
        answered = _answered_after(requests, turn)
        if not answered:
            continue  # nothing was answered after it: unanswered, not lost (unanswered_prompts)
        where = {"compact": [r.get("index") for r in carrying if r.get("compact")],
                 "failed": [{"request": r.get("index"), "status": r.get("status")}
                            for r in carrying if not r.get("compact") and r.get("status") != 200],
                 "answered_without_it": [r.get("index") for r in answered]}
        seen = ("only by the summarizer" if where["compact"] and not where["failed"] else
                "only in requests that failed" if where["failed"] and not where["compact"] else
                "only to the summarizer and in failed requests" if carrying else "in no request")
        found.append({
            "promise": PROMPT, "request": answered[0].get("index"), "turn": turn,
            "message": f"turn {turn}'s prompt ({len(prompt)} chars) was sent {seen}; the answered request(s) "
                       f"{where['answered_without_it'][:5]}{'...' if len(answered) > 5 else ''} after it went "
                       f"without it: the model never saw it verbatim",
            "observed": where, "expected": "a non-compact request answered with 200 carrying the prompt verbatim"})
    return found


def carries_context(request: dict) -> bool:
    """Whether the request holds a runtime-context snapshot (a user message in dsh-system-prompt's rendering)."""
    return any(m.get("role") == "user" and message_text(m).startswith(CONTEXT_PREFIX) for m in _messages(request))


def context_violations(requests: list[dict]) -> list[dict]:
    """The first request without the runtime context after one carried it (G2), and the first second one in a
    row (G2's overflow variant): at most one violation per promise per run."""
    found: dict[str, dict] = {}
    seen, missing = False, []
    for r in (r for r in requests if not r.get("compact")):
        if carries_context(r):
            seen, missing = True, []
            continue
        if not seen:
            continue
        missing.append(r.get("index"))
        for promise, count in ((CONTEXT_LOST, 1), (CONTEXT_WINDOW, 2)):
            if len(missing) == count and promise not in found:
                found[promise] = {
                    "promise": promise, "request": r.get("index"), "turn": r.get("turn"),
                    "message": f"request(s) {missing} went out without the runtime context, "
                               f"{len(missing)} in a row after request(s) that carried it",
                    "observed": {"without_context": list(missing)},
                    "expected": "every request carries it" if count == 1 else "at most one request in a row without it"}
    return list(found.values())


def wire_checks(script: Any, requests: list[dict]) -> list[dict]:
    """Every wire promise on the recorded requests: pairing (per request), the prompts (per turn), then the
    runtime context (per run)."""
    requests = [r for r in (requests or []) if isinstance(r, dict)]
    return pairing_violations(requests) + prompt_violations(script, requests) + context_violations(requests)


__all__ = ["PAIRING", "PROMPT", "CONTEXT_LOST", "CONTEXT_WINDOW", "wire_checks", "context_violations", "carries_context", "pairing_violations", "prompt_violations", "unanswered_prompts", "unpaired",
           "carries_prompt", "message_text"]
