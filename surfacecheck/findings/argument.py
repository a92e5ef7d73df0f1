"""Each finding's argument, checked where it can be: its class quoted from dsh's own text, and
how far a real session is from it.

``argue(finding, corpus)`` checks every quote of the entry against the installed dsh packages
(:mod:`.dsh_text`) and a foreign-producer claim's corpus logs against the model's scan
(:mod:`.reachability`). A quote dsh does not contain, or a corpus log that does not show the finding, makes
the entry STALE (the registry must be kept true); what cannot be checked here (dsh not installed, no
corpus) is reported as unchecked, never as confirmed.
"""
from __future__ import annotations

from pathlib import Path

from . import reachability
from .paths import display_path
from .dsh_text import check_quote, installed_modules, spec_path
from .registry import Finding

CLASS_ORDER = ("new", "defect", "design-question", "tradeoff")
RUNTIMES = (("model", "model"), ("embedded", "embedded"), ("dsh_library", "dsh library"))


def argue(finding: Finding, corpus: Path | None, modules: Path | None = None, spec: Path | None = None) -> dict:
    """``{evidence, evidence_also, reachability, problems}``: each quote with its check, the reachability with
    its proof rows; ``problems`` lists what makes the entry stale."""
    modules = modules if modules is not None else installed_modules()
    spec = spec if spec is not None else spec_path()
    problems: list[str] = []

    def checked(quote: dict, role: str) -> dict:
        result = check_quote(quote, modules, spec)
        if result.found is False:
            problems.append(f"{role} quote not found in {result.where}: {result.why}")
        return {**quote, "check": result.to_json()}

    evidence = checked(finding.evidence, "evidence")
    also = [checked(q, f"evidence_also[{i}]") for i, q in enumerate(finding.evidence_also)]
    reach = dict(finding.reachability)
    if reach["kind"] == "not-reachable":
        reach["guard"] = checked(reach["guard"], "reachability guard")
    if reach["kind"] == "foreign-producer" and reach.get("corpus"):
        reach["proof"] = reachability.corpus_proof(finding.promise, reach, corpus)
        problems += [f"reachability: corpus log {row['log']} does not show it ({row['why']})"
                     for row in reach["proof"] if row["shows"] is False]
    trace = reachability.library_trace(reach, finding.trace_path)
    trace = display_path(trace) if trace is not None else None
    if reach["kind"] == "shipped-runtime":
        reach["proof"] = {"e2e": reach["e2e"],
                          "command": f"surfacecheck e2e dsh --script scenarios/e2e/{reach['e2e']}.json"}
    if reach["kind"] == "public-api":
        reach["proof"] = {"trace": str(trace), "command": f"surfacecheck replay {trace} --runtime dsh"}
    elif trace is not None:
        reach["proof"]["library"] = f"surfacecheck replay {trace} --runtime dsh"
    return {"evidence": evidence, "evidence_also": also, "reachability": reach, "problems": problems}


def reproduced_on(shown_on: dict | None, reach: dict | None) -> list[str]:
    """Where the finding has been shown: the model always (its witness just replayed), then the registry's
    ``shown_on`` runtimes and the shipped binary's e2e script."""
    shown = shown_on or {}
    out = ["model"] + [label for key, label in RUNTIMES[1:] if shown.get(key)]
    script = shown.get("dsh_binary") or ((reach or {}).get("e2e") if (reach or {}).get("kind") == "shipped-runtime"
                                         else None)
    if script:
        out.append(f"dsh binary (e2e {script})")
    return out


def order(finding: dict) -> tuple:
    """Report order: NEW, then defects, design questions, tradeoffs; within each, nearest the user first."""
    klass = finding["class"]
    return (CLASS_ORDER.index(klass) if klass in CLASS_ORDER else len(CLASS_ORDER),
            reachability.rank(finding.get("reachability")), finding["id"])
