"""Issue 17's coverage arithmetic on small inputs: V8 ranges to line counts, regions to dsh files, the
situations of each scenario log, and the rule table held to the audit's."""
from __future__ import annotations

from pathlib import Path

import pytest

from surfacecheck.model.jsonl import read_log
from surfacecheck.audit.rules import RULES
from surfacecheck.coverage import situations
from surfacecheck.coverage.v8 import line_counts, package_of, split_regions

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = "function f(a) {\n  if (a) {\n    return 1;\n  }\n  return 2;\n}\n// a comment\nf(1);\n"


def _offset(text: str, needle: str) -> int:
    return text.index(needle)


def test_the_innermost_range_decides_a_line():
    whole = {"startOffset": 0, "endOffset": len(SCRIPT), "count": 1}
    body = {"startOffset": _offset(SCRIPT, "{\n  if"), "endOffset": _offset(SCRIPT, "\nf(1)"), "count": 1}
    not_taken = {"startOffset": _offset(SCRIPT, "\n  return 2"), "endOffset": _offset(SCRIPT, "\n}\n//"), "count": 0}
    counts = line_counts(SCRIPT, [{"ranges": [whole]}, {"ranges": [body, not_taken]}])
    assert counts == {1: 1, 2: 1, 3: 1, 5: 0, 8: 1}  # blank/brace/comment lines are not counted


def test_a_function_never_called_counts_zero():
    counts = line_counts(SCRIPT, [{"ranges": [{"startOffset": 0, "endOffset": len(SCRIPT), "count": 1}]},
                                  {"ranges": [{"startOffset": 0, "endOffset": _offset(SCRIPT, "\nf(1)"), "count": 0}]}])
    assert counts[3] == 0 and counts[8] == 1


def test_regions_attribute_lines_to_dsh_source_files(tmp_path):
    bundle = tmp_path / "node_modules" / "@deepseek-ai" / "dsh-compaction-basic" / "lib" / "index.js"
    bundle.parent.mkdir(parents=True)
    bundle.write_text("//#region lib/types/region.js\nconst a = 1;\nconst b = 2;\n//#endregion\n"
                      "//#region lib/types/index.js\nexport { a };\n//#endregion\n")
    files = split_regions(bundle, "dsh-compaction-basic", {2: 3, 3: 0, 6: 1})
    assert [(f.key, f.lines, f.covered, f.missed()) for f in files] == [
        ("dsh-compaction-basic/region.js", 2, 1, [(3, 3)]), ("dsh-compaction-basic/index.js", 1, 1, [])]
    assert package_of(bundle.as_uri()) == ("dsh-compaction-basic", bundle)
    assert package_of("node:internal/x") is None


@pytest.mark.parametrize("log, witness", [
    ("prune.jsonl", "prune-sufficed"), ("second-generation.jsonl", "second-generation-checkpoint"),
    ("failed-bracket.jsonl", "shrink-floor-refusal"), ("failed-bracket.jsonl", "bracket-failed"),
    ("manual-compact.jsonl", "compact-compacted"), ("overflow-recovery.jsonl", "overflow-retry-succeeded"),
    ("runtime-context.jsonl", "runtime-context-reemission"), ("crash-reload.jsonl", "reload-end-seed"),
    ("pressure-summary.jsonl", "summary-committed")])
def test_each_scenario_reaches_its_situation(log, witness):
    found = situations.witnesses(read_log(ROOT / "surfacecheck" / "scenarios" / "logs" / log).events)
    assert witness in found and found[witness] > 0


def test_a_log_without_compaction_reaches_none():
    events = [e for e in read_log(ROOT / "surfacecheck" / "scenarios" / "logs" / "prune.jsonl").events
              if not e.type.startswith("compaction/") and e.type != "tool/result"]
    assert not set(situations.witnesses(events)) & {"prune-sufficed", "prune-insufficient", "bracket-failed"}


def test_every_audit_rule_has_a_judge_and_every_judge_a_rule():
    assert set(situations.JUDGES) == set(RULES)


def _ranges_of(*spans):
    return [{"startOffset": s, "endOffset": e, "count": c} for s, e, c in spans]


def test_a_block_left_out_of_a_dump_counts_as_its_container():
    from surfacecheck.coverage.branches import sum_blocks

    body = (_offset(SCRIPT, "{\n  if"), _offset(SCRIPT, "\nf(1)"))
    taken = (_offset(SCRIPT, "{\n    return 1"), _offset(SCRIPT, "\n  return 2"))
    rest = (_offset(SCRIPT, "\n  return 2"), _offset(SCRIPT, "\n}\n//"))
    top = [{"ranges": _ranges_of((0, len(SCRIPT), 1))}]
    # process 1 called f(1): the `if` arm ran (merged into the body), `return 2` never did
    one = top + [{"ranges": _ranges_of((*body, 1), (*rest, 0))}]
    # process 2 called f(0): the arm was skipped, `return 2` ran (merged)
    two = top + [{"ranges": _ranges_of((*body, 1), (*taken, 0))}]
    blocks = {(b.start, b.end): b for b in sum_blocks([one])}
    assert blocks[rest].unreached and not blocks[body].unreached and blocks[body].function
    summed = {(b.start, b.end): b for b in sum_blocks([one, two])}
    assert (summed[rest].count, summed[rest].parent) == (1, 2) and not summed[rest].unreached
    assert (summed[taken].count, summed[taken].parent) == (1, 2)
    assert sum_blocks([two])[-1].unreached  # the arm never taken in a run of f(0) alone


def test_dsh_own_ignore_comment_is_the_reason():
    from surfacecheck.coverage.branches import ignored

    lines = ["a();", "/* v8 ignore next -- closed-union exhaustiveness guard */", "default: return x;",
             "/* v8 ignore start -- unreachable */", "b();", "c();", "/* v8 ignore stop */", "d();"]
    assert ignored(lines, 3) == "dsh marks it `v8 ignore next`: closed-union exhaustiveness guard"
    assert ignored(lines, 6) == "dsh marks it `v8 ignore start`: unreachable"
    assert ignored(lines, 8) is None and ignored(lines, 1) is None


@pytest.mark.skipif(__import__("shutil").which("node") is None, reason="dsh's code runs in Node")
def test_a_dsh_run_reports_branches_and_why_some_never_ran(tmp_path):
    """One short replay on dsh under NODE_V8_COVERAGE: region.js's branches are counted, the arms never taken are
    listed, dsh's own `v8 ignore` reasons are read, and every committed reason names a line dsh still has."""
    import json as json_
    import os
    import subprocess
    import sys

    from surfacecheck.coverage.branches import REASONS
    from surfacecheck.coverage.code import DSH_FILES
    from surfacecheck.coverage.v8 import read_dsh_coverage
    from surfacecheck.runtime import dsh

    trace = ROOT / "runtimes" / "dsh" / "traces" / "d12-auto-false-overflow-count.jsonl"
    env = {**os.environ, "NODE_V8_COVERAGE": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "surfacecheck", "replay", str(trace), "--runtime", "dsh"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    files = {f.key: f for f in read_dsh_coverage(tmp_path, DSH_FILES)}
    region = files["dsh-compaction-basic/region.js"]
    assert 0 < region.branches_reached < region.branches
    assert region.unreached and all({"line", "end_line", "kind", "code", "why"} <= set(u) for u in region.unreached)
    assert any((u["why"] or "").startswith("dsh marks it `v8 ignore") for f in files.values() for u in f.unreached)
    bundles = {p: (dsh.ensure_installed() / "@deepseek-ai" / p / "lib" / "index.js").read_text() for p in DSH_FILES}
    for entry in json_.loads(REASONS.read_text())["blocks"]:
        key, code = entry["block"].split(": ", 1)
        assert entry["why"] and code in bundles[key.split("/")[0]], entry
