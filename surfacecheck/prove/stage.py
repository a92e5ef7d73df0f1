"""``prove`` as a stage of ``surfacecheck check``: the obligations about the reference model.

The proofs concern the model, whatever runtime ``check`` drives; the stage runs them at
``STAGE_BOUND`` (smaller than the command's default, to keep ``check`` quick) and writes the
counterexample traces under the report directory. One JUnit case per obligation and per control.
"""
from __future__ import annotations

from surfacecheck.core.cases import Outcome, TestCase
from surfacecheck.core.stage import INCONCLUSIVE, OK, VIOLATION, CheckContext, StageResult

STAGE_BOUND = 8  # the bounded proofs and cross-checks; five obligations hold for any length regardless
CLASSNAME = "surfacecheck.prove"


def stage(ctx: CheckContext) -> StageResult:
    from .run import PROVED_VERDICT, VIOLATION as PROVE_VIOLATION, prove

    report = prove(STAGE_BOUND, trace_dir=ctx.report_dir / "traces", err=ctx.err,
                   command=f"surfacecheck check (prove stage, bound {STAGE_BOUND})")
    cases = []
    for result in report.results:
        props = {"section": result.section, "bound": str(result.bound)}
        outcome = None
        if result.status == "refuted":
            outcome = Outcome(message=f"{result.name} refuted: {result.replay_message}", type="refuted",
                              text=f"trace: {result.trace_path}")
        cases.append(TestCase(name=result.name, classname=CLASSNAME, time=result.seconds, properties=props,
                              failure=outcome,
                              error=Outcome(message="unknown", type="unknown") if result.status == "unknown" else None))
        for control in result.controls:
            bad = control.status != "refuted" or not control.replayed
            cases.append(TestCase(name=f"{result.name} / control {control.name}", classname=CLASSNAME,
                                  time=control.seconds, failure=Outcome(message=control.replay_message or control.status,
                                                                        type="control") if bad else None,
                                  properties={"runtime": control.runtime, "trace": control.trace_path or ""}))
    status = {PROVED_VERDICT: OK, PROVE_VIOLATION: VIOLATION}.get(report.verdict, INCONCLUSIVE)
    return StageResult("prove", status, report.to_json(), report.text(), cases, report.seconds)
