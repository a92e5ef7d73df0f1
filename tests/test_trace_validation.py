"""Nothing passes unchecked: a trace is validated line by line before it runs, and a bad one is exit 2 with
``PATH:LINE: reason`` (never a verdict about a runtime, never a traceback).

The three shapes a new user met first (an unknown op, a header with no steps, an ``event`` that is a number) are
pinned exactly; Hypothesis then breaks a valid trace one field at a time (header fields, step number, op, args,
event, label, the violation line; a wrong type, a field missing, extra junk, a truncated line, a line that is not
JSON) and ``surfacecheck replay`` must refuse each at the line it broke. Every committed trace must still read.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from surfacecheck.cli import main
from surfacecheck.core.trace import FORMAT, Trace, TraceError, write_trace
from surfacecheck.properties.trace_check import read_valid_trace

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "surfacecheck"
HEADER = {"format": FORMAT, "source": "verify", "level": "log", "runtime": "model", "seed": 3,
          "property": "lockstep-result", "command": "surfacecheck verify", "created": "2026-01-01T00:00:00Z",
          "notes": {"why": "a test"}}
USER = {"type": "user/message", "surfaceOp": "append", "time": 1,
        "data": {"id": "u1", "role": "user", "content": [{"type": "text", "text": "abcd"}], "source": {"kind": "user"}}}
STEPS = [{"step": 1, "op": "reset", "args": {}, "label": "a new session"},
         {"step": 2, "op": "append", "args": {"event": USER}, "label": "a prompt"},
         {"step": 3, "op": "surface", "args": {}},
         {"step": 4, "op": "select_range", "args": {"retain_tokens": 10}}]
VIOLATION = {"violation": {"property": "lockstep-result", "step": 2, "message": "differs",
                           "expected": {"seq": 0}, "observed": {"seq": 1}}}
VALID = [HEADER, *STEPS, VIOLATION]


def _write(path: Path, records: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


def _replay(capsys, path: Path, *extra: str) -> tuple[int, str, str]:
    code = main(["replay", str(path), *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- the three a new user met -----------------------------------------------------------------------------------
THREE = {
    "unknown-op": ([HEADER, {"step": 1, "op": "frobnicate", "args": {}}], 2, "unknown op 'frobnicate'"),
    "no-steps": ([HEADER], 1, "no steps: a trace that runs nothing proves nothing"),
    "event-a-number": ([HEADER, STEPS[0], {"step": 2, "op": "append", "args": {"event": 5}}], 3,
                       "event: 5 is not of type 'object'"),
}


@pytest.mark.parametrize("name", THREE)
def test_replay_refuses_what_a_new_user_met_first(tmp_path, capsys, name):
    records, line, reason = THREE[name]
    path = _write(tmp_path / f"{name}.jsonl", records)
    code, out, err = _replay(capsys, path)
    assert code == 2
    assert err.startswith(f"surfacecheck replay: error: {path}:{line}: ") and reason in err
    assert "Traceback" not in err and "fixed" not in out and "AttributeError" not in out + err
    code, out, err = _replay(capsys, path, "--json")
    doc = json.loads(out)  # exactly one JSON document
    assert code == 2 and doc["verdict"] == "error" and doc["exit_code"] == 2
    assert doc["error"].startswith(f"{path}:{line}: ") and reason in doc["error"]


def test_the_valid_trace_replays(tmp_path, capsys):
    path = _write(tmp_path / "ok.jsonl", VALID)
    assert read_valid_trace(path).steps[1].args == {"event": USER}
    code, out, _err = _replay(capsys, path, "--json")
    assert code in (0, 1) and json.loads(out)["verdict"] in ("fixed", "failing", "failing-differently")


def test_an_e2e_bundle_trace_keeps_its_own_shape(tmp_path):
    """An e2e bundle's trace records the runtime's log, so it may have no steps; its property is the bundle's."""
    from surfacecheck.e2e.bundle import PROPERTY_AGREEMENT

    path = write_trace(tmp_path / "trace.jsonl", Trace("e2e", "log", PROPERTY_AGREEMENT, (), None, "dsh-1",
                                                        notes={"script": "script.json"}))
    assert read_valid_trace(path).notes["script"] == "script.json"
    bad = _write(tmp_path / "bad.jsonl", [{**json.loads(path.read_text().splitlines()[0]), "property": "x"}])
    with pytest.raises(TraceError, match=r":1: header property 'x': an e2e trace"):
        read_valid_trace(bad)


# -- every committed trace reads ----------------------------------------------------------------------------------
COMMITTED = sorted([*PACKAGE.glob("properties/regressions/*.jsonl"), *PACKAGE.glob("properties/findings/**/*.jsonl"),
                    *(ROOT / "runtimes" / "dsh" / "traces").glob("*.jsonl")])


def test_there_are_committed_traces():
    assert len(COMMITTED) >= 50


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_trace_is_valid(path):
    trace = read_valid_trace(path)
    assert trace.steps and trace.violation is not None


def test_every_reader_of_traces_validates():
    """Only the checked reader calls core's structural ``read_trace``; every other module reads through it."""
    offenders = []
    for module in PACKAGE.rglob("*.py"):
        if module.name == "trace_check.py" or module.parent.name == "core" and module.name == "trace.py":
            continue
        text = module.read_text(encoding="utf-8")
        if "read_trace" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module == "surfacecheck.core.trace" \
                    and any(alias.name == "read_trace" for alias in node.names):
                offenders.append(str(module.relative_to(ROOT)))
    assert offenders == []


# -- any one field broken: refused at its line ----------------------------------------------------------------------
JUNK = ("junk", 1)
MISSING = object()
HEADER_BAD = {
    "format": [5, "surfacecheck-trace/2", None, MISSING], "source": ["nope", 3, None, MISSING],
    "level": ["nope", [], MISSING], "property": [7, "", "no-such-property", MISSING],
    "runtime": [5, "", []], "seed": ["x", 1.5, True], "command": [5, {}], "created": [5, []], "notes": [5, "x", []],
}
STEP_BAD = {
    "step": [0, 99, "1", True, None, MISSING], "op": ["frobnicate", "hello", 5, None, MISSING],
    "args": [5, [], "x", None], "label": [5, []],
}
EVENT_BAD = [5, "x", [], None, MISSING, {}, {**USER, "type": 5}, {**USER, "junk": 1}, {**USER, "time": "noon"}]
VIOLATION_BAD = {"property": [5, "", "no-such-property", MISSING], "message": [5, []], "step": ["2", 1.5, -1, 99]}


def _set(record: dict, key: str, value) -> dict:
    out = dict(record)
    if value is MISSING:
        out.pop(key, None)
    else:
        out[key] = value
    return out


@st.composite
def broken_traces(draw) -> tuple[list, int, str]:
    """A copy of :data:`VALID` with one thing wrong; returns its lines, the (1-based) line broken and what."""
    records = [dict(r) for r in VALID]
    kind = draw(st.sampled_from(["header", "step", "args", "event", "violation", "junk", "truncated", "not-json",
                                 "no-steps"]))
    if kind == "no-steps":
        return [records[0], records[-1]], 2, kind
    index = 0 if kind == "header" else len(records) - 1 if kind == "violation" else \
        draw(st.integers(0, len(records) - 1)) if kind in ("junk", "truncated", "not-json") else \
        2 if kind == "event" else draw(st.integers(1, len(STEPS)))
    record = records[index]
    if kind == "header":
        key = draw(st.sampled_from(sorted(HEADER_BAD)))
        records[index] = _set(record, key, draw(st.sampled_from(HEADER_BAD[key])))
    elif kind == "step":
        key = draw(st.sampled_from(sorted(STEP_BAD)))
        records[index] = _set(record, key, draw(st.sampled_from(STEP_BAD[key])))
    elif kind == "args":
        records[index] = {**record, "args": {**record["args"], "junk": draw(st.sampled_from([1, "x", None]))}}
    elif kind == "event":
        records[index] = {**record, "args": _set(record["args"], "event", draw(st.sampled_from(EVENT_BAD)))}
    elif kind == "violation":
        if draw(st.booleans()):
            key = draw(st.sampled_from(sorted(VIOLATION_BAD)))
            records[index] = {"violation": _set(record["violation"], key, draw(st.sampled_from(VIOLATION_BAD[key])))}
        else:
            records[index] = draw(st.sampled_from([{"violation": 5}, {**record, "junk": 1},
                                                   {"violation": {**record["violation"], "junk": 1}}]))
    elif kind == "junk":
        records[index] = {**record, draw(st.sampled_from(["junk", "Step", "extra"])): JUNK[1]}
    elif kind == "truncated":
        text = json.dumps(record)
        records[index] = text[: draw(st.integers(1, len(text) - 1))]
    else:
        records[index] = draw(st.sampled_from(["{this is not json", "'single': 1", "[1, 2", "\x00", "nul"]))
    return records, index + 1, kind


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(case=broken_traces(), as_json=st.booleans())
def test_a_trace_broken_anywhere_is_refused_at_that_line(tmp_path_factory, capsys, case, as_json):
    records, line, kind = case
    path = _write(tmp_path_factory.mktemp("broken") / "t.jsonl", records)
    code, out, err = _replay(capsys, path, *(["--json"] if as_json else []))
    assert code == 2, (kind, records, out, err)
    assert "Traceback" not in err
    message = json.loads(out)["error"] if as_json else err.removeprefix("surfacecheck replay: error: ")
    assert message.startswith(f"{path}:{line}: "), (kind, message)
