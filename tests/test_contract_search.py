"""The contract search on a small conversation runtime of its own: it finds a broken promise, shrinks the witness,
writes a trace that reads back and replays (exit 1 on the runtime that breaks it, 0 on one that keeps it), gives
the same witness for the same seed, and is inconclusive when the runtime hangs."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from surfacecheck.cli import main
from surfacecheck.contract import replay as contract_replay
from surfacecheck.contract import search as contract_search
from surfacecheck.contract.conversations import histories, number_replies, turn_scripts
from surfacecheck.contract.search import search, trace_name, write_traces
from surfacecheck.contract.session import Breach
from surfacecheck.contract.settings import settings_for
from surfacecheck.core.protocol import RuntimeUnavailable
from surfacecheck.core.trace import TraceError, read_trace
from surfacecheck.runtime import registry
from surfacecheck.runtime.conversation.peer import check_messages, tool_result

BOUND = 6
PROMISE = "test-history-bounded"
QUIET = lambda line: None  # noqa: E731 - progress lines are not under test


class FakeConversation:
    """A conversation runtime in a few lines: a turn appends the user message and the scripted replies with their
    tool results; above ``max_messages`` (None: never) a turn or a direct compact keeps a summary and the last
    ``keep`` messages. ``hang``: every turn and compact is a runtime that stopped answering."""

    def __init__(self, name: str, max_messages: int | None = None, keep: int = 4, hang: bool = False):
        self.name, self.max_messages, self.keep, self.hang = name, max_messages, keep, hang
        self.history: list[dict] = []

    def hello(self) -> dict:
        return {"protocol": "surfacecheck-runtime/1", "name": self.name, "levels": ["conversation"],
                "ops": ["open", "turn", "compact"]}

    def close(self) -> None:
        pass

    def call(self, op: str, args: dict) -> dict:
        if op == "open":
            self.history = list(args.get("history") or [])
            return {"settings": {"compaction": True, **(args.get("settings") or {})}, "trigger": None}
        if self.hang:
            raise RuntimeUnavailable("timeout", "no answer within 1 s")
        steps: list[dict] = []
        if op == "turn":
            self.history.append({"role": "user", "text": args["user"]})
            for reply in args.get("replies") or ():
                calls = reply.get("calls") or []
                self.history.append({"role": "assistant", "text": reply.get("text", ""), **({"calls": calls} if calls else {})})
                self.history += [{"role": "tool", "call_id": c["id"], "text": tool_result(c["args"])} for c in calls]
        if self.max_messages is not None and (len(self.history) > self.max_messages or op == "compact"):
            before = list(self.history)
            self.history = [{"role": "user", "text": "Here is a summary.", "summary": True}] + before[-self.keep:]
            steps.append({"kind": "compaction", "before": before, "after": list(self.history),
                          "cause": "direct" if op == "compact" else "size", "count_before": None, "count_after": None})
        return {"steps": steps, "history": list(self.history)}


def bounded(session) -> list[Breach]:
    """A promise of the test's own: no answer's history holds more than BOUND messages."""
    for exchange in session.exchanges:
        size = len(exchange.answer.get("history") or [])
        if size > BOUND:
            return [Breach(PROMISE, exchange.number, f"the history holds {size} messages, above {BOUND}", BOUND, size)]
    return []


bounded.promises = (PROMISE,)
RUNTIMES = {
    "reference:test-grows": lambda: FakeConversation("reference:test-grows"),
    "reference:test-keeps": lambda: FakeConversation("reference:test-keeps", max_messages=BOUND, keep=4),
    "reference:test-hangs": lambda: FakeConversation("reference:test-hangs", hang=True),
}


@pytest.fixture(autouse=True, scope="module")
def fakes():
    for spec, factory in RUNTIMES.items():
        registry.register_variant(spec, factory)
    contract_replay.register_judge(PROMISE, bounded)
    yield
    for spec in RUNTIMES:
        registry._VARIANTS.pop(spec, None)
    contract_replay._JUDGES.pop(PROMISE, None)


def _search(spec: str = "reference:test-grows", seed: int = 11, **kw):
    return search(spec, seed=seed, examples=60, judge=bounded, deadline_seconds=60, progress=QUIET, **kw)


@pytest.fixture(scope="module")
def grown(fakes):
    """The search of the runtime whose history grows without bound, once for the tests that read its witness."""
    return _search()


def test_the_search_finds_the_broken_promise_and_shrinks_its_witness(grown):
    result = grown
    assert result.exit_code == 1 and set(result.found) == {PROMISE}
    found = result.found[PROMISE]
    assert found.breach.step == len(found.steps)  # the witness ends where the promise breaks
    assert found.steps[0].op == "open" and len(found.steps) <= 3
    assert BOUND < found.messages <= 12
    assert all(step.label for step in found.steps)
    assert result.rounds == 1  # every promise the judge checks was found: no second round


def test_the_witness_trace_round_trips_and_replays(grown, tmp_path, capsys):
    result = grown
    [path] = write_traces(result, tmp_path).values()
    assert path.name == trace_name("reference:test-grows", PROMISE) == f"contract-reference-test-grows-{PROMISE}.jsonl"
    trace = contract_replay.read_contract_trace(path)
    assert (trace.source, trace.level, trace.property) == ("contract", "conversation", PROMISE)
    assert (trace.runtime, trace.provider, trace.seed) == ("reference:test-grows", "anthropic", 11)
    assert [(s.op, s.args, s.label) for s in trace.steps] == [(s.op, s.args, s.label) for s in result.found[PROMISE].steps]
    assert trace.violation.step == result.found[PROMISE].breach.step
    assert read_trace(path).dumps().splitlines()[1:] == path.read_text().splitlines()[1:]

    assert main(["replay", str(path)]) == 1
    assert "still fails" in capsys.readouterr().out
    assert main(["replay", str(path), "--runtime", "reference:test-keeps", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "fixed"
    assert main(["replay", str(path), "--runtime", "reference:test-hangs"]) == 3


def test_a_bad_conversation_trace_is_exit_2_naming_its_line(grown, tmp_path, capsys):
    result = grown
    [path] = write_traces(result, tmp_path).values()
    lines = path.read_text().splitlines()
    step = json.loads(lines[1])
    step["op"] = "turn"  # a conversation trace opens with open
    path.write_text("\n".join([lines[0], json.dumps(step)] + lines[2:]) + "\n")
    assert main(["replay", str(path)]) == 2
    assert f"{path}:2:" in capsys.readouterr().err
    with pytest.raises(TraceError):
        contract_replay.read_contract_trace(path)


def test_the_same_seed_gives_the_same_witness(grown):
    first, second = grown, _search()
    assert [(s.op, s.args) for s in first.found[PROMISE].steps] == [(s.op, s.args) for s in second.found[PROMISE].steps]
    assert first.examples == second.examples


def test_a_runtime_that_keeps_the_promise_gives_no_witness():
    result = _search("reference:test-keeps")
    assert result.exit_code == 0 and result.found == {} and result.examples >= 60


def test_a_runtime_that_hangs_is_inconclusive():
    result = _search("reference:test-hangs")
    assert result.exit_code == 3 and result.found == {}
    assert result.inconclusive.startswith("timeout:")


def test_the_command_writes_the_witness_and_prints_the_table(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(contract_search, "default_judge", lambda: bounded)
    monkeypatch.setattr(contract_search, "promise_ids", lambda judge=None: (PROMISE,))
    code = main(["contract", "--runtime", "reference:test-grows", "--seed", "3", "--examples", "40",
                 "--out", str(tmp_path), "--json"])
    out = capsys.readouterr()
    document = json.loads(out.out)
    assert code == 1 and document["exit_code"] == 1 and document["seed"] == 3
    [row] = document["promises"]
    assert row["status"] == "broken" and (tmp_path / "traces" / trace_name("reference:test-grows", PROMISE)).is_file()
    assert "seed 3" in out.err
    assert main(["contract", "--runtime", "reference:test-keeps", "--examples", "10", "--out", str(tmp_path)]) == 0
    assert f"{PROMISE}  held" in capsys.readouterr().out


def test_a_runtime_without_the_conversation_level_is_a_usage_error(capsys):
    # dsh and embedded are bridged (test_conversation_eventlog.py); a cmd: child serving dsh's log levels is not
    assert main(["contract", "--runtime", f"cmd:{sys.executable} -m surfacecheck.serve model", "--budget", "5"]) == 2
    assert "conversation level" in capsys.readouterr().err


@settings(max_examples=40, deadline=None)
@given(history=histories(), script=turn_scripts())
def test_histories_are_neutral_messages_whose_calls_are_answered_in_order(history, script):
    check_messages(history)
    ids = [c["id"] for m in history for c in m.get("calls") or ()]
    assert len(ids) == len(set(ids))
    answered = [m["call_id"] for m in history if m["role"] == "tool"]
    assert answered == ids[: len(answered)]  # results in call order; only the tail's calls may be pending
    numbered, _ = number_replies(script, len(ids) + 1)
    new = [c["id"] for r in numbered["replies"] for c in r.get("calls") or ()]
    assert not set(new) & set(ids) and len(new) == len(set(new))


@pytest.mark.parametrize("spec", ["langchain", "strands", "openhands", "reference:cut-toward-tail", "cmd:./x"])
def test_every_runtime_draws_its_defaults_first(spec):
    strategy = settings_for(spec)
    seen = []

    @settings(max_examples=30, deadline=None, database=None)
    @given(st.data())
    def draw(data):
        seen.append(data.draw(strategy))

    draw()
    assert {} in seen


CHILD = f"cmd:{sys.executable} {Path(__file__).with_name('contract_fake_runtime.py')}"


def test_a_child_process_runtime_is_searched_through_the_protocol():
    result = search(CHILD, seed=2, examples=30, judge=bounded, deadline_seconds=60, progress=QUIET, timeout=5)
    assert result.exit_code == 1 and result.found[PROMISE].messages <= 12


def test_a_child_that_hangs_is_inconclusive():
    result = search(CHILD + " hang", seed=2, examples=30, judge=bounded, deadline_seconds=60, progress=QUIET,
                    timeout=0.5)
    assert result.exit_code == 3 and result.inconclusive.startswith("timeout")


def test_the_budget_ends_the_search_between_examples():
    result = search("reference:test-keeps", seed=1, examples=100_000, judge=bounded, deadline_seconds=0.5,
                    progress=QUIET)
    assert result.out_of_time and result.exit_code == 0 and result.seconds < 10


def test_a_witness_records_its_command_without_this_machine_s_out_folder():
    from surfacecheck.contract.cli import _portable

    argv = ["contract", "--runtime", "langchain", "--out", "/tmp/x", "--seed", "3", "--out=/tmp/y"]
    assert _portable(argv) == ["contract", "--runtime", "langchain", "--seed", "3"]
