"""The scripted model server: the real dsh runtime's model endpoint, on loopback only.

It speaks the wire the pinned runtime's adapter (dsh 0.1.1-rc.1 ``llm-deepseek``) expects: OpenAI chat
completions, ``POST {base_url}/chat/completions``, streamed ``data:`` lines ending with ``data: [DONE]``.

What the script decides (``surfacecheck-e2e-script/1``, see ``docs/schemas/e2e-script.schema.json``):

* A turn's replies answer its non-compaction requests in order. The runner announces each turn on the
  control path ``POST /__surfacecheck__/turn {"turn": i}`` before it sends the prompt, so a turn that ends
  early (an overflow the runtime gives up on) cannot shift the next turn's replies.
  - ``{"text": T}``: ``T`` streamed in chunks, ``finish_reason: "stop"``; in a turn with ``"compact": true``
    the turn's last text reply ends with :data:`COMPACT_MARKER` (the plugin runs /compact on seeing it).
  - ``{"tool": {"output_chars": N}}`` (or ``{"tools": [...]}`` for parallel calls): ``bash`` tool calls, ids
    ``call-<turn>-<n>`` (n counts the turn's calls from 1), each printing exactly N chars inside the workspace.
  - ``{"overflow": true}``: HTTP 400 whose message says "maximum context length" (context_length_exceeded):
    the adapter maps it to CONTEXT_WINDOW_EXCEEDED (spec 10.1).
* A compaction request (header ``x-deepseek-harness-compact: 1``, spec 8.5) consumes ``summaries`` in order
  (default ``{"outcome": "text", "ratio": 0.1}``): ``text`` (``text`` given, or ``ratio`` x the span chars),
  ``failure`` (HTTP 500), ``too-big`` (2 x span chars + 64: never smaller than the span), ``empty`` (a
  whitespace-only summary), ``truncated`` (text with ``finish_reason: "length"``).
  *Span chars* = length of the compact JSON (``separators=(",", ":")``, ``ensure_ascii=False``) of the
  request's messages without the first (system) and the last (the compaction instruction).

Usage (spec 4.2: the token meter anchors on it):

* ``"fixed"``: ``prompt_tokens = 16``, ``completion_tokens = 8`` on every reply: far below the heuristic
  estimate ``E``, so every anchor is ``estimated`` and the model's baseline heuristic decides pressure.
* ``"realistic"``: ``prompt_tokens = ceil(U / 4)`` where ``U`` is the number of UTF-16 code units of the
  compact JSON of the request's ``messages`` plus that of its ``tools`` (``[]`` when absent);
  ``completion_tokens = ceil(V / 4)`` where ``V`` is the UTF-16 length of the reply's text, or of the tool
  calls' compact JSON arguments (at least 1). A reply may carry ``"usage": [prompt, completion]``.

Every request is recorded (:attr:`ScriptedServer.requests`); anything the script cannot answer gets a 500
with a clear message and an :attr:`ScriptedServer.errors` entry. Binds 127.0.0.1 only.

:class:`LoopbackScriptedServer` holds everything above that is not OpenAI framing (lifecycle, record, control
path, script cursor, summaries, usage mode); :class:`ScriptedServer` is its OpenAI wire and
``wire_anthropic.AnthropicScriptedServer`` its Anthropic-Messages wire (dsh 0.2.x).
"""
from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMPACT_MARKER = "[[surfacecheck:compact]]"
CONTROL_PATH = "/__surfacecheck__/turn"
FIXED_PROMPT_TOKENS = 16
FIXED_COMPLETION_TOKENS = 8
DEFAULT_SUMMARY = {"outcome": "text", "ratio": 0.1}
MODEL_ID = "surfacecheck-scripted"
TEXT_CHUNK = 64
SUMMARY_FAILURE = "scripted summarizer failure"
"""The message of a scripted summary ``failure`` (HTTP 500): the runtime closes the bracket with it (spec 8.3)."""


def script_json(script: Any) -> dict:
    """The script as its JSON document: a dict, or anything with ``to_json()`` (H8b's ``Script``)."""
    doc = script.to_json() if hasattr(script, "to_json") else script
    if not isinstance(doc, dict):
        raise TypeError(f"a script must be a dict or have to_json(), got {type(script).__name__}")
    return doc


def utf16_len(text: str) -> int:
    """JS string length (UTF-16 code units), the unit of every dsh length (spec 4.1)."""
    return len(text.encode("utf-16-le")) // 2


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def tool_command(chars: int) -> str:
    """A harmless bash command printing exactly ``chars`` characters (``x``) and nothing else."""
    return f"head -c {int(chars)} /dev/zero | tr '\\0' x"


def span_chars(messages: list) -> int:
    """Span chars of a compaction request: its messages minus system prompt and instruction."""
    return utf16_len(compact_json(messages[1:-1])) if len(messages) > 2 else 0


def filler(n: int) -> str:
    """Deterministic summary text of exactly ``n`` chars."""
    unit = "summary of the earlier conversation. "
    return (unit * (n // len(unit) + 1))[:n]


def _redact(headers: dict) -> dict:
    return {k: ("<redacted>" if k in ("authorization", "x-api-key") else v) for k, v in headers.items()}


class LoopbackScriptedServer:
    """What every wire's scripted server shares: the loopback HTTP lifecycle, the record, the control path and
    the script cursor (turn replies, summaries, usage mode). A wire subclass supplies only what differs: which
    path it serves, its error/overflow bodies, its span and realistic usage, and its message/SSE framing."""

    wire = ""
    finish_reasons: dict[str, str] = {}  # the script's finish ("stop" | "tool_calls" | "length") -> the wire's

    def __init__(self, script: Any, record_path: str | None = None) -> None:
        self.script = script_json(script)
        self.usage_mode = self.script.get("usage", "fixed")
        if self.usage_mode not in ("fixed", "realistic"):
            raise ValueError(f"usage must be 'fixed' or 'realistic', got {self.usage_mode!r}")
        self.turns = list(self.script.get("turns", []))
        self.summaries = list(self.script.get("summaries", []))
        self.requests: list[dict] = []
        self.record_path = record_path  # append each answered request here as it happens (isolated runs)
        self.errors: list[str] = []
        self.turn = 0
        self._cursor = 0
        self._calls = 0
        self._summary_index = 0
        self._lock = threading.Lock()
        self._silent = threading.Event()
        self._released = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> str:
        """Bind 127.0.0.1 on a free port, serve in a thread, return the base URL (no trailing slash)."""
        handler = type("Handler", (_Handler,), {"owner": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"scripted-{self.wire}", daemon=True)
        self._thread.start()
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
        """From now on accept every request and never reply (the hang test)."""
        self._silent.set()

    def __enter__(self) -> "LoopbackScriptedServer":
        self.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.stop()

    # -- the script ------------------------------------------------------------------------------
    def set_turn(self, turn: int) -> None:
        with self._lock:
            self.turn, self._cursor, self._calls = int(turn), 0, 0

    def answer(self, path: str, headers: dict, body: Any) -> tuple[int, Any, list | None]:
        """Decide the reply: ``(status, reply JSON, SSE payloads or None)``; records the request."""
        with self._lock:
            compact = headers.get("x-deepseek-harness-compact") == "1"
            entry = {"index": len(self.requests), "path": path, "headers": _redact(headers), "body": body,
                     "compact": compact, "turn": self.turn}
            self.requests.append(entry)
            errors_before = len(self.errors)
            if not self._serves(path):
                status, reply, sse = self._fail(f"unexpected request path {path}", 404)
            elif not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                status, reply, sse = self._fail(f"request {entry['index']}: body has no messages list", 400)
            elif compact:
                status, reply, sse = self._summary(body)
            else:
                status, reply, sse = self._step(body)
            if self._silent.is_set():
                reply, status = None, None  # accepted, never answered
            entry["reply"], entry["status"] = reply, status
            if len(self.errors) > errors_before:
                entry["error"] = self.errors[-1]
            if self.record_path:
                with open(self.record_path, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(entry) + "\n")
            return status, reply, sse

    def _fail(self, message: str, status: int = 500) -> tuple[int, Any, None]:
        self.errors.append(message)
        return status, self._error_body(f"surfacecheck scripted server: {message}"), None

    def _step(self, body: dict) -> tuple[int, Any, list | None]:
        if self.turn >= len(self.turns):
            return self._fail(f"request for turn {self.turn}, but the script has {len(self.turns)} turns")
        turn = self.turns[self.turn]
        replies = turn.get("replies", [])
        if self._cursor >= len(replies):
            return self._fail(f"script exhausted: turn {self.turn} has {len(replies)} replies, "
                              f"request {len(self.requests) - 1} asked for reply {self._cursor + 1}")
        index, self._cursor = self._cursor, self._cursor + 1
        reply = replies[index]
        if reply.get("overflow"):
            return (*self._overflow(), None)
        if "text" in reply:
            text = str(reply["text"])
            last_text = max(i for i, r in enumerate(replies) if "text" in r)
            if turn.get("compact") and index == last_text:
                text = f"{text} {COMPACT_MARKER}" if text else COMPACT_MARKER  # the /compact plugin's cue
            return self._stream(body, text=text, finish="stop", usage=reply.get("usage"))
        specs = reply.get("tools") or ([reply["tool"]] if "tool" in reply else None)
        if specs:
            calls = []
            for spec in specs:
                self._calls += 1
                chars = int(spec.get("output_chars", 0))
                calls.append({"id": f"call-{self.turn}-{self._calls}", "name": "bash",
                              "arguments": compact_json(self._bash_arguments(chars))})
            return self._stream(body, calls=calls, finish="tool_calls", usage=reply.get("usage"))
        return self._fail(f"turn {self.turn} reply {index}: unknown reply {compact_json(reply)}")

    def _summary(self, body: dict) -> tuple[int, Any, list | None]:
        index = self._summary_index
        self._summary_index += 1
        spec = self.summaries[index] if index < len(self.summaries) else DEFAULT_SUMMARY
        outcome = spec.get("outcome", "text")
        span = self._span_chars(body)
        if outcome == "failure":
            return (*self._summary_failure(), None)
        if outcome == "text":
            text = spec["text"] if "text" in spec else filler(max(1, math.floor(span * float(spec.get("ratio", 0.1)))))
        elif outcome == "too-big":
            text = filler(2 * span + 64)
        elif outcome == "empty":
            text = " "
        elif outcome == "truncated":
            text = spec.get("text") or filler(max(1, math.floor(span * float(spec.get("ratio", 0.1)))))
            return self._stream(body, text=text, finish="length", usage=spec.get("usage"))
        else:
            return self._fail(f"summary {index}: outcome {outcome!r} cannot be served over HTTP")
        return self._stream(body, text=text, finish="stop", usage=spec.get("usage"))

    def _stream(self, body: dict, *, text: str | None = None, calls: list | None = None,
                finish: str, usage: Any = None) -> tuple[int, Any, list]:
        """A 200 streamed reply: usage is the reply's own pair, the fixed constants, or the wire's estimate."""
        calls = calls or []
        produced = (text or "") + "".join(call["arguments"] for call in calls)
        if usage is not None:
            pair = (int(usage[0]), int(usage[1]))
        elif self.usage_mode == "fixed":
            pair = (FIXED_PROMPT_TOKENS, FIXED_COMPLETION_TOKENS)
        else:
            pair = self._realistic_usage(body, produced)
        reply, payloads = self._message(body, text, calls, self.finish_reasons.get(finish, finish), pair)
        return 200, reply, payloads

    # -- what a wire supplies --------------------------------------------------------------------
    def _serves(self, path: str) -> bool:
        raise NotImplementedError

    def _error_body(self, message: str) -> dict:
        raise NotImplementedError

    def _overflow(self) -> tuple[int, dict]:
        """The HTTP error the wire's adapter classifies CONTEXT_WINDOW_EXCEEDED (spec 10.1)."""
        raise NotImplementedError

    def _summary_failure(self) -> tuple[int, dict]:
        raise NotImplementedError

    def _span_chars(self, body: dict) -> int:
        raise NotImplementedError

    def _realistic_usage(self, body: dict, produced: str) -> tuple[int, int]:
        raise NotImplementedError

    def _bash_arguments(self, chars: int) -> dict:
        return {"command": tool_command(chars), "description": f"print {chars} characters"}

    def _message(self, body: dict, text: str | None, calls: list, finish: str,
                 usage: tuple[int, int]) -> tuple[dict, list]:
        """One streamed assistant message: ``(reply record, SSE payloads)``."""
        raise NotImplementedError

    def _frame(self, payloads: list) -> bytes:
        """The SSE body for ``payloads``."""
        raise NotImplementedError


class ScriptedServer(LoopbackScriptedServer):
    """One scripted conversation's model endpoint (contract: ``ScriptedServer(script, wire="openai")``)."""

    def __init__(self, script: Any, wire: str = "openai", record_path: str | None = None) -> None:
        if wire != "openai":
            raise ValueError(f"wire {wire!r} is not served here (0.1.1rc1 speaks 'openai')")
        self.wire = wire
        super().__init__(script, record_path)

    def _serves(self, path: str) -> bool:
        return path.endswith("/chat/completions")

    def _error_body(self, message: str) -> dict:
        return {"error": {"message": message, "type": "surfacecheck_script_error", "code": "script_error"}}

    def _overflow(self) -> tuple[int, dict]:
        window = (self.script.get("config") or {}).get("contextWindow", 0)
        return 400, {"error": {
            "message": f"This model's maximum context length is {window} tokens. However, you requested "
                       f"more tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error", "param": None, "code": "context_length_exceeded"}}

    def _summary_failure(self) -> tuple[int, dict]:
        return 500, {"error": {"message": SUMMARY_FAILURE, "type": "server_error",
                               "code": "scripted_failure"}}

    def _span_chars(self, body: dict) -> int:
        return span_chars(body["messages"])

    def _realistic_usage(self, body: dict, produced: str) -> tuple[int, int]:
        units = utf16_len(compact_json(body.get("messages", []))) + utf16_len(compact_json(body.get("tools") or []))
        return math.ceil(units / 4), max(1, math.ceil(utf16_len(produced) / 4))

    def _message(self, body: dict, text: str | None, calls: list, finish: str,
                 usage: tuple[int, int]) -> tuple[dict, list]:
        base = {"id": f"chatcmpl-sc-{len(self.requests) - 1}", "object": "chat.completion.chunk",
                "created": 0, "model": body.get("model", MODEL_ID)}
        payloads = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                          "finish_reason": None}]}]
        if text is not None:
            for at in range(0, len(text), TEXT_CHUNK):
                payloads.append({**base, "choices": [{"index": 0, "delta": {"content": text[at:at + TEXT_CHUNK]},
                                                      "finish_reason": None}]})
        for n, call in enumerate(calls):
            payloads.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [{
                "index": n, "id": call["id"], "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]}}]}, "finish_reason": None}]})
        tokens = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": usage[0] + usage[1]}
        payloads.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": tokens})
        return {"text": text, "tool_calls": calls, "finish_reason": finish, "usage": tokens}, payloads

    def _frame(self, payloads: list) -> bytes:
        return b"".join(b"data: " + compact_json(p).encode() + b"\n\n" for p in payloads) + b"data: [DONE]\n\n"


class _Handler(BaseHTTPRequestHandler):
    owner: LoopbackScriptedServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *_args) -> None:  # keep stderr quiet: the record is the log
        pass

    def do_GET(self) -> None:
        status, reply, _ = self.owner._fail(f"unexpected GET {self.path}", 404)
        self._send(status, "application/json", compact_json(reply).encode())

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        if self.path == CONTROL_PATH:
            self.owner.set_turn(int((body or {}).get("turn", 0)))
            self._send(200, "application/json", compact_json({"turn": self.owner.turn}).encode())
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        status, reply, sse = self.owner.answer(self.path, headers, body)
        if status is None:
            self.owner._released.wait()  # accepted, never answered
            self.close_connection = True
        elif sse is None:
            self._send(status, "application/json", compact_json(reply).encode())
        elif not self._send(status, "text/event-stream", self.owner._frame(sse), {"Cache-Control": "no-cache"}):
            self.owner.errors.append("client closed the stream early")

    def _send(self, status: int, content_type: str, data: bytes, extra: dict | None = None) -> bool:
        """Send one whole response and close the connection; False when the client had gone."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return False
        return True


def main(argv: list[str] | None = None) -> int:
    """``python -m surfacecheck.e2e.server SCRIPT.json --url-file F --record R``: serve until SIGTERM.

    Used by isolated runs, where the server must live inside the runtime's network namespace.
    """
    import argparse
    import signal
    import sys

    parser = argparse.ArgumentParser(prog="python -m surfacecheck.e2e.server", description=main.__doc__)
    parser.add_argument("script")
    parser.add_argument("--url-file", required=True)
    parser.add_argument("--record", required=True)
    args = parser.parse_args(argv)
    with open(args.script, encoding="utf-8") as handle:
        server = ScriptedServer(json.load(handle), record_path=args.record)
    open(args.record, "w").close()
    server.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with open(args.url_file + ".tmp", "w", encoding="utf-8") as handle:
        handle.write(server.base_url)
    import os
    os.replace(args.url_file + ".tmp", args.url_file)
    stop.wait()
    server.stop()
    for error in server.errors:
        print(f"scripted server: {error}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
