"""Real runs of the shipped dsh runtime (issue 8): every compaction path, the failure modes, loopback only.

Each run takes ~1.5 s here (2 cores, shared). Skipped only when the SDK is not importable AND ``CI`` is unset;
under CI the ``dsh`` extra is installed and these must run.
"""
from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from surfacecheck.model.config import RuntimePolicy
from surfacecheck.model.jsonl import read_log
from surfacecheck.model.meter import MeterState, fold_meter
from surfacecheck.audit.run import audit_log
from surfacecheck.e2e import config as cordis
from surfacecheck.e2e.runner import (RuntimeFailed, RuntimeNotInstalled, descendants, outside_loopback,
                                     run_script)
from surfacecheck.e2e.server import ScriptedServer

from e2e_helpers import kill_runtime_after

HAVE_SDK = importlib.util.find_spec("deepseek_harness") is not None
real = pytest.mark.skipif(not HAVE_SDK and not os.environ.get("CI"),
                          reason="deepseek-harness-sdk not installed (pip install -e '.[dsh]'); required under CI")

CONFIG = {"contextWindow": 16000, "thresholdRatio": 0.5, "retainTokens": 2000, "maxTokens": 1024,
          "compactionRetries": 1, "maxOverflowRetries": 1, "requestMaxTokens": 1024,
          "pruner": {"thresholdChars": 2000, "headChars": 200, "tailChars": 200}}


def tools(n: int, chars: int) -> list:
    return [{"tool": {"output_chars": chars}} for _ in range(n)]


def four_paths(**over) -> dict:
    """Threshold floor(16000*0.5) = 8000 tokens; the header (system + tools) prices ~1010.

    turn 1: six 6000-char outputs (~1512 tokens each): pressure, the pruner cuts each to 439 chars: prune only.
    turn 2: fourteen 1800-char outputs (below the pruner's 2000): pressure, pruning cannot relieve it: summary.
    turn 3: a 400 overflow on step 2: overflow compaction, then the same step retried (second generation).
    turn 4: its reply carries the marker: manual /compact after the turn.  turn 5: a plain reply.
    """
    doc = {"format": "surfacecheck-e2e-script/1", "name": "four-paths", "description": four_paths.__doc__,
           "config": copy.deepcopy(CONFIG), "usage": "fixed",
           "turns": [{"prompt": "turn one: big outputs", "replies": tools(6, 6000) + [{"text": "pruned"}]},
                     {"prompt": "turn two: medium outputs", "replies": tools(14, 1800) + [{"text": "summarised"}]},
                     {"prompt": "turn three: overflow", "replies": tools(1, 1800) + [{"overflow": True},
                                                                                     {"text": "recovered"}]},
                     {"prompt": "turn four: then compact", "replies": tools(1, 1800) + [{"text": "ready"}],
                      "compact": True},
                     {"prompt": "turn five", "replies": [{"text": "bye"}]}],
           "summaries": [{"outcome": "text", "ratio": 0.1}]}
    doc.update(over)
    return doc


def of_type(events, prefix):
    return [e for e in events if e.get("type", "").startswith(prefix)]


def turn_of(events, seq):
    """The dsh turn number (1-based) a seq falls in, from turn/start."""
    turn = None
    for e in events:
        if e.get("seq", -1) > seq:
            break
        if e.get("type") == "turn/start":
            turn = e["data"]["turn"]
    return turn


def audit_errors(run, script):
    policy = RuntimePolicy.from_json(cordis.policy_json(script["config"]))
    return [f.to_json() for f in audit_log(run.log_path, policy).findings if f.severity == "error"]


@pytest.fixture(scope="module")
def four_path_run(tmp_path_factory):
    if not HAVE_SDK and not os.environ.get("CI"):
        pytest.skip("deepseek-harness-sdk not installed")
    script = four_paths()
    return script, run_script(script, keep_dir=tmp_path_factory.mktemp("four"), timeout=120)


@real
def test_four_paths_fire_and_audit_clean(four_path_run):
    script, run = four_path_run
    ev = run.events
    assert run.version == "0.1.1rc1" and run.server_errors == []
    assert [t["finish_reason"] for t in run.turns] == ["completed"] * 5
    prunes = of_type(ev, "compaction/prune")
    starts = of_type(ev, "compaction/start")
    # pressure prune: turn 1 prunes (six outputs) and opens no summary bracket
    assert sum(turn_of(ev, e["seq"]) == 1 for e in prunes) >= 5
    assert not [e for e in starts if e["data"].get("turn") == 1]
    for e in prunes:
        assert e["data"]["shadowedTokenCount"] == 1512  # ceil((6000 + "[exit code: 0]" framing)/4)+8 per node
    # pressure summary in turn 2; overflow recovery in turn 3; manual /compact with turn null
    assert [e["data"].get("turn") for e in starts] == [2, 3, None]
    manual = starts[2]["data"]
    assert manual["sourceCommandId"].startswith("cmd-")
    done = of_type(ev, "command/done")
    assert len(done) == 1 and done[0]["data"]["kind"] == "success"
    assert re.fullmatch(r"Compacted \d+ history items \(~\d+ tokens\)\.", done[0]["data"]["text"])
    assert run.turns[3]["compact"] == done[0]["data"]
    # overflow: the step's request failed with CONTEXT_WINDOW_EXCEEDED, compaction, then the SAME step succeeded
    failed = [e for e in of_type(ev, "assistant/chunk")
              if e["data"]["chunk"].get("reason", {}).get("kind") == "error"]
    assert len(failed) == 1 and "maximum context length" in failed[0]["data"]["chunk"]["reason"]["failure"]["message"]
    step = (failed[0]["data"]["turn"], failed[0]["data"]["step"])
    retried = [e for e in of_type(ev, "assistant/message") if (e["data"]["turn"], e["data"]["step"]) == step]
    assert len(retried) == 1 and starts[1]["seq"] < retried[0]["seq"]
    # second generation: the overflow checkpoint replaced a span starting at the first checkpoint
    replaces = [e for e in ev if isinstance(e.get("surfaceOp"), dict) and e["surfaceOp"].get("op") == "replace"
                and e["type"] == "user/message"]
    assert len(replaces) == 3 and replaces[1]["surfaceOp"]["start"] == replaces[0]["seq"]
    # the server's record: 3 summary requests (header set), one 400, turns announced by the driver
    compact = [r for r in run.requests if r["compact"]]
    assert len(compact) == 3 and all(r["headers"]["x-deepseek-harness-compact"] == "1" for r in compact)
    assert [r["turn"] for r in run.requests if r["status"] == 400] == [2]
    # the runtime's own logger, made visible by the test plugin (the executable has no console logger)
    assert any("compaction (step pressure): shadowed" in line for line in run.runtime_log)
    assert any("compaction (context overflow recovery): shadowed" in line for line in run.runtime_log)
    assert audit_errors(run, script) == []


@real
def test_run_dir_holds_log_record_and_config(four_path_run):
    _, run = four_path_run
    assert run.log_path == run.run_dir / "session.jsonl" and run.log_path.is_file()
    header = json.loads(run.log_path.read_text().splitlines()[0])
    assert header["type"] == "session" and header["version"] == 0
    assert header["cwd"] == str(run.run_dir / "workspace")
    rows = [json.loads(line) for line in (run.run_dir / "requests.jsonl").read_text().splitlines()]
    assert len(rows) == len(run.requests) and rows[0]["index"] == 0
    assert json.loads((run.run_dir / "script.json").read_text())["name"] == "four-paths"
    assert {r["id"] for r in json.loads((run.run_dir / "cordis.json").read_text())} >= {
        "token-meter", "compaction-basic", "tool-result-pruner", "command-compact", "surfacecheck-compact"}
    assert list((run.run_dir / "workspace").iterdir()) == []  # tool calls only print
    assert (run.run_dir / "dsh-home").is_dir() and run.seconds > 0


@real
def test_failing_summarizer_closes_every_bracket_with_an_error(tmp_path):
    script = four_paths(name="failing", summaries=[{"outcome": "failure"}] * 30)
    run = run_script(script, keep_dir=tmp_path, timeout=120)
    ev = run.events
    ends = of_type(ev, "compaction/end")
    assert ends and all(e["data"].get("error") == "scripted summarizer failure" for e in ends)
    assert len(ends) == len(of_type(ev, "compaction/start")) and not of_type(ev, "compaction/summary")
    turn_ends = [e["data"]["reason"] for e in of_type(ev, "turn/end")]
    assert turn_ends[2]["kind"] == "error" and turn_ends[2]["error"]["code"] == "CONTEXT_WINDOW_EXCEEDED"
    assert run.turns[3]["compact"]["kind"] == "error"
    assert "could not produce a useful summary" in run.turns[3]["compact"]["text"]
    assert "[dsh warn basic-compaction-engine] step compaction failed: scripted summarizer failure; continuing " \
        "the turn" in run.runtime_log
    assert audit_errors(run, script) == []


@real
def test_realistic_usage_anchors_the_meter_on_reported_usage(tmp_path):
    """spec 4.2: fixed usage (16 tokens) never beats the estimate; realistic usage does."""
    script = four_paths(name="realistic", usage="realistic",
                        turns=four_paths()["turns"][:2])
    run = run_script(script, keep_dir=tmp_path, timeout=120)
    kinds = anchor_kinds(run.log_path)
    assert kinds.get("usage", 0) >= 10 and kinds["usage"] > kinds.get("estimated", 0)
    assert audit_errors(run, script) == []


def anchor_kinds(path) -> dict:
    log = list(read_log(path).events)
    state, kinds = MeterState(), {}
    for event in log:
        after = fold_meter(state, event, lambda s: log[s] if 0 <= s < len(log) else None)
        if after.anchor is not None and after.anchor is not state.anchor:
            kinds[after.anchor.baseline.kind] = kinds.get(after.anchor.baseline.kind, 0) + 1
        state = after
    return kinds


@real
def test_fixed_usage_keeps_the_heuristic(four_path_run):
    _, run = four_path_run
    assert set(anchor_kinds(run.log_path)) == {"estimated"}


def normalised(run) -> list[str]:
    text = run.log_path.read_text().replace(str(run.run_dir), "<run>")
    sid = json.loads(text.splitlines()[0])["id"]
    text = text.replace(sid, "<session>")
    text = re.sub(r'"(time|createdAt)":\d+', r'"\1":0', text)
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", text)
    text = re.sub(r"cmd-[0-9a-f]{8}-", "cmd-<token>-", text)
    return text.splitlines()


@real
def test_isolated_run_stays_on_loopback_and_reproduces_the_log(four_path_run, tmp_path):
    if shutil.which("strace") is None or subprocess.run(["unshare", "-rn", "true"]).returncode != 0:
        pytest.skip("this machine allows no unprivileged network namespace or has no strace")
    script, first = four_path_run
    run = run_script(script, keep_dir=tmp_path, timeout=180, stall_timeout=90, isolate_network=True,
                     trace_connect=True)
    assert run.isolated and run.connects, "strace recorded no connect()"
    assert outside_loopback(run.connects) == []
    assert any(c.startswith("AF_INET 127.0.0.1:") for c in run.connects)
    assert normalised(run) == normalised(first)  # same script, same log once times, ids and paths are normalised
    assert [r["reply"] for r in run.requests] == [r["reply"] for r in first.requests]


def test_namespace_blocks_a_non_loopback_connect():
    """Negative control for the isolation: inside `unshare -rn` a connect to a routable address fails."""
    if subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode != 0:
        pytest.skip("unprivileged network namespaces are not allowed here")
    probe = ("import socket,sys\ns=socket.socket();s.settimeout(2)\n"
             "try:\n s.connect(('192.0.2.1',80));print('connected')\nexcept OSError as e:print('blocked',e.errno)")
    out = subprocess.run(["unshare", "-rn", "python3", "-c", probe], capture_output=True, text=True, timeout=20)
    assert out.stdout.startswith("blocked")


def test_outside_loopback_flags_routable_targets():
    assert outside_loopback(["AF_INET 127.0.0.1:80", "AF_UNIX /var/run/nscd/socket", "AF_INET6 ::1:443"]) == []
    assert outside_loopback(["AF_INET 93.184.216.34:443", "AF_INET6 2001:db8::1:443"]) == [
        "AF_INET 93.184.216.34:443", "AF_INET6 2001:db8::1:443"]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def watch_tree(found: list, stop: threading.Event):
    def on_spawn(proc):
        while not stop.is_set() and proc.poll() is None:
            found.extend(p for p in descendants(proc.pid) if p not in found)
            time.sleep(0.05)
        found.insert(0, proc.pid)
    return on_spawn


@real
def test_server_that_stops_answering_fails_fast_and_kills_the_group(tmp_path):
    script = four_paths(name="hang")
    server = ScriptedServer(script)
    server.stop_answering()
    server.start()
    seen, stop = [], threading.Event()
    started = time.monotonic()
    try:
        with pytest.raises(RuntimeFailed) as failure:
            run_script(script, keep_dir=tmp_path, timeout=120, stall_timeout=4, server=server,
                       on_spawn=watch_tree(seen, stop))
    finally:
        stop.set()
        server.stop()
    assert time.monotonic() - started < 30  # the stall watchdog, not the 120 s wall clock
    message = str(failure.value)
    assert "runtime stalled: no model request and no finished turn for 4 s in phase 'turn 0'" in message
    assert "left 1 request(s) unanswered" in message
    time.sleep(0.2)
    assert len(seen) >= 2 and not [pid for pid in seen if alive(pid)]  # driver + runtime executable gone


@real
def test_killed_runtime_is_a_runtime_failure(tmp_path):
    script = four_paths(name="killed")
    server = ScriptedServer(script)
    server.start()
    try:
        with pytest.raises(RuntimeFailed) as failure:
            run_script(script, keep_dir=tmp_path, timeout=60, server=server, on_spawn=kill_runtime_after(server, 3))
    finally:
        server.stop()
    assert str(failure.value).startswith("runtime failed: the runtime executable was killed by signal 9")


@real
def test_temporary_run_dir_lives_as_long_as_the_result():
    run = run_script(four_paths(turns=[{"prompt": "hi", "replies": [{"text": "hello"}]}]), timeout=60)
    assert run.log_path.is_file() and (run.run_dir / "requests.jsonl").is_file()
    assert not (run.run_dir / "home").exists() and run.events[-1]["type"] == "turn/end"
    run_dir = run.run_dir
    run.discard()
    assert not run_dir.exists()


@real
def test_wall_clock_timeout_kills_a_slow_run(tmp_path):
    with pytest.raises(RuntimeFailed, match=r"runtime timed out after 0.5 s in phase '[\w ]+' \(process group killed"):
        run_script(four_paths(), keep_dir=tmp_path, timeout=0.5)


def test_sdk_not_importable_is_runtime_not_installed(tmp_path):
    python = tmp_path / "python-without-site"
    python.write_text(f"#!/bin/sh\nexec {os.path.realpath(os.sys.executable)} -S \"$@\"\n")
    python.chmod(0o755)
    with pytest.raises(RuntimeNotInstalled) as failure:
        run_script(four_paths(), python=str(python), timeout=30)
    assert "pip install -e '.[dsh]'" in str(failure.value)


def test_config_refuses_what_the_runtime_would_hang_on():
    with pytest.raises(cordis.ConfigError, match="headroomTokens"):
        cordis.resolve({"headroomTokens": 65536})
    with pytest.raises(cordis.ConfigError, match="must be below the threshold"):
        cordis.resolve({"contextWindow": 1000, "thresholdRatio": 0.5, "retainTokens": 500})
    with pytest.raises(cordis.ConfigError):
        run_script(four_paths(config={"contextWindow": 1000, "retainTokens": 900}))


def test_policy_json_is_what_the_model_loads():
    policy = RuntimePolicy.from_json(cordis.policy_json(CONFIG))
    assert policy.context_window == 16000
    assert cordis.policy_json(CONFIG)["toolResultPruner"] == CONFIG["pruner"]
    assert "toolResultPruner" not in cordis.policy_json({**CONFIG, "pruner": None})
    rows = cordis.cordis_rows({**CONFIG, "pruner": None}, session_root="/s", workspace="/w")
    assert "tool-result-pruner" not in [r["id"] for r in rows]
    llm = next(r for r in rows if r["id"] == "llm-deepseek")["config"]
    assert llm["models"][0]["contextWindow"] == 16000 and llm["retryPolicy"]["maxRetries"] == 0


@real
def test_summary_outcomes_and_parallel_tool_calls(tmp_path):
    """too-big / empty / truncated each fail their bracket with the runtime's own reason (spec 8.3, 8.5);
    the fourth summary lands. Replies with three parallel bash calls each."""
    script = four_paths(
        name="outcomes", config={**CONFIG, "contextWindow": 10000, "retainTokens": 1000, "compactionRetries": 0,
                                 "pruner": None},
        turns=[{"prompt": "parallel", "replies": [{"tools": [{"output_chars": 1800}] * 3}] * 6 + [{"text": "ok"}]}],
        summaries=[{"outcome": "too-big"}, {"outcome": "empty"}, {"outcome": "truncated"},
                   {"outcome": "text", "ratio": 0.05}])
    run = run_script(script, keep_dir=tmp_path, timeout=120)
    errors = [e["data"].get("error", "") for e in of_type(run.events, "compaction/end")]
    assert len(errors) == 4 and errors[3] == ""
    assert errors[0].startswith("summary is not smaller than the shadowed content")
    assert errors[1] == "summarization produced no text summary content"
    assert errors[2].startswith("summarization truncated at the token cap")
    calls = [e["data"]["callId"] for e in of_type(run.events, "tool/call")]
    assert calls == [f"call-0-{n}" for n in range(1, 19)]
    assert audit_errors(run, script) == []


def test_missing_plugin_is_refused(tmp_path):
    with pytest.raises(cordis.ConfigError, match="plugin is missing"):
        cordis.write_cordis(tmp_path / "c.json", CONFIG, session_root="/s", workspace="/w",
                            plugin_path=tmp_path / "absent.mjs")
    path = cordis.write_cordis(tmp_path / "c.json", CONFIG, session_root="/s", workspace="/w")
    rows = json.loads(path.read_text())
    plugin = next(r for r in rows if r["id"] == "surfacecheck-compact")
    assert Path(plugin["name"]).is_file() and plugin["config"]["marker"] == "[[surfacecheck:compact]]"
