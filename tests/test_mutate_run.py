"""``surfacecheck mutate`` end to end on small files (issue 16): StrykerJS over dsh, mutmut over embedded.

Each run is real: the tool generates the mutants and the gate judges them. Shown here: the scoring reaches the
tool's results (a gate stage that cannot reach a file scores 0, one that drives it kills), a dsh tree whose
unmutated gate fails voids the score (exit 3), and the working copy is the tool's, never the cache's.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from surfacecheck.runtime import dsh

needs_dsh = pytest.mark.skipif(dsh.spec_problem("dsh") is not None, reason=str(dsh.spec_problem("dsh")))


def mutate(*args: str, env: dict | None = None, timeout: float = 600) -> tuple[int, dict, str]:
    done = subprocess.run([sys.executable, "-m", "surfacecheck", "mutate", "--json", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})
    return done.returncode, json.loads(done.stdout), done.stderr


def digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.rglob("index.js")):
        h.update(path.read_bytes())
    return h.hexdigest()


@needs_dsh
def test_stryker_over_dsh_kills_with_the_runtime_gate_and_leaves_the_cache_alone(tmp_path):
    cache = dsh.ensure_installed() / "@deepseek-ai"
    before = digest(cache)
    code, doc, err = mutate("--runtime", "dsh", "--files", "dsh-compaction/checkpoint.js", "--gate", "runtime",
                            "--report-dir", str(tmp_path))
    assert code == 0, err[-2000:]
    assert doc["tool"].startswith("StrykerJS") and doc["files"] == ["dsh-compaction/checkpoint.js"]
    assert doc["mutants"] > 10 and doc["killed"] > 0
    assert doc["score"] == round(100 * doc["killed"] / (doc["killed"] + doc["survived"] + doc["no_coverage"]
                                                          + doc["timed_out"] + doc["crashed"]), 1)
    assert doc["baseline"]["status"] == "passed" and doc["baseline"]["units"] > 100
    assert all(s["diff"].startswith("- ") for s in doc["survivors"])
    assert (tmp_path / "stryker" / "mutation.html").is_file()  # Stryker's own report, beside ours
    assert json.loads((tmp_path / "mutate.json").read_text())["score"] == doc["score"]
    assert digest(cache) == before


def statuses(report_dir: Path) -> dict:
    report = json.loads((report_dir / "stryker" / "mutation.json").read_text(encoding="utf-8"))
    return {(m["location"]["start"]["line"], m["location"]["start"]["column"], m["mutatorName"], m["replacement"]):
            m["status"] for entry in report["files"].values() for m in entry["mutants"]}


@needs_dsh
def test_the_shortcuts_change_the_time_never_a_verdict(tmp_path):
    # the default: one runtime per worker imported unmutated with each mutant switched on in it, and units whose
    # answers all have the unmutated digests passing in one round trip; --no-shortcut: neither
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    runs = {}
    for folder, extra in ((fast, ()), (slow, ("--no-shortcut",))):
        code, doc, err = mutate("--runtime", "dsh", "--files", "dsh-token-meter/surface-fold.js", "--report-dir",
                                str(folder), *extra)
        assert code == 0, err[-2000:]
        runs[folder] = doc
    assert runs[fast]["stryker"]["shortcut"] is True and runs[slow]["stryker"]["shortcut"] is False
    assert statuses(fast) == statuses(slow)
    assert {"Killed", "Survived"} <= set(statuses(fast).values())
    assert "units recorded" in (fast / "stryker" / "stryker.log").read_text(encoding="utf-8")


@needs_dsh
def test_a_gate_that_cannot_reach_the_file_scores_zero(tmp_path):
    # no unit drives dsh-session's SessionPreparation (the registry's unpublished-session ownership: the adapter
    # opens sessions directly): Stryker's per-unit coverage marks every mutant unreached, and unreached mutants
    # are not kills
    code, doc, err = mutate("--runtime", "dsh", "--files", "dsh-session/preparation.js", "--gate", "runtime",
                            "--report-dir", str(tmp_path))
    assert code == 0, err[-2000:]
    assert doc["mutants"] > 5 and doc["killed"] == 0 and doc["no_coverage"] >= doc["mutants"] - 3  # module-level
    assert doc["score"] == 0.0


@needs_dsh
def test_a_tree_whose_unmutated_gate_fails_voids_the_score(tmp_path):
    tree = tmp_path / "node_modules"
    shutil.copytree(dsh.ensure_installed(), tree, symlinks=True)
    bundle = tree / "@deepseek-ai" / "dsh-token-meter" / "lib" / "index.js"
    text = bundle.read_text(encoding="utf-8")
    assert "deltaTokens: tokens - claim.tokens," in text
    bundle.write_text(text.replace("deltaTokens: tokens - claim.tokens,", "deltaTokens: tokens,"), encoding="utf-8")
    code, doc, _ = mutate("--runtime", "dsh", "--files", "dsh-compaction/checkpoint.js", "--gate", "runtime",
                          "--report-dir", str(tmp_path / "out"), env={dsh.MODULES_ENV: str(tree)})
    assert code == 3 and doc["verdict"] == "void"
    assert "unmutated gate did not pass" in doc["void"] and "protocol step" in doc["void"]  # the unit that failed


@pytest.mark.parametrize("args, needle", [
    (("--gate", "nope"), "unknown gate stage"),
    (("--min-score", "101"), "percentage"),
    (("--runtime", "dsh", "--files", "dsh-session/none.js"), "matches no dsh source file"),
    (("--runtime", "embedded", "--files", "none.py"), "matches no module"),
    (("--concurrency", "0"), "positive whole number"),
])
def test_usage_errors_exit_2_with_one_json_document(args, needle, tmp_path):
    if "--runtime" in args and "dsh" in args and dsh.spec_problem("dsh"):
        pytest.skip("no node")
    code, doc, err = mutate(*args, "--report-dir", str(tmp_path))
    assert code == 2 and doc["exit_code"] == 2
    assert needle in (doc.get("error", "") + err)


def test_mutmut_over_the_embedded_runtime(tmp_path):
    code, doc, err = mutate("--runtime", "embedded", "--files", "tracker.py", "--gate", "findings",
                            "--report-dir", str(tmp_path))
    assert code == 0, err[-2000:]
    assert doc["tool"].startswith("mutmut") and doc["files"] == ["tracker.py"]
    assert doc["mutants"] > 20 and doc["killed"] > doc["mutants"] // 2
    assert set(doc["per_file"]) == {"embedded/tracker.py"} and doc["per_section"]
    survivors = [s for s in doc["survivors"] if s["status"] == "survived"]
    assert all(s["diff"].startswith("-") and "\n+" in s["diff"] for s in survivors)
    assert doc["time_per_mutant"]["runs"] > 0 and doc["time_per_mutant"]["median_s"] > 0
