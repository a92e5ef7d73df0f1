"""Anthropic-Messages wire for dsh 0.2.x: the scripted model endpoint ``{base_url}/v1/messages``.

dsh 0.2.1rc2's DeepSeek adapter ("DeepSeek Messages", row ``llm-deepseek``) posts to
``messagesApiRoot(baseURL) + "/messages"`` (a base URL not ending in ``/v1`` gets ``/v1``) with ``x-api-key`` and
``anthropic-version: 2023-06-01`` headers, and reads server-sent events whose ``event:`` name must equal the data's
``type``: ``message_start`` (usage) - ``content_block_start`` / ``content_block_delta`` (``text_delta``,
``input_json_delta``) / ``content_block_stop`` - ``message_delta`` (``stop_reason``: end_turn | tool_use |
max_tokens; usage) - ``message_stop``. An error body ``{"type":"error","error":{type,message}}`` whose text
says "maximum context length" is classified CONTEXT_WINDOW_EXCEEDED (``isContextWindowExceededError``): the
failure overflow recovery listens for (spec 10.1).

Script semantics are the shared server's (``server.py``: per-turn replies announced on the control path,
summaries in order, span chars, filler text); only the framing differs. Usage (spec 4.2, P = input + cache +
output): ``"fixed"`` reports the shared constants; ``"realistic"`` reports ``input_tokens = ceil(U / 4)`` with
``U`` = UTF-16 length of the compact JSON of ``system`` + ``messages`` + ``tools`` (the system prompt travels
outside ``messages`` on this wire), ``output_tokens = ceil(V / 4)`` of the produced text or tool arguments.
"""
from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .server import (COMPACT_MARKER, CONTROL_PATH, DEFAULT_SUMMARY, FIXED_COMPLETION_TOKENS, FIXED_PROMPT_TOKENS, compact_json,
                     filler, script_json, tool_command, utf16_len)

MESSAGES_PATH = "/v1/messages"
OVERFLOW_MESSAGE = "prompt is too long: the request exceeds this model's maximum context length"
TEXT_CHUNK = 64


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
    return 500, error_body("api_error", "scripted summarizer failure")


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

class AnthropicScriptedServer:
    """Loopback-only Messages endpoint answering a ``surfacecheck-e2e-script/1`` script.

    Same interface and record as the shared ``ScriptedServer`` (``start() -> base_url``, ``stop()``,
    ``stop_answering()``, ``requests``, ``errors``, ``set_turn``; control path ``POST CONTROL_PATH``)."""

    wire = "anthropic"

    def __init__(self, script: Any) -> None:
        self.script = script_json(script)
        self.usage_mode = self.script.get("usage", "fixed")
        self.turns = list(self.script.get("turns", []))
        self.summaries = list(self.script.get("summaries", []))
        self.requests: list[dict] = []
        self.errors: list[str] = []
        self.turn, self._cursor, self._calls, self._summary_index = 0, 0, 0, 0
        self._lock = threading.Lock()
        self._silent = threading.Event()
        self._released = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None

    def start(self) -> str:
        handler = type("Handler", (_Handler,), {"owner": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, name="scripted-messages", daemon=True).start()
        return self.base_url

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def stop(self) -> None:
        self._released.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def stop_answering(self) -> None:
        self._silent.set()

    def __enter__(self) -> "AnthropicScriptedServer":
        self.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.stop()

    def set_turn(self, turn: int) -> None:
        with self._lock:
            self.turn, self._cursor, self._calls = int(turn), 0, 0

    def answer(self, path: str, headers: dict, body: Any) -> tuple[int, dict, list | None]:
        """Decide the reply ``(status, reply JSON, SSE events or None)`` and record the request."""
        with self._lock:
            compact = headers.get("x-deepseek-harness-compact") == "1"
            entry = {"index": len(self.requests), "path": path, "headers": _redact(headers), "body": body,
                     "compact": compact, "turn": self.turn}
            self.requests.append(entry)
            if path.split("?")[0] != MESSAGES_PATH:
                status, reply, events = self._fail(f"unexpected request path {path}", 404)
            elif not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                status, reply, events = self._fail(f"request {entry['index']}: body has no messages list", 400)
            elif compact:
                status, reply, events = self._summary(body)
            else:
                status, reply, events = self._step(body)
            entry["reply"], entry["status"] = reply, status
            return status, reply, events

    def _fail(self, message: str, status: int = 500) -> tuple[int, dict, None]:
        self.errors.append(message)
        return status, error_body("api_error", f"surfacecheck scripted server: {message}"), None

    def _step(self, body: dict):
        if self.turn >= len(self.turns):
            return self._fail(f"request for turn {self.turn}, but the script has {len(self.turns)} turns")
        replies = self.turns[self.turn].get("replies", [])
        if self._cursor >= len(replies):
            return self._fail(f"script exhausted: turn {self.turn} has {len(replies)} replies, "
                              f"request {len(self.requests) - 1} asked for reply {self._cursor + 1}")
        reply = replies[self._cursor]
        self._cursor += 1
        if reply.get("overflow"):
            status, err = overflow_error()
            return status, err, None
        if "text" in reply:
            text = str(reply["text"])
            last_text = max(i for i, r in enumerate(replies) if "text" in r)
            if self.turns[self.turn].get("compact") and self._cursor - 1 == last_text:
                text = f"{text} {COMPACT_MARKER}" if text else COMPACT_MARKER  # the /compact plugin's cue
            return self._stream(body, text=text, stop="end_turn", usage=reply.get("usage"))
        specs = reply.get("tools") or ([reply["tool"]] if "tool" in reply else None)
        if specs:
            calls = []
            for spec in specs:
                self._calls += 1
                chars = int(spec.get("output_chars", 0))
                calls.append({"id": f"call-{self.turn}-{self._calls}", "name": "bash", "arguments": compact_json(
                    {"description": f"print {chars} characters", "command": tool_command(chars)})})
            return self._stream(body, calls=calls, stop="tool_use", usage=reply.get("usage"))
        return self._fail(f"turn {self.turn}: unknown reply {compact_json(reply)}")

    def _summary(self, body: dict):
        index, self._summary_index = self._summary_index, self._summary_index + 1
        spec = self.summaries[index] if index < len(self.summaries) else DEFAULT_SUMMARY
        outcome, span = spec.get("outcome", "text"), span_chars(body)
        if outcome == "failure":
            status, err = summary_failure()
            return status, err, None
        ratio_text = filler(max(1, math.floor(span * float(spec.get("ratio", 0.1)))))
        if outcome == "text":
            return self._stream(body, text=spec.get("text", ratio_text), stop="end_turn", usage=spec.get("usage"))
        if outcome == "too-big":
            return self._stream(body, text=filler(2 * span + 64), stop="end_turn", usage=spec.get("usage"))
        if outcome == "empty":
            return self._stream(body, text=" ", stop="end_turn", usage=spec.get("usage"))
        if outcome == "truncated":
            return self._stream(body, text=spec.get("text") or ratio_text, stop="max_tokens", usage=spec.get("usage"))
        return self._fail(f"summary {index}: outcome {outcome!r} cannot be served over HTTP")

    def _stream(self, body: dict, *, text: str | None = None, calls: list | None = None, stop: str,
                usage: Any = None):
        produced = (text or "") + "".join(c["arguments"] for c in calls or [])
        if usage is not None:
            pair = (int(usage[0]), int(usage[1]))
        elif self.usage_mode == "realistic":
            pair = realistic_usage(body, produced)
        else:
            pair = (FIXED_PROMPT_TOKENS, FIXED_COMPLETION_TOKENS)
        events = message_events(text=text, calls=calls, stop_reason=stop, usage=pair,
                                model=str(body.get("model", "scripted")), msg_id=f"msg-sc-{len(self.requests) - 1}")
        reply = {"text": text, "tool_calls": calls or [], "stop_reason": stop,
                 "usage": {"input_tokens": pair[0], "output_tokens": pair[1]}}
        return 200, reply, events


def _redact(headers: dict) -> dict:
    return {k: ("<redacted>" if k in ("authorization", "x-api-key") else v) for k, v in headers.items()}


class _Handler(BaseHTTPRequestHandler):
    owner: AnthropicScriptedServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *_args) -> None:  # the record is the log
        pass

    def do_GET(self) -> None:
        self.owner.errors.append(f"unexpected GET {self.path}")
        self._send_json(404, error_body("not_found_error", f"no GET {self.path}"))

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        if self.path == CONTROL_PATH:
            self.owner.set_turn(int((body or {}).get("turn", 0)))
            self._send_json(200, {"turn": self.owner.turn})
            return
        status, reply, events = self.owner.answer(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        if self.owner._silent.is_set():
            self.owner._released.wait()  # accepted, never answered
            self.close_connection = True
            return
        if events is None:
            self._send_json(status, reply)
            return
        data = sse(events)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.owner.errors.append("client closed the stream early")

    def _send_json(self, status: int, doc: Any) -> None:
        data = compact_json(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
