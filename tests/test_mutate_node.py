"""``surfacecheck mutate --runtime gemini|ai``: StrykerJS over the Node frameworks' compaction code with the
compaction contract as the gate (surfacecheck/mutate/stryker_frameworks.py, node_gate.py)."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from surfacecheck.mutate.stryker_frameworks import TARGETS, regions

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def modules() -> Path:
    from surfacecheck.runtime.conversation.node import ensure_installed, spec_problem

    if spec_problem("ai"):
        pytest.skip("Node is not installed")
    return ensure_installed()


def test_the_mutated_ranges_are_found_in_the_installed_files(modules):
    for runtime, (package, file, heads) in TARGETS.items():
        lines = (modules / package / file).read_text(encoding="utf-8").split("\n")
        found = regions(modules, runtime)
        assert [r.name for r in found] == [h.rstrip("( ").split()[-1] for h in heads]
        for region, head in zip(found, heads):
            assert lines[region.start - 1].startswith(head)
            assert lines[region.end - 1] == "}"
            assert all(line != "}" for line in lines[region.start:region.end - 1])  # the first closing line
    ai = regions(modules, "ai")[0]
    assert ai.name == "pruneMessages" and 10 < ai.end - ai.start < 400  # one function of a ~23,000-line bundle


def test_the_working_copy_links_the_cache_and_copies_the_mutated_package(modules, tmp_path):
    from surfacecheck.mutate.stryker import working_copy

    copy = working_copy(tmp_path, ["ai", "@google/gemini-cli-core"], modules, link_rest=True)
    assert Path(os.path.realpath(copy / "ai")) == (tmp_path / "pkgs" / "ai").resolve()
    assert not (tmp_path / "pkgs" / "ai").is_symlink() and (tmp_path / "pkgs" / "ai" / "dist" / "index.js").is_file()
    gemini = Path(os.path.realpath(copy / "@google" / "gemini-cli-core"))
    assert gemini == (tmp_path / "pkgs" / "@google" / "gemini-cli-core").resolve()
    assert Path(os.path.realpath(copy / "@google" / "genai")) == (modules / "@google" / "genai").resolve()
    assert (copy / "zod").is_symlink()


def test_a_small_ai_run_kills_with_the_contract_and_leaves_the_cache_alone(modules, tmp_path):
    bundle = modules / "ai" / "dist" / "index.js"
    before = hashlib.sha256(bundle.read_bytes()).hexdigest()
    done = subprocess.run([sys.executable, "-m", "surfacecheck", "mutate", "--runtime", "ai", "--max-mutants", "16",
                           "--examples", "10", "--json", "--report-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=240,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["verdict"] == "ok" and report["void"] is None
    assert report["baseline"]["status"] == "passed"
    assert report["baseline"]["by_kind"]["witness"] >= 2 and report["baseline"]["by_kind"]["search"] >= 5
    assert report["selected"] == 16 == report["mutants"] and report["generated"] > 100
    assert report["killed"] >= 1
    for field in ("survived", "no_coverage", "timed_out", "crashed", "score", "minutes", "survivors"):
        assert field in report
    assert sum(report[k] for k in ("killed", "survived", "no_coverage", "timed_out", "crashed")) == 16
    region = regions(modules, "ai")[0]
    assert report["files"] == [f"ai/dist/index.js:pruneMessages ({region.start}-{region.end})"]
    kill = report["kills"][0]
    assert kill["by"].startswith(("witness:", "search:")) and "verdict differs" in kill["why"]
    for survivor in report["survivors"]:
        assert region.start <= survivor["line"] <= region.end and survivor["diff"].startswith("- ")
    # Stryker instrumented every mutant of the range; the runner ran only selected ones (by the runner's key)
    stryker = json.loads((tmp_path / "stryker" / "mutation.json").read_text(encoding="utf-8"))
    every = [m for f in stryker["files"].values() for m in f["mutants"]]
    ran = [m for m in every if m["status"] in ("Killed", "Survived", "Timeout")]
    assert len(every) == report["generated"] and 1 <= len(ran) <= 16
    skipped = [m for m in every if m.get("statusReason") == "not selected (--max-mutants)"]
    unreached = [m for m in every if m["status"] == "NoCoverage"]
    assert len(ran) + len(skipped) + len(unreached) == len(every) and len(skipped) >= len(every) - 16 - len(unreached)
    assert hashlib.sha256(bundle.read_bytes()).hexdigest() == before
