"""The ``findings`` stage of ``surfacecheck check``: the registry's witnesses replayed, discovery over
every log, a short seeded Hypothesis search and the explorer pass (spec §15). NEW or STALE is a
violation; known findings pass unless ``--strict``; a runtime other than the model is told which known
findings it lacks. The Markdown findings report goes to ``REPORT_DIR/findings.md``."""
from __future__ import annotations

from surfacecheck.core.cases import Outcome, TestCase

from ..core.stage import INCONCLUSIVE, OK, VIOLATION, CheckContext, StageResult
from .registry import RegistryError
from .evidence import summary
from .run import SEARCH_SECONDS, FindingsReport, run_findings
from .search import EXPLORE_BOUNDS

CLASSNAME = "surfacecheck.findings"
REPORT_NAME = "findings.md"


def stage(ctx: CheckContext) -> StageResult:
    try:
        report = run_findings(ctx.runtime, strict=ctx.strict, corpus=ctx.corpus, trace_dir=ctx.report_dir / "traces",
                              search_seconds=SEARCH_SECONDS, explore_bounds=EXPLORE_BOUNDS, err=ctx.err,
                              command=f"surfacecheck check --runtime {ctx.runtime} (findings stage)",
                              timeout=ctx.timeout)
    except RegistryError as exc:
        return StageResult("findings", INCONCLUSIVE, {"error": str(exc)}, f"findings: bad registry: {exc}",
                           [TestCase(name="registry", classname=CLASSNAME,
                                     error=Outcome(message=str(exc), type="registry"))])
    status = {"ok": OK, "violation": VIOLATION}.get(report.verdict, INCONCLUSIVE)
    document, text = report.to_json(), report.text(verbose=False)
    try:
        from surfacecheck.findings.report import write_report

        document["report"] = str(write_report(document, ctx.report_dir / REPORT_NAME))
        text += f"\nreport: {document['report']}"
    except Exception as exc:  # noqa: BLE001 - the report is a by-product: its failure must not hide the verdict
        document["report_error"] = f"{type(exc).__name__}: {exc}"
        text += f"\nreport not written: {document['report_error']}"
    return StageResult("findings", status, document, text, junit_cases(report), report.seconds)


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
    for p in report.promises:
        if p["status"] == "held":
            cases.append(TestCase(name=f"held {p['name']}", classname=CLASSNAME,
                                  properties={"section": p["section"], "evidence": summary(p["evidence"])}))
        elif p["status"] == "measured":  # broken in the cost model: reported like a known finding
            failure = Outcome(message=f"measured: {p['name']} is broken by a dsh path", type="measured-finding") \
                if report.strict else None
            cases.append(TestCase(name=f"measured {p['name']}", classname=CLASSNAME, failure=failure,
                                  properties={"section": p["section"], "cost_model": "; ".join(
                                      f"{c['variant']} {c['growth']}" for c in p["evidence"]["cost_model"])}))
    for s in report.stale:
        cases.append(TestCase(name=f"stale {s['id']}", classname=CLASSNAME,
                              failure=Outcome(message=s["why"], type="stale-finding")))
    return cases
