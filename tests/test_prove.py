"""Issue 5: the Z3 obligations prove at a small bound, every negative control is refuted and its trace
replays to the violation, the encoding agrees with the executable model, and the CLI/stage work."""
from __future__ import annotations

import json
import random

import pytest
import z3

from surfacecheck.properties.proofs import names, run_obligations
from surfacecheck.properties.proofs.obligation import PROVED, REFUTED
from surfacecheck.core.trace import read_trace

BOUND = 8  # small and fast; tests/test_prove_patched.py breaks the model and expects refutations


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    trace_dir = tmp_path_factory.mktemp("prove-traces")
    return {r.name: r for r in run_obligations(BOUND, trace_dir=trace_dir)}, trace_dir


def test_all_six_obligations_run(results):
    assert list(results[0]) == names() and len(names()) == 6


@pytest.mark.parametrize("name", names())
def test_obligation_proved_and_controls_refuted_and_replayed(results, name):
    result = results[0][name]
    assert result.status == PROVED, result.to_json()
    assert result.controls, "every obligation has a negative control"
    for control in result.controls:
        assert control.status == REFUTED, control.to_json()
        assert control.replayed is True, control.to_json()
        assert control.trace is not None and control.trace.violation is not None
        assert control.trace.violation.property == control.trace.property


def test_control_traces_are_shared_format_and_replay_with_exit_1(results):
    from surfacecheck.verify.replay import replay_trace

    paths = sorted(results[1].glob("*.jsonl"))
    assert len(paths) == sum(len(r.controls) for r in results[0].values())
    for path in paths:
        trace = read_trace(path)
        assert trace.source == "prove" and trace.steps[0].op == "reset"
        assert all(step.op in ("reset", "append", "cuts", "select_range", "compact", "configure", "request_error")
                   for step in trace.steps)
        outcome = replay_trace(trace)
        assert outcome.exit_code == 1, (path.name, outcome.describe())


def test_control_traces_hold_on_the_plain_model(results):
    """The violations are the wrong variants': the same steps through the reference model hold
    (except where the control drops a premise the model itself does not enforce)."""
    from surfacecheck.properties.proofs.replay import replay_steps

    for result in results[0].values():
        for control in result.controls:
            if control.runtime == "model":
                continue  # premise-dropping controls reproduce on the real model by design
            assert replay_steps(control.trace.steps, "model", control.trace.property) is None, control.name


def test_symbolic_execution_enumerates_every_path():
    from surfacecheck.properties.proofs.symexec import SymInt, explore

    x = z3.Int("x")

    def sign(value):
        if value < 0:
            return -1
        return 1 if value > 0 else 0

    paths = explore(lambda: sign(SymInt(x)))
    assert sorted(p.value for p in paths) == [-1, 0, 1]
    for path in paths:  # each path condition admits exactly the inputs that produce its value
        solver = z3.Solver()
        solver.add(path.condition, z3.Not({-1: x < 0, 0: x == 0, 1: x > 0}[path.value]))
        assert solver.check() == z3.unsat


def test_cut_legality_encoding_matches_the_executable_model_on_concrete_surfaces():
    """The declarative spec-7 answer the obligation states equals what ModelRuntime's select_range
    returns, on random well-formed surfaces (seeded)."""
    from surfacecheck.properties.proofs.concrete import ASSISTANT, RESULT, USER, min_price, surface_steps
    from surfacecheck.properties.proofs.monitors import cut_legality_problem
    from surfacecheck.runtime.select import open_runtime

    rng = random.Random(5)
    for _ in range(40):
        kinds, calls, prices, open_calls = [], [], [], 0
        for _ in range(rng.randint(0, 9)):
            kind = rng.choice([USER, ASSISTANT, RESULT] if open_calls else [USER, ASSISTANT])
            k = rng.randint(0, 3) if kind == ASSISTANT else 0
            open_calls += k if kind == ASSISTANT else (-1 if kind == RESULT else 0)
            kinds.append(kind), calls.append(k), prices.append(min_price(kind, k) + rng.randint(0, 30))
        steps, seqs = surface_steps(kinds, calls, prices)
        runtime = open_runtime("model")
        for step in steps:
            assert "error" not in runtime.call(step.op, step.args)
        assert runtime.call("measure", {})["prices"] == prices
        budget = rng.randint(0, sum(prices) + 20)
        answer = runtime.call("select_range", {"retain_tokens": budget})["range"]
        balanced = runtime.call("cuts", {})["balanced"]
        assert cut_legality_problem(seqs, balanced, prices, budget, answer) is None


def test_cli_json_is_one_document_and_exit_0(tmp_path, capsys):
    from surfacecheck.cli import main

    code = main(["prove", "--bound", "3", "--json", "--trace-dir", str(tmp_path), "--only",
                 "cut-legality,projection-equivalence"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["verdict"] == "proved"
    assert [o["name"] for o in report["obligations"]] == ["cut-legality", "projection-equivalence"]
    assert report["obligations"][1]["bound"] == "unbounded"
    assert all(c["trace"] and c["replayed"] for o in report["obligations"] for c in o["negative_controls"])


def test_cli_unknown_obligation_is_usage_error(capsys):
    from surfacecheck.cli import main

    assert main(["prove", "--only", "no-such", "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["exit_code"] == 2


def test_stage_reports_ok_with_junit_cases(tmp_path, monkeypatch):
    import io

    from surfacecheck.prove import stage as prove_stage
    from surfacecheck.core.stage import CheckContext

    monkeypatch.setattr(prove_stage, "STAGE_BOUND", 3)
    result = prove_stage.stage(CheckContext("model", None, False, tmp_path, io.StringIO()))
    assert result.status == "ok" and result.summary["verdict"] == "proved"
    assert len(result.cases) == 6 + 8 and not any(case.failure for case in result.cases)
    assert (tmp_path / "traces").is_dir()


def test_cut_legality_at_the_default_bound():
    """One obligation at the command's default bound (24 nodes) inside the suite's time budget."""
    from surfacecheck.properties.proofs import DEFAULT_BOUND, cut_legality

    status, clauses, cex, reached = cut_legality.prove(DEFAULT_BOUND)
    assert DEFAULT_BOUND >= 24 and status == PROVED and reached == DEFAULT_BOUND and cex is None
    assert all(clause.status == PROVED for clause in clauses)


@pytest.mark.parametrize("span_price, landed", [(103, False), (104, True)])
def test_smallest_span_on_the_executable_model(span_price, landed):
    """Obligation 6's number, on the model itself: a one-character summary (framed 103) replaces a span
    of 104 tokens and cannot replace one of 103."""
    from surfacecheck.properties.proofs.concrete import USER, NodeWriter
    from surfacecheck.runtime.select import open_runtime

    writer = NodeWriter()
    first = writer.node(USER, 0, span_price - 50)
    last = writer.node(USER, 0, 50)
    writer.node(USER, 0, 9)
    runtime = open_runtime("model")
    runtime.call("reset", {})
    for step in writer.steps:
        assert "error" not in runtime.call(step.op, step.args)
    result = runtime.call("compact", {"start": first, "end": last, "summary": {"outcome": "text", "text": "x"}})
    assert (result["kind"] == "success") is landed, result
    if not landed:
        assert "not smaller" in json.dumps(result["failure"])
