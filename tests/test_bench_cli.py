"""``surfacecheck bench`` end to end at small sizes, the protocol ``bench`` op, the plot, and the
``check`` stage. Exit codes of the gate are driven with synthetic figures: no timing is asserted."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from surfacecheck.bench.harness import Point, Series
from surfacecheck.bench.variants import VARIANTS, Variant
from surfacecheck.bench import cli as bench_cli
from surfacecheck.bench import inprocess, measure
from surfacecheck.bench.plot import figure
from surfacecheck.bench import stage as bench_stage
from surfacecheck.bench.stage import stage
from surfacecheck.cli import main
from surfacecheck.core.protocol import ProtocolError
from surfacecheck.core.stage import OK, SKIPPED, VIOLATION, CheckContext
from test_bench import RecountingProjection  # noqa: E402  (the impostor negative control)

SERVE = f"cmd:{sys.executable} -m surfacecheck.serve"
SMALL = ["--sizes", "100", "400", "--memory-events", "--appends", "60"]


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_bench_json_reports_every_variant_with_plot_and_report(tmp_path, capsys):
    code = main(["bench", "--json", "--report-dir", str(tmp_path), *SMALL])
    report = _json(capsys)
    assert code == 0 and report["verdict"] == "measured" and report["exit_code"] == 0
    assert list(report["variants"]) == ["projection", "incremental", "copy-on-append", "recount", "bare-pricing"]
    for series in report["variants"].values():
        assert [p["size"] for p in series["points"]] == [100, 400]
        assert all(p["median_ns"] > 0 and p["appends"] >= 3 for p in series["points"])
    assert report["gate"]["cost_model"]["projection"] == "constant"
    assert report["gate"]["cost_model"]["recount"] == "linear"
    assert report["machine"]["cpus"] >= 1 and report["seed"] == 0
    assert Path(report["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads(Path(report["report"]).read_text())["variants"].keys() == report["variants"].keys()


def test_bench_human_output_and_memory(tmp_path, capsys):
    code = main(["bench", "--runtime", "model", "--report-dir", str(tmp_path), "--sizes", "100", "300",
                 "--memory-events", "1000", "5000", "--appends", "30"])
    out = capsys.readouterr().out
    assert code == 0
    assert "reference model's claim fold" in out and "ratio" in out and "memory: model-projection state" in out
    assert "verdict: measured" in out


def _fake(medians: list[float], floor: float = 3400.0):
    """bench_in_process returning fixed figures (the gate's wiring without timing)."""
    def fake(names, sizes, **kw):
        series = {"projection": Series("projection", "(a)", "constant",
                                       [Point(s, 10, m, 1.0) for s, m in zip(sizes, medians)]),
                  "bare-pricing": Series("bare-pricing", "(e)", "constant", [Point(s, 10, floor, 1.0) for s in sizes])}
        return series, {}
    return fake


@pytest.mark.parametrize("medians, code", [([4000, 4300], 0), ([4000, 9000], 1)])
def test_check_exit_status_follows_the_gate(tmp_path, capsys, monkeypatch, medians, code):
    monkeypatch.setattr(measure, "bench_in_process", _fake(medians))
    assert main(["bench", "--check", "--json", "--report-dir", str(tmp_path), "--sizes", "100", "1000000"]) == code
    report = _json(capsys)
    assert report["verdict"] == ("held" if code == 0 else "violated") and report["gate"]["held"] == (code == 0)


def test_without_check_a_failing_gate_is_reported_not_enforced(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(measure, "bench_in_process", _fake([4000, 9000]))
    assert main(["bench", "--report-dir", str(tmp_path), "--sizes", "100", "1000000"]) == 0
    assert "gate: FAILED projection" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--sizes", "100"], "at least two different --sizes"),
    (["--variants", "nope"], "unknown variant 'nope'"),
    (["--runtime", "bogus"], "unknown runtime"),
    (["--runtime", SERVE + " embedded", "--gated", "recount"], "in-process runtimes"),
])
def test_bad_usage_exits_2(tmp_path, capsys, argv, message):
    try:
        code = main(["bench", "--json", "--report-dir", str(tmp_path), *argv])
    except SystemExit as exc:  # the shared --runtime is refused while the arguments are parsed
        code = exc.code
    assert code == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["exit_code"] == 2 and message in captured.err


def test_bad_size_and_unwritable_report_dir_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--sizes", "100", "lots"])
    assert exc.value.code == 2
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SystemExit) as exc:  # refused before anything is measured
        main(["bench", "--report-dir", str(blocker / "sub"), "--sizes", "100", "200"])
    assert exc.value.code == 2
    assert f"argument --report-dir: {blocker / 'sub'}: cannot be created" in capsys.readouterr().err


def test_bench_over_the_protocol(tmp_path, capsys):
    code = main(["bench", "--json", "--runtime", SERVE + " embedded", "--report-dir", str(tmp_path),
                 "--sizes", "100", "1000", "--appends", "40"])
    report = _json(capsys)
    assert code == 0 and set(report["variants"]) == {"runtime", "bare-pricing"}
    assert [p["size"] for p in report["variants"]["runtime"]["points"]] == [100, 1000]
    assert report["gate"]["cost_model"]["runtime"] == "constant"


def test_a_runtime_without_bench_is_inconclusive(tmp_path, capsys):
    server = tmp_path / "nobench.py"
    server.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    r = json.loads(line)\n"
        "    if r['op'] == 'hello':\n"
        "        out = {'id': r['id'], 'result': {'protocol': 'surfacecheck-runtime/1', 'name': 'x',\n"
        "                                         'levels': ['log']}}\n"
        "    else:\n"
        "        out = {'id': r['id'], 'error': {'type': 'unsupported', 'message': 'no bench here'}}\n"
        "    print(json.dumps(out), flush=True)\n")
    code = main(["bench", "--json", "--runtime", f"cmd:{sys.executable} {server}", "--report-dir", str(tmp_path),
                 "--sizes", "100", "1000"])
    assert code == 3 and "no bench here" in _json(capsys)["error"]


def test_inprocess_handle_answers_and_rejects_bad_args():
    result = inprocess.handle("model", {"sizes": [200, 100], "appends": 20})
    assert set(result["ns_per_append"]) == {"100", "200"} and result["variant"] == "model-projection"
    assert result["ops_per_append"] == {"100": 2.0, "200": 2.0}
    for bad in ({}, {"sizes": []}, {"sizes": [0]}, {"sizes": [True]}, {"sizes": "100"}, {"sizes": [10], "appends": 0}):
        with pytest.raises(ProtocolError) as exc:
            inprocess.handle("embedded", bad)
        assert exc.value.type == "bad-args"


def test_plot_has_labelled_log_axes_and_one_line_per_variant():
    variants = {name: {"label": name, "points": [{"size": s, "median_ns": 10.0 * s, "ops": 1.0} for s in (100, 1000)]}
                for name in ("projection", "recount", "bare-pricing")}
    fig = figure(variants, "title")
    times, ops = fig.axes
    for axis in (times, ops):
        assert axis.get_xscale() == axis.get_yscale() == "log"
        assert axis.get_xlabel() == "surface size (nodes)" and axis.get_ylabel()
        assert [line.get_label() for line in axis.get_lines()] == list(variants)


def _ctx(runtime: str, tmp_path) -> CheckContext:
    return CheckContext(runtime, None, False, tmp_path, sys.stderr)


def test_check_stage_holds_for_the_embedded_projection(tmp_path):
    result = stage(_ctx("embedded", tmp_path))
    assert result.status == OK and result.summary["cost_model"]["projection"] == "constant"
    assert [case.status for case in result.cases] == ["passed"] * 3


def test_check_stage_flags_a_linear_projection(tmp_path, monkeypatch):
    monkeypatch.setitem(VARIANTS, "projection", Variant("projection", "impostor", RecountingProjection))
    monkeypatch.setattr(bench_stage, "COST_SIZES", (100, 1000))
    monkeypatch.setattr(bench_stage, "TIMING_SIZES", (100, 1000))
    result = stage(_ctx("embedded", tmp_path))
    assert result.status == VIOLATION and result.cases[0].status == "failure"


def test_check_stage_skips_a_runtime_without_bench(tmp_path, monkeypatch):
    def unsupported(*args, **kw):
        raise ProtocolError("unsupported", "bench is not available")
    monkeypatch.setattr(measure, "bench_protocol", unsupported)
    assert stage(_ctx("cmd:whatever", tmp_path)).status == SKIPPED


def test_default_sizes_reach_a_million():
    assert bench_cli.DEFAULT_MEMORY_EVENTS == (10**3, 10**6)
    parser = bench_cli.argparse.ArgumentParser()
    bench_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["bench"])
    assert args.sizes == [10**2, 10**3, 10**4, 10**5, 10**6] and args.runtime == "embedded"
