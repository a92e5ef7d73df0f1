"""JSONL session-log I/O against the dsh corpus and hand-made logs (spec 1.7)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from surfacecheck.model.errors import LogFormatError
from surfacecheck.model.event import Event
from surfacecheck.model.jsonl import LogFile, decode_record, dumps_log, iter_log, read_log, write_log


def corpus_root() -> Path | None:
    """$SURFACECHECK_CORPUS, else <repo>/../shared/corpus; None when the folder is missing."""
    env = os.environ.get("SURFACECHECK_CORPUS")
    root = Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
    return root if root.is_dir() else None


def corpus_logs() -> list[Path]:
    root = corpus_root()
    if root is None:
        return []
    return sorted((root / "dsh-sessions").glob("*.jsonl")) + sorted((root / "dsh-generated").glob("*.jsonl"))


needs_corpus = pytest.mark.skipif(
    corpus_root() is None,
    reason="dsh corpus not found: set SURFACECHECK_CORPUS to the folder holding dsh-sessions/ and dsh-generated/",
)

# A hand-authored llm-replay fixture (examples/headless-agent/tests/subagent-inheritance-snapshots/
# parent-override/child.replay.jsonl): its header line was written with Python-style `", "`/`": "`
# spacing, which JSON.stringify (and so dsh's JSONL writer, format.ts toHeaderLine) never emits.
# No writer of dsh's format can reproduce it; its header object and every event line still must.
NON_STRINGIFY_HEADER = {
    "examples__headless-agent__tests__subagent-inheritance-snapshots__parent-override__child.replay.jsonl",
}

HEADER = {"type": "session", "version": 0, "id": "s-1", "createdAt": 1000, "cwd": "/w", "delegationDepth": 0}


def chunk(seq: int, time: int, kind: str, index: int = 0, text: str = "x", *, turn: int = 1, step: int = 1, **extra) -> Event:
    """An `assistant/chunk` delta in dsh's key order (spec 1.7)."""
    if kind == "tool-call-delta":
        body = {"type": kind, "index": index, "id": extra.get("id", "c1")}
        if extra.get("name") is not None:
            body["name"] = extra["name"]
        body["argumentsDelta"] = text
    else:
        body = {"type": kind, "index": index, "text": text}
    return Event("assistant/chunk", seq, time, {"turn": turn, "step": step, "chunk": body})


def model_events() -> list[Event]:
    """A log that exercises every packing rule: runs, breaks, short runs, odd shapes."""
    ev: list[Event] = [
        Event("turn/start", 0, 10, {"turn": 1}),
        Event("user/message", 1, 11, {"content": [{"type": "text", "text": "hi"}]}, surface_op="append"),
    ]
    seq = len(ev)

    def add(*events: Event) -> None:
        nonlocal seq
        ev.extend(events)
        seq += len(events)

    add(*(chunk(seq + k, 20 + k * 3, "reasoning-delta", text=f"r{k}") for k in range(5)))  # packs
    add(*(chunk(seq + k, 40 - k, "text-delta", index=1, text=f"t{k}") for k in range(4)))  # negative dt, packs
    add(*(chunk(seq + k, 50, "text-delta", index=2) for k in range(2)))  # run of 2: verbatim
    add(*(chunk(seq + k, 60 + k, "tool-call-delta", index=3, name="bash", text="{") for k in range(3)))  # packs
    add(*(chunk(seq + k, 70 + k, "tool-call-delta", index=3, text="}") for k in range(3)))  # nameless: new row
    add(chunk(seq, 80, "tool-call-delta", index=4, name="a"), chunk(seq + 1, 81, "tool-call-delta", index=4),
        chunk(seq + 2, 82, "tool-call-delta", index=4, name="a"))  # mixed name presence: no row
    add(chunk(seq, 90, "text-delta", index=5), chunk(seq + 1, 91, "text-delta", index=6),
        chunk(seq + 2, 92, "text-delta", index=6), chunk(seq + 3, 93, "text-delta", index=6, step=2))  # breaks
    odd = chunk(seq, 95, "text-delta", index=7)
    add(Event(odd.type, odd.seq, odd.time, {**odd.data, "extra": 1}),  # not exact shape: verbatim
        chunk(seq + 1, 96, "text-delta", index=7), chunk(seq + 2, 97, "text-delta", index=7))
    add(Event("assistant/chunk", seq, 98, {"turn": 1, "step": 1, "chunk": {"type": "finish", "reason": {"kind": "stop"}}}),
        Event("assistant/message", seq + 1, 99, {"content": [], "s": "é\u2028😀\ud800"}, surface_op="append",
              source_event_seqs=[2, 3]),
        Event("custom/thing", seq + 2, -5, None, ignorable=True))
    add(*(chunk(seq + k, 2**53 - 3 + k, "text-delta", index=8) for k in range(3)))  # times at the safe edge
    return ev


# -- (1) + (2) the corpus ----------------------------------------------------------------------

@needs_corpus
def test_corpus_is_complete():
    logs = corpus_logs()
    assert len(logs) == 169, "expected 159 recorded + 10 generated logs"


@needs_corpus
@pytest.mark.parametrize("path", corpus_logs(), ids=lambda p: p.name)
def test_corpus_log_reads_and_round_trips(path: Path):
    log = read_log(path)
    assert isinstance(log, LogFile) and log.header["type"] == "session" and not log.torn_tail
    assert len(log.lines) == len(log.events)
    original = path.read_bytes()
    written = dumps_log(log.header, log.events).encode("utf-8")
    if path.name in NON_STRINGIFY_HEADER:
        head, _, body = original.partition(b"\n")
        new_head, _, new_body = written.partition(b"\n")
        assert json.loads(head) == json.loads(new_head) and list(json.loads(head)) == list(json.loads(new_head))
        assert new_body == body
    else:
        assert written == original


@needs_corpus
def test_corpus_packing_totals():
    logs = [read_log(p) for p in corpus_logs()]
    assert sum(1 for log in logs if log.packed_rows) == 79  # 69 recorded + all 10 generated
    assert sum(log.packed_rows for log in logs) == 497
    assert sum(len(log.events) for log in logs) == 17795
    long = next(log for log in logs if log.path.endswith("10-long-session.jsonl"))
    assert len(long.events) == 1943 and long.lines[-1] == 1302


# -- (3) model-made logs -----------------------------------------------------------------------

@pytest.mark.parametrize("pack", [True, False])
def test_model_log_round_trip(tmp_path: Path, pack: bool):
    events = model_events()
    path = tmp_path / "session.jsonl"
    write_log(path, HEADER, events, pack_chunks=pack)
    log = read_log(path)
    assert log.header == HEADER and list(log.header) == list(HEADER)
    assert list(log.events) == events
    assert log.packed_rows == (5 if pack else 0)
    assert path.read_text(encoding="utf-8") == dumps_log(HEADER, log.events, pack_chunks=pack)
    # five rows replace 5+4+3+3+3 members; count "\n" only (str.splitlines would also split at U+2028)
    assert path.read_text(encoding="utf-8").count("\n") == 1 + len(events) - (18 - 5 if pack else 0)


def test_packed_row_shape():
    events = [chunk(7, 100, "tool-call-delta", index=1, name="bash", text=a) for a in ("{", "}", "")]
    events = [Event(e.type, 7 + k, 100 + 5 * k, e.data) for k, e in enumerate(events)]
    text = dumps_log(HEADER, events)
    assert text.splitlines()[1] == (
        '{"type":"tool-call-chunks","seq0":7,"time0":100,"data":{"turn":1,"step":1,"index":1,'
        '"dt":[5,5],"id":"c1","name":"bash","args":["{","}",""]}}'
    )


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["text-delta", "reasoning-delta", "tool-call-delta"]),
                          st.integers(0, 2), st.integers(-3, 3), st.booleans()), max_size=25))
def test_random_delta_runs_round_trip(spec):
    """Any mix of deltas decodes back to exactly the events that were packed (spec 1.7)."""
    events, time = [], 0
    for seq, (kind, index, gap, named) in enumerate(spec):
        time += gap
        events.append(chunk(seq, time, kind, index, text=str(seq), name="n" if named else None))
    text = dumps_log(HEADER, events)
    header, stream = _stream_text(text)
    assert [e for _, e in stream] == events


def _stream_text(text: str):
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as handle:
        handle.write(text)
    try:
        header, stream = iter_log(handle.name)
        return header, list(stream)
    finally:
        os.unlink(handle.name)


# -- (4) errors --------------------------------------------------------------------------------

GOOD_EVENT = '{"type":"turn/start","seq":0,"time":1,"data":{}}'
HEADER_LINE = json.dumps(HEADER, separators=(",", ":"))


def _expect_error(tmp_path: Path, text: str, line: int | None, reason: str) -> LogFormatError:
    path = tmp_path / "bad.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(LogFormatError) as info:
        read_log(path)
    err = info.value
    assert err.path == str(path) and err.line == line
    assert str(path) in str(err) and (line is None or f"{path}:{line}:" in str(err))
    assert reason in err.reason, err.reason
    return err


@pytest.mark.parametrize("text, line, reason", [
    ("", 1, "empty file"),
    ("not json\n", 1, "header line is not valid JSON"),
    (GOOD_EVENT + "\n", 1, "not a session header"),
    ('{"type":"session","version":1,"id":"x"}\n', 1, "unsupported session format version 1"),
    ('{"type":"session","version":"0"}\n', 1, 'unsupported session format version "0"'),
    (HEADER_LINE, 1, "not newline-terminated"),
    (f"{HEADER_LINE}\n{GOOD_EVENT}\n{{oops\n", 3, "line is not valid JSON"),
    (f"{HEADER_LINE}\n\n", 2, "line is not valid JSON"),
    (f"{HEADER_LINE}\n{{\"type\":\"x\",\"seq\":0,\"time\":NaN,\"data\":1}}\n", 2, "line is not valid JSON"),
    (f"{HEADER_LINE}\n[1,2]\n", 2, "record is not a JSON object"),
    (f"{HEADER_LINE}\n{GOOD_EVENT}\n{{\"type\":\"x\",\"seq\":-1,\"time\":1,\"data\":1}}\n", 3, "seq must be"),
    (f"{HEADER_LINE}\n{{\"type\":\"x\",\"seq\":0,\"time\":1.5,\"data\":1}}\n", 2, "time must be"),
    (f"{HEADER_LINE}\n{{\"type\":\"x\",\"seq\":0,\"time\":1}}\n", 2, "data is missing"),
    (f"{HEADER_LINE}\n{{\"type\":\"x\",\"seq\":0,\"time\":1,\"data\":1,\"extra\":2}}\n", 2, "unexpected key 'extra'"),
    (f"{HEADER_LINE}\n{{\"type\":\"x\",\"seq\":0,\"time\":1,\"data\":1,\"ignorable\":false}}\n", 2, "ignorable"),
    (f"{HEADER_LINE}\n{{\"type\":7,\"seq\":0,\"time\":1,\"data\":1}}\n", 2, "type must be a string"),
])
def test_format_errors(tmp_path: Path, text: str, line: int, reason: str):
    _expect_error(tmp_path, text, line, reason)


ROW = {"type": "text-chunks", "seq0": 0, "time0": 5, "data": {"turn": 1, "step": 1, "index": 0, "dt": [1, 1], "texts": ["a", "b", "c"]}}
TOOL_ROW = {"type": "tool-call-chunks", "seq0": 0, "time0": 5,
            "data": {"turn": 1, "step": 1, "index": 0, "id": "c", "dt": [1], "args": ["a", "b"]}}


def _mutate(row: dict, **changes) -> dict:
    out = json.loads(json.dumps(row))
    for key, value in changes.items():
        target = out["data"] if key in out["data"] or key in ("name", "bogus") else out
        if value is ...:
            del target[key]
        else:
            target[key] = value
    return out


@pytest.mark.parametrize("row, why", [
    (_mutate(ROW, seq0=...), "envelope must be exactly {type, seq0, time0, data}"),
    (_mutate(ROW, seq0=-1), "seq0 must be a non-negative safe integer"),
    (_mutate(ROW, time0=1.5), "time0 must be a safe integer"),
    (_mutate(ROW, data=[]), "data must be exactly {turn, step, index, dt, texts}"),  # an array is a record in JS
    (_mutate(ROW, data=None), "data must be an object"),
    (_mutate(ROW, bogus=1), "data must be exactly {turn, step, index, dt, texts}"),
    (_mutate(ROW, index="0"), "turn/step/index must be numbers"),
    (_mutate(ROW, texts=[]), "texts must be a non-empty string array"),
    (_mutate(ROW, dt=[1, 0.5]), "dt must be an array of safe integers"),
    (_mutate(ROW, dt=[1]), "dt length 1 does not match 3 members"),
    (_mutate(ROW, seq0=2**53 - 1), "member seqs must stay safe integers"),
    (_mutate(ROW, time0=2**53 - 2), "member times must stay safe integers"),
    (_mutate(TOOL_ROW, name=5), "id (and name when present) must be strings"),
    (_mutate(TOOL_ROW, args=...), "data must be exactly {turn, step, index, id, name?, dt, args}"),
])
def test_malformed_packed_rows(tmp_path: Path, row: dict, why: str):
    tag = row["type"]
    err = _expect_error(tmp_path, f"{HEADER_LINE}\n{GOOD_EVENT}\n{json.dumps(row)}\n", 3, why)
    assert err.reason == f"malformed {tag} storage row: {why}"


def test_torn_tail_is_ignored(tmp_path: Path):
    path = tmp_path / "torn.jsonl"
    path.write_text(f'{HEADER_LINE}\n{GOOD_EVENT}\n{{"type":"turn/e', encoding="utf-8")
    log = read_log(path)
    assert log.torn_tail and [e.type for e in log.events] == ["turn/start"] and log.lines == (2,)
    # like dsh's SessionLogScanner, an unterminated final record is torn even when it parses
    path.write_text(f"{HEADER_LINE}\n{GOOD_EVENT}", encoding="utf-8")
    log = read_log(path)
    assert log.torn_tail and log.events == ()


def test_missing_and_directory_paths(tmp_path: Path):
    for path, reason in ((tmp_path / "nope.jsonl", "no such file"), (tmp_path, "directory")):
        with pytest.raises(LogFormatError) as info:
            read_log(path)
        assert info.value.path == str(path) and str(path) in str(info.value) and reason in info.value.reason
        with pytest.raises(LogFormatError):
            iter_log(path)


def test_invalid_utf8_is_a_format_error(tmp_path: Path):
    path = tmp_path / "bin.jsonl"
    path.write_bytes(HEADER_LINE.encode() + b'\n{"type":"x\xff","seq":0,"time":1,"data":1}\n')
    with pytest.raises(LogFormatError) as info:
        read_log(path)
    assert info.value.line == 2 and "not valid JSON" in info.value.reason


def test_big_integers_follow_json_parse(tmp_path: Path):
    """JSON.parse reads numbers as doubles, so dsh re-writes 2^64 as 18446744073709552000."""
    path = tmp_path / "big.jsonl"
    path.write_text(f'{HEADER_LINE}\n{{"type":"x","seq":0,"time":1,"data":18446744073709551617}}\n', encoding="utf-8")
    assert dumps_log(HEADER, read_log(path).events).splitlines()[1].endswith('"data":18446744073709552000}')


# -- (5) streaming -----------------------------------------------------------------------------

@needs_corpus
def test_streaming_matches_read_log():
    for path in corpus_logs():
        log = read_log(path)
        header, stream = iter_log(path)
        pairs = list(stream)
        assert header == log.header
        assert tuple(e for _, e in pairs) == log.events and tuple(n for n, _ in pairs) == log.lines
        assert (stream.packed_rows, stream.torn_tail) == (log.packed_rows, log.torn_tail)


def test_streaming_is_lazy(tmp_path: Path):
    """Events before a corrupt line are delivered before the error: lines are read on demand."""
    path = tmp_path / "lazy.jsonl"
    path.write_text(f"{HEADER_LINE}\n{json.dumps(ROW)}\n{{broken\n", encoding="utf-8")
    header, stream = iter_log(path)
    assert header == HEADER
    assert [(n, e.seq) for n, e in (next(stream), next(stream), next(stream))] == [(2, 0), (2, 1), (2, 2)]
    with pytest.raises(LogFormatError) as info:
        next(stream)
    assert info.value.line == 3


def test_streaming_memory_is_bounded(tmp_path: Path):
    """Writing and reading a large log never holds it whole (generators in, iterator out)."""
    import tracemalloc

    n = 60_000
    path = tmp_path / "big.jsonl"

    def events():
        for seq in range(n):
            yield chunk(seq, seq, "text-delta", index=seq // 1000, text="tok") if seq % 7 else \
                Event("step/start", seq, seq, {"turn": 1, "step": seq})

    tracemalloc.start()
    write_log(path, HEADER, events())
    count = sum(1 for _ in iter_log(path)[1])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert count == n
    assert peak < path.stat().st_size / 4, (peak, path.stat().st_size)


def test_member_seq_guard_rounds_as_dsh_does():
    """`Number.isSafeInteger(seq0 + length - 1)` in doubles: seq0 = 2**53 - 2 with three members sums to 2**53 + 1,
    which rounds to 2**53, and minus one passes; dsh expands the row with a last seq of 2**53 (DIVERGENCES D6)."""
    events = decode_record(_mutate(ROW, seq0=2**53 - 2))
    assert [event.seq for event in events] == [2**53 - 2, 2**53 - 1, 2**53]
