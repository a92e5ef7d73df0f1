"""report.html explains a run that is not held: the reasons at the top, failures grouped by property and drawn
where this run fails, known findings collapsed, labels wrapped, values in words; opened in headless Chromium, no
text overflows its box and an inconclusive page names its reason on the first screen.

The browser tests need Debian's `chromium`; without it, and without CI, they skip.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from surfacecheck.reports.html_report import plain, render, write_html
from surfacecheck.reports.reasons import reasons
from surfacecheck.reports.trace_drawing import LABEL_CHARS

ROOT = Path(__file__).resolve().parent.parent
REGRESSIONS = ROOT / "surfacecheck" / "properties" / "regressions"
FINDINGS = ROOT / "surfacecheck" / "properties" / "findings"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
browser = pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                             reason="chromium not installed (apt-get install chromium; required under CI)")
SHORT = REGRESSIONS / "compaction-embedded-cut-toward-tail-lockstep-result-3b71df37c9ab.jsonl"  # 4 steps
LONG = REGRESSIONS / "policy-embedded-retention-ignored-lockstep-result-e3f434ff177c.jsonl"  # 23 steps
OTHER = REGRESSIONS / "log-embedded-claim-not-expired-lockstep-projection-bff073e52c7d.jsonl"  # recorded: projection


def _report(verdict: str, stages: dict) -> dict:
    return {"verdict": verdict, "exit_code": {"held": 0, "violated": 1, "inconclusive": 3}[verdict],
            "logs_verdict": "held", "runtime": "embedded", "seconds": 1.0, "version": "0", "generated_at": "now",
            "summary": {"total": {"logs": 1, "violations": 0}}, "violations": [], "logs": [], "stages": stages}


def _verify(status: str, **summary) -> dict:
    return {"verify": {"status": status, "seconds": 1.0, "summary": {"levels": [], "regressions": [], "traces": [],
                                                                     **summary}}}


def _regression(path: Path, verdict: str, now: dict | None) -> dict:
    return {"trace": str(path), "verdict": verdict, "detail": "", "now": now}


INCONCLUSIVE = _report("inconclusive", _verify("inconclusive", unavailable="timeout: runtime 'cmd:sleep 100': no "
                                               "answer to 'hello' within 2 s; the child was killed"))
VIOLATED = _report("violated", _verify("violation", regressions=[
    _regression(LONG, "failing", {"property": "lockstep-result", "step": 23, "message": "pre_step differs now"}),
    _regression(OTHER, "failing-differently", {"property": "lockstep-result", "step": 3, "message": "differs at 3"}),
    _regression(SHORT, "failing", {"property": "lockstep-result", "step": 2, "message": "select_range differs at 2"}),
]))


def test_an_inconclusive_page_says_why_at_its_top_and_nothing_green():
    page = render(INCONCLUSIVE, None)
    assert reasons(INCONCLUSIVE) == [{"stage": "verify", "status": "inconclusive", "more": 0, "reasons": [
        "runtime unavailable: " + INCONCLUSIVE["stages"]["verify"]["summary"]["unavailable"]]}]
    why = page.index('id="why"')
    assert why < page.index('id="stages"') and "no answer to &#39;hello&#39; within 2 s" in page[why:page.index('id="stages"')]
    assert "no violation" not in page and "Why INCONCLUSIVE" in page


def test_old_regressions_group_under_the_property_they_break_now_drawn_where_they_fail_now():
    page = render(VIOLATED, None)
    assert "Failures: this run's counterexamples (1 property, 3 traces)" in page
    groups = re.findall(r'<h3 class="failure-group"[^>]*>([^<]*)<', page)
    assert [g.strip() for g in groups] == ["lockstep-result"]
    cards = re.findall(r'id="failure-1-(\d)".*?breaks at step (\d+)\).*?<br>\s*(.*?)<br>', page, re.S)
    # the shortest first; each drawn at the step where THIS run's replay fails, with this run's message
    assert cards[0] == ("1", "2", "select_range differs at 2")
    assert [c[1] for c in cards] == ["2", "3", "23"]
    first = page[page.index('id="failure-1-1"'):page.index('id="failure-1-2"')]
    highlighted = re.search(r'<rect class="broken" x="0" y="(\d+)"', first)
    assert highlighted and int(highlighted.group(1)) < 60  # step 2's row, not the recorded step 4's
    assert "recorded as" not in first and "fails differently now" in page
    assert "(recorded as lockstep-projection)" in page  # the old regression now failing another way
    assert reasons(VIOLATED)[0]["reasons"] == ["regression traces failing again: 3 × lockstep-result"]


def test_known_findings_are_collapsed_and_values_are_words(tmp_path):
    known = [{"id": p.stem, "class": "defect", "promise": "p", "trace_path": str(p)} for p in sorted(FINDINGS.glob("*.jsonl"))[:3]]
    report = _report("held", {
        "findings": {"status": "ok", "seconds": 1.0, "summary": {"known": known, "new": [], "stale": []}},
        "explore": {"status": "ok", "seconds": 1.0, "summary": {
            "model": {"states": 3, "edges": 4, "depth": 2, "states_per_second": 1.0, "verdict": "ok"},
            "bounds": {"events": 4, "tool_pairs": 2, "compactions": 1, "max_seq": None},
            "controls": {"c": {"caught": True, "states": 1, "shortest": None}}, "violations": []}},
    })
    page = write_html(report, None, tmp_path).read_text()
    assert '<details class="known-findings"><summary>3 known findings' in page
    assert '<details class="registry"><summary>' in page  # closed: no "open"
    assert "events 4 · tool pairs 2 · compactions 1<" in page and "{&#39;" not in page and ">None<" not in page
    assert plain({"a_b": [1, 2], "c": None}) == "a b 1, 2"


def test_trace_labels_wrap_into_lines_and_keep_every_character():
    from surfacecheck.core.trace import read_trace
    from surfacecheck.reports.trace_drawing import frames, label_lines

    rows, _kinds, _stopped = frames(read_trace(LONG))
    long = [f for f in rows if len(f.label) > LABEL_CHARS]
    assert long, "the trace has a label longer than one line"
    for f in long:
        lines = label_lines(f)
        assert len(lines) > 1 and all(len(line) <= LABEL_CHARS for line in lines)
        assert "".join(lines).replace(" ", "") == (f.label + (f" — {f.note}" if f.note else "")).replace(" ", "")


@browser
def test_the_overflow_probe_catches_text_wider_than_its_box(tmp_path):
    from surfacecheck.reports.screenshot import probe

    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><div style="width:40px;white-space:nowrap">' + "x" * 80 + "</div></body></html>")
    assert probe(bad)["overflow"] == ["wider than its box: div: " + "x" * 60]


@browser
def test_every_label_and_cell_fits_its_box_in_chromium(tmp_path):
    from surfacecheck.reports.screenshot import probe

    for name, report in (("violated", VIOLATED), ("inconclusive", INCONCLUSIVE)):
        folder = tmp_path / name
        folder.mkdir()
        assert probe(write_html(report, None, folder))["overflow"] == [], name


@browser
def test_an_inconclusive_run_names_its_reason_on_the_first_screen(tmp_path):
    from surfacecheck.check import run_check
    from surfacecheck.reports.screenshot import SCREEN, probe

    with open(os.devnull, "w") as quiet:
        code = run_check(runtime="cmd:sleep 100", report_dir=tmp_path, stages=("verify",), coverage=False,
                         timeout=2.0, out=quiet, err=quiet)
    assert code == 3
    report = json.loads((tmp_path / "report.json").read_text())
    found = probe(tmp_path / "report.html")
    assert found["overflow"] == []
    assert 0 < found["why_top"] and found["why_bottom"] <= SCREEN
    assert "Why INCONCLUSIVE" in found["why_text"]
    assert report["stages"]["verify"]["summary"]["unavailable"] in found["why_text"]
