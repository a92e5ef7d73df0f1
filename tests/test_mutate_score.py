"""``surfacecheck mutate``'s scoring and selection, without running a mutation tool (issue 16 point 3).

Only a kill counts: timeouts, crashes and mutants the gate never reached are not kills; Stryker's own score
(timeouts as kills) is shown beside ours; survivors carry their diff and, when judged equivalent, the reason.
"""
from __future__ import annotations

import json

import pytest

from surfacecheck.mutate import score as scoring
from surfacecheck.mutate.dsh_files import DEFAULT_FILES, select_files
from surfacecheck.mutate.run import MutationRun
from surfacecheck.mutate.score import Place

SOURCE = "function f(a, b) {\n  return a < b ? a : b;\n}\nconst NAME = \"compact\";\n"


def mutant(mid: str, status: str, line: int = 2, col: tuple[int, int] = (10, 15), replacement: str = "a <= b",
           killed_by: list[str] | None = None) -> dict:
    return {"id": mid, "mutatorName": "EqualityOperator", "replacement": replacement, "status": status,
            "location": {"start": {"line": line, "column": col[0]}, "end": {"line": line, "column": col[1]}},
            **({"killedBy": killed_by} if killed_by else {})}


def report(*mutants: dict) -> dict:
    return {"files": {"pkgs/x/lib/index.js": {"source": SOURCE, "mutants": list(mutants)}}}


def locate(_name: str, line: int) -> Place | None:
    return Place("x/a.js", ("7", "8")) if line <= 3 else Place("x/b.js", ("9.1",))


def test_only_kills_count_and_timeouts_crashes_and_unreached_count_against():
    figures = scoring.score(report(mutant("1", "Killed", killed_by=["log:scenarios/a.jsonl"]),
                                   mutant("2", "Survived"), mutant("3", "NoCoverage"), mutant("4", "Timeout"),
                                   mutant("5", "RuntimeError"), mutant("6", "CompileError")), locate)
    assert (figures["killed"], figures["survived"], figures["no_coverage"], figures["timed_out"],
            figures["crashed"], figures["not_run"]) == (1, 1, 1, 1, 1, 1)
    assert figures["mutants"] == 6
    assert figures["score"] == 20.0  # 1 / (1 + 1 + 1 + 1 + 1)
    assert figures["stryker_score"] == 50.0  # Stryker: (killed + timeout) / (killed, survived, unreached, timeout)
    assert figures["killed_by_unit_kind"] == {"log": 1}


def test_a_gate_that_kills_nothing_scores_zero_and_one_that_kills_all_scores_100():
    assert scoring.score(report(*(mutant(str(i), "Survived") for i in range(5))), locate)["score"] == 0.0
    assert scoring.score(report(*(mutant(str(i), "NoCoverage") for i in range(5))), locate)["score"] == 0.0
    assert scoring.score(report(*(mutant(str(i), "Killed") for i in range(5))), locate)["score"] == 100.0
    assert scoring.score(report(), locate)["score"] is None  # nothing to score is not a score


def test_per_file_and_per_spec_section():
    figures = scoring.score(report(mutant("1", "Killed"), mutant("2", "Survived"),
                                   mutant("3", "Survived", line=4, col=(14, 23), replacement='""')), locate)
    assert figures["per_file"]["x/a.js"]["score"] == 50.0
    assert figures["per_file"]["x/b.js"]["score"] == 0.0
    assert list(figures["per_section"]) == ["7", "8", "9.1"]
    assert figures["per_section"]["9.1"] == {"survived": 1, "score": 0.0, "score_argued_apart": 0.0}


def test_survivors_carry_their_diff_and_a_judged_equivalent_one_says_why():
    figures = scoring.score(report(mutant("2", "Survived")), locate)
    (survivor,) = figures["survivors"]
    assert survivor["diff"] == "- return a < b ? a : b;\n+ return a <= b ? a : b;"
    assert (survivor["file"], survivor["line"]) == ("x/a.js", 2)
    place = Place("x/a.js", ("7", "8"))
    sig = scoring.signature(place, mutant("2", "Survived"), "return a < b ? a : b;")
    figures = scoring.score(report(mutant("2", "Survived")), locate, equivalent={sig: "min of equal values"})
    assert figures["survivors"][0]["equivalent"] == "min of equal values"
    assert figures["judged_equivalent"] == 1 and figures["score"] == 0.0  # still a survivor


def test_the_second_figure_sets_the_argued_survivors_apart_and_only_them():
    killed, argued, plain = mutant("1", "Killed"), mutant("2", "Survived"), mutant("3", "Survived", line=4,
                                                                                   col=(14, 23), replacement='""')
    sig = scoring.signature(Place("x/a.js", ("7", "8")), argued, "return a < b ? a : b;")
    figures = scoring.score(report(killed, argued, plain), locate, equivalent={sig: "min of equal values"})
    assert figures["score"] == 33.3  # the argued survivor counts against the strict score
    assert figures["score_argued_apart"] == 50.0  # killed 1 of the 2 not argued
    assert figures["per_file"]["x/a.js"]["argued"] == 1 and figures["per_file"]["x/a.js"]["score_argued_apart"] == 100.0
    assert figures["per_file"]["x/b.js"]["score_argued_apart"] == 0.0


def test_time_per_mutant_median_and_p90(tmp_path):
    times = tmp_path / "times.jsonl"
    times.write_text("".join(json.dumps({"id": str(i), "ms": 100 * i}) + "\n" for i in range(1, 11)))
    figures = scoring.score(report(mutant("1", "Killed")), locate, times=scoring.read_times(times))
    assert figures["time_per_mutant"] == {"runs": 10, "median_s": 0.55, "p90_s": 0.9}


def test_exit_codes_void_below_and_meeting_the_minimum(tmp_path):
    run = MutationRun("dsh", "StrykerJS", ("runtime",), [], tmp_path, figures={"score": 60.0}, min_score=70.0)
    assert (run.exit_code, run.verdict) == (1, "below-min-score")
    run.min_score = 60.0
    assert run.exit_code == 0
    run.min_score = None
    assert run.exit_code == 0
    run.void = "the unmutated gate did not pass"
    assert (run.exit_code, run.verdict) == (3, "void")
    assert "VOID" in run.text()


@pytest.fixture(scope="module")
def modules():
    from surfacecheck.runtime import dsh

    if dsh.spec_problem("dsh"):
        pytest.skip(str(dsh.spec_problem("dsh")))
    return dsh.ensure_installed()


def test_default_files_are_regions_of_the_installed_bundles(modules):
    files = select_files(modules, None)
    assert {(f.package, f.name) for f in files} == set(DEFAULT_FILES)
    region = next(f for f in files if f.key == "dsh-compaction-basic/region.js")
    lines = region.bundle(modules).read_text(encoding="utf-8").split("\n")
    assert lines[region.start - 1] == "//#region lib/types/region.js"
    assert lines[region.end - 1].startswith("//#endregion")
    assert [f.key for f in select_files(modules, ["dsh-token-meter/surface-*"])] == [
        "dsh-token-meter/surface-projection.js", "dsh-token-meter/surface-fold.js"]
    with pytest.raises(ValueError, match="matches no dsh source file"):
        select_files(modules, ["dsh-token-meter/nope.js"])
