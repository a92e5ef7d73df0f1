"""The ``findings`` stage of ``surfacecheck check``: the registry's witnesses replayed, discovery over
every log and a short seeded Hypothesis search (spec §15). NEW or STALE is a violation; known findings
pass unless ``--strict``; a runtime other than the model is told which known findings it lacks."""
from __future__ import annotations

from reports.junit import Outcome, TestCase

from ..stage import INCONCLUSIVE, OK, VIOLATION, CheckContext, StageResult
from .registry import RegistryError
from .run import SEARCH_SECONDS, FindingsReport, run_findings

CLASSNAME = "surfacecheck.findings"


def stage(ctx: CheckContext) -> StageResult:
    try:
        report = run_findings(ctx.runtime, strict=ctx.strict, corpus=ctx.corpus, trace_dir=ctx.report_dir / "traces",
                              search_seconds=SEARCH_SECONDS, err=ctx.err,
                              command=f"surfacecheck check --runtime {ctx.runtime} (findings stage)")
    except RegistryError as exc:
        return StageResult("findings", INCONCLUSIVE, {"error": str(exc)}, f"findings: bad registry: {exc}",
                           [TestCase(name="registry", classname=CLASSNAME,
                                     error=Outcome(message=str(exc), type="registry"))])
    status = {"ok": OK, "violation": VIOLATION}.get(report.verdict, INCONCLUSIVE)
    return StageResult("findings", status, report.to_json(), report.text(), junit_cases(report), report.seconds)


def junit_cases(report: FindingsReport) -> list[TestCase]:
    cases = []
    for k in report.known:
        failure = Outcome(message=f"known {k['class']} {k['gap']}: {k['reason']}", type="known-finding") \
            if report.strict else None
        cases.append(TestCase(name=f"known {k['id']}", classname=CLASSNAME, failure=failure,
                              properties={"gap": k["gap"], "class": k["class"], "promise": k["promise"]}))
    for n in report.new:
        cases.append(TestCase(name=f"NEW {n['promise']} at {n['where']}", classname=CLASSNAME,
                              failure=Outcome(message=n["message"], type="new-finding", text=f"trace: {n['trace']}")))
    for s in report.stale:
        cases.append(TestCase(name=f"stale {s['id']}", classname=CLASSNAME,
                              failure=Outcome(message=s["why"], type="stale-finding")))
    return cases
