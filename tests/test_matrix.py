"""``surfacecheck matrix``: the contract on several runtimes, one table; the same seed gives the same table; a cell
is held only where the search met what the promise judges."""
from __future__ import annotations

import json

import pytest

from surfacecheck.cli import main as cli_main
from surfacecheck.contract import promises
from surfacecheck.contract.premises import PREMISES, exercised
from surfacecheck.contract.session import Exchange, Session
from surfacecheck.matrix import run as matrix_run
from surfacecheck.matrix.cells import BROKEN, HELD, NOT_APPLICABLE, NOT_EXERCISED
from surfacecheck.matrix.run import run_matrix
from surfacecheck.reports.matrix_page import cell_md, markdown

SEED = 3
EXAMPLES = 12


def _run(tmp_path, runtimes, name="out"):
    return run_matrix(runtimes, seed=SEED, examples=EXAMPLES, trace_dir=tmp_path / name / "traces", timeout=30.0,
                      say=lambda line: None)


def test_every_promise_has_a_premise():
    assert set(PREMISES) == {p.id for p in promises.PROMISES}


def test_a_session_without_compaction_exercises_no_compaction_promise():
    answer = {"steps": [{"kind": "request", "system": None, "messages": [{"role": "user", "text": "hi"}],
                         "overflow": False, "tokens": None}], "history": [{"role": "user", "text": "hi"}]}
    session = Session("reference", {"compaction": True}, {"kind": "tokens", "value": 100, "counter": "runtime"},
                      None, (), "anthropic", (Exchange(2, "turn", {"user": "hi"}, answer),))
    got = exercised(session)
    assert "contract-under-threshold-noop" in got
    assert not got & {"contract-no-orphan-created", "contract-summarizer-used", "contract-fits-after"}


def test_the_variant_breaks_its_promise_and_the_control_keeps_every_one(tmp_path):
    matrix = _run(tmp_path, ["reference", "reference:drop-system"])
    control, variant = matrix.rows
    assert {c.state for c in control.cells} <= {HELD, NOT_EXERCISED}
    assert control.count(HELD) >= 10
    broken = [c for c in variant.cells if c.state == BROKEN]
    assert [c.promise for c in broken] == ["contract-system-kept"]
    assert broken[0].finding == "NEW" and broken[0].replay == 1 and broken[0].control == 0
    assert (tmp_path / "out" / broken[0].witness).exists()
    assert matrix.exit_code() == 1 and matrix.verdict() == "violation"


def test_the_same_seed_gives_the_same_table(tmp_path):
    first = _run(tmp_path, ["reference:compact-early"], "a").table()
    second = _run(tmp_path, ["reference:compact-early"], "b").table()
    assert first == second


def test_a_declared_gap_is_not_applicable_and_an_unmet_premise_is_not_held(tmp_path, monkeypatch):
    monkeypatch.setattr(matrix_run.registry, "not_applicable",
                        lambda spec: {"contract-summarizer-used": "this runtime has no summarizer"})
    row = _run(tmp_path, ["reference"]).rows[0]
    cell = {c.promise: c for c in row.cells}
    assert cell["contract-summarizer-used"].state == NOT_APPLICABLE
    assert cell["contract-summarizer-used"].why == "this runtime has no summarizer"
    for c in row.cells:
        assert (c.state == HELD) == (c.exercised > 0 and c.promise != "contract-summarizer-used")


def test_markdown_links_a_registered_witness_from_the_page():
    cell = {"promise": "contract-progress", "state": "broken", "finding": "LC9", "class": "defect",
            "witness": "surfacecheck/contract/witnesses/LC9.jsonl", "replay": 1, "control": 0}
    assert cell_md(cell, "../") == "**broken** [LC9](../surfacecheck/contract/witnesses/LC9.jsonl) defect"
    data = {"verdict": "ok", "meanings": {"contract-progress": "shrinks"}, "runs": {"x": {"seconds": 1.0}},
            "table": {"seed": 1, "examples": None, "promises": ["contract-progress"],
                      "rows": [{"runtime": "x", "version": "x 1", "provider": "openai", "cells": [cell]}]}}
    page = markdown(data, "surfacecheck matrix --seed 1", "../")
    assert "| `contract-progress` | **broken** [LC9](../surfacecheck/" in page


@pytest.mark.parametrize("spec, words", [("nonesuch", "unknown runtime"), ("cmd:true", "conversation level")])
def test_a_runtime_the_contract_cannot_ask_is_bad_usage(spec, words, capsys, tmp_path):
    code = cli_main(["matrix", "--runtime", spec, "--json", "--report-dir", str(tmp_path)])
    out = json.loads(capsys.readouterr().out)
    assert code == 2 and out["exit_code"] == 2 and words in out["error"]


def test_the_command_writes_json_markdown_and_html(tmp_path, capsys):
    md = tmp_path / "committed" / "matrix.md"
    code = cli_main(["matrix", "--runtime", "reference", "--examples", str(EXAMPLES), "--seed", str(SEED), "--json",
                     "--report-dir", str(tmp_path / "r"), "--markdown", str(md)])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["verdict"] == "ok" and data["table"]["seed"] == SEED
    assert (tmp_path / "r" / "matrix.html").read_text().count("<td class=\"held\"") == data["totals"]["held"]
    assert md.read_text().startswith("# The compaction contract across runtimes")
