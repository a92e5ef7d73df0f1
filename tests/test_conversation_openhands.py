"""The OpenHands SDK adapter (``surfacecheck/runtime/conversation/openhands_peer.py``) through the suite's own client:
one peer for the module, each test opening its own session; the registered findings replay broken on OpenHands
and held on the reference; the interpreter finder says what it tried and how to fix it when no Python 3.12 is
found."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from surfacecheck.contract import promises, registry
from surfacecheck.contract.driver import Driver, default_provider
from surfacecheck.contract.replay import read_contract_trace, replay
from surfacecheck.core.protocol import ProtocolError
from surfacecheck.runtime.conversation.interpreters import NoInterpreter, find_python
from surfacecheck.runtime.registry import open_spec

SYSTEM = "You are terse."
REFERENCE_SMALL = {"trigger_tokens": 200, "keep_tokens": 50}
"""The reference's settings for a witness's replay: OpenHands' own settings mean nothing to it, and a small trigger
makes it compact where OpenHands did."""
FINDINGS = registry.for_runtime(registry.load(None, tuple(p.id for p in promises.PROMISES)), "openhands")


@pytest.fixture(scope="module")
def rt():
    runtime = open_spec("openhands", 120)
    yield runtime
    runtime.close()


def user(text):
    return {"role": "user", "text": text}


def assistant(text, calls=None):
    return {"role": "assistant", "text": text, **({"calls": calls} if calls else {})}


def call(cid, size=10):
    return {"id": cid, "name": "fetch", "args": {"size": size, "tag": cid}}


def kinds(answer):
    return [step["kind"] for step in answer["steps"]]


def plain(messages):
    return [(m["role"], m.get("text", ""), [c["id"] for c in m.get("calls") or []], m.get("summary", False))
            for m in messages]


def test_hello_and_open_echo_the_condensers_own_defaults(rt):
    hello = rt.hello()
    assert hello["levels"] == ["conversation"] and hello["runtime"] == {"name": "openhands", "version": "1.58.2"}
    assert "bench" in hello["ops"]
    opened = rt.call("open", {"settings": {}, "system": SYSTEM})
    assert opened["settings"]["max_size"] == 240 and opened["settings"]["keep_first"] == 2
    assert opened["trigger"] == {"kind": "messages", "value": 239, "counter": "runtime"}
    assert rt.call("open", {"settings": {"compaction": False}})["trigger"] is None


def test_an_unknown_or_refused_setting_is_bad_args(rt):
    with pytest.raises(ProtocolError) as caught:
        rt.call("open", {"settings": {"keep": ["messages", 3]}})
    assert caught.value.type == "bad-args" and "'keep'" in str(caught.value)
    with pytest.raises(ProtocolError) as caught:  # keep_first must leave room below max_size // 2
        rt.call("open", {"settings": {"max_size": 6, "keep_first": 3}})
    assert caught.value.type == "bad-args" and "keep_first" in str(caught.value)


def test_a_round_trip_records_each_request_as_sent_and_the_history(rt):
    rt.call("open", {"settings": {}, "system": SYSTEM, "history": [user("hi"), assistant("hello")]})
    answer = rt.call("turn", {"user": "fetch two", "replies": [
        {"text": "on it", "calls": [call("c1"), call("c2", 5)]}, {"text": "got them"}]})
    assert kinds(answer) == ["request", "request"]
    first, second = answer["steps"]
    assert first["system"] == SYSTEM and first["overflow"] is False
    assert plain(first["messages"]) == plain([user("hi"), assistant("hello"), user("fetch two")])
    assert plain(second["messages"][3:4]) == [("assistant", "on it", ["c1", "c2"], False)]
    assert [(m["role"], m["call_id"], m["text"]) for m in second["messages"][4:]] == [
        ("tool", "c1", "c1 lorem ipsu"), ("tool", "c2", "c2 lorem")]
    assert plain(answer["history"]) == plain(second["messages"]) + [("assistant", "got them", [], False)]


def test_one_condensation_by_size_marks_its_summary_and_reaches_the_next_request(rt):
    rt.call("open", {"settings": {"max_size": 8, "keep_first": 1}, "system": "S"})
    answer = rt.call("turn", {"user": "go", "replies": [{"calls": [call(f"c{i}")]} for i in range(6)],
                              "summaries": [{"text": "THE GIST"}]})
    assert kinds(answer) == ["request"] * 4 + ["summarizer", "compaction"] + ["request"] * 3
    summarizer, compaction, after = answer["steps"][4:7]
    assert summarizer["output"] == "THE GIST" and "c0 lorem ipsu" in summarizer["prompt"]
    assert compaction["cause"] == "size" and (compaction["count_before"], compaction["count_after"]) == (10, 4)
    assert compaction["after"][0] == {"role": "user", "text": "THE GIST", "summary": True}
    assert plain(compaction["after"][1:]) == plain(compaction["before"][-2:])
    assert plain(after["messages"][:3]) == plain(compaction["after"])
    assert answer["history"][0]["summary"] is True


def test_an_overflow_is_a_condensation_request_and_compact_is_condense(rt):
    history = [user("q0"), assistant("a0"), user("q1"), assistant("a1"), user("q2"), assistant("a2")]
    rt.call("open", {"settings": {}, "history": history})
    answer = rt.call("turn", {"user": "now", "overflow_above": 30})
    assert kinds(answer)[:3] == ["request", "summarizer", "compaction"]
    assert answer["steps"][0]["overflow"] is True and answer["steps"][2]["cause"] == "overflow"
    rt.call("open", {"settings": {}, "history": history})
    direct = rt.call("compact", {"summaries": [{"text": "older half"}]})
    assert kinds(direct) == ["summarizer", "compaction"] and direct["steps"][1]["cause"] == "direct"


def test_bench_times_the_trigger_check_per_appended_event(rt):
    points = rt.call("bench", {"sizes": [10, 100], "repeats": 3})["points"]
    assert [p["messages"] for p in points] == [10, 100]
    assert all(p["seconds_per_append"] > 0 and p["from_events_seconds"] > 0 for p in points)


def test_openhands_has_registered_findings():
    assert len(FINDINGS) >= 8 and all(f.trace_path.is_file() for f in FINDINGS)


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.id)
def test_each_registered_witness_breaks_on_openhands_and_holds_on_the_reference(rt, finding):
    trace = read_contract_trace(str(finding.trace_path))
    driver = Driver(rt, "openhands", trace.provider or default_provider("openhands"))  # the module's one peer
    driver.open(trace.steps[0].args)
    for step in trace.steps[1:]:
        driver.run(step.op, step.args)
    assert finding.promise in {b.promise for b in promises.judge(driver.session)}, finding.id
    opened = dataclasses.replace(trace.steps[0], args={**trace.steps[0].args, "settings": {
        "compaction": trace.steps[0].args.get("settings", {}).get("compaction", True), **REFERENCE_SMALL}})
    held = replay(dataclasses.replace(trace, steps=(opened, *trace.steps[1:])), "reference", timeout=30)
    assert held.verdict == "fixed", held.describe()


def test_the_finder_says_what_it_tried_and_how_to_fix_it(tmp_path):
    environ = {"SURFACECHECK_PYTHON312": sys.executable, "PATH": str(tmp_path)}  # the suite's 3.11, no PATH
    with pytest.raises(NoInterpreter) as caught:
        find_python((3, 12), environ, home=tmp_path)
    message = str(caught.value)
    assert f"SURFACECHECK_PYTHON312={sys.executable} (Python 3.11)" in message
    assert "Install Python 3.12" in message and "set SURFACECHECK_PYTHON312=" in message
    assert find_python((3, 11), environ, home=tmp_path) == sys.executable


def test_without_an_interpreter_the_cli_exits_2_with_the_fix_before_anything_runs(tmp_path):
    env = {**os.environ, "SURFACECHECK_PYTHON312": sys.executable, "PATH": str(tmp_path), "HOME": str(tmp_path),
           "SURFACECHECK_CACHE": str(tmp_path / "cache")}
    env.pop("SURFACECHECK_PYTHON", None)
    done = subprocess.run([sys.executable, "-m", "surfacecheck", "contract", "--runtime", "openhands"],
                          capture_output=True, text=True, timeout=120, env=env, cwd=Path(__file__).parents[1], check=False)
    assert done.returncode == 2, done.stderr
    assert "needs Python >= 3.12" in done.stderr and "SURFACECHECK_PYTHON312=" in done.stderr
    assert not (tmp_path / "cache").exists()
