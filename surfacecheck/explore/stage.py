"""The explore stage of ``surfacecheck check``: the correct model at small bounds, then each negative control.

The correct model must show no violation; each negative-control variant, at the least bounds
that reach its bug, must show the property it breaks (a checker that stopped finding bugs fails
the stage). Counterexample traces go to ``<report-dir>/explore-traces/``.
"""
from __future__ import annotations

import time

from surfacecheck.core.cases import Outcome, TestCase

from ..core.stage import OK, VIOLATION, CheckContext, StageResult
from .run import run_explore
from .variants import VARIANTS
from .world import Bounds

STAGE_BOUNDS = Bounds(4, 2, 1)
CONTROL_BOUNDS = {  # the least bounds at which each bug is reachable
    "retry-without-progress": Bounds(3, 0, 0),
    "never-reemit-runtime-context": Bounds(3, 0, 1),
    "pressure-skipped": Bounds(3, 1, 0),
    "unbalanced-cut": Bounds(4, 2, 1),
    "no-shrink-rule": Bounds(2, 0, 1),
}


def stage(ctx: CheckContext) -> StageResult:
    """``surfacecheck check`` stage: ok when the model holds and every control is caught."""
    started = time.perf_counter()
    traces = ctx.report_dir / "explore-traces"
    cases, lines, failed = [], [], False
    t0 = time.perf_counter()
    report = run_explore(STAGE_BOUNDS, trace_dir=traces)
    case = TestCase(name="model", classname="surfacecheck.explore", time=time.perf_counter() - t0,
                    properties={"states": str(report["states"]), "edges": str(report["edges"])})
    if report["violations"]:
        failed = True
        first = report["violations"][0]
        case.failure = Outcome(message=f"{first['property']}: {first['message']}", type=first["property"],
                               text=" ".join(first["actions"]))
    cases.append(case)
    lines.append(f"explore: model at {vars(STAGE_BOUNDS)}: {report['states']} states, {report['edges']} edges, "
                 f"depth {report['depth']}, {report['states_per_second']} states/s, {len(report['violations'])} violations")
    controls = {}
    for name, bounds in CONTROL_BOUNDS.items():
        v = VARIANTS[name]
        t0 = time.perf_counter()
        found = run_explore(bounds, variant=v)
        caught = any(x["property"] == v.breaks for x in found["violations"])
        controls[name] = {"caught": caught, "states": found["states"],
                          "shortest": min((x["length"] for x in found["violations"] if x["property"] == v.breaks),
                                          default=None)}
        case = TestCase(name=f"control:{name}", classname="surfacecheck.explore", time=time.perf_counter() - t0)
        if not caught:
            failed = True
            case.failure = Outcome(message=f"negative control {name} not caught: expected {v.breaks}",
                                   type="control-missed", text=str(found["violations"]))
        cases.append(case)
        lines.append(f"explore: control {name}: {'caught' if caught else 'MISSED'} {v.breaks}")
    summary = {"model": {k: report[k] for k in ("states", "edges", "depth", "states_per_second", "verdict", "actions")},
               "bounds": vars(STAGE_BOUNDS), "violations": report["violations"], "controls": controls}
    return StageResult("explore", VIOLATION if failed else OK, summary, "\n".join(lines), cases,
                       time.perf_counter() - started)
