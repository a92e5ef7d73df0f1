"""`surfacecheck check` folds capability stages: violation > inconclusive > held; crashes are inconclusive."""
from __future__ import annotations

import io
import json
import sys
import types

import pytest

from surfacecheck import stages as stages_mod
from surfacecheck.check import run_check
from surfacecheck.core.stage import INCONCLUSIVE, OK, VIOLATION, StageResult, fold_status


def _install(monkeypatch, name, behaviour):
    module = types.ModuleType(f"surfacecheck.{name}.stage")
    module.stage = behaviour
    monkeypatch.setitem(sys.modules, f"surfacecheck.{name}.stage", module)


@pytest.mark.parametrize(("statuses", "folded"), [
    ([OK, OK], OK), ([OK, INCONCLUSIVE], INCONCLUSIVE), ([INCONCLUSIVE, VIOLATION], VIOLATION), ([], OK),
])
def test_fold_status(statuses, folded):
    assert fold_status(statuses) == folded


@pytest.mark.parametrize(("status", "code", "verdict"), [(OK, 0, "held"), (VIOLATION, 1, "violated"),
                                                         (INCONCLUSIVE, 3, "inconclusive")])
def test_a_stage_verdict_decides_the_exit_code(tmp_path, monkeypatch, status, code, verdict):
    _install(monkeypatch, "fakestage", lambda ctx: StageResult("fakestage", status, {"ran": ctx.runtime}, "text"))
    out, err = io.StringIO(), io.StringIO()
    rc = run_check("model", tmp_path, json_out=True, corpus=None, stages=("fakestage",), out=out, err=err)
    report = json.loads(out.getvalue())
    assert rc == code and report["verdict"] == verdict
    assert report["stages"]["fakestage"]["summary"] == {"ran": "model"}
    assert json.loads((tmp_path / "report.json").read_text())["exit_code"] == code


def test_a_crashing_stage_is_inconclusive_not_a_pass(tmp_path, monkeypatch):
    def boom(ctx):
        raise RuntimeError("suite bug")

    _install(monkeypatch, "fakestage", boom)
    out, err = io.StringIO(), io.StringIO()
    rc = run_check("model", tmp_path, json_out=True, stages=("fakestage",), out=out, err=err)
    report = json.loads(out.getvalue())
    assert rc == 3 and report["stages"]["fakestage"]["status"] == INCONCLUSIVE
    assert "suite bug" in report["stages"]["fakestage"]["summary"]["error"]
    assert "stage-crash" in (tmp_path / "junit.xml").read_text()


def test_a_capability_without_a_stage_is_skipped_silently(tmp_path):
    ctx_err = io.StringIO()
    from surfacecheck.core.stage import CheckContext
    ctx = CheckContext("model", None, False, tmp_path, ctx_err)
    assert stages_mod.run_stages(ctx, ("no_such_capability",)) == []
