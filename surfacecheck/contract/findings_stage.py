"""The ``findings`` stage of ``surfacecheck check`` on a conversation-level runtime: every registered contract
finding of the runtime replayed (its witness must still break its promise) and its quotes checked against the
installed package. STALE fails; known findings pass unless ``--strict``. The search's NEW findings are the
``contract`` stage's."""
from __future__ import annotations

from ..core.cases import Outcome, TestCase
from ..core.stage import INCONCLUSIVE, OK, VIOLATION, CheckContext, StageResult
from ..core.verdict import Verdict
from .findings_run import run_findings
from .registry import RegistryError

CLASSNAME = "surfacecheck.contract.findings"


def stage(ctx: CheckContext) -> StageResult:
    try:
        report = run_findings(ctx.runtime, strict=ctx.strict, trace_dir=ctx.report_dir / "traces", search=False,
                              timeout=max(ctx.timeout, 60.0),
                              progress=lambda line: (ctx.err.write(line + "\n"), ctx.err.flush()))
    except RegistryError as exc:
        return StageResult("findings", INCONCLUSIVE, {"error": str(exc)}, f"findings: bad registry: {exc}\n",
                           [TestCase(name="registry", classname=CLASSNAME, error=Outcome(str(exc), type="registry"))])
    cases = []
    for k in report.known:
        failure = Outcome(message=f"known {k['class']} {k['id']}: {k['reason']}", type="known-finding") \
            if report.strict else None
        cases.append(TestCase(name=f"known {k['id']}", classname=CLASSNAME, failure=failure,
                              properties={"promise": k["promise"], "class": k["class"], "issue": k["issue"] or ""}))
    for s in report.stale:
        cases.append(TestCase(name=f"stale {s['id']}", classname=CLASSNAME,
                              failure=Outcome(message=s["why"], type="stale-finding")))
    if not report.known and not report.stale:
        cases.append(TestCase(name="registry", classname=CLASSNAME,
                              properties={"note": f"no contract finding registered for {ctx.runtime}"}))
    status = {Verdict.OK: OK, Verdict.VIOLATION: VIOLATION}.get(report.verdict, INCONCLUSIVE)
    return StageResult("findings", status, report.to_json(), report.text() + "\n", cases, report.seconds)
