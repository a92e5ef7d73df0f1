"""The ``verify`` stage of ``surfacecheck check``: the lockstep machines under the ``ci`` profile
(fixed seed, bounded) at every level the runtime supports, regression folder first.

Traces go to ``<report dir>/traces``; ``check`` never writes into the committed regression folder.
"""
from __future__ import annotations

import time

from surfacecheck.core.cases import Outcome, TestCase
from surfacecheck.core.stage import INCONCLUSIVE, OK, VIOLATION, CheckContext, StageResult

CLASSNAME = "surfacecheck.verify"
PROFILE = "ci"


def stage(ctx: CheckContext) -> StageResult:
    """``verify --runtime ctx.runtime --profile ci`` as a stage: one JUnit case per level and per
    regression trace replayed."""
    from surfacecheck.verify.run import verify

    started = time.perf_counter()
    try:
        report = verify(ctx.runtime, profile=PROFILE, trace_dir=ctx.report_dir / "traces", save_regressions=False,
                        err=ctx.err, command=f"surfacecheck check --runtime {ctx.runtime}", timeout=ctx.timeout)
    except ValueError as exc:
        message = f"verify could not open runtime {ctx.runtime}: {exc}"
        case = TestCase(name="verify", classname=CLASSNAME, error=Outcome(message=message, type="usage"))
        return StageResult("verify", INCONCLUSIVE, {"error": message}, message, [case],
                           time.perf_counter() - started)
    cases = []
    for entry in report.regressions:
        failing = entry["verdict"].startswith("failing")
        outcome = Outcome(message=entry["detail"], type="regression") if entry["verdict"] != "fixed" else None
        cases.append(TestCase(name=f"regression {entry['trace'].rsplit('/', 1)[-1]}", classname=CLASSNAME,
                              failure=outcome if failing else None, error=None if failing else outcome))
    for level in report.levels:
        name = f"level {level.level}"
        props = {"examples": str(level.examples), "steps": str(level.steps), "seed": str(report.seed)}
        if level.violation is not None:
            v = level.violation
            trace = next((t for t in report.traces if f"verify-{level.level}-" in t), "")
            outcome = Outcome(message=f"{v.property} at step {v.step}: {v.message}", type=v.property,
                              text=f"trace: {trace}")
            cases.append(TestCase(name=name, classname=CLASSNAME, time=level.seconds, failure=outcome,
                                  properties=props))
        elif level.unavailable:
            cases.append(TestCase(name=name, classname=CLASSNAME, time=level.seconds, properties=props,
                                  error=Outcome(message=level.unavailable, type="runtime-unavailable",
                                                text=level.stderr[-2000:])))
        else:
            cases.append(TestCase(name=name, classname=CLASSNAME, time=level.seconds, properties=props))
    if report.unavailable:
        cases.append(TestCase(name="verify", classname=CLASSNAME,
                              error=Outcome(message=report.unavailable, type="runtime-unavailable",
                                            text=report.stderr[-2000:])))
    status = {"ok": OK, "violation": VIOLATION, "inconclusive": INCONCLUSIVE}[report.status]
    return StageResult("verify", status, report.to_json(), report.text(), cases, time.perf_counter() - started)
