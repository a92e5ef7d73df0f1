"""Anthropic-Messages wire for dsh 0.2.x: the scripted model endpoint ``{base_url}/v1/messages``.

dsh 0.2.1rc2's DeepSeek adapter ("DeepSeek Messages", row ``llm-deepseek``) posts to
``messagesApiRoot(baseURL) + "/messages"`` (a base URL not ending in ``/v1`` gets ``/v1``) with ``x-api-key`` and
``anthropic-version: 2023-06-01`` headers, and reads server-sent events whose ``event:`` name must equal the data's
``type``: ``message_start`` (usage) - ``content_block_start`` / ``content_block_delta`` (``text_delta``,
``input_json_delta``) / ``content_block_stop`` - ``message_delta`` (``stop_reason``: end_turn | tool_use |
max_tokens; usage) - ``message_stop``. An error body ``{"type":"error","error":{type,message}}`` whose text
says "maximum context length" is classified CONTEXT_WINDOW_EXCEEDED (``isContextWindowExceededError``): the
failure overflow recovery listens for (spec 10.1).

Script semantics, lifecycle, record and control path are the shared ``server.LoopbackScriptedServer``'s
(per-turn replies announced on the control path, summaries in order, span chars, filler text); only the path,
the error bodies, span chars, usage and framing below are this wire's. Usage (spec 4.2, P = input + cache +
output): ``"fixed"`` reports the shared constants; ``"realistic"`` reports ``input_tokens = ceil(U / 4)`` with
``U`` = UTF-16 length of the compact JSON of ``system`` + ``messages`` + ``tools`` (the system prompt travels
outside ``messages`` on this wire), ``output_tokens = ceil(V / 4)`` of the produced text or tool arguments.
"""
from __future__ import annotations

import json
import math

from .server import SUMMARY_FAILURE, TEXT_CHUNK, LoopbackScriptedServer, compact_json, tool_command, utf16_len

MESSAGES_PATH = "/v1/messages"
OVERFLOW_MESSAGE = "prompt is too long: the request exceeds this model's maximum context length"


# -- framing (pure functions; unit-tested without a runtime) ---------------------------------------------------

def sse(events: list[dict]) -> bytes:
    """Frame events as SSE: ``event: <type>`` then ``data: <json>`` (the runtime checks the two agree)."""
    return "".join(f"event: {e['type']}\ndata: {compact_json(e)}\n\n" for e in events).encode()


def parse_sse(raw: bytes) -> list[dict]:
    """Decode an SSE body back into events; a frame whose event name differs from its type is an error."""
    events = []
    for frame in raw.decode().split("\n\n"):
        lines = [ln for ln in frame.splitlines() if ln.strip()]
        if not lines:
            continue
        name = next((ln[6:].strip() for ln in lines if ln.startswith("event:")), None)
        data = json.loads("".join(ln[5:].strip() for ln in lines if ln.startswith("data:")))
        if name is not None and name != data.get("type"):
            raise ValueError(f"SSE event name {name!r} != data type {data.get('type')!r}")
        events.append(data)
    return events


def message_events(*, text: str | None = None, calls: list[dict] | None = None, stop_reason: str,
                   usage: tuple[int, int], model: str, msg_id: str) -> list[dict]:
    """One streamed assistant message: a text block (in TEXT_CHUNK deltas) and/or tool_use blocks."""
    events: list[dict] = [{"type": "message_start", "message": {
        "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": usage[0], "output_tokens": 1}}}]
    index = 0
    if text is not None:
        events.append({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
        for at in range(0, len(text), TEXT_CHUNK):
            events.append({"type": "content_block_delta", "index": index,
                           "delta": {"type": "text_delta", "text": text[at:at + TEXT_CHUNK]}})
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    for call in calls or []:
        events.append({"type": "content_block_start", "index": index,
                       "content_block": {"type": "tool_use", "id": call["id"], "name": call["name"], "input": {}}})
        events.append({"type": "content_block_delta", "index": index,
                       "delta": {"type": "input_json_delta", "partial_json": call["arguments"]}})
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    events.append({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                   "usage": {"output_tokens": usage[1]}})
    events.append({"type": "message_stop"})
    return events


def error_body(kind: str, message: str) -> dict:
    """The Messages API error envelope."""
    return {"type": "error", "error": {"type": kind, "message": message}}


def overflow_error() -> tuple[int, dict]:
    """HTTP 400 that the 0.2.x adapter classifies CONTEXT_WINDOW_EXCEEDED (spec 10.1)."""
    return 400, error_body("invalid_request_error", OVERFLOW_MESSAGE)


def summary_failure() -> tuple[int, dict]:
    """HTTP 500: a failing summarizer call (spec 8.3 closes the bracket with an error)."""
    return 500, error_body("api_error", SUMMARY_FAILURE)


def span_chars(body: dict) -> int:
    """Span chars of a compaction request: its messages minus the final compaction instruction (the system
    prompt is not in ``messages`` on this wire)."""
    messages = body.get("messages") or []
    return utf16_len(compact_json(messages[:-1])) if len(messages) > 1 else 0


def realistic_usage(body: dict, produced: str) -> tuple[int, int]:
    """``"realistic"`` usage: ceil(U/4) over system + messages + tools; ceil(V/4) over what was produced."""
    units = sum(utf16_len(compact_json(body.get(k) if body.get(k) is not None else []))
                for k in ("system", "messages", "tools"))
    return math.ceil(units / 4), max(1, math.ceil(utf16_len(produced) / 4))


# -- the scripted server ---------------------------------------------------------------------------------------

class AnthropicScriptedServer(LoopbackScriptedServer):
    """Loopback-only Messages endpoint answering a ``surfacecheck-e2e-script/1`` script.

    Same interface and record as the shared ``ScriptedServer`` (both are ``LoopbackScriptedServer``s:
    ``start() -> base_url``, ``stop()``, ``stop_answering()``, ``requests``, ``errors``, ``set_turn``; control path
    ``POST CONTROL_PATH``); only the path, bodies, usage and framing below are this wire's."""

    wire = "anthropic"
    finish_reasons = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}

    def _serves(self, path: str) -> bool:
        return path.split("?")[0] == MESSAGES_PATH

    def _error_body(self, message: str) -> dict:
        return error_body("api_error", message)

    def _overflow(self) -> tuple[int, dict]:
        return overflow_error()

    def _summary_failure(self) -> tuple[int, dict]:
        return summary_failure()

    def _span_chars(self, body: dict) -> int:
        return span_chars(body)

    def _realistic_usage(self, body: dict, produced: str) -> tuple[int, int]:
        return realistic_usage(body, produced)

    def _bash_arguments(self, chars: int) -> dict:
        return {"description": f"print {chars} characters", "command": tool_command(chars)}

    def _message(self, body: dict, text: str | None, calls: list, finish: str,
                 usage: tuple[int, int]) -> tuple[dict, list]:
        events = message_events(text=text, calls=calls, stop_reason=finish, usage=usage,
                                model=str(body.get("model", "scripted")), msg_id=f"msg-sc-{len(self.requests) - 1}")
        return {"text": text, "tool_calls": calls, "stop_reason": finish,
                "usage": {"input_tokens": usage[0], "output_tokens": usage[1]}}, events

    def _frame(self, payloads: list) -> bytes:
        return sse(payloads)
