"""``surfacecheck bench --runtime dsh``: the protocol ``bench`` op on dsh's own code (issue 14 point 5).

The adapter (``runtimes/dsh/adapter/bench.mjs``) times, per append, dsh's ``foldSurfaceProjection`` (the
gated O(1) projection fold), the registered ``contextPressure`` unit riding it, the meter's
``foldSurfaceTokens`` and ``TokenMeter.measure()``. One real run at small sizes is shared by the tests
(``dsh_result``); the CLI paths are driven with those real figures: the gate holds on the projection
fold and fails, exit 1, when the meter's growing fold is gated instead. The result-parsing tests need
no Node. Sizes are small so the whole file runs in a few seconds.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from surfacecheck.bench.harness import MAX_RATIO
from surfacecheck.bench import measure
from surfacecheck.cli import main
from surfacecheck.core.protocol import ProtocolError, RuntimeUnavailable
from surfacecheck.runtime.dsh import ADAPTER, MODULES_ENV, modules_problem, spec_problem

SIZES = [100, 3000]
APPENDS = 60
EXTRA = {"projection-unit", "fold-tokens", "meter-measure"}
LOCAL_MODULES = ADAPTER / "node_modules"


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


# -- the bench result's further series (no Node needed) -------------------------------------------------

def _synthetic(extra: dict | None = None) -> dict:
    return {"ns_per_append": {"100": 90.0, "3000": 95.0}, "floor_ns_per_append": {"100": 120.0, "3000": 118.0},
            "variant": "dsh foldSurfaceProjection",
            "series": extra if extra is not None else {
                "meter-measure": {"label": "dsh TokenMeter.measure() per append", "expected": "linear",
                                  "ns_per_append": {"100": 1e5, "3000": 2e6}},
                "fold-tokens": {"label": "x", "expected": "linear", "ns_per_append": {}}}}


def test_further_series_are_read_with_their_label_and_expectation():
    series = measure.series_from_result(_synthetic())
    assert list(series) == ["runtime", "bare-pricing", "meter-measure"]  # an unmeasured series is left out
    meter = series["meter-measure"]
    assert meter.expected == "linear" and meter.label == "dsh TokenMeter.measure() per append"
    assert [p.size for p in meter.points] == [100, 3000] and meter.ratio == 20.0
    assert series["runtime"].label == "runtime (dsh foldSurfaceProjection)"


@pytest.mark.parametrize("extra", [{"runtime": {"ns_per_append": {"100": 1.0}}}, {"x": 3}, ["meter-measure"]])
def test_a_malformed_series_is_a_protocol_failure(extra):
    with pytest.raises(RuntimeUnavailable):
        measure.series_from_result(_synthetic(extra))


def test_judge_records_the_other_series_beside_the_gate():
    series = measure.series_from_result(_synthetic())
    verdict = measure.judge(series, "runtime", True)
    assert verdict["held"] and verdict["beside"]["meter-measure"]["ratio"] == 20.0
    assert verdict["beside_flat"] == []
    losing = measure.judge(series, "meter-measure", True)
    assert not losing["held"] and "meter-measure" in losing["failures"][0]


# -- dsh's own code ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dsh_modules():
    """Skip without Node (or npm and no cache); prefer the repository's installed node_modules."""
    problem = spec_problem("dsh")
    if problem:
        pytest.skip(f"the dsh runtime cannot run here: {problem}")
    if not os.environ.get(MODULES_ENV) and modules_problem(LOCAL_MODULES) is None:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(MODULES_ENV, str(LOCAL_MODULES))
            yield
    else:
        yield


@pytest.fixture(scope="module")
def dsh_result(dsh_modules):
    return measure.bench_request("dsh", SIZES, APPENDS)


def _projection_ratio(result: dict) -> float:
    values = list(result["ns_per_append"].values())
    return max(values) / min(values)


def test_dsh_bench_reports_every_series_from_dsh_code(dsh_result):
    r = dsh_result
    assert r["variant"] == "dsh foldSurfaceProjection" and r["raw_folds_via"]
    assert set(r["series"]) == EXTRA and "unavailable" not in r
    for figures in [r["ns_per_append"], r["floor_ns_per_append"]] + [s["ns_per_append"] for s in r["series"].values()]:
        assert sorted(map(int, figures)) == SIZES and all(ns > 0 for ns in figures.values())
    assert r["series"]["meter-measure"]["expected"] == r["series"]["fold-tokens"]["expected"] == "linear"
    assert r["series"]["projection-unit"]["expected"] == "constant"
    # the setup is dsh's own: at each size its surface has exactly that many nodes and every total agreed
    assert {int(k): v["surface_nodes"] for k, v in r["checks"].items()} == {s: s for s in SIZES}
    # linear series over fewer appends (benchmarks/harness.py linear_appends: 50 at 100), O(1) ones pooled passes
    assert r["series"]["meter-measure"]["appends"]["100"] == 50 < r["appends"]["100"]


def test_dsh_meter_fold_grows_with_the_surface(dsh_result):
    meter = dsh_result["series"]["meter-measure"]["ns_per_append"]
    assert meter["3000"] > 5 * meter["100"]  # measure() clones the whole priced surface per call


def test_dsh_check_holds_on_the_projection_fold(dsh_modules, dsh_result, tmp_path, capsys, monkeypatch):
    result = dsh_result
    for _ in range(2):  # sub-µs medians on a shared machine: re-measure before calling it a failure
        if _projection_ratio(result) <= MAX_RATIO:
            break
        result = measure.bench_request("dsh", SIZES, APPENDS)
    monkeypatch.setattr(measure, "bench_request", lambda *a, **kw: result)
    code = main(["bench", "--runtime", "dsh", "--check", "--json", "--report-dir", str(tmp_path),
                 "--sizes", *map(str, SIZES), "--appends", str(APPENDS)])
    report = _json(capsys)
    assert code == 0 and report["verdict"] == "held" and report["gate"]["gated"] == "runtime"
    assert set(report["variants"]) == {"runtime", "bare-pricing"} | EXTRA
    assert report["gate"]["beside"]["meter-measure"]["expected"] == "linear"
    assert report["gate"]["beside"]["meter-measure"]["ratio"] > MAX_RATIO
    assert report["runtime_info"]["checks"] and report["runtime_info"]["variant"] == "dsh foldSurfaceProjection"
    assert Path(report["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("gated", ["meter-measure", "fold-tokens"])
def test_dsh_check_fails_when_the_meter_fold_is_gated(dsh_result, tmp_path, capsys, monkeypatch, gated):
    """The losing variant: the same real figures, the growing series gated instead: --check exits 1."""
    monkeypatch.setattr(measure, "bench_request", lambda *a, **kw: dsh_result)
    code = main(["bench", "--runtime", "dsh", "--check", "--json", "--gated", gated, "--report-dir", str(tmp_path),
                 "--sizes", *map(str, SIZES), "--appends", str(APPENDS)])
    report = _json(capsys)
    assert code == 1 and report["verdict"] == "violated" and report["gate"]["gated"] == gated
    assert any("not O(1)" in failure for failure in report["gate"]["failures"])


def test_dsh_gated_must_name_a_reported_series(dsh_result, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(measure, "bench_request", lambda *a, **kw: dsh_result)
    assert main(["bench", "--runtime", "dsh", "--json", "--gated", "nope", "--report-dir", str(tmp_path),
                 "--sizes", *map(str, SIZES)]) == 2
    assert "reported no such series" in capsys.readouterr().err


def test_dsh_bench_end_to_end_human_table(dsh_modules, tmp_path, capsys):
    """One real run through the CLI: both folds in the same table, the gate's line and the meter beside it."""
    code = main(["bench", "--runtime", "dsh", "--report-dir", str(tmp_path), "--sizes", "100", "1000",
                 "--appends", "30"])
    out = capsys.readouterr().out
    assert code == 0  # without --check the gate is informational
    assert "runtime (dsh foldSurfaceProjection)" in out and "dsh TokenMeter.measure() per append" in out
    assert "dsh foldSurfaceTokens (meter's fold)" in out and "beside the gate: meter-measure" in out


def test_dsh_bench_rejects_bad_args(dsh_modules):
    from surfacecheck.runtime.select import open_runtime
    handle = open_runtime("dsh")
    try:
        for bad in ({}, {"sizes": []}, {"sizes": [0]}, {"sizes": [1.5]}, {"sizes": [10], "appends": 0}):
            with pytest.raises(ProtocolError) as exc:
                handle.call("bench", bad)
            assert exc.value.type == "bad-args"
    finally:
        handle.close()
