"""The known-findings registry (``properties/findings.json``): dsh behaviours that break a design
promise, each with its §15 gap, its class, the promise monitor it breaks, a reason citing the spec, a
minimal witness trace (path relative to the registry), the responsible dsh ``source`` function (from the
spec section of the gap), an ``explanation`` a dsh engineer can act on, and optionally the design-essay
``seed`` section the promise comes from.

The class is argued from dsh's own text: a ``defect`` quotes the dsh text that promises the
property (``evidence.kind: promise``) and says what was ``searched`` for text giving it up; a ``tradeoff``
quotes the text that documents or intends the behaviour (``intent``); a ``design-question`` quotes the
closest dsh text, which is ``silent`` on the promise, and names the seed/spec ``design_source`` that makes
it. ``evidence_also`` holds further quotes. ``reachability`` says how far a real session is from it
(:mod:`.reachability`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from surfacecheck import properties
from surfacecheck.core.json_where import line_of, read_document

from . import reachability as reach_mod
from .dsh_text import quote_problem

DEFAULT_PATH = Path(properties.__file__).resolve().parent / "findings.json"
CLASSES = ("defect", "design-question", "tradeoff")
EVIDENCE_KIND = {"defect": "promise", "tradeoff": "intent", "design-question": "silent"}
"""What the class's evidence must show (the class's rule)."""
FIELDS = ("id", "gap", "class", "promise", "reason", "trace", "source", "explanation")
"""Required, non-empty strings; ``seed`` is optional (a string when present)."""
OPTIONAL = ("seed", "shown_on", "evidence_also", "design_source", "searched", "argument")
SHOWN_ON = ("model", "embedded", "dsh_library", "dsh_binary")
"""Where a finding has been shown: ``model`` / ``embedded`` / ``dsh_library`` (the witness replayed through
``--runtime dsh``, dsh's own npm code) are true, false or null (not run: the level is not served);
``dsh_binary`` names the e2e seed script that reproduces it on the shipped runtime, or null."""


class RegistryError(ValueError):
    """A registry that cannot be used; ``str()`` is ``PATH: reason``."""


@dataclass(frozen=True)
class Finding:
    """One registered finding; ``trace_path`` is the witness resolved against the registry's folder."""

    id: str
    gap: str
    klass: str
    promise: str
    reason: str
    trace: str
    trace_path: Path
    source: str = ""
    explanation: str = ""
    seed: str | None = None
    shown_on: dict | None = None
    evidence: dict | None = None
    evidence_also: tuple = ()
    design_source: str | None = None
    searched: str | None = None
    reachability: dict | None = None
    argument: str | None = None

    def to_json(self) -> dict:
        return {"id": self.id, "gap": self.gap, "class": self.klass, "promise": self.promise,
                "reason": self.reason, "trace": self.trace, "source": self.source,
                "explanation": self.explanation, "seed": self.seed, "shown_on": self.shown_on,
                "evidence": self.evidence, "evidence_also": list(self.evidence_also),
                "design_source": self.design_source, "searched": self.searched, "reachability": self.reachability,
                "argument": self.argument}


def load(path: str | Path | None = None) -> list[Finding]:
    """Read and check the registry; :class:`RegistryError` on anything malformed."""
    from surfacecheck.properties.monitors import all_monitors

    path = Path(path) if path is not None else DEFAULT_PATH
    text, document = read_document(path, RegistryError)
    entries = document.get("findings") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise RegistryError(f"{path}:{line_of(text, ['findings'])}: expected an object with a \"findings\" list")
    monitors, seen, found = all_monitors(), set(), []
    for index, entry in enumerate(entries):
        where = f"{path}:{line_of(text, ['findings', index])}: findings[{index}]"

        def at(key: str, index: int = index) -> str:  # the entry's field, located
            return f"{path}:{line_of(text, ['findings', index, key])}: findings[{index}]"

        if not isinstance(entry, dict):
            raise RegistryError(f"{where}: expected an object with {', '.join(FIELDS)}")
        missing = [k for k in FIELDS if not isinstance(entry.get(k), str) or not entry[k].strip()]
        if missing:
            name = f" ({entry['id']})" if isinstance(entry.get("id"), str) else ""
            raise RegistryError(f"{where}{name}: missing or empty {', '.join(missing)} "
                                f"(every entry needs non-empty strings {', '.join(FIELDS)})")
        if "seed" in entry and (not isinstance(entry["seed"], str) or not entry["seed"].strip()):
            raise RegistryError(f"{at('seed')}: seed, when present, must be a non-empty string (a seed essay section)")
        shown = entry.get("shown_on")
        if shown is not None and (not isinstance(shown, dict) or set(shown) - set(SHOWN_ON) or any(
                not (v is None or isinstance(v, bool)) for k, v in shown.items() if k != "dsh_binary")
                or not (shown.get("dsh_binary") is None or isinstance(shown.get("dsh_binary"), str))):
            raise RegistryError(f"{at('shown_on')}: shown_on is {{model, embedded, dsh_library: true|false|null, "
                                f"dsh_binary: e2e seed name|null}}")
        if entry["id"] in seen:
            raise RegistryError(f"{at('id')}: duplicate id {entry['id']!r}")
        if entry["class"] not in CLASSES:
            raise RegistryError(f"{at('class')}: class must be one of {CLASSES}, got {entry['class']!r}")
        if entry["promise"] not in monitors or not entry["promise"].startswith("promise-"):
            raise RegistryError(f"{at('promise')}: {entry['promise']!r} is not a registered promise- monitor")
        _check_argument(entry, f"{where} ({entry['id']})")
        seen.add(entry["id"])
        found.append(Finding(entry["id"], entry["gap"], entry["class"], entry["promise"], entry["reason"],
                             entry["trace"], (path.parent / entry["trace"]).resolve(), entry["source"],
                             entry["explanation"], entry.get("seed"), entry.get("shown_on"), entry["evidence"],
                             tuple(entry.get("evidence_also", ())), entry.get("design_source"),
                             entry.get("searched"), _resolved(entry["reachability"], path.parent),
                             entry.get("argument")))
    return found


def _resolved(reach: dict, folder: Path) -> dict:
    """``reachability`` with its proof trace (``trace``, relative to the registry) resolved as ``trace_path``."""
    return {**reach, "trace_path": str((folder / reach["trace"]).resolve())} if reach.get("trace") else dict(reach)


def _check_argument(entry: dict, where: str) -> None:
    """The class argued from dsh's text and the reachability stated, or :class:`RegistryError`."""
    klass = entry["class"]
    bad = quote_problem(entry.get("evidence"), f"{where}: evidence")
    if bad:
        raise RegistryError(bad)
    if entry["evidence"]["kind"] != EVIDENCE_KIND[klass]:
        raise RegistryError(f"{where}: a {klass} quotes dsh text of kind {EVIDENCE_KIND[klass]!r} "
                            f"(got {entry['evidence']['kind']!r})")
    also = entry.get("evidence_also", [])
    if not isinstance(also, list):
        raise RegistryError(f"{where}: evidence_also is a list of quotes")
    for index, quote in enumerate(also):
        bad = quote_problem(quote, f"{where}: evidence_also[{index}]")
        if bad:
            raise RegistryError(bad)
    for name, needed in (("design_source", klass == "design-question"), ("searched", klass == "defect"),
                         ("argument", False)):
        value = entry.get(name)
        if (needed or value is not None) and (not isinstance(value, str) or not value.strip()):
            raise RegistryError(f"{where}: {name} is {'required for a ' + klass if needed else 'a non-empty string'}")
    bad = reach_mod.problem(entry.get("reachability"), f"{where}: reachability")
    if bad:
        raise RegistryError(bad)


def match(findings: list[Finding], promise: str, gap: str | None = None) -> Finding | None:
    """The registered finding for a violation of ``promise`` (and ``gap`` when the finder knows it)."""
    for finding in findings:
        if finding.promise == promise and (gap is None or finding.gap == gap):
            return finding
    return None
