"""Can the finding happen in a real session? Each registry entry's ``reachability`` says how far.

Four kinds, nearest the user first:

* ``shipped-runtime`` — the shipped dsh binary reproduces it: ``e2e`` names the seed script
  (``scenarios/e2e/<name>.json``) whose run shows the finding (``surfacecheck e2e dsh --script …``).
* ``public-api`` — dsh's own code, composed as shipped, gets there through public calls: ``how`` names the call
  sequence; the proof is a trace (``trace``, default the witness) that replays exit 1 on ``--runtime dsh``
  (a shipped-runtime claim may carry such a ``trace`` too: :func:`library_trace`).
* ``foreign-producer`` — only a producer dsh does not ship (a plugin appending directly, a hand-written log)
  writes what it needs: ``producer`` says which, ``corpus`` names corpus logs (relative to the corpus root)
  whose scan shows the promise broken.
* ``not-reachable`` — no shipped composition gets there: ``guard`` quotes the dsh text that blocks it and
  ``how`` says what would make it reachable (a latent finding).

:func:`corpus_proof` runs the corpus claims here (the model's log scan); the ``dsh`` stage replays the
public-API traces on dsh's library and the ``e2e`` stage checks the shipped-runtime scripts.
"""
from __future__ import annotations

from pathlib import Path

from .dsh_text import quote_problem

KINDS = ("shipped-runtime", "public-api", "foreign-producer", "not-reachable")
"""In the report's order: a reachable defect first, a latent one last."""
E2E_DIR = Path(__file__).resolve().parents[1] / "scenarios" / "e2e"


def problem(reach, where: str) -> str | None:
    """Why ``reach`` is not a well-formed reachability object (registry validation), or None."""
    if not isinstance(reach, dict):
        return f"{where}: expected an object {{kind, how, ...}}"
    kind = reach.get("kind")
    if kind not in KINDS:
        return f"{where}: kind must be one of {KINDS}, got {kind!r}"
    if not isinstance(reach.get("how"), str) or not reach["how"].strip():
        return f"{where}: how (the call sequence, producer or what would make it reachable) is required"
    if kind == "shipped-runtime":
        script = reach.get("e2e")
        if not isinstance(script, str) or not (E2E_DIR / f"{script}.json").is_file():
            return f"{where}: e2e must name a seed script of scenarios/e2e (got {script!r})"
    if "trace" in reach and (kind not in ("public-api", "shipped-runtime") or not isinstance(reach["trace"], str)):
        return f"{where}: trace, when present, is a path relative to the registry"
    if kind == "foreign-producer":
        corpus, producer = reach.get("corpus", []), reach.get("producer")
        if not isinstance(corpus, list) or not all(isinstance(c, str) and c for c in corpus):
            return f"{where}: corpus is a list of log paths relative to the corpus root"
        if not corpus and not (isinstance(producer, str) and producer.strip()):
            return f"{where}: a foreign-producer claim names the producer or a corpus log that shows it"
    if kind == "not-reachable":
        return quote_problem(reach.get("guard"), f"{where}.guard")
    return None


def rank(reach: dict | None) -> int:
    return KINDS.index(reach["kind"]) if reach and reach.get("kind") in KINDS else len(KINDS)


def corpus_proof(promise: str, reach: dict, corpus: Path | None) -> list[dict]:
    """Per named corpus log: does the model's log scan (every event appended, then the log reopened) show
    ``promise`` broken there (``shows`` True/False, ``at`` the seq or ``reload``), or can it not be checked
    (``shows`` None: no corpus, log missing)?"""
    from .search import scan_log

    rows = []
    for name in reach.get("corpus", []):
        path = corpus / name if corpus is not None else None
        if path is None or not path.is_file():
            rows.append({"log": name, "shows": None, "why": "corpus not found" if corpus is None else "log missing"})
            continue
        found = scan_log("corpus", path, promises=[promise], reload_after=True)
        at = found[0].violation.step if found else None
        rows.append({"log": name, "shows": bool(found),
                     "at": None if at is None else "reload" if at == len(found[0].steps) and
                     found[0].steps[-1].op == "reload" else f"seq {at - 2}",  # step 1 is the reset; seqs from 0
                     "why": "" if found else f"the scan (every event appended, then a reload) does not break "
                                             f"{promise} on it"})
    return rows


def library_trace(reach: dict, witness: Path) -> Path | None:
    """The trace that must replay exit 1 on dsh's library (``--runtime dsh``): a public-API claim's own
    ``trace`` (resolved by the registry) or its witness; a shipped-runtime claim's ``trace`` when it has one
    (what the binary shows, told through the library in dsh's own event order); None otherwise."""
    if reach.get("trace_path"):
        return Path(reach["trace_path"])
    return witness if reach.get("kind") == "public-api" else None


def text(reach: dict | None) -> str:
    """One line for the report."""
    if not reach:
        return "not stated"
    kind = reach["kind"]
    extra = {"shipped-runtime": f" (e2e script {reach.get('e2e')})",
             "foreign-producer": (f" (corpus: {', '.join(reach['corpus'])})" if reach.get("corpus") else "")
             + (f" (producer: {reach['producer']})" if reach.get("producer") else "")}.get(kind, "")
    return f"{kind}{extra}: {reach['how']}"


def shipped_proof(findings, reproduced: dict[str, list[str]], ran: set[str]) -> list[dict]:
    """Per ``shipped-runtime`` claim whose script ran: did that script's run on the shipped binary show the
    finding (``reproduced`` {finding id: [scripts]}, from the log scan and the wire checks)?"""
    rows = []
    for finding in findings:
        reach = finding.reachability or {}
        if reach.get("kind") != "shipped-runtime" or reach.get("e2e") not in ran:
            continue
        rows.append({"id": finding.id, "e2e": reach["e2e"],
                     "shows": reach["e2e"] in reproduced.get(finding.id, [])})
    return rows
