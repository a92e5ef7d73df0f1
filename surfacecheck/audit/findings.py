"""A finding: which rule broke, how badly, at which seq, and expected vs observed in words."""
from __future__ import annotations

from dataclasses import dataclass

from .rules import rule


@dataclass(frozen=True)
class AuditIssue:
    """One broken audit rule on one log (JSON shape ``{rule, severity, seq, message}``); ``known`` is the
    registry reason when this finding is a known, spec-explained one (``known_findings.json``)."""

    rule: str
    seq: int | None
    message: str
    known: str | None = None

    @property
    def severity(self) -> str:
        return rule(self.rule).severity

    def to_json(self) -> dict:
        out = {"rule": self.rule, "severity": self.severity, "seq": self.seq, "message": self.message}
        if self.known is not None:
            out["known"] = self.known
        return out


def finding(rule_id: str, seq: int | None, message: str) -> AuditIssue:
    """Build a finding, checking the rule id exists (an unknown id raises KeyError)."""
    rule(rule_id)
    return AuditIssue(rule_id, seq, message)
