"""``surfacecheck mutate --runtime langchain``: mutmut over LangChain's SummarizationMiddleware with the compaction
contract as the gate, on a handful of chosen mutants (one run for the module)."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from surfacecheck.contract import promises, registry
from surfacecheck.contract.registry import site_packages
from surfacecheck.mutate.framework import MODULES, Mutant, pick, run_framework
from surfacecheck.runtime.conversation.pyenv import RUNTIMES

SUMMARIZATION = "langchain/agents/middleware/summarization.py"
TRIGGER_FLIP = "xǁSummarizationMiddlewareǁ_should_summarize__mutmut_8"
"""``if kind == "messages" and len(messages) < value`` -> ``if kind == "MESSAGES" ...``: a message-count trigger is
never checked, so the middleware compacts under it (LC8's witness, a ``["messages", 5]`` trigger, then compacts a
step early and its summarizer-window breach moves)."""
ASYNC_ONLY = "xǁSummarizationMiddlewareǁ_acreate_summary__mutmut_1"
"""The async summarizer call: create_agent's ``invoke`` never runs it, so no scenario reaches it."""


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    installed = site_packages(RUNTIMES["langchain"].entry()) / SUMMARIZATION
    before = _digest(installed)
    report_dir = tmp_path_factory.mktemp("mutate-langchain")
    run = run_framework("langchain", report_dir, functions=[TRIGGER_FLIP, ASYNC_ONLY], examples=2,
                        say=lambda line: print(line, file=sys.stderr), progress=False)
    return run, before, _digest(installed), report_dir


def test_the_unmutated_module_passes_the_gate(outcome):
    run, *_ = outcome
    assert run.void is None, run.void
    findings = registry.for_runtime(registry.load(None, tuple(p.id for p in promises.PROMISES)), "langchain")
    assert run.baseline["status"] == "passed"
    assert run.baseline["by_kind"]["witness"] == len(findings) >= 1
    assert run.baseline["by_kind"]["search"] >= 1


def test_the_trigger_flip_is_killed_and_the_async_hook_is_not_reached(outcome):
    run, *_ = outcome
    report = json.loads((run.report_dir / "mutation.json").read_text(encoding="utf-8"))
    status = {m["id"]: m for f in report["files"].values() for m in f["mutants"]}
    assert status[TRIGGER_FLIP]["status"] == "Killed"
    assert status[TRIGGER_FLIP]["killedBy"][0].startswith(("witness:", "search:"))
    assert status[ASYNC_ONLY]["status"] == "NoCoverage"
    assert run.figures["killed"] == 1 and run.figures["no_coverage"] == 1
    assert run.figures["score"] == 50.0  # the strict score: not reached counts against it


def test_the_json_has_the_figures_and_the_survivors_diffs(outcome):
    run, *_ = outcome
    document = run.to_json()
    for key in ("mutants", "killed", "survived", "no_coverage", "timed_out", "crashed", "score", "minutes",
                "survivors", "baseline", "generated", "selected", "gate_settings"):
        assert key in document, key
    assert document["runtime"] == "langchain" and document["selected"] == 2 and document["generated"] > 500
    unreached = [s for s in document["survivors"] if s["id"] == ASYNC_ONLY]
    assert unreached and unreached[0]["status"] == "no_coverage"
    assert unreached[0]["diff"].startswith(("-", "+")), unreached[0]["diff"]
    json.dumps(document)


def test_the_cached_environment_is_never_written(outcome):
    _, before, after, _ = outcome
    assert before == after


def test_a_sample_is_spread_over_the_whole_order_and_the_filter_matches_functions():
    mutants = [Mutant(SUMMARIZATION, "m", f"x_f{i // 10}__mutmut_{i % 10 + 1}") for i in range(100)]
    sample = pick(mutants, None, 10)
    assert [m.name for m in sample] == [f"x_f{i}__mutmut_1" for i in range(10)]
    assert {m.name for m in pick(mutants, ["x_f3"], None)} == {f"x_f3__mutmut_{k}" for k in range(1, 11)}
    assert set(MODULES) >= {"langchain", "strands"}


def test_the_search_sessions_depend_on_the_seed_alone():
    """The gate's search part is a fixed set of scripts: the same seed and counts give the same sessions (on the
    in-process reference runtime, cheap), another seed others."""
    from surfacecheck.mutate.framework_gate import search_scripts
    from surfacecheck.runtime.registry import open_spec

    def scripts(seed):
        runtime = open_spec("reference", 10)
        try:
            return [(s.open_args, s.requests) for s in search_scripts(runtime, "reference", "anthropic", examples=6,
                                                                      seed=seed)]
        finally:
            runtime.close()
    first = scripts(7)
    assert len(first) >= 6 and any(requests for _, requests in first)
    assert scripts(7) == first
    assert scripts(8) != first
