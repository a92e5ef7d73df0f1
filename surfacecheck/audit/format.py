"""Human and JSON renderings of an audit report (the audit's output contract)."""
from __future__ import annotations

import json

from surfacecheck.core.words import count, errors_line

from .rules import ERROR
from .run import AuditReport, LogAudit


def _log_line(log: LogAudit) -> str:
    return (f"{log.path}: {log.events} events, surface {len(log.surface_nodes)} nodes, generation {log.generation}, "
            f"{len(log.replacements)} replacements, policy {log.policy or 'dsh defaults'}")


def _finding_line(f) -> str:
    seq = "-" if f.seq is None else str(f.seq)
    known = f"  [known: {f.known}]" if f.known else ""
    return f"  {f.severity:<7} seq {seq:>6}  {f.rule}: {f.message}{known}"


def human(report: AuditReport, verbose: bool = False, known: bool = True) -> str:
    """One line per log with findings (every log with ``verbose``), its findings, then the summary.
    ``known=False`` leaves out the registered, spec-explained findings (the summary still counts them)."""
    lines = []
    for log in report.logs:
        shown = [f for f in log.findings if known or f.known is None]
        if shown or verbose:
            lines.append(_log_line(log))
            lines.extend(_finding_line(f) for f in shown)
    counts = report.counts()
    lines.append(f"audit: {count(counts['logs'], 'log')}, {errors_line(counts['errors'], counts['errors_set_aside'])}, "
                 f"{count(counts['warnings'], 'warning')} ({counts['known']} known, listed in "
                 "surfacecheck/audit/known_findings.json)"
                 + ("" if not report.unreadable else f", {count(len(report.unreadable), 'unreadable input')}"))
    if counts["errors_set_aside"]:
        lines.append("audit: known errors are set aside; --strict counts them")
    if report.logs and not any(f.severity == ERROR for log in report.logs for f in log.findings):
        lines.append("audit: no error-severity finding")
    return "\n".join(lines) + "\n"


def as_json(report: AuditReport) -> str:
    return json.dumps(report.to_json(), indent=1) + "\n"
