"""The ``dsh`` stage of ``surfacecheck check``: whatever runtime ``check`` tests, the
reference model is also held against dsh's real library — ``verify --runtime dsh --profile ci`` at every
level the adapter serves, then every registered finding's witness replayed on it (does the real library
reproduce the finding?). Skipped, with the install hint, where Node.js is missing; skipped as redundant
when the runtime under test already is dsh (every other stage ran against it).

Verdict: a lockstep divergence is a violation (a question about the model or a regression in dsh); a
witness the library does not reproduce is reported, not failed (the registry records where each finding
has been shown, ``properties/findings.json`` ``shown_on``) — except for a ``public-api`` reachability claim,
whose trace (and a shipped-runtime claim's library trace) must replay exit 1 on the library: one
that does not is a stale claim, a violation.
"""
from __future__ import annotations

import time

from surfacecheck.core.cases import Outcome, TestCase
from surfacecheck.core.stage import INCONCLUSIVE, OK, SKIPPED, VIOLATION, CheckContext, StageResult

CLASSNAME = "surfacecheck.dsh"
SPEC = "dsh"


def witness_reproduction(spec: str) -> list[dict]:
    """Per registered finding: does ``spec`` reproduce its witness (True / False / None = level not served)?"""
    from surfacecheck.findings import registry
    from surfacecheck.findings.run import reproduces
    from surfacecheck.properties.trace_check import read_valid_trace

    from surfacecheck.findings.reachability import library_trace

    rows = []
    for finding in registry.load():
        trace = read_valid_trace(finding.trace_path)
        row = {"id": finding.id, "level": trace.level, "reproduces": reproduces(trace, spec),
               "reachability": (finding.reachability or {}).get("kind")}
        proof = library_trace(finding.reachability or {}, finding.trace_path)
        if proof is not None:  # a reachability claim's trace must replay exit 1 on dsh's library
            row["reachability_trace"] = str(proof)
            row["reachability_reproduces"] = (row["reproduces"] if proof == finding.trace_path
                                              else reproduces(read_valid_trace(proof), spec))
        rows.append(row)
    return rows


def stage(ctx: CheckContext) -> StageResult:
    from surfacecheck.core.protocol import RuntimeUnavailable
    from surfacecheck.runtime.dsh import is_dsh_spec, spec_problem
    from surfacecheck.verify.run import verify

    started = time.perf_counter()
    if is_dsh_spec(ctx.runtime):
        note = f"the runtime under test is {ctx.runtime}: every stage above ran against dsh's own code"
        return StageResult("dsh", SKIPPED, {"skipped": note}, note + "\n", [], 0.0)
    problem = spec_problem(SPEC)
    if problem:
        note = f"skipped: {problem}"
        case = TestCase(name="dsh", classname=CLASSNAME, skipped=Outcome(message=note, type="dsh-unavailable"))
        return StageResult("dsh", SKIPPED, {"skipped": problem}, note + "\n", [case], 0.0)
    report = verify(SPEC, profile="ci", trace_dir=ctx.report_dir / "traces" / "dsh", save_regressions=False,
                    err=ctx.err, command="surfacecheck check (stage dsh)")
    cases, lines = [], [report.text().rstrip()]
    for level in report.levels:
        props = {"examples": str(level.examples), "steps": str(level.steps), "seed": str(report.seed)}
        if level.violation is not None:
            v = level.violation
            trace = next((t for t in report.traces if f"verify-{level.level}-" in t), "")
            cases.append(TestCase(name=f"dsh level {level.level}", classname=CLASSNAME, time=level.seconds,
                                  properties=props, failure=Outcome(message=f"{v.property} at step {v.step}: {v.message}",
                                                                    type=v.property, text=f"trace: {trace}")))
        else:
            cases.append(TestCase(name=f"dsh level {level.level}", classname=CLASSNAME, time=level.seconds,
                                  properties=props))
    summary = {"verify": report.to_json()}
    status = {"ok": OK, "violation": VIOLATION, "inconclusive": INCONCLUSIVE}[report.status]
    if status == OK:
        try:
            rows = witness_reproduction(SPEC)
        except RuntimeUnavailable as exc:
            rows, status = [], INCONCLUSIVE
            lines.append(f"findings witnesses on dsh: inconclusive: {str(exc).splitlines()[0]}")
        summary["witnesses"] = rows
        shown = [r["id"] for r in rows if r["reproduces"]]
        not_shown = [r["id"] for r in rows if r["reproduces"] is False]
        unserved = [r["id"] for r in rows if r["reproduces"] is None]
        if rows:
            lines.append(f"findings witnesses on dsh's library: {len(shown)}/{len(rows)} reproduce"
                         + (f"; not reproduced: {', '.join(not_shown)}" if not_shown else "")
                         + (f"; level not served: {', '.join(unserved)}" if unserved else ""))
        cases.append(TestCase(name=f"dsh findings witnesses ({len(shown)}/{len(rows)} reproduce)", classname=CLASSNAME))
        claims = [r for r in rows if "reachability_reproduces" in r]
        false = [r for r in claims if r["reachability_reproduces"] is not True]
        if claims:
            lines.append(f"registry reachability traces: {len(claims) - len(false)}/{len(claims)} replay exit 1 on "
                         f"dsh's library" + "".join(f"\n  NOT reproduced: {r['id']} ({r['reachability_trace']}; the "
                                                    f"registry must be kept true)" for r in false))
            case = TestCase(name="registry reachability traces", classname=CLASSNAME)
            if false:
                case.failure = Outcome(message=f"{len(false)} reachability traces not reproduced on dsh",
                                       type="reachability-stale", text="\n".join(r["id"] for r in false))
                status = VIOLATION
            cases.append(case)
    return StageResult("dsh", status, summary, "\n".join(lines) + "\n", cases, time.perf_counter() - started)
