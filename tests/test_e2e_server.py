"""The scripted model server alone (issue 8): the wire dsh 0.1.1-rc.1's adapter reads, without the runtime."""
from __future__ import annotations

import http.client
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from surfacecheck.e2e.server import (COMPACT_MARKER, CONTROL_PATH, FIXED_COMPLETION_TOKENS, FIXED_PROMPT_TOKENS,
                                     ScriptedServer, compact_json, span_chars, tool_command, utf16_len)

SYSTEM = {"role": "system", "content": "you are scripted"}
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


def script(**over) -> dict:
    doc = {"format": "surfacecheck-e2e-script/1", "name": "t", "config": {"contextWindow": 12345},
           "usage": "fixed", "turns": [
               {"prompt": "p0", "replies": [{"tool": {"output_chars": 37}}, {"overflow": True}, {"text": "a" * 150}]},
               {"prompt": "p1", "replies": [{"text": "first"}, {"text": "last"}], "compact": True}],
           "summaries": [{"outcome": "text", "ratio": 0.25}, {"outcome": "failure"}, {"outcome": "too-big"},
                         {"outcome": "text", "text": "exact"}]}
    doc.update(over)
    return doc


def post(server: ScriptedServer, body, *, path="/chat/completions", headers=None, timeout=5.0):
    """POST like the adapter does; returns (status, headers, raw body)."""
    conn = http.client.HTTPConnection("127.0.0.1", int(server.base_url.rsplit(":", 1)[1]), timeout=timeout)
    conn.request("POST", path, body=json.dumps(body),
                 headers={"content-type": "application/json", "authorization": "Bearer sk-secret",
                          **(headers or {})})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, data


def sse(data: bytes) -> list:
    """Parse an SSE body into its payloads; asserts the `data: [DONE]` terminator."""
    lines = [line for line in data.decode().split("\n") if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    return [json.loads(line[len("data: "):]) for line in lines[:-1]]


def request(messages=None):
    return {"model": "surfacecheck-scripted", "stream": True, "messages": messages or [SYSTEM, {"role": "user",
            "content": "hi"}], "tools": TOOLS}


@pytest.fixture
def server():
    with ScriptedServer(script()) as s:
        yield s


def test_binds_loopback_only(server):
    assert server.base_url.startswith("http://127.0.0.1:")
    assert server._httpd.server_address[0] == "127.0.0.1"


def test_tool_call_stream_prints_exactly_the_scripted_chars(server, tmp_path):
    status, headers, data = post(server, request())
    assert status == 200 and headers["content-type"] == "text/event-stream"
    payloads = sse(data)
    calls = [c for p in payloads for ch in p["choices"] for c in ch["delta"].get("tool_calls", [])]
    assert [(c["id"], c["function"]["name"]) for c in calls] == [("call-0-1", "bash")]
    command = json.loads(calls[0]["function"]["arguments"])["command"]
    out = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout == "x" * 37 and list(tmp_path.iterdir()) == []
    assert payloads[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert payloads[-1]["usage"] == {"prompt_tokens": FIXED_PROMPT_TOKENS, "completion_tokens":
                                     FIXED_COMPLETION_TOKENS, "total_tokens": FIXED_PROMPT_TOKENS + FIXED_COMPLETION_TOKENS}


def test_overflow_is_a_400_saying_maximum_context_length(server):
    post(server, request())
    status, _, data = post(server, request())
    error = json.loads(data)["error"]
    assert status == 400 and "maximum context length is 12345 tokens" in error["message"]
    assert error["code"] == "context_length_exceeded"


def test_text_streams_in_chunks_and_the_compact_turn_carries_the_marker(server):
    for _ in range(2):
        post(server, request())
    payloads = sse(post(server, request())[2])
    text = "".join(ch["delta"].get("content", "") for p in payloads for ch in p["choices"])
    assert text == "a" * 150 and len(payloads) > 3  # several content deltas
    assert payloads[-1]["choices"][0]["finish_reason"] == "stop"
    assert COMPACT_MARKER not in text
    server.set_turn(1)
    first = "".join(ch["delta"].get("content", "") for p in sse(post(server, request())[2]) for ch in p["choices"])
    last = "".join(ch["delta"].get("content", "") for p in sse(post(server, request())[2]) for ch in p["choices"])
    assert first == "first" and last == f"last {COMPACT_MARKER}"


def test_control_path_selects_the_turn(server):
    status, _, data = post(server, {"turn": 1}, path=CONTROL_PATH)
    assert status == 200 and json.loads(data) == {"turn": 1}
    payloads = sse(post(server, request())[2])
    assert "".join(ch["delta"].get("content", "") for p in payloads for ch in p["choices"]) == "first"
    assert server.requests[-1]["turn"] == 1


def test_summaries_follow_the_script_then_the_default(server):
    compact = {"x-deepseek-harness-compact": "1"}
    region = [SYSTEM, {"role": "user", "content": "u" * 400}, {"role": "assistant", "content": "b" * 200},
              {"role": "user", "content": "summarize"}]
    span = span_chars(region)
    assert span == utf16_len(compact_json(region[1:-1]))

    def summary():
        status, _, data = post(server, request(region), headers=compact)
        if status != 200:
            return status, None
        return status, "".join(ch["delta"].get("content", "") for p in sse(data) for ch in p["choices"])

    assert summary() == (200, summary_text := summary_text_of(span, 0.25))
    assert summary()[0] == 500
    status, big = summary()
    assert status == 200 and len(big) > span
    assert summary() == (200, "exact")
    assert summary() == (200, summary_text_of(span, 0.1))  # summaries ran out: the default ratio 0.1
    assert [r["compact"] for r in server.requests] == [True] * 5
    assert server.errors == [] and len(summary_text) == math.floor(span * 0.25)


def summary_text_of(span: int, ratio: float) -> str:
    from surfacecheck.e2e.server import filler
    return filler(max(1, math.floor(span * ratio)))


def test_realistic_usage_counts_utf16_units_of_messages_and_tools():
    doc = script(usage="realistic")
    with ScriptedServer(doc) as s:
        s.set_turn(0)
        messages = [SYSTEM, {"role": "user", "content": "emoji \U0001F600 counts twice"}]
        payloads = sse(post(s, request(messages))[2])
    units = utf16_len(compact_json(messages)) + utf16_len(compact_json(TOOLS))
    assert utf16_len("\U0001F600") == 2
    arguments = json.loads(s.requests[0]["reply"]["tool_calls"][0]["arguments"]) and \
        s.requests[0]["reply"]["tool_calls"][0]["arguments"]
    assert payloads[-1]["usage"]["prompt_tokens"] == math.ceil(units / 4)
    assert payloads[-1]["usage"]["completion_tokens"] == math.ceil(utf16_len(arguments) / 4)


def test_record_redacts_auth_and_keeps_everything_else(server):
    post(server, request(), headers={"x-deepseek-harness-session-id": "s1"})
    entry = server.requests[0]
    assert entry["index"] == 0 and entry["path"] == "/chat/completions" and entry["turn"] == 0
    assert entry["headers"]["authorization"] == "<redacted>" and entry["headers"]["x-deepseek-harness-session-id"] == "s1"
    assert entry["body"] == request() and entry["compact"] is False and entry["status"] == 200
    assert entry["reply"]["tool_calls"][0]["id"] == "call-0-1"
    assert "sk-secret" not in json.dumps(server.requests)


def test_exhausted_script_gets_a_clear_500_and_an_error(server):
    server.set_turn(1)
    post(server, request()), post(server, request())
    status, _, data = post(server, request())
    assert status == 500 and "script exhausted: turn 1 has 2 replies" in json.loads(data)["error"]["message"]
    assert server.errors == [server.requests[-1]["error"]] and "script exhausted" in server.errors[0]
    status, _, _ = post(server, request(), path="/v1/messages")
    assert status == 404 and "unexpected request path /v1/messages" in server.errors[-1]


def test_stop_answering_accepts_and_never_replies(server):
    server.stop_answering()
    with pytest.raises((socket.timeout, TimeoutError)):
        post(server, request(), timeout=0.5)
    assert len(server.requests) == 1 and server.requests[0]["status"] is None
    assert server.requests[0]["reply"] is None


def test_tool_command_is_exact_for_zero_and_large():
    for n in (0, 1, 5000):
        out = subprocess.run(["bash", "-c", tool_command(n)], capture_output=True, check=True)
        assert out.stdout == b"x" * n


def test_module_cli_serves_until_sigterm_and_records(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script()))
    url_file, record = tmp_path / "url", tmp_path / "requests.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "surfacecheck.e2e.server", str(path), "--url-file",
                             str(url_file), "--record", str(record)], stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(200):
            if url_file.exists():
                break
            time.sleep(0.05)
        base = url_file.read_text()
        assert base.startswith("http://127.0.0.1:")
        fake = type("S", (), {"base_url": base})()
        assert post(fake, request())[0] == 200
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    rows = [json.loads(line) for line in record.read_text().splitlines()]
    assert proc.returncode == 0 and [r["reply"]["tool_calls"][0]["id"] for r in rows] == ["call-0-1"]


def test_script_object_with_to_json_is_accepted():
    class Script:
        def to_json(self):
            return script(name="obj")
    assert ScriptedServer(Script()).script["name"] == "obj"
    with pytest.raises(TypeError):
        ScriptedServer(["not", "a", "script"])
    with pytest.raises(ValueError):
        ScriptedServer(script(usage="huge"))


def test_parallel_tool_calls_and_per_reply_usage():
    doc = script(turns=[{"prompt": "p", "replies": [{"tools": [{"output_chars": 3}, {"output_chars": 5}],
                                                     "usage": [900, 7]}]}])
    with ScriptedServer(doc) as s:
        payloads = sse(post(s, request())[2])
    calls = [c for p in payloads for ch in p["choices"] for c in ch["delta"].get("tool_calls", [])]
    assert [(c["index"], c["id"]) for c in calls] == [(0, "call-0-1"), (1, "call-0-2")]
    assert payloads[-1]["usage"]["prompt_tokens"] == 900 and payloads[-1]["usage"]["completion_tokens"] == 7


def test_driver_marker_matches_the_server_marker():
    """driver.py imports nothing from surfacecheck, so its copy of the marker is pinned here."""
    import importlib.util
    from pathlib import Path
    import surfacecheck.e2e as pkg
    spec = importlib.util.spec_from_file_location("e2e_driver", Path(pkg.__file__).with_name("driver.py"))
    driver = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(driver)
    assert driver.DEFAULT_MARKER == COMPACT_MARKER
