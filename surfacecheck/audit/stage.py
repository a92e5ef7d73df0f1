"""The audit stage of ``surfacecheck check``: audit every scenario and corpus log under its policy.

Scenario logs run under the policy `scenarios/generate.py` gave them; `dsh-generated/NN-*.jsonl`
under `dsh-generated/policies/NN-*.json` (so selection-mismatch is checked against the range dsh
chose); `dsh-sessions/` under dsh's defaults. A violation is an error-severity finding not in
`known_findings.json` (any error with ``--strict``).
"""
from __future__ import annotations

import time
from pathlib import Path

from surfacecheck.model.config import RuntimePolicy
from surfacecheck.core.cases import Outcome, TestCase

from ..core.corpus import GENERATED_DIR, POLICIES_DIR, SESSIONS_DIR
from ..core.stage import OK, VIOLATION, CheckContext, StageResult
from .format import human
from .reader import AuditInputError
from .rules import ERROR
from .run import AuditReport, audit_log, load_known, load_policy, log_key


def _jobs(ctx: CheckContext) -> list[tuple[Path, RuntimePolicy | None]]:
    from surfacecheck.scenarios.generate import LOG_DIR, SCENARIOS

    jobs = [(Path(LOG_DIR) / f"{s.name}.jsonl", RuntimePolicy.from_json(s.policy)) for s in SCENARIOS]
    if ctx.corpus is not None:
        jobs += [(p, None) for p in sorted((ctx.corpus / SESSIONS_DIR).glob("*.jsonl"))]
        generated = ctx.corpus / GENERATED_DIR
        for path in sorted(generated.glob("*.jsonl")):
            policy_file = generated / POLICIES_DIR / f"{path.stem}.json"
            jobs.append((path, load_policy(policy_file) if policy_file.exists() else None))
    return jobs


def _case(log, strict: bool, seconds: float) -> TestCase:
    counted = [f for f in log.findings if f.severity == ERROR and (strict or f.known is None)]
    case = TestCase(name=log_key(Path(log.path)), classname="surfacecheck.audit", time=seconds,
                    properties={"events": str(log.events), "findings": str(len(log.findings))})
    if counted:
        first = counted[0]
        case.failure = Outcome(message=f"{first.rule} at seq {first.seq}: {first.message}", type=first.rule,
                               text="\n".join(f"{f.rule} seq {f.seq}: {f.message}" for f in counted))
    return case


def stage(ctx: CheckContext) -> StageResult:
    """Audit scenarios + corpus; violation when an unexplained error-severity finding exists."""
    started = time.perf_counter()
    known = load_known()
    report = AuditReport(strict=ctx.strict)
    cases = []
    for path, policy in _jobs(ctx):
        t0 = time.perf_counter()
        try:
            log = audit_log(path, policy, known)
        except AuditInputError as exc:
            report.unreadable.append(exc)
            cases.append(TestCase(name=str(path), classname="surfacecheck.audit",
                                  error=Outcome(message=str(exc), type="unreadable")))
            continue
        report.logs.append(log)
        cases.append(_case(log, ctx.strict, time.perf_counter() - t0))
    counts = report.counts()
    status = VIOLATION if counts["errors"] or report.unreadable else OK
    summary = dict(counts, unreadable=len(report.unreadable),
                   findings={log_key(Path(log.path)): [f.to_json() for f in log.findings]
                             for log in report.logs if log.findings})
    return StageResult("audit", status, summary, human(report, known=ctx.strict), cases, time.perf_counter() - started)
