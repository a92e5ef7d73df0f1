"""The counterexample trace format (surfacecheck/trace.py): round-trip and PATH:LINE errors."""
from __future__ import annotations

import json

import pytest

from surfacecheck.core.trace import FORMAT, Step, Trace, TraceError, Violation, read_trace, write_trace

HEADER = {"format": FORMAT, "source": "verify", "level": "log", "runtime": "embedded", "seed": 7,
          "property": "lockstep-surface"}


def _trace() -> Trace:
    steps = (Step("reset", {}, "a new session"),
             Step("append", {"event": {"type": "user/message", "data": {"text": "héllo 🙂"}, "surfaceOp": "append"}}),
             Step("surface", {}))
    violation = Violation("lockstep-surface", "differs", 2, {"nodes": [0]}, {"nodes": []})
    return Trace("verify", "log", "lockstep-surface", steps, violation, "embedded:x", 7, "surfacecheck verify",
                 "2026-11-30T00:00:00Z", {"k": 1})


def test_round_trip_keeps_every_field(tmp_path):
    trace = _trace()
    path = write_trace(tmp_path / "deep" / "t.jsonl", trace)
    again = read_trace(path)
    assert again == trace
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["format"] == FORMAT
    assert [json.loads(line).get("step") for line in lines[1:4]] == [1, 2, 3]
    assert "violation" in json.loads(lines[-1])


def _write(tmp_path, records) -> str:
    path = tmp_path / "bad.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("records, line, reason", [
    ([], 1, "empty file"),
    (["{not json"], 1, "not JSON"),
    ([{"format": "other"}], 1, "not a trace header"),
    ([{**HEADER, "level": "nope"}], 1, "header level"),
    ([HEADER, {"step": 2, "op": "reset"}], 2, "step number 2, expected 1"),
    ([HEADER, {"step": 1, "op": 5}], 2, "op must be a string"),
    ([HEADER, {"step": 1, "op": "append", "args": []}], 2, "args must be an object"),
    ([HEADER, {"step": 1, "op": "reset"}, "[1]"], 3, "expected a JSON object"),
    ([HEADER, {"violation": {"property": "p"}}, {"step": 1, "op": "reset"}], 3, "after the violation"),
    ([HEADER, {"violation": {"property": "p"}}, {"violation": {"property": "p"}}], 3, "second violation"),
])
def test_malformed_lines_name_path_and_line(tmp_path, records, line, reason):
    path = _write(tmp_path, records)
    with pytest.raises(TraceError) as info:
        read_trace(path)
    assert str(info.value).startswith(f"{path}:{line}: ")
    assert reason in str(info.value)


def test_missing_file_and_binary_are_trace_errors(tmp_path):
    with pytest.raises(TraceError, match=":0: not a file"):
        read_trace(tmp_path / "nope.jsonl")
    binary = tmp_path / "b.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(TraceError, match="UTF-8"):
        read_trace(binary)
