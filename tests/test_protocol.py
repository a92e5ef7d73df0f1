"""The JSON-lines protocol: schemas, the server, and the process client (``docs/protocol.md``).

A real child (``python -m surfacecheck.serve model``) answers every op exactly as the in-process
runtime does, and every message validates against its schema. Children that hang, exit mid-run,
print garbage or announce another protocol raise RuntimeUnavailable promptly, with their stderr.
"""
from __future__ import annotations

import io
import json
import shlex
import sys
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, strategies as st

from surfacecheck.core.protocol import OPTIONAL_OPS, PROTOCOL, ProtocolError, RuntimeUnavailable, ops_at
from surfacecheck.runtime.client import ProcessRuntime
from surfacecheck.runtime.model_runtime import ModelRuntime
from surfacecheck.runtime.sample import sample_requests
from surfacecheck.runtime.schemas import ALL_OPS, documents
from surfacecheck.runtime.select import open_runtime
from surfacecheck.serve import handle, serve

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "docs" / "schemas"
PYTHON = shlex.quote(sys.executable)
SERVE_MODEL = f"{PYTHON} -m surfacecheck.serve model"
DOCS = documents()


def validator(name: str):
    return jsonschema.Draft202012Validator(DOCS[name])


def test_schema_files_are_up_to_date_and_valid():
    on_disk = {path.name: json.loads(path.read_text(encoding="utf-8")) for path in SCHEMA_DIR.glob("*.json")
               if not path.name.startswith("e2e-")}  # the e2e script schema: tests/test_e2e_script.py
    assert on_disk == DOCS, "regenerate: python -m surfacecheck.runtime.schemas docs/schemas"
    for doc in DOCS.values():
        jsonschema.Draft202012Validator.check_schema(doc)
    assert set(ops_at("policy")) | {"hello", "bench"} | set(OPTIONAL_OPS) == set(ALL_OPS)


def test_every_sample_request_and_result_matches_its_schema():
    runtime = ModelRuntime()
    seen = set()
    for op, args in sample_requests():
        validator("request.json").validate({"id": 1, "op": op, "args": args})
        validator(f"{op}.args.json").validate(args)
        result = runtime.call(op, args)
        validator(f"{op}.result.json").validate(result)
        seen.add(op)
    validator("hello.result.json").validate(runtime.hello())
    assert seen == set(ALL_OPS) - {"hello", "bench"}


def test_schemas_reject_what_the_protocol_forbids():
    with pytest.raises(jsonschema.ValidationError):
        validator("append.result.json").validate({"seq": 1})
    with pytest.raises(jsonschema.ValidationError):
        validator("append.result.json").validate({"error": {"type": "X", "rule": "r", "message": "m"}})
    with pytest.raises(jsonschema.ValidationError):
        validator("append.args.json").validate({"event": {"type": "x", "seq": 4}})
    with pytest.raises(jsonschema.ValidationError):
        validator("response.json").validate({"id": 1, "error": {"type": "oops", "message": "m"}})


def test_server_handles_each_line_and_keeps_serving():
    lines = [json.dumps({"id": 1, "op": "hello"}), "not json", json.dumps([1]),
             json.dumps({"id": 2, "op": "frobnicate"}), json.dumps({"id": 3, "op": "append", "args": {}}),
             json.dumps({"id": 4, "op": "append", "args": {"event": {"type": "note", "data": {}}}}),
             json.dumps({"id": 5, "op": "surface"})]
    out = io.StringIO()
    assert serve("model", io.StringIO("\n".join(lines) + "\n"), out) == 0
    responses = [json.loads(line) for line in out.getvalue().splitlines()]
    for response in responses:
        validator("response.json").validate(response)
    assert responses[0]["result"]["protocol"] == PROTOCOL
    assert [r.get("error", {}).get("type") for r in responses[1:5]] == ["bad-request", "bad-request", "unknown-op",
                                                                         "bad-args"]
    assert responses[5] == {"id": 4, "result": {"seq": 0, "generation": 0}}
    assert responses[6] == {"id": 5, "result": {"nodes": [], "generation": 0}}


def test_bench_is_delegated_or_unsupported():
    response = handle(ModelRuntime(), "model", {"id": 9, "op": "bench", "args": {"sizes": [10], "appends": 5}})
    try:
        import surfacecheck.bench.inprocess  # noqa: F401
    except ImportError:
        assert response == {"id": 9, "error": {"type": "unsupported", "message": response["error"]["message"]}}
    else:
        assert "ns_per_append" in response.get("result", {}), response


def test_real_child_round_trips_every_op_like_the_in_process_model():
    local = ModelRuntime()
    with ProcessRuntime(SERVE_MODEL, timeout=30) as child:
        assert child.hello()["levels"] == ["log", "compaction", "policy"]
        assert child.name == f"cmd:{SERVE_MODEL}"
        for op, args in sample_requests():
            assert child.call(op, args) == local.call(op, args), op
        with pytest.raises(ProtocolError) as raised:
            child.call("frobnicate", {})
        assert raised.value.type == "unknown-op"
        assert child.call("surface", {}) == local.call("surface", {})  # still serving after a protocol error


def test_open_runtime_cmd_uses_the_process_client():
    runtime = open_runtime(f"cmd:{SERVE_MODEL}", timeout=30)
    try:
        assert isinstance(runtime, ProcessRuntime)
        assert runtime.call("reset", {}) == {"generation": 0}
    finally:
        runtime.close()
    runtime.close()  # idempotent


def child(tmp_path: Path, name: str, body: str) -> str:
    script = tmp_path / f"{name}.py"
    script.write_text("import json, sys, time\n" + body, encoding="utf-8")
    return f"{PYTHON} {shlex.quote(str(script))}"


HELLO = ('line = sys.stdin.readline()\n'
         'req = json.loads(line)\n'
         'print(json.dumps({"id": req["id"], "result": {"protocol": "%s", "name": "t", "levels": ["log"]}}), flush=True)\n'
         % PROTOCOL)


def test_hanging_child_times_out_and_is_killed(tmp_path):
    runtime = ProcessRuntime(child(tmp_path, "hang", HELLO + 'print("about to hang", file=sys.stderr, flush=True)\n'
                                                         'time.sleep(600)\n'), timeout=0.5)
    with pytest.raises(RuntimeUnavailable) as raised:
        runtime.call("surface", {})
    assert raised.value.kind == "timeout" and "about to hang" in raised.value.stderr
    assert runtime._proc.poll() is not None  # killed
    with pytest.raises(RuntimeUnavailable):
        runtime.call("surface", {})  # dead from now on


def test_child_exiting_mid_run_is_unavailable_with_its_stderr(tmp_path):
    runtime = ProcessRuntime(child(tmp_path, "dies", HELLO + 'sys.stdin.readline()\n'
                                                         'print("segfault-ish: giving up", file=sys.stderr)\n'
                                                         'sys.exit(7)\n'), timeout=10)
    with pytest.raises(RuntimeUnavailable) as raised:
        runtime.call("append", {"event": {"type": "note", "data": {}}})
    assert raised.value.kind == "exited"
    assert "exit status 7" in str(raised.value) and "giving up" in raised.value.stderr


@pytest.mark.parametrize("garbage", ['print("hello there", flush=True)',
                                     'print(json.dumps({"id": 999, "result": {}}), flush=True)',
                                     'print(json.dumps({"id": 2, "result": [1, 2]}), flush=True)'])
def test_child_printing_garbage_is_a_protocol_failure(tmp_path, garbage):
    runtime = ProcessRuntime(child(tmp_path, "garbage", HELLO + "sys.stdin.readline()\n" + garbage + "\n"
                                                            "time.sleep(600)\n"), timeout=10)
    with pytest.raises(RuntimeUnavailable) as raised:
        runtime.call("surface", {})
    assert raised.value.kind == "protocol"
    assert runtime._proc.poll() is not None


def test_wrong_handshake_or_missing_command_is_unavailable(tmp_path):
    wrong = HELLO.replace(PROTOCOL, "other-protocol/9")
    with pytest.raises(RuntimeUnavailable) as raised:
        ProcessRuntime(child(tmp_path, "wrong", wrong + "time.sleep(600)\n"), timeout=5)
    assert raised.value.kind == "protocol" and "other-protocol/9" in str(raised.value)
    refuses = ('req = json.loads(sys.stdin.readline())\n'
               'print(json.dumps({"id": req["id"], "error": {"type": "unknown-op", "message": "hello?"}}), flush=True)\n'
               'time.sleep(600)\n')
    with pytest.raises(RuntimeUnavailable) as raised:
        ProcessRuntime(child(tmp_path, "refuses", refuses), timeout=5)
    assert raised.value.kind == "protocol" and "handshake" in str(raised.value)
    with pytest.raises(RuntimeUnavailable) as raised:
        ProcessRuntime(str(tmp_path / "no-such-runtime"), timeout=5)
    assert raised.value.kind == "exited"
    with pytest.raises(RuntimeUnavailable) as raised:
        ProcessRuntime(child(tmp_path, "silent", "sys.exit(0)\n"), timeout=5)
    assert raised.value.kind == "exited"


def test_embedded_runtime_is_served_when_present():
    try:
        from surfacecheck.runtime.embedded import EmbeddedRuntime  # noqa: F401
    except ImportError:
        pytest.skip("surfacecheck.runtime.embedded is not there yet")
    with ProcessRuntime(f"{PYTHON} -m surfacecheck.serve embedded", timeout=30) as served:
        hello = served.hello()
        validator("hello.result.json").validate(hello)
        assert "log" in hello["levels"]
        assert served.call("reset", {}) is not None
        assert served.call("append", {"event": {"type": "note", "data": {}}}) == {"seq": 0, "generation": 0}


class _GenerationOnAppend(ModelRuntime):
    """Negative control: bumps the generation it reports on every append (a one-idea bug, spec 2.1)."""

    def _append(self, args):
        result = super()._append(args)
        return {**result, "generation": result["generation"] + 1} if "seq" in result else result


def test_runtime_stage_passes_the_model_and_catches_a_broken_runtime(tmp_path):
    from surfacecheck.runtime.select import register_variant
    from surfacecheck.runtime.stage import stage
    from surfacecheck.core.stage import CheckContext

    ok = stage(CheckContext("model", None, False, tmp_path, io.StringIO()))
    assert ok.status == "ok" and len(ok.summary["runs"]) == 2, ok.text  # in-process and served
    assert all(run["requests"] > 40 for run in ok.summary["runs"])
    register_variant("model:h4a-generation-on-append", _GenerationOnAppend)
    bad = stage(CheckContext("model:h4a-generation-on-append", None, False, tmp_path, io.StringIO()))
    assert bad.status == "violation"
    first = bad.summary["runs"][0]["divergences"][0]
    assert first["op"] == "append" and first["observed"]["generation"] == first["expected"]["generation"] + 1
    dies = child(tmp_path, "dies2", HELLO + "sys.stdin.readline()\nsys.exit(3)\n")
    stuck = stage(CheckContext(f"cmd:{dies}", None, False, tmp_path, io.StringIO()))
    assert stuck.status == "inconclusive" and "inconclusive" in stuck.text


JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-3, 40), st.text(max_size=6),
                      st.sampled_from(["append", "replace", "text", "failure", "concurrent", "user/message"]))
JSON = st.recursive(JSON_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.sampled_from(["op", "start", "end", "type", "data", "event", "surfaceOp", "outcome", "text",
                                     "ratio", "usage", "concurrent", "retain_tokens", "code", "summary",
                                     "summaries", "pruner", "policy", "faults", "manual", "args", "x"]),
                    inner, max_size=5)), max_leaves=12)


@given(ops=st.lists(st.tuples(st.sampled_from(ALL_OPS + ("nope",)), st.one_of(
    JSON, st.fixed_dictionaries({"event": st.fixed_dictionaries({"type": st.sampled_from(
        ["user/message", "note", "tool/result", "compaction/prune"]), "data": JSON}, optional={"surfaceOp": JSON})}),
)), max_size=8))
def test_arbitrary_requests_get_a_typed_answer_never_a_crash(ops):
    runtime = ModelRuntime()
    for number, (op, args) in enumerate(ops):
        response = handle(runtime, "model", {"id": number, "op": op, "args": args})
        validator("response.json").validate(response)
        if "error" in response:
            assert response["error"]["type"] != "internal", (op, args, response)
        elif op != "bench":
            validator(f"{op}.result.json").validate(response["result"])


OUTCOMES = ["text", "failure", "empty", "image", "truncated", "cancel", "agent-cancel", "late-cancel", "concurrent"]
TYPES = ["user/message", "tool/result", "assistant/message", "note", "compaction/prune", "compaction/summary",
         "step/start", "step/end", "request/header", "agent/status", "turn/start", "turn/end", "compaction/start"]


def _walk_event(rng, n):
    """A dsh-ish event, often malformed (live appends skip shape checks, spec 1.3 / §15 G18)."""
    data = rng.choice([{}, {"turn": 1, "step": rng.randint(1, 3)}, {"message": {"content": []}}, None, [], "s",
                       {"content": [{"type": "text", "text": "x" * rng.randint(0, 50)}]},
                       {"shadowedRange": {"start": rng.randint(0, n), "end": rng.randint(0, n)},
                        "shadowedTokenCount": rng.randint(0, 99)}, {"status": "idle"}])
    event = {"type": rng.choice(TYPES), "data": data}
    if rng.random() < 0.5:
        event["surfaceOp"] = rng.choice(["append", {"op": "replace", "start": rng.randint(0, n),
                                                    "end": rng.randint(0, n)}, None, "x"])
    return event


def _walk_args(rng, op, n):
    script = {"outcome": rng.choice(OUTCOMES)}
    if script["outcome"] == "concurrent" or rng.random() < 0.2:
        event = _walk_event(rng, n)
        script["concurrent"] = [[event["type"], event["data"], event.get("surfaceOp")]]
    return {"append": {"event": _walk_event(rng, n)}, "select_range": {"retain_tokens": rng.randint(0, 500)},
            "compact": {"start": rng.randint(0, n), "end": rng.randint(0, n), "manual": rng.random() < 0.5,
                        "summary": script},
            "prune": {"pruner": {"thresholdChars": rng.randint(0, 3000), "headChars": rng.randint(0, 500),
                                 "tailChars": rng.randint(0, 300)}},
            "pre_step": {"summary": script}, "request_error": {"code": "CONTEXT_WINDOW_EXCEEDED", "summary": script},
            "manual_compact": {"summary": script},
            "meter_replay": {"events": []},
            "configure": {"policy": rng.choice([{}, {"thresholdRatio": 0.5, "retainTokens": 20}, {"auto": False},
                                                {"bogus": 1}]), "context_window": rng.choice([None, 100, 1000])},
            }.get(op, {})


def test_random_walks_over_malformed_logs_get_typed_answers():
    """Seeded walks from every prefix of the sample: no op crashes the model runtime (a JS TypeError in
    dsh is the refusal rule ``message-shape``), and every result matches its schema."""
    import random

    walk_ops = ["append"] * 3 + [op for op in ops_at("policy") if op not in ("reset", "append")]
    sample = sample_requests()
    for seed in range(30):
        rng = random.Random(seed)
        runtime = ModelRuntime()
        for op, args in sample[: rng.randint(0, len(sample))]:
            runtime.call(op, args)
        for number in range(20):
            op = rng.choice(walk_ops)
            args = _walk_args(rng, op, len(runtime.session.log))
            response = handle(runtime, "model", {"id": number, "op": op, "args": args})
            assert "result" in response, (seed, number, op, args, response)
            validator(f"{op}.result.json").validate(response["result"])
