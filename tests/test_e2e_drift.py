"""Version drift (issue 8 item 5): the Anthropic wire, drift classification on recorded facts, one real run.

The wire and classification tests need no runtime. The real-run test needs dsh 0.2.1rc2 in its own venv
(``SURFACECHECK_DSH_V2_PYTHON``) and is skipped without it.
"""
from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from surfacecheck.e2e import drift as d
from surfacecheck.e2e import drift_run as r2
from surfacecheck.e2e import release as rel
from surfacecheck.e2e.runner import NoPython, RuntimeNotInstalled, run_script
from surfacecheck.e2e import wire_anthropic as wa
from surfacecheck.e2e.server import CONTROL_PATH

# dsh 0.2.1rc2's isContextWindowExceededError (its second alternative), copied from the shipped bundle.
RUNTIME_OVERFLOW = re.compile(r"\b(?:maximum|max)(?:\s+(?:allowed|supported))?\s+context\s+(?:length|window)\b", re.I)

SCRIPT = {"format": "surfacecheck-e2e-script/1", "name": "wire", "usage": "fixed",
          "config": {"contextWindow": 16000, "thresholdRatio": 0.5, "retainTokens": 2000},
          "turns": [{"prompt": "p0", "replies": [{"tool": {"output_chars": 12}}, {"overflow": True}, {"text": "ok"}]},
                    {"prompt": "p1", "replies": [{"text": "second"}]}],
          "summaries": [{"outcome": "failure"}, {"outcome": "text", "ratio": 0.5}]}


def post(url: str, body: dict, headers: dict | None = None) -> tuple[int, str, bytes]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json", **(headers or {})})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=10) as resp:
            return resp.status, resp.headers.get("content-type", ""), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("content-type", ""), err.read()


# -- the wire ---------------------------------------------------------------------------------------------------

def test_text_message_frames_in_order_and_round_trips():
    events = wa.message_events(text="x" * 150, stop_reason="end_turn", usage=(7, 3), model="m", msg_id="i")
    assert wa.parse_sse(wa.sse(events)) == events
    types = [e["type"] for e in events]
    assert types[0] == "message_start" and types[-2:] == ["message_delta", "message_stop"]
    assert "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta") == "x" * 150
    assert events[0]["message"]["usage"]["input_tokens"] == 7 and events[-2]["usage"]["output_tokens"] == 3
    assert events[-2]["delta"]["stop_reason"] == "end_turn"


def test_tool_use_block_carries_arguments_as_input_json_delta():
    call = {"id": "call-0-1", "name": "bash", "arguments": json.dumps({"description": "d", "command": "true"})}
    events = wa.message_events(calls=[call], stop_reason="tool_use", usage=(1, 1), model="m", msg_id="i")
    start = next(e for e in events if e["type"] == "content_block_start")
    assert start["content_block"] == {"type": "tool_use", "id": "call-0-1", "name": "bash", "input": {}}
    delta = next(e for e in events if e["type"] == "content_block_delta")["delta"]
    assert delta["type"] == "input_json_delta" and json.loads(delta["partial_json"])["command"] == "true"


def test_parse_sse_refuses_a_mismatched_event_name():
    with pytest.raises(ValueError, match="event name"):
        wa.parse_sse(b'event: message_stop\ndata: {"type":"message_start"}\n\n')


def test_overflow_text_is_classified_as_context_window_exceeded_by_the_runtime_rule():
    status, body = wa.overflow_error()
    assert status == 400 and RUNTIME_OVERFLOW.search(body["error"]["message"])
    assert not RUNTIME_OVERFLOW.search(wa.summary_failure()[1]["error"]["message"])


def test_realistic_usage_counts_system_messages_and_tools():
    body = {"system": "abcd", "messages": [{"role": "user", "content": "hi"}], "tools": []}
    units = len(json.dumps("abcd")) + len(wa.compact_json(body["messages"])) + len("[]")
    assert wa.realistic_usage(body, "12345") == (-(-units // 4), 2)


def test_server_answers_a_script_over_loopback_and_records_it():
    with wa.AnthropicScriptedServer(SCRIPT) as server:
        base = server.base_url
        assert base.startswith("http://127.0.0.1:")
        url = base + wa.MESSAGES_PATH
        body = {"model": "m", "messages": [{"role": "user", "content": "p0"}], "system": "s", "tools": []}
        status, ctype, raw = post(url, body, {"x-api-key": "secret", "anthropic-version": "2023-06-01"})
        assert status == 200 and ctype == "text/event-stream"
        tool = json.loads(next(e for e in wa.parse_sse(raw) if e["type"] == "content_block_delta")
                          ["delta"]["partial_json"])
        assert tool["command"] == wa.tool_command(12) and tool["description"]
        status, _, raw = post(url, body)
        assert status == 400 and RUNTIME_OVERFLOW.search(json.loads(raw)["error"]["message"])
        compact = {"model": "m", "messages": [{"role": "user", "content": "a" * 40}, {"role": "user", "content": "i"}]}
        assert post(url, compact, {"x-deepseek-harness-compact": "1"})[0] == 500
        status, _, raw = post(url, compact, {"x-deepseek-harness-compact": "1"})
        text = "".join(e["delta"]["text"] for e in wa.parse_sse(raw) if e["type"] == "content_block_delta")
        assert status == 200 and len(text) == wa.span_chars(compact) // 2
        assert post(base + CONTROL_PATH, {"turn": 1})[0] == 200
        status, _, raw = post(url, body)
        assert "second" in raw.decode()
        assert post(base + "/chat/completions", body)[0] == 404
        record = server.requests
    assert [r["status"] for r in record] == [200, 400, 500, 200, 200, 404]
    assert record[0]["headers"]["x-api-key"] == "<redacted>" and record[2]["compact"] and record[4]["turn"] == 1
    assert any("unexpected request path" in e for e in server.errors)


def test_server_reports_an_exhausted_turn():
    with wa.AnthropicScriptedServer(SCRIPT) as server:
        post(server.base_url + CONTROL_PATH, {"turn": 1})
        url = server.base_url + wa.MESSAGES_PATH
        post(url, {"messages": []})
        assert post(url, {"messages": []})[0] == 500
    assert any("script exhausted" in e for e in server.errors)


# -- adapter choice and the 0.2.x config overlay ----------------------------------------------------------------

@pytest.mark.parametrize("version,release", [("0.1.1rc1", "0.1.x"), ("0.1.0", "0.1.x"), ("0.2.1rc2", "0.2.x"),
                                             ("1.0.0", "0.2.x"), ("0.2.x", "0.2.x"), (None, "0.1.x")])
def test_a_version_selects_its_release(version, release):
    assert rel.release(version).name == release


def test_an_unknown_release_is_refused():
    with pytest.raises(KeyError, match="unknown dsh release"):
        rel.release("garbage")


def test_releases_are_immutable_and_name_their_sdk():
    for name, release in rel.RELEASES.items():
        assert release.name == name and rel.line_of(release.sdk_version) == name
        with pytest.raises(AttributeError):
            release.name = "other"


def test_run_for_refuses_a_python_without_the_sdk(tmp_path):
    with pytest.raises(RuntimeNotInstalled, match="not installed"):
        r2.run_for(SCRIPT, python=str(tmp_path / "no-python"))
    assert rel.installed_version(str(tmp_path / "no-python")) is None


def test_the_second_release_without_its_python_names_the_variable(monkeypatch, capsys):
    monkeypatch.delenv(rel.V2_PYTHON_ENV, raising=False)
    with pytest.raises(NoPython, match=rel.V2_PYTHON_ENV):
        run_script(SCRIPT, release="0.2.x")
    assert r2.main(["--known"]) == 2
    assert rel.V2_PYTHON_ENV in capsys.readouterr().err


def test_patch_sets_headroom_only_when_asked():
    config = dict(SCRIPT["config"], pruner={"thresholdChars": 2000, "headChars": 200, "tailChars": 200})
    rows = {e["id"]: e for e in rel.patch_entries(config)}
    assert "headroomTokens" not in rows["compaction-basic"]["config"]
    assert rows["llm-deepseek"]["config"]["models"][0]["contextWindow"] == 16000
    assert rows["tool-result-pruner"]["config"]["thresholdChars"] == 2000
    assert rows["session-log-deepseek"]["config"] == {"enabled": False}
    small = {e["id"]: e for e in rel.patch_entries(config, headroom_tokens=512)}
    assert small["compaction-basic"]["config"]["headroomTokens"] == 512
    assert '"/x/sessions"' in rel.patch_yaml(rel.patch_entries(config), "/x/sessions")


# -- drift classification on recorded facts ---------------------------------------------------------------------
# Shapes recorded from real runs of the same script (0.1.1rc1 and 0.2.1rc2, 2026-11-30).

def _v1_run():
    tool = {"role": "user", "source": {"kind": "tool", "callId": "c"},
            "content": [{"type": "tool-result", "toolCallId": "c", "content": [{"type": "text", "text": "x" * 40}]}]}
    events = [{"type": "session", "version": 0, "id": "s"},
              {"type": "user/message", "seq": 4, "data": {"content": [], "role": "user"}, "surfaceOp": "append"},
              {"type": "assistant/chunk", "seq": 5, "data": {"chunk": {"type": "finish", "reason": {
                  "kind": "error", "failure": {"code": "CONTEXT_WINDOW_EXCEEDED"}}}}},
              {"type": "tool/result", "seq": 6, "data": {"message": tool}, "surfaceOp": "append"},
              {"type": "compaction/prune", "seq": 7, "data": {"shadowedRange": {"start": 6, "end": 6},
                                                              "shadowedSeqs": [6], "shadowedTokenCount": 22}},
              {"type": "tool/result", "seq": 8, "data": {"message": tool}, "surfaceOp": {"op": "replace", "start": 6,
                                                                                         "end": 6}},
              {"type": "compaction/summary", "seq": 9, "data": {"shadowedRange": {"start": 4, "end": 8}}},
              {"type": "user/message", "seq": 10, "data": {"source": {"kind": "plugin", "plugin": "compact"}},
               "surfaceOp": {"op": "replace", "start": 4, "end": 8}}]
    requests = [{"path": "/chat/completions", "headers": {"authorization": "<redacted>"}, "body": {"messages": []}}]
    return SimpleNamespace(events=events, requests=requests, version="0.1.1rc1", log_path=None,
                           log_name="session.jsonl")


def _v2_run():
    tool = {"role": "tool", "toolCallId": "c", "content": [{"type": "text", "text": "x" * 40}]}
    events = [{"type": "permission/preset", "seq": 0, "data": {}},
              {"type": "system/message", "seq": 7, "data": {"message": {"role": "system"}}, "surfaceOp": "append"},
              {"type": "user/message", "seq": 8, "data": {"content": [], "role": "user"}, "surfaceOp": "append"},
              {"type": "assistant/attempt", "seq": 9, "data": {"stream": [{"chunk": {"reason": {
                  "failure": {"code": "CONTEXT_WINDOW_EXCEEDED"}}}}]}},
              {"type": "assistant/message", "seq": 10, "data": {"message": {"content": []}, "stream": []},
               "surfaceOp": "append"},
              {"type": "tool/result", "seq": 11, "data": {"message": tool}, "surfaceOp": "append"},
              {"type": "compaction/summary", "seq": 12, "data": {"shadowedRange": {"start": 8, "end": 11}}},
              {"type": "user/message", "seq": 13, "data": {"source": {"kind": "compact-checkpoint"}},
               "surfaceOp": {"op": "replace", "startSeq": 8, "endSeq": 11}}]
    requests = [{"path": "/v1/messages", "headers": {"x-api-key": "<redacted>", "anthropic-version": "2023-06-01"},
                 "body": {"messages": [], "dsh_plugin_packages": []}}]
    return SimpleNamespace(events=events, requests=requests, version="0.2.1rc2", log_path=None,
                           log_name="session.v4.jsonl", header={"type": "session", "version": 4})


def test_drift_names_every_recorded_change():
    found = {f.id: f for f in d.drift(_v1_run(), _v2_run())}
    assert found["log-header-version"].expected == 0 and found["log-header-version"].observed == 4
    assert found["log-file-name"].observed == "session.v4.jsonl"
    assert "system/message" in found["surface-event-types"].observed
    assert found["surface-op-replace-shape"].observed == ["endSeq", "op", "startSeq"]
    assert found["tool-result-shape"].observed.startswith("role=tool")
    assert found["wire-endpoint"].observed == ["/v1/messages"]
    assert found["wire-auth"].observed == ["anthropic-version", "x-api-key"]
    assert found["wire-body-fields"].observed == ["dsh_plugin_packages"]
    assert {"system/message", "assistant/attempt", "permission/preset"} <= set(found["new-event-types"].observed)
    assert found["overflow-failure-event"].observed == "assistant/attempt"
    assert found["checkpoint-source"].observed == "compact-checkpoint"
    assert "pinned" in found["checkpoint-range-start"].observed
    assert found["assistant-stream-storage"].observed.startswith("inline")
    assert found["compaction-paths"].expected == ["compaction/prune", "compaction/summary"]
    assert found["compaction-paths"].observed == ["compaction/summary"] and "'compaction/prune': 7" in \
        found["compaction-paths"].evidence


def test_no_drift_between_a_run_and_itself():
    assert d.drift(_v1_run(), _v1_run()) == []
    assert d.drift(_v2_run(), _v2_run()) == []


def test_drift_against_the_spec_facts_when_a_is_not_installed():
    ids = {f.id for f in d.drift(d.SPEC_FACTS, _v2_run())}
    assert {"log-header-version", "wire-endpoint", "checkpoint-source", "overflow-failure-event"} <= ids
    assert not {f.id for f in d.drift(d.SPEC_FACTS, _v1_run())} - {"compaction-paths"}


def _runs(*compacting: bool):
    return [SimpleNamespace(events=[{"type": "compaction/prune", "seq": 3}] if c else [], requests=[], version=v,
                            log_path=None) for c, v in zip(compacting, ("0.1.1rc1", "0.2.1rc2", "0.2.1rc2"))]


def test_headroom_finding_needs_the_behavioural_pattern():
    config = {"contextWindow": 16000, "thresholdRatio": 0.5, "requestMaxTokens": 1024}
    (f,) = d.headroom_drift(*_runs(True, False, True), config=config, headroom_small=512)
    assert f.expected["threshold"] == 8000
    assert f.observed["budget_default"] == 16000 - 1024 - 65536 and f.observed["threshold_headroom_small"] == 8000
    assert d.headroom_drift(*_runs(True, True, True), config=config, headroom_small=512) == []
    assert d.headroom_drift(*_runs(True, False, False), config=config, headroom_small=512) == []


def _schema(basic_keys, pruner_default=8192, rows=("compaction-basic", "tool-result-pruner", "token-meter")):
    props = {"compaction-basic": {k: {} for k in basic_keys},
             "tool-result-pruner": {"thresholdChars": {"default": pruner_default}, "headChars": {}, "tailChars": {}},
             "token-meter": {}}
    defs, clauses = {}, []
    for n, row in enumerate(rows):
        defs[f"config{n}"] = {"anyOf": [{"type": ["object", "null"], "properties": props[row]}]}
        clauses.append({"if": {"properties": {"name": {"const": d.ROW_PACKAGES[row]}}},
                        "then": {"properties": {"config": {"anyOf": [{"$ref": f"#/$defs/config{n}"}]}}}})
    return {"$defs": {**defs, "entry": {"allOf": [{"$ref": "#/$defs/entryMetadata"}, *clauses]}}}


def test_config_drift_on_a_dumped_schema():
    spec = d.SPEC_KEYS["compaction-basic"]
    assert d.config_drift(_schema(spec), "x") == []
    (f,) = d.config_drift(_schema(spec | {"headroomTokens"}), "x")
    assert f.id == "config-keys-compaction-basic" and "headroomTokens" in f.observed
    assert {f.id for f in d.config_drift(_schema(spec, 4096), "x")} == {"config-default-tool-result-pruner-thresholdChars"}
    assert {f.id for f in d.config_drift(_schema(spec, rows=("compaction-basic", "token-meter")), "x")} == {
        "config-row-tool-result-pruner"}


def test_merge_unions_event_types_and_keeps_compaction_paths_per_script():
    a = d.DriftFinding("new-event-types", "w", [], ["x"], "x@1")
    b = d.DriftFinding("new-event-types", "w", [], ["y"], "y@2")
    c = d.DriftFinding("compaction-paths", "w", {"p": 1}, {}, "e")
    same = d.DriftFinding("log-header-version", "w", 0, 4, "e")
    out = {f.id: f for f in r2.merge([("s1", a), ("s2", b), ("s1", c), ("s1", same), ("s2", same)])}
    assert out["new-event-types"].observed == ["x", "y"] and "x@1 (s1)" in out["new-event-types"].evidence
    e1 = d.DriftFinding("audit-event-types", "w", {}, {"system/message": ["r1"]}, "e")
    e2 = d.DriftFinding("audit-event-types", "w", {}, {"system/message": ["r2"], "tool/result": ["r3"]}, "e")
    assert {f.id: f for f in r2.merge([("s1", e1), ("s2", e2)])}["audit-event-types"].observed == {
        "system/message": ["r1", "r2"], "tool/result": ["r3"]}
    assert "compaction-paths:s1" in out and out["log-header-version"].observed == 4


def test_audit_drift_refuses_v4_then_names_the_rules_still_firing(tmp_path):
    log = tmp_path / "session.v4.jsonl"
    lines = [{"type": "session", "version": 4, "id": "s", "createdAt": 0, "delegationDepth": 0},
             {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
             {"type": "step/start", "seq": 1, "time": 1, "data": {"turn": 1, "step": 1}},
             {"type": "system/message", "seq": 2, "time": 1, "data": {"turn": 1, "step": 1, "message": {
                 "role": "system", "content": [{"type": "text", "text": "s"}]}}, "surfaceOp": "append"}]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    run = SimpleNamespace(log_path=log, version="0.2.1rc2", events=lines[1:])
    found = {f.id: f for f in d.audit_drift(run, {"contextWindow": 16000, "thresholdRatio": 0.5, "retainTokens": 10})}
    assert "unsupported session format version 4" in found["audit-raw"].observed
    assert found["audit-normalised"].observed == {"surface-op-forbidden": [2]}
    assert found["audit-event-types"].observed == {"system/message": ["surface-op-forbidden"]}
    assert json.loads(log.read_text().splitlines()[0])["version"] == 4  # the input is never modified


def test_normalise_renames_only_the_pure_renamings():
    out = [json.loads(x) for x in d.normalise_v4([
        json.dumps({"type": "session", "version": 4}),
        json.dumps({"type": "tool/result", "seq": 3, "surfaceOp": {"op": "replace", "startSeq": 1, "endSeq": 2}}),
        json.dumps({"type": "system/message", "seq": 4, "surfaceOp": "append"})])]
    assert out[0]["version"] == 0 and out[1]["surfaceOp"] == {"op": "replace", "start": 1, "end": 2}
    assert out[2]["surfaceOp"] == "append"


# -- one real 0.2.1rc2 run --------------------------------------------------------------------------------------

V2_PYTHON = os.environ.get(rel.V2_PYTHON_ENV, "")


@pytest.mark.skipif(not V2_PYTHON or not Path(V2_PYTHON).exists(), reason=f"dsh 0.2.1rc2 venv not found at {V2_PYTHON!r} "
                    "(set SURFACECHECK_DSH_V2_PYTHON; CI does not install it: see docs/e2e-drift.md)")
def test_real_021rc2_headroom_silences_pressure_and_small_headroom_restores_it(tmp_path):
    default = r2.run_v2(r2.PROBE, python=V2_PYTHON, keep_dir=tmp_path / "default", timeout=120)
    small = r2.run_v2(r2.PROBE, python=V2_PYTHON, keep_dir=tmp_path / "small", timeout=120,
                      headroom_tokens=r2.HEADROOM_SMALL)
    assert default.version == "0.2.1rc2" and default.log_name == "session.v4.jsonl"
    assert default.header["version"] == 4
    assert {r["path"] for r in default.requests} == {"/v1/messages"} and not default.server_errors
    assert not [e for e in default.events if e["type"].startswith("compaction/")]
    prunes = [e for e in small.events if e["type"] == "compaction/prune"]
    assert prunes, "headroomTokens 512 must let pressure prune fire on the 16000-token window"
    assert all(logged == model for _, logged, model in d.prune_prices(small.events))
    ids = {f.id for f in d.drift(d.SPEC_FACTS, small)}
    assert {"log-header-version", "surface-event-types", "surface-op-replace-shape", "wire-endpoint"} <= ids
    audit = {f.id: f for f in d.audit_drift(small, r2.PROBE["config"])}
    assert "version 4" in audit["audit-raw"].observed
    assert "surface-op-forbidden" in audit["audit-event-types"].observed["system/message"]
    (finding,) = d.headroom_drift(r2._spec_compacts(), default, small, config=r2.PROBE["config"],
                                  headroom_small=r2.HEADROOM_SMALL)
    assert finding.observed["compacts_default"] is False
    assert os.path.exists(small.log_path)
