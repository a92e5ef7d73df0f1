"""The optional persistence views ``closers`` and ``rows`` (spec 1.6-1.7; ``runtime/storage.py``, the dsh adapter's
``storage.mjs``): dsh's crash repair and JSONL packer answer as the model's ``model/repair.py`` and ``model/jsonl.py``.
"""
from __future__ import annotations

import pytest

from surfacecheck.core.protocol import OPTIONAL_OPS
from surfacecheck.runtime import dsh
from surfacecheck.runtime.embedded.runtime import EmbeddedRuntime
from surfacecheck.runtime.embedded.stage import _optional_answer, not_served
from surfacecheck.runtime.model_runtime import ModelRuntime

needs_dsh = pytest.mark.skipif(dsh.spec_problem("dsh") is not None, reason=str(dsh.spec_problem("dsh")))
MODEL_SOURCE = {"kind": "model", "provider": "p", "model": "m"}


def chunk(step: int, text: str, time: int, index: int = 0) -> dict:
    return {"type": "assistant/chunk", "data": {"turn": 1, "step": step, "chunk": {
        "type": "text-delta", "index": index, "text": text}}, "time": time}


def interrupted_log() -> list[dict]:
    """An open turn: step 1 asked for two tools (one recorded as started), then text streams (chunks) when the process dies."""
    calls = [{"type": "tool-call", "id": call, "name": "read", "arguments": {}} for call in ("c1", "c2")]
    return [
        {"type": "turn/start", "data": {"turn": 1}, "time": 10},
        {"type": "step/start", "data": {"turn": 1, "step": 1}, "time": 11},
        {"type": "assistant/message", "surfaceOp": "append", "time": 12, "data": {"turn": 1, "step": 1, "message": {
            "id": "a-1", "role": "assistant", "source": MODEL_SOURCE, "content": calls}}},
        {"type": "tool/call", "data": {"turn": 1, "step": 1, "callId": "c1", "name": "read"}, "time": 13},
        *[chunk(2, f"part {i}", 20 + i * i) for i in range(4)],  # one packed row (dt 1, 3, 5)
        chunk(2, "other block", 40, index=1),  # a run of one: verbatim
    ]


def legacy_log() -> list[dict]:
    """An assistant/message without `message` (an old fixture shape): dsh's repair scan reads `.content` of undefined."""
    return [{"type": "turn/start", "data": {"turn": 1}},
            {"type": "assistant/message", "surfaceOp": "append", "data": {"turn": 1, "step": 1, "content": []}}]


def answers(runtime, log: list[dict]) -> dict:
    runtime.call("reset", {})
    for event in log:
        assert "error" not in runtime.call("append", {"event": event})
    return {op: runtime.call(op, {}) for op in ("closers", "rows")}


def test_model_closers_and_rows_of_an_interrupted_turn():
    got = answers(ModelRuntime(), interrupted_log())
    closers = got["closers"]["closers"]
    assert [(c["type"], c["seq"], c["time"]) for c in closers] == [
        ("tool/result", 9, 40), ("tool/result", 10, 40), ("step/end", 11, 40), ("turn/end", 12, 40)]
    assert closers[0]["sourceEventSeqs"] == [3] and "sourceEventSeqs" not in closers[1]  # recorded vs not started
    assert closers[2]["data"] == {"turn": 1, "step": 1}  # the open step is the last step/start
    records = got["rows"]["records"]
    assert got["rows"]["roundtrip"] is True
    assert records[:4] == [0, 1, 2, 3] and records[5] == 8  # verbatim events as their seqs
    assert records[4] == {"type": "text-chunks", "seq0": 4, "time0": 20, "data": {
        "turn": 1, "step": 2, "index": 0, "dt": [1, 3, 5], "texts": ["part 0", "part 1", "part 2", "part 3"]}}


def test_embedded_serves_the_same_views_and_announces_them():
    assert answers(EmbeddedRuntime(), interrupted_log()) == answers(ModelRuntime(), interrupted_log())
    assert set(OPTIONAL_OPS) <= set(EmbeddedRuntime().hello()["ops"])


def test_a_runtime_without_the_views_is_not_compared_on_them():
    class Bare(ModelRuntime):
        def __init__(self):
            super().__init__()
            for op in OPTIONAL_OPS:
                del self._ops[op]

    assert not_served(_optional_answer(Bare(), "closers", {}))
    assert not not_served(_optional_answer(ModelRuntime(), "closers", {}))


@needs_dsh
@pytest.mark.parametrize("log", [interrupted_log(), legacy_log()], ids=["interrupted", "legacy-shape"])
def test_dsh_repairs_and_packs_as_the_model(log):
    from surfacecheck.runtime.select import open_runtime

    runtime = open_runtime("dsh")
    try:
        assert set(OPTIONAL_OPS) <= set(runtime.hello()["ops"])
        observed = answers(runtime, log)
    finally:
        runtime.close()
    expected = answers(ModelRuntime(), log)
    if "error" in expected["closers"]:  # refusals compare by type, rule and seq
        assert expected["closers"]["error"]["rule"] == "repair-scan"
        assert {k: observed["closers"]["error"][k] for k in ("type", "rule", "seq")} == \
            {k: expected["closers"]["error"][k] for k in ("type", "rule", "seq")}
        assert observed["rows"] == expected["rows"]
    else:
        assert observed == expected


@needs_dsh
def test_dsh_decodes_and_refuses_storage_records_as_the_model():
    """Every record of the protocol sample's decoder check: expanded, passed through or refused with dsh's message;
    the row whose member seq guard rounds (seq0 = 2**53 - 2, DIVERGENCES D6) is expanded by both."""
    from surfacecheck.runtime.sample import _storage_records
    from surfacecheck.runtime.select import open_runtime

    records = _storage_records() + [{"type": "text-chunks", "seq0": 2**53 - 2, "time0": 0, "data": {
        "turn": 1, "step": 1, "index": 0, "dt": [0, 0], "texts": ["a", "b", "c"]}}]
    model = ModelRuntime()
    runtime = open_runtime("dsh")
    try:
        observed = [runtime.call("decode", {"record": record}) for record in records]
    finally:
        runtime.close()
    expected = [model.call("decode", {"record": record}) for record in records]
    assert observed == expected
    assert sum("error" in answer for answer in expected) == 22  # every check of validateRow, some twice
    assert expected[-1]["events"][-1]["seq"] == 2**53
