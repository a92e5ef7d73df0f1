"""Audit logs end to end: read (streaming) → `Auditor` → per-log results → one report.

Also loads `--policy FILE` (the corpus `policies/*.json` shape, `model.config.RuntimePolicy`) and
the registry of known, spec-explained findings (`known_findings.json`).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable

from surfacecheck.core.json_where import line_of
from surfacecheck.core.verdict import Verdict
from surfacecheck.model.config import RuntimePolicy
from surfacecheck.model.errors import ModelError
from surfacecheck.model.replay import Replacement

from .auditor import Auditor
from .findings import AuditIssue, finding
from .reader import AuditInputError, AuditStream, log_paths
from .rules import ERROR, WARNING

KNOWN_FILE = Path(__file__).with_name("known_findings.json")


class PolicyError(Exception):
    """`--policy FILE` cannot be used: `FILE[:LINE]: reason` (exit 2)."""


def load_policy(path: str | os.PathLike | None) -> RuntimePolicy:
    """dsh's defaults without a file; else the file's BasicCompactionConfig + pruner + contextWindow (spec 9.1)."""
    if path is None:
        return RuntimePolicy()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(f"{path}: cannot read policy: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PolicyError(f"{path}:{exc.lineno}: policy is not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise PolicyError(f"{path}:1: policy is not JSON this suite can read: nested too deeply") from None
    if not isinstance(obj, dict):
        raise PolicyError(f"{path}:1: policy must be a JSON object")
    window = obj.get("contextWindow")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window <= 0):
        raise PolicyError(f"{path}:{line_of(text, ['contextWindow'])}: invalid policy: contextWindow must be a "
                          f"positive integer or null, got {json.dumps(window)}")
    try:
        return RuntimePolicy.from_json(obj)
    except ModelError as exc:
        raise PolicyError(f"{path}:{_policy_line(text, obj, exc.message)}: invalid policy: {exc.message}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise PolicyError(f"{path}:{_policy_line(text, obj, str(exc))}: invalid policy: {exc}") from None


def _policy_line(text: str, obj: dict, message: str) -> int:
    """The line of the policy key dsh's refusal names (the deepest one ``message`` mentions), else line 1: dsh's
    config checks (spec 9.1, 6) say which key, not where."""
    paths = [[key] for key in obj]
    for key, value in obj.items():
        if isinstance(value, dict):
            paths += [[key, inner] for inner in value]
    named = [p for p in paths if isinstance(p[-1], str) and re.search(rf"\b{re.escape(p[-1])}\b", message)]
    return line_of(text, max(named, key=len)) if named else 1


def load_known(path: Path = KNOWN_FILE) -> dict[tuple[str, str, int | None], str]:
    """`(folder/file, rule, seq) -> reason` from the registry."""
    entries = json.loads(path.read_text(encoding="utf-8"))["findings"]
    return {(e["log"], e["rule"], e["seq"]): e["reason"] for e in entries}


def log_key(path: Path) -> str:
    """How the registry names a log: its folder and file name (e.g. ``dsh-sessions/x.jsonl``)."""
    return f"{path.parent.name}/{path.name}"


@dataclass
class LogAudit:
    path: str
    events: int
    surface_nodes: tuple[int, ...]
    generation: int
    replacements: list[Replacement]
    findings: list[AuditIssue]
    torn_line: int | None = None
    policy: str | None = None

    def to_json(self) -> dict:
        return {"path": self.path, "events": self.events, "surface_nodes": list(self.surface_nodes),
                "generation": self.generation, "replacements": [r.to_json() for r in self.replacements],
                "findings": [f.to_json() for f in self.findings], "policy": self.policy}


def audit_log(path: str | os.PathLike, policy: RuntimePolicy | None = None,
              known: dict | None = None) -> LogAudit:
    """Audit one log file (raises AuditInputError when it cannot be read as a log)."""
    stream = AuditStream(path)
    auditor = Auditor(policy)
    for line, event in stream:
        auditor.feed(event, line)
    summary = auditor.finish()
    findings = list(auditor.findings)
    if stream.torn_line is not None:
        findings.append(finding("torn-tail", summary.events, f"line {stream.torn_line}: expected a newline-terminated "
                                "record, observed an unterminated final line; dsh's scanner never consumes it and "
                                "repair truncates it (spec 1.7); not audited"))
    findings.sort(key=lambda f: (f.seq is None, f.seq if f.seq is not None else 0))
    key = log_key(Path(path))
    if known:
        findings = [replace(f, known=known.get((key, f.rule, f.seq))) for f in findings]
    return LogAudit(os.fspath(path), summary.events, summary.surface_nodes, summary.generation,
                    list(auditor.replacements), findings, stream.torn_line)


@dataclass
class AuditReport:
    logs: list[LogAudit] = field(default_factory=list)
    unreadable: list[AuditInputError] = field(default_factory=list)
    strict: bool = False

    def counts(self) -> dict:
        findings = [f for log in self.logs for f in log.findings]
        errors = [f for f in findings if f.severity == ERROR and (self.strict or f.known is None)]
        return {"logs": len(self.logs), "errors": len(errors),
                "errors_set_aside": sum(1 for f in findings if f.severity == ERROR) - len(errors),
                "warnings": sum(1 for f in findings if f.severity == WARNING),
                "known": sum(1 for f in findings if f.known is not None)}

    @property
    def exit_code(self) -> int:
        if self.unreadable:
            return Verdict.BAD_INPUT.exit_code
        return (Verdict.VIOLATION if self.counts()["errors"] else Verdict.OK).exit_code

    def to_json(self) -> dict:
        out = {"logs": [log.to_json() for log in self.logs], "summary": self.counts()}
        if self.unreadable:
            out["unreadable"] = [{"path": e.path, "line": e.line, "reason": e.reason} for e in self.unreadable]
        return out


def expand(targets: Iterable[str | os.PathLike]) -> tuple[list[Path], list[AuditInputError]]:
    paths, problems = [], []
    for target in targets:
        try:
            paths.extend(log_paths(target))
        except AuditInputError as exc:
            problems.append(exc)
    return paths, problems


def sibling_policy(path: Path) -> Path | None:
    """The corpus layout: `dsh-generated/NN-x.jsonl` ran under `dsh-generated/policies/NN-x.json`."""
    candidate = path.parent / "policies" / f"{path.stem}.json"
    return candidate if candidate.is_file() else None


def audit_paths(targets: Iterable[str | os.PathLike], policy: RuntimePolicy | None = None, *, strict: bool = False,
                progress=None, policy_name: str | None = None) -> AuditReport:
    """Audit every log under `targets`; unreadable inputs are collected, not raised.

    Without `policy`, a log with a sibling `policies/<stem>.json` is audited under it; others under
    dsh's defaults. A bad sibling policy is reported like an unreadable input."""
    paths, problems = expand(targets)
    report = AuditReport(unreadable=problems, strict=strict)
    known = load_known()
    for path in progress(paths) if progress else paths:
        used, name = policy, policy_name
        try:
            if used is None and (found := sibling_policy(path)) is not None:
                used, name = load_policy(found), str(found)
            log = audit_log(path, used, known)
        except AuditInputError as exc:
            report.unreadable.append(exc)
            continue
        except PolicyError as exc:
            report.unreadable.append(AuditInputError(str(found), None, str(exc).split(": ", 1)[-1]))
            continue
        log.policy = name
        report.logs.append(log)
    return report
