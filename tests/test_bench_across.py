"""``surfacecheck bench --across``: every runtime's cost per appended message in one table, with a constant and a
linear baseline measured in the same run; a runtime that cannot be timed is a row with its reason."""
from __future__ import annotations

import json

from surfacecheck.bench import across
from surfacecheck.cli import main as cli_main


def test_the_table_has_each_runtime_and_both_baselines():
    result = across.measure_across(["embedded", "reference"], sizes=(100, 1000), repeats=20)
    rows = {r.runtime: r for r in result.rows}
    assert rows["embedded"].points and rows["embedded"].points[0][0] == 100
    assert rows["reference"].unavailable  # the reference runtime times no trigger check
    assert rows["recount baseline"].points[1][1] > rows["recount baseline"].points[0][1]
    table = across.markdown(result)
    assert "| embedded | shadow-price projection" in table and "unavailable" in table
    assert "Machine:" in table


def test_growth_reads_the_slope():
    assert across.Row("x", "y", ((100, 1e-6), (1000, 1e-6), (10000, 1.1e-6))).growth == "constant"
    assert across.Row("x", "y", ((100, 1e-6), (1000, 1e-5), (10000, 1e-4))).growth == "linear"


def test_an_unknown_runtime_is_bad_usage(capsys, tmp_path):
    code = cli_main(["bench", "--across", "nonesuch", "--json", "--report-dir", str(tmp_path)])
    assert code == 2 and json.loads(capsys.readouterr().out)["exit_code"] == 2
