"""The findings output (issue 9 point 2), the held-promise evidence (point "where a promise holds") and the
Markdown findings report (point 4): every registered finding has its section with the witness drawn, the
committed ``reports/findings.md`` is what the generator writes today."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from surfacecheck.properties.monitors import all_monitors
from surfacecheck.findings.report import draw_trace, render, write_report
from surfacecheck.findings import registry
from surfacecheck.findings.cli import explore_bounds
from surfacecheck.findings.evidence import PROOFS
from surfacecheck.findings.run import run_findings
from surfacecheck.findings.search import EXPLORE_BOUNDS, explore_search, promise_names
from surfacecheck.runtime.model_runtime import ModelRuntime
from surfacecheck.core.trace import read_trace

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "reports" / "findings.md"


def _path(shown: str) -> Path:
    """A trace path as the output shows it (relative to the working directory or the checkout)."""
    path = Path(shown)
    return path if path.is_absolute() or path.exists() else ROOT / path


@pytest.fixture(scope="module")
def witnesses_only() -> dict:
    """The registry's witnesses alone (no discovery): cheap, and enough for the finding sections."""
    return run_findings(search_seconds=0, scan=False, explore_bounds=None, trace_dir=None).to_json()


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> dict:
    """Every discovery engine, small: the scenario logs, 5 examples per Hypothesis run, the explorer at 3/1/1."""
    from surfacecheck import scenarios

    logs = [("scenarios", p) for p in sorted(Path(scenarios.LOGS_DIR).glob("*.jsonl"))]
    return run_findings(logs=logs, search_seconds=600, examples_per_run=5, explore_bounds=(3, 1, 1),
                        trace_dir=tmp_path_factory.mktemp("new-traces")).to_json()


def test_every_registered_finding_is_a_finding_with_its_fields(witnesses_only):
    entries = {f.id: f for f in registry.load()}
    findings = {f["id"]: f for f in witnesses_only["findings"]}
    assert set(findings) == set(entries)
    for fid, f in findings.items():
        entry = entries[fid]
        assert f["class"] == entry.klass in registry.CLASSES and f["source"] == entry.source
        assert f["explanation"] == entry.explanation and f["promise"]["name"] == entry.promise
        assert f["promise"]["section"] == all_monitors()[entry.promise].section and f["promise"]["seed"] == entry.seed
        trace = read_trace(_path(f["trace"]["path"]))
        assert f["trace"]["steps"] == len(trace.steps) and f["trace"]["replay"].startswith("surfacecheck replay ")
        assert (f["step"], f["observed"], f["expected"]) == \
               (trace.violation.step, trace.violation.observed, trace.violation.expected)


def test_every_promise_is_violated_or_held(witnesses_only):
    promises = {p["name"]: p for p in witnesses_only["promises"]}
    assert list(promises) == list(promise_names()) and all(n.startswith("promise-") for n in promises)
    registered = {f.promise for f in registry.load()}
    for name, p in promises.items():
        assert (p["status"] == "violated") == (name in registered) == bool(p["findings"])
        assert [q["name"] for q in p["evidence"]["proofs"]] == [n for n, _ in PROOFS.get(name, [])]


def test_proof_map_names_real_obligations():
    from surfacecheck.properties.proofs import names

    assert {n for pairs in PROOFS.values() for n, _ in pairs} <= set(names())
    assert set(PROOFS) <= set(promise_names())


def test_held_evidence_counts_what_was_watched(small):
    d = small["discovery"]
    assert d["logs"] >= 8 and d["events"] > d["logs"] and d["examples"] > 0 and d["explore"]["states"] > 0
    for p in small["promises"]:
        e = p["evidence"]
        assert e["logs"] == {"logs": d["logs"], "events": d["events"]} and e["explore"] == d["explore"]
        if p["status"] == "held":  # watched through every Hypothesis run (it never failed, so never left)
            assert e["hypothesis"]["examples"] == d["examples"] and e["hypothesis"]["steps"] > 0
            assert e["found_by"] == []
        else:
            assert e["hypothesis"]["examples"] <= d["examples"]


def test_explorer_pass_watches_every_state_and_finds_the_runtime_context_window():
    """At 4/2/1 the explorer reaches §15 G2 (a pressure compaction shadowing the snapshot in its own
    pre-step); every state is on one of the concretised paths; the minimised trace still fails."""
    from surfacecheck.findings.search import first_violation

    found, stats = explore_search((4, 2, 1), promises=["promise-runtime-context-never-lost"])
    assert stats["states"] > stats["paths"] > 0 and stats["steps"] >= stats["paths"]
    assert stats["simulation_mismatches"] == 0
    assert explore_search((3, 1, 1), promises=["promise-runtime-context-never-lost"])[0] == []  # too small for G2
    [d] = found
    assert d.promise == "promise-runtime-context-never-lost" and d.source == "explore"
    assert first_violation(d.steps, d.promise) is not None and d.violation.step == len(d.steps)


def _signature(found) -> list:
    return [(d.promise, d.where, [s.to_json(i) for i, s in enumerate(d.steps, 1)], d.violation) for d in found]


def test_shared_prefixes_give_what_fresh_runs_give():
    """The explorer pass restores the runtime, the concretiser and the monitors before each branch; the
    result equals re-running every root-to-leaf path on a fresh runtime (fewer requests, same findings)."""
    shared, fast = explore_search((3, 1, 1))
    fresh, slow = explore_search((3, 1, 1), share=False)
    assert _signature(shared) == _signature(fresh) and fast["steps"] < slow["steps"]
    assert fast["states"] == slow["states"] and fast["paths"] == slow["paths"]
    assert fast["simulation_mismatches"] == slow["simulation_mismatches"] == 0  # α(concrete) = explored state


def test_shared_prefixes_need_the_rollback(monkeypatch):
    """Negative control: without restoring the state before a branch the walk is wrong (it fails or differs)."""
    from surfacecheck.findings import search

    monkeypatch.setattr(search, "_rollback", lambda *_args: None)
    try:
        _found, stats = search.explore_search((3, 1, 1))
    except (IndexError, KeyError, RuntimeError, ValueError):
        return
    assert stats["simulation_mismatches"] > 0


def test_explore_bounds_argument():
    assert explore_bounds(None) == EXPLORE_BOUNDS and explore_bounds("off") is None
    assert explore_bounds("3/1/1") == (3, 1, 1)
    with pytest.raises(ValueError, match="E/P/C"):
        explore_bounds("3/1")


def test_report_has_a_section_per_finding_with_the_witness_drawn(witnesses_only):
    text = render(witnesses_only)
    for f in witnesses_only["findings"]:
        section = text.split(f"### {f['id']} ({f['class']})", 1)[1].split("\n### ", 1)[0]
        assert f["trace"]["replay"] in section and f["source"] in section and f["explanation"] in section
        assert f"step {f['trace']['steps']}  " in section and "^^^ the promise breaks here" in section
        assert f"| [{f['id']}](#" in text  # in the summary table
    assert text.count("^^^ the promise breaks here") == len(witnesses_only["findings"])


def test_drawing_shows_the_surface_the_model_has_after_each_step():
    """G1: the drawn `after` of the last step is the model's own surface, measure and projection."""
    finding = next(f for f in registry.load() if f.id == "G1-unclaimed-replace-drift")
    trace = read_trace(finding.trace_path)
    runtime = ModelRuntime()
    for step in trace.steps:
        runtime.call(step.op, step.args)
    surface, measure, projection = (runtime.call(op, {}) for op in ("surface", "measure", "projection"))
    last = "\n".join(draw_trace(finding.trace_path, len(trace.steps))).split(f"step {len(trace.steps)}  ")[1]
    after = last.split("after: ", 1)[1]
    assert after.startswith(f"gen {surface['generation']} · measure {measure['total']} · "
                            f"projection {projection['total']}")
    assert measure["total"] != projection["total"]  # the drift G1 is about, visible in the drawing
    shadowed = [s for s in read_trace(finding.trace_path).steps if s.op == "append"][0]
    assert "-[0 user" in last and all(f"+[{seq} " in after for seq in surface["nodes"])
    assert shadowed.args["event"]["type"] == "user/message"


def test_report_written_where_asked(tmp_path, witnesses_only):
    path = write_report(witnesses_only, tmp_path / "sub" / "findings.md")
    assert path.read_text(encoding="utf-8") == render(witnesses_only)


def _registered_parts(text: str, ids: list[str]) -> dict[str, str]:
    """Each registered finding's summary row and section, without the discovery-dependent 'Also found by'."""
    parts = {}
    for fid in ids:
        row = next(line for line in text.splitlines() if line.startswith(f"| [{fid}](#"))
        section = text.split(f"\n### {fid} (", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
        kept = "\n".join(line for line in section.splitlines() if not line.startswith("**Also found by**"))
        kept = re.sub(r"\n{3,}", "\n\n", kept)
        # whether a quote was checked depends on this machine having dsh's packages installed, not on the registry
        kept = re.sub(r"\((?:quoted verbatim from the installed package|not checked here .*)\)$",
                      "(quote status)", kept, flags=re.MULTILINE)
        parts[fid] = row + "\n" + kept
    return parts


def test_committed_report_is_current(witnesses_only):
    """reports/findings.md shows every registered finding exactly as the generator draws it now (the
    registry, the monitors and the model decide these parts; discovery, whose search the committed copy
    ran in full, only adds 'Also found by' lines, NEW findings and the held evidence). Regenerate with
    `surfacecheck findings --search-seconds 600 --report reports/findings.md`."""
    assert COMMITTED.is_file(), "reports/findings.md missing"
    committed = COMMITTED.read_text(encoding="utf-8")
    ids = [f["id"] for f in witnesses_only["findings"]]
    missing = [fid for fid in ids if f"\n### {fid} (" not in committed]
    assert not missing, f"reports/findings.md lacks {missing}: regenerate it"
    assert _registered_parts(committed, ids) == _registered_parts(render(witnesses_only), ids), \
        "reports/findings.md is stale: surfacecheck findings --search-seconds 600 --report reports/findings.md"
    for p in witnesses_only["promises"]:
        assert f"`{p['name']}`" in committed


def test_json_document_is_one_json_with_the_sections(capsys):
    import argparse

    from surfacecheck.findings import cli

    parser = argparse.ArgumentParser(prog="surfacecheck")
    cli.register(parser.add_subparsers())
    args = parser.parse_args(["findings", "--no-logs", "--search-seconds", "0", "--explore-bounds", "off", "--json"])
    code = args.func(args)
    document = json.loads(capsys.readouterr().out)
    assert code == document["exit_code"] == 0
    assert {f["id"] for f in document["findings"]} == {f.id for f in registry.load()}
    assert {p["name"] for p in document["promises"]} == set(promise_names())


def test_every_finding_trace_replays(small):
    """Must show: every violated promise is listed with a trace `surfacecheck replay` reproduces (exit 1)."""
    from surfacecheck.verify.replay import replay_trace

    for f in small["findings"]:
        outcome = replay_trace(read_trace(_path(f["trace"]["path"])), "model")
        assert outcome.exit_code == 1 and outcome.same and outcome.violation.step == f["trace"]["steps"], f["id"]


def test_the_meter_fold_breaks_the_cost_promise_in_the_cost_model(witnesses_only):
    """dsh's foldSurfaceTokens copies the node array per append (spec 4.2): the cost promise is `measured`
    (broken without a trace), the projection path stays constant, and the report says so."""
    (p,) = [p for p in witnesses_only["promises"] if p["name"] == "promise-pressure-update-constant"]
    growth = {c["variant"]: c["growth"] for c in p["evidence"]["cost_model"]}
    assert p["status"] == "measured" and growth == {"model-projection": "constant", "copy-on-append": "linear"}
    ops = {c["variant"]: c["ops_per_append"] for c in p["evidence"]["cost_model"]}
    assert ops["copy-on-append"]["10000"] > 50 * ops["copy-on-append"]["100"]
    text = render(witnesses_only)
    assert "## Broken in the cost model (measured, not traced)" in text and "foldSurfaceTokens" in text


def test_a_constant_meter_fold_would_keep_the_cost_promise(monkeypatch):
    """Negative control: were dsh's meter fold incremental (1 cell per append), the promise would hold, and a
    measured promise fails only under --strict."""
    from surfacecheck.findings import evidence
    from surfacecheck.findings import run as run_module

    cost = evidence.cost_evidence("promise-pressure-update-constant")
    monkeypatch.setitem(evidence.COST_PATHS, "promise-pressure-update-constant",
                        [("model-projection", "projection"), ("incremental", "an in-place meter fold")])
    fixed = evidence.cost_evidence("promise-pressure-update-constant")
    assert {c["growth"] for c in fixed} == {"constant"} and {c["growth"] for c in cost} == {"constant", "linear"}
    report = run_module.run_findings(search_seconds=0, scan=False, explore_bounds=None, trace_dir=None)
    assert {p["name"]: p["status"] for p in report.promises}["promise-pressure-update-constant"] == "held"
    measured = [{"name": "promise-pressure-update-constant", "status": "measured"}]
    assert run_module.FindingsReport("model", strict=False, promises=measured).exit_code == 0
    assert run_module.FindingsReport("model", strict=True, promises=measured).exit_code == 1
