"""Issue 17: `check` writes report.html (self-contained, opened in a real headless Chromium), coverage.json and
a Cobertura coverage.xml; a sometimes-witness never reached fails `check --strict`.

The browser test needs Debian's `chromium` (`.ci/run` installs it); without it, and without CI, it skips.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from surfacecheck.check import run_check

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
browser = pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                             reason="chromium not installed (apt-get install chromium; required under CI)")


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """One `check` of the embedded runtime with the stages that draw (findings' witnesses, explore, bench)."""
    out = tmp_path_factory.mktemp("report")
    code = run_check(report_dir=out, stages=("findings", "explore", "bench"), out=open(os.devnull, "w"),
                     err=open(os.devnull, "w"))
    return code, out


def test_check_writes_the_page_and_the_coverage_files(checked):
    code, out = checked
    assert code == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    report = json.loads((out / "report.json").read_text())
    coverage = json.loads((out / "coverage.json").read_text())
    assert set(report["coverage"]["files"]) == {"coverage.json", "coverage.xml"}
    # self-contained: no script, nothing fetched from anywhere
    assert "<script" not in page and not re.search(r'(src|href)="(https?:)?//', page)
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg" class="trace"') >= 10  # the findings' witnesses
    assert 'src="data:image/png;base64,' in page  # the bench plot
    # the property x engine table: spec 10.2's rule with the audit's and the explorer's names for it
    retry = next(row for row in report["catalogue"] if row["id"] == "overflow-retry-after-progress")
    assert retry["engines"]["audit"] == "retry-without-progress"
    assert '<table class="catalogue">' in page and "explore-no-compaction-loop" in page
    # code coverage of the embedded runtime: per file, from coverage.py
    embedded = coverage["code"][0]
    assert embedded["runtime"] == "embedded" and embedded["tool"] == "coverage.py"
    assert embedded["totals"]["covered"] > 0 and {"session.py", "compaction.py"} <= {f["file"] for f in embedded["files"]}
    cobertura = ET.parse(out / "coverage.xml").getroot()
    assert cobertura.tag == "coverage" and float(cobertura.get("line-rate")) > 0
    assert cobertura.find("packages/package").get("name") == "embedded"


def test_transition_and_sometimes_coverage_count_what_was_reached(checked):
    _code, out = checked
    coverage = json.loads((out / "coverage.json").read_text())
    sources = coverage["transitions"]["sources"]
    assert sources["scenarios"]["logs"] >= 8 and sources["corpus"]["logs"] >= 150
    assert sources["scenarios"]["event_types"]["compaction/start"] > 0
    assert sources["explore"]["actions"] and all(n > 0 for n in sources["explore"]["actions"].values())
    rules = coverage["transitions"]["rules"]
    assert rules["cut-unbalanced"] > 0 and rules["shadow-price-wrong"] > 0
    reached = {w["id"]: w for w in coverage["sometimes"]["witnesses"]}
    second = reached["second-generation-checkpoint"]
    assert second["reached"] and second["first"]["seq"] > 0 and second["first"]["where"].endswith(".jsonl")
    assert coverage["sometimes"]["unreached"] == [w for w in reached if not reached[w]["reached"]]


def _narrowed(tmp: Path) -> tuple[Path, Path]:
    """Only the prune scenario and a corpus of the one generated prune log: most situations are out of reach."""
    scenarios = tmp / "scenarios"
    scenarios.mkdir()
    shutil.copy(ROOT / "surfacecheck" / "scenarios" / "logs" / "prune.jsonl", scenarios)
    corpus = tmp / "corpus"
    (corpus / "dsh-generated").mkdir(parents=True)
    source = ROOT.parent / "shared" / "corpus" / "dsh-generated"
    if not source.is_dir():
        pytest.skip("the corpus is not at ../shared/corpus")
    shutil.copy(source / "01-prune.jsonl", corpus / "dsh-generated")
    expected = json.loads((source / "expected.json").read_text())
    (corpus / "dsh-generated" / "expected.json").write_text(json.dumps([e for e in expected if e["file"] == "01-prune.jsonl"]))
    return scenarios, corpus


def test_an_unreached_sometimes_witness_fails_only_strict(tmp_path):
    scenarios, corpus = _narrowed(tmp_path)
    devnull = open(os.devnull, "w")
    loose = run_check(report_dir=tmp_path / "loose", scenario_dir=scenarios, corpus=corpus, stages=(),
                      out=devnull, err=devnull)
    strict = run_check(report_dir=tmp_path / "strict", scenario_dir=scenarios, corpus=corpus, stages=(), strict=True,
                       out=devnull, err=devnull)
    report = json.loads((tmp_path / "strict" / "report.json").read_text())
    unreached = report["coverage"]["sometimes_unreached"]
    assert loose == 0 and strict == 1
    assert "second-generation-checkpoint" in unreached and "prune-sufficed" not in unreached
    assert report["coverage"]["strict_failure"].startswith("--strict:")


@browser
def test_the_page_opens_in_headless_chromium_and_is_screenshotted(checked):
    from surfacecheck.reports import screenshot

    _code, out = checked
    html = screenshot.dump_dom(out / "report.html")
    for stage in ("findings", "explore", "bench"):
        assert f'id="stage-{stage}"' in html
    assert html.count('class="trace"') >= 10 and 'class="code-coverage"' in html
    assert 'class="sometimes"' in html and 'class="rules"' in html and 'id="verdict"' in html
    assert screenshot.probe(out / "report.html")["overflow"] == []  # labels, cells and coverage bars fit their boxes
    shot = screenshot.render(out / "report.html", out / screenshot.PNG_FILE)
    assert shot.stat().st_size > 50_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
