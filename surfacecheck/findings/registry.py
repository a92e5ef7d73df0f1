"""The known-findings registry (``properties/findings.json``): dsh behaviours that break a design
promise, each with its §15 gap, its class (``defect`` or ``tradeoff``), the promise monitor it
breaks, a reason citing the spec, a minimal witness trace (path relative to the registry), the
responsible dsh ``source`` function (from the spec section of the gap), an ``explanation`` a dsh
engineer can act on, and optionally the design-essay ``seed`` section the promise comes from.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import properties

DEFAULT_PATH = Path(properties.__file__).resolve().parent / "findings.json"
CLASSES = ("defect", "tradeoff")
FIELDS = ("id", "gap", "class", "promise", "reason", "trace", "source", "explanation")
"""Required, non-empty strings; ``seed`` is optional (a string when present)."""
OPTIONAL = ("seed", "shown_on")
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

    def to_json(self) -> dict:
        return {"id": self.id, "gap": self.gap, "class": self.klass, "promise": self.promise,
                "reason": self.reason, "trace": self.trace, "source": self.source,
                "explanation": self.explanation, "seed": self.seed, "shown_on": self.shown_on}


def load(path: str | Path | None = None) -> list[Finding]:
    """Read and check the registry; :class:`RegistryError` on anything malformed."""
    from properties.monitors import all_monitors

    path = Path(path) if path is not None else DEFAULT_PATH
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RegistryError(f"{path}: not JSON: {exc}") from None
    entries = document.get("findings") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise RegistryError(f"{path}: expected an object with a \"findings\" list")
    monitors, seen, found = all_monitors(), set(), []
    for index, entry in enumerate(entries):
        where = f"{path}: findings[{index}]"
        if not isinstance(entry, dict):
            raise RegistryError(f"{where}: expected an object with {', '.join(FIELDS)}")
        missing = [k for k in FIELDS if not isinstance(entry.get(k), str) or not entry[k].strip()]
        if missing:
            name = f" ({entry['id']})" if isinstance(entry.get("id"), str) else ""
            raise RegistryError(f"{where}{name}: missing or empty {', '.join(missing)} "
                                f"(every entry needs non-empty strings {', '.join(FIELDS)})")
        if "seed" in entry and (not isinstance(entry["seed"], str) or not entry["seed"].strip()):
            raise RegistryError(f"{where}: seed, when present, must be a non-empty string (a seed essay section)")
        shown = entry.get("shown_on")
        if shown is not None and (not isinstance(shown, dict) or set(shown) - set(SHOWN_ON) or any(
                not (v is None or isinstance(v, bool)) for k, v in shown.items() if k != "dsh_binary")
                or not (shown.get("dsh_binary") is None or isinstance(shown.get("dsh_binary"), str))):
            raise RegistryError(f"{where}: shown_on is {{model, embedded, dsh_library: true|false|null, "
                                f"dsh_binary: e2e seed name|null}}")
        if entry["id"] in seen:
            raise RegistryError(f"{where}: duplicate id {entry['id']!r}")
        if entry["class"] not in CLASSES:
            raise RegistryError(f"{where}: class must be one of {CLASSES}, got {entry['class']!r}")
        if entry["promise"] not in monitors or not entry["promise"].startswith("promise-"):
            raise RegistryError(f"{where}: {entry['promise']!r} is not a registered promise- monitor")
        seen.add(entry["id"])
        found.append(Finding(entry["id"], entry["gap"], entry["class"], entry["promise"], entry["reason"],
                             entry["trace"], (path.parent / entry["trace"]).resolve(), entry["source"],
                             entry["explanation"], entry.get("seed"), entry.get("shown_on")))
    return found


def match(findings: list[Finding], promise: str, gap: str | None = None) -> Finding | None:
    """The registered finding for a violation of ``promise`` (and ``gap`` when the finder knows it)."""
    for finding in findings:
        if finding.promise == promise and (gap is None or finding.gap == gap):
            return finding
    return None
