"""The contract's known findings (``contract/findings.json``): for each runtime, the promises it breaks.

Each entry names the ``runtime`` and the contract ``promise`` it breaks, a minimal witness ``trace`` (relative to the
registry; ``surfacecheck replay`` exits 1 on it), and a ``class`` argued from that runtime's own words, as dsh's
findings are: a ``defect`` quotes text that promises the property (``evidence.kind: promise``) and says what was
``searched`` for text giving it up; a ``tradeoff`` quotes text that documents or intends the behaviour
(``intent``); a ``design-question`` quotes the closest text, ``silent`` on the promise, and names the
``design_source`` that makes it. Every quote names the Python distribution, its version, the file inside
``site-packages`` and the line, and is checked verbatim against the installed package (:func:`check_quote`).
``reachability`` says how the runtime's public API gets there (``kind: public-api`` and ``how``), and ``issue``
names the public issue that reports it, or is null when none was found (``searched_issues`` says where).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..core.json_where import line_of, read_document
from ..core.quotes import PY_MARKER, QuoteCheck, check_installed

DEFAULT_PATH = Path(__file__).resolve().parent / "findings.json"
CLASSES = ("defect", "design-question", "tradeoff")
EVIDENCE_KIND = {"defect": "promise", "tradeoff": "intent", "design-question": "silent"}
FIELDS = ("id", "runtime", "promise", "class", "reason", "trace", "explanation")
REACH_KINDS = ("public-api", "not-reachable")


class RegistryError(ValueError):
    """A registry that cannot be used; ``str()`` is ``PATH:LINE: reason``."""


@dataclass(frozen=True)
class Finding:
    """One registered contract finding; ``trace_path`` is the witness resolved against the registry's folder."""

    id: str
    runtime: str
    promise: str
    klass: str
    reason: str
    trace: str
    trace_path: Path
    explanation: str
    evidence: dict
    evidence_also: tuple = ()
    reachability: dict = field(default_factory=dict)
    issue: str | None = None
    searched: str | None = None
    design_source: str | None = None

    def to_json(self) -> dict:
        return {"id": self.id, "runtime": self.runtime, "promise": self.promise, "class": self.klass,
                "reason": self.reason, "trace": self.trace, "explanation": self.explanation,
                "evidence": self.evidence, "evidence_also": list(self.evidence_also),
                "reachability": self.reachability, "issue": self.issue, "searched": self.searched,
                "design_source": self.design_source}


def load(path: str | Path | None = None, promises: tuple[str, ...] | None = None) -> list[Finding]:
    """Read and check the registry (``promises``: the contract's ids an entry may name)."""
    path = Path(path) if path is not None else DEFAULT_PATH
    text, document = read_document(path, RegistryError)
    entries = document.get("findings") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise RegistryError(f"{path}:1: expected an object with a \"findings\" list")
    found, seen = [], set()
    for index, entry in enumerate(entries):
        def at(key: str | None = None, index: int = index) -> str:
            keys = ["findings", index] + ([key] if key else [])
            return f"{path}:{line_of(text, keys)}: findings[{index}]"

        if not isinstance(entry, dict):
            raise RegistryError(f"{at()}: expected an object with {', '.join(FIELDS)}")
        missing = [k for k in FIELDS if not isinstance(entry.get(k), str) or not entry[k].strip()]
        if missing:
            raise RegistryError(f"{at()}: missing or empty {', '.join(missing)}")
        if entry["id"] in seen:
            raise RegistryError(f"{at('id')}: duplicate id {entry['id']!r}")
        seen.add(entry["id"])
        if entry["class"] not in CLASSES:
            raise RegistryError(f"{at('class')}: class must be one of {CLASSES}, got {entry['class']!r}")
        if promises is not None and entry["promise"] not in promises:
            raise RegistryError(f"{at('promise')}: {entry['promise']!r} is not a contract promise")
        why = quote_problem(entry.get("evidence"))
        if why:
            raise RegistryError(f"{at('evidence')}: {why}")
        if entry["evidence"]["kind"] != EVIDENCE_KIND[entry["class"]]:
            raise RegistryError(f"{at('evidence')}: a {entry['class']} quotes text of kind "
                                f"{EVIDENCE_KIND[entry['class']]!r}, got {entry['evidence']['kind']!r}")
        for i, quote in enumerate(entry.get("evidence_also") or []):
            why = quote_problem(quote)
            if why:
                raise RegistryError(f"{at('evidence_also')}[{i}]: {why}")
        for name, needed in (("searched", entry["class"] == "defect"),
                             ("design_source", entry["class"] == "design-question")):
            value = entry.get(name)
            if (needed or value is not None) and (not isinstance(value, str) or not value.strip()):
                raise RegistryError(f"{at(name)}: {name} is {'required for a ' + entry['class'] if needed else 'a non-empty string'}")
        reach = entry.get("reachability")
        if not isinstance(reach, dict) or reach.get("kind") not in REACH_KINDS or not str(reach.get("how", "")).strip():
            raise RegistryError(f"{at('reachability')}: expected {{kind: {' | '.join(REACH_KINDS)}, how: the public calls}}")
        issue = entry.get("issue")
        if issue is not None and not (isinstance(issue, str) and issue.startswith("https://")):
            raise RegistryError(f"{at('issue')}: issue is the public issue's https address, or null")
        found.append(Finding(entry["id"], entry["runtime"], entry["promise"], entry["class"], entry["reason"],
                             entry["trace"], (path.parent / entry["trace"]).resolve(), entry["explanation"],
                             entry["evidence"], tuple(entry.get("evidence_also") or ()), reach, issue,
                             entry.get("searched"), entry.get("design_source")))
    return found


def for_runtime(findings: list[Finding], runtime: str) -> list[Finding]:
    return [f for f in findings if f.runtime == runtime]


def match(findings: list[Finding], runtime: str, promise: str) -> Finding | None:
    """The registered finding for a breach of ``promise`` on ``runtime``."""
    return next((f for f in findings if f.runtime == runtime and f.promise == promise), None)


def quote_problem(evidence) -> str | None:
    """Why ``evidence`` is not a well-formed quote object, or None."""
    if not isinstance(evidence, dict):
        return "expected an object {kind, quote, distribution, version, file, line}"
    if evidence.get("kind") not in EVIDENCE_KIND.values():
        return f"kind must be one of {tuple(EVIDENCE_KIND.values())}, got {evidence.get('kind')!r}"
    missing = [k for k in ("quote", "distribution", "version", "file")
               if not isinstance(evidence.get(k), str) or not evidence[k].strip()]
    if missing:
        return f"missing or empty {', '.join(missing)}"
    if "line" in evidence and not (isinstance(evidence["line"], int) and evidence["line"] >= 1):
        return "line must be a positive integer"
    return None


def site_packages(environment: Path) -> Path | None:
    """The ``site-packages`` folder of a virtual environment, or None."""
    return next(iter(sorted(environment.glob("lib/python3*/site-packages"))), None)


def installed_version(site: Path, distribution: str) -> str | None:
    """The version of ``distribution`` installed in ``site`` (from its ``.dist-info`` folder), or None."""
    wanted = distribution.replace("-", "_").lower()
    for info in site.glob("*.dist-info"):
        name, _, version = info.name[: -len(".dist-info")].rpartition("-")
        if name.replace("-", "_").lower() == wanted:
            return version
    return None


def check_quote(evidence: dict, environment: Path | None) -> QuoteCheck:
    """Is ``evidence['quote']`` in the installed file, at the version and line the entry says? (In a
    ``node_modules`` environment, an npm package's: :mod:`.npm_quotes`.)"""
    from .npm_quotes import check_npm_quote, is_node_modules

    if is_node_modules(environment):
        return check_npm_quote(evidence, environment)
    where = f"{evidence['distribution']}=={evidence['version']} {evidence['file']}"
    site = site_packages(environment) if environment is not None and environment.is_dir() else None
    if site is None:
        return QuoteCheck(None, where, why="the runtime's environment is not installed")
    return check_installed(evidence, where, installed_version(site, evidence["distribution"]),
                           f"{evidence['distribution']} is not installed in {site}", site / evidence["file"],
                           f"{evidence['file']} is not in {site}", PY_MARKER)
