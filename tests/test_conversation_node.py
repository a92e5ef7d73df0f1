"""The Node conversation adapters (``runtimes/conversation-node/``): gemini-cli-core's chat compression (``gemini``)
and the AI SDK's ``pruneMessages`` (``ai``) through the suite's own client, the JavaScript neutral size against
Python's, and every registered witness of theirs: broken on its runtime, held on the reference runtime."""
from __future__ import annotations

import json
import random
import subprocess

import pytest

from surfacecheck.contract import promises, registry
from surfacecheck.contract.driver import Driver
from surfacecheck.contract.replay import read_contract_trace
from surfacecheck.core.protocol import ProtocolError
from surfacecheck.runtime.conversation import node
from surfacecheck.runtime.conversation.peer import neutral_tokens
from surfacecheck.runtime.dsh import node_binary
from surfacecheck.runtime.registry import open_spec

FINDINGS = [f for f in registry.load(None, tuple(p.id for p in promises.PROMISES)) if f.runtime in ("gemini", "ai")]


@pytest.fixture(scope="module", params=["gemini", "ai"])
def rt(request):
    runtime = open_spec(request.param, 60)
    yield request.param, runtime
    runtime.close()


def user(text):
    return {"role": "user", "text": text}


def assistant(text, calls=None):
    return {"role": "assistant", "text": text, **({"calls": calls} if calls else {})}


def call(cid, size=10):
    return {"id": cid, "name": "fetch", "args": {"size": size, "tag": cid}}


def tool(cid, text, packed):
    return {"role": "tool", "call_id": cid, "text": text, "packed": packed}


def _random_messages(rng: random.Random, n: int) -> list[dict]:
    alphabet = "abc xyz\"\\\n\té😀\u2028\x7f中"
    text = lambda: "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))  # noqa: E731
    out = []
    for i in range(n):
        kind = rng.randrange(3)
        if kind == 0:
            out.append(user(text()))
        elif kind == 1:
            args = {"size": rng.randint(0, 999), "tag": text(), "nested": {"z": [1, text()], "a": rng.randint(-5, 5)}}
            out.append(assistant(text(), [{"id": f"c{i}", "name": rng.choice(["fetch", "fé😀"]), "args": args}]))
        else:
            out.append({"role": "tool", "call_id": f"c{i}", "text": text()})
    return out


def test_the_javascript_neutral_size_equals_pythons():
    node_path = node_binary()
    assert node_path is not None, node.INSTALL_HINT
    rng = random.Random(7)
    cases = [(_random_messages(rng, rng.randint(0, 6)), rng.choice([None, "", "sys é😀"])) for _ in range(40)]
    script = ("import('" + (node.ADAPTER / "peer.mjs").as_uri() + "').then((p) => {"
              "const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
              "console.log(JSON.stringify(cases.map(([m, s]) => p.neutralTokens(m, s))));});")
    done = subprocess.run([node_path, "-e", script], input=json.dumps(cases), capture_output=True, text=True,
                          timeout=30, check=True)
    assert json.loads(done.stdout) == [neutral_tokens(m, s) for m, s in cases]


def test_hello_names_the_installed_package_and_whether_it_summarizes(rt):
    name, runtime = rt
    hello = runtime.hello()
    assert hello["levels"] == ["conversation"] and "bench" in hello["ops"]
    assert hello["runtime"] == {"name": name, "version": node.PACKAGES[name][1]}
    assert hello["summarizes"] is (name == "gemini")


def test_an_unknown_setting_is_bad_args_naming_the_key(rt):
    _, runtime = rt
    with pytest.raises(ProtocolError) as caught:
        runtime.call("open", {"settings": {"bogus": 1}})
    assert caught.value.type == "bad-args" and "'bogus'" in str(caught.value)


def test_a_history_round_trips_with_packed_results(rt):
    name, runtime = rt
    history = [user("hi"), assistant("", [call("c1"), call("c2")]), tool("c1", "c1 lorem", 2), tool("c2", "c2 x", 2),
               assistant("ok"), user("more"), assistant("", [call("c3")]), tool("c3", "c3 y", 6), assistant("done")]
    opened = runtime.call("open", {"settings": {}, "history": history, "system": "terse"})
    assert opened["settings"]["compaction"] is True
    answer = runtime.call("turn", {"user": "again", "replies": [{"calls": [call("c4", 5), call("c5", 3)]}]})
    requests = [s for s in answer["steps"] if s["kind"] == "request"]
    assert [s["kind"] for s in answer["steps"]] == ["request", "request"]  # the defaults compact nothing here
    assert requests[0]["messages"] == history + [user("again")]
    assert requests[0]["system"] == "terse"
    tail = answer["history"][-4:]
    assert [m["role"] for m in tail] == ["assistant", "tool", "tool", "assistant"]
    assert tail[1]["packed"] == tail[2]["packed"] == len(history) + 2 - 1  # both results in one runtime message
    assert tail[1]["text"] == "c4 lorem"


def test_the_direct_compaction_is_the_runtimes_own(rt):
    name, runtime = rt
    history = [user("q0"), assistant("", [call("c1", 400)]), tool("c1", "c1 " + "x" * 400, 2), assistant("a0"),
               user("q1"), assistant("a1")]
    settings = {} if name == "gemini" else {"toolCalls": "before-last-message"}
    runtime.call("open", {"settings": settings, "history": history})
    answer = runtime.call("compact", {"summaries": [{"text": "the gist"}, {"text": "the gist, checked"}]})
    compaction = answer["steps"][-1]
    assert compaction["kind"] == "compaction" and compaction["cause"] == "direct"
    if name == "gemini":  # a summary, then its verification (the "Probe"), then the kept tail
        assert [s["outcome"] for s in answer["steps"][:2]] == ["text", "text"]
        assert "q0" in answer["steps"][0]["prompt"] and "<state_snapshot>" in answer["steps"][0]["prompt"]
        assert answer["history"][0] == {"role": "user", "text": "the gist, checked", "summary": True}
    else:  # the call and its result are pruned, the emptied assistant message removed
        assert answer["history"] == [user("q0"), assistant("a0"), user("q1"), assistant("a1")]


def test_bench_times_the_pre_call_check(rt):
    _, runtime = rt
    result = runtime.call("bench", {"sizes": [10, 100], "repeats": 3})
    assert [p["messages"] for p in result["points"]] == [10, 100]
    assert all(p["seconds_per_append"] > 0 for p in result["points"])


def _breaches(runtime, spec, trace, settings=None):
    """The witness's steps on ``runtime`` (``settings`` in place of its open settings when given), judged."""
    driver = Driver(runtime, spec, trace.provider or "anthropic")
    args = dict(trace.steps[0].args)
    if settings is not None:
        args["settings"] = settings
    driver.open(args)
    for step in trace.steps[1:]:
        driver.run(step.op, step.args)
    return [b for b in promises.judge(driver.session) if b.promise == trace.property]


def test_each_witness_breaks_on_its_runtime_and_holds_on_the_reference(rt):
    """Every registered witness of the runtime, on the module's process (``surfacecheck findings`` replays them
    each in a fresh one), and on the reference runtime with its open settings dropped (they are the runtime's own)."""
    name, runtime = rt
    mine = [f for f in FINDINGS if f.runtime == name]
    assert mine
    reference = open_spec("reference", 30)
    try:
        for finding in mine:
            trace = read_contract_trace(finding.trace_path)
            assert _breaches(runtime, name, trace), finding.id
            assert _breaches(reference, "reference", trace, settings={}) == [], finding.id
    finally:
        reference.close()
