"""The evidence for every promise (``promises`` of the findings report): violated with its finding ids,
``measured`` (a cost promise broken in the cost model) or ``held``, with what watched it — logs, Hypothesis,
the explorer — the Z3 obligations that cover it, and, for a cost promise, the cost model of ``benchmarks/``.
"""
from __future__ import annotations

from .search import promise_names


PROOFS = {
    # promise -> [(Z3 obligation of properties/proofs, what it proves about this promise)]; run by `surfacecheck prove`
    "promise-projection-exact": [
        ("projection-equivalence", "on fully metered logs (every replacement claimed) the O(1) projection equals "
                                   "the recount after every event, for logs of any length (k-induction); the "
                                   "promise's violation needs an unclaimed replace, outside the proof's premise")],
    "promise-compaction-progress": [
        ("smallest-compactable-span", "every framed checkpoint costs >= 103 tokens and 103 is reached: a span "
                                      "priced <= 103 can never shrink, the floor this promise runs into")],
    "promise-retry-after-real-progress": [
        ("generation-progress", "on_request_error answers retry only after a generation advance, at most "
                                "maxOverflowRetries times (a ranking function); it does not prove the retried "
                                "request fits, which is what this promise asks")],
    "promise-pressure-relieved": [
        ("generation-progress", "compact_if_needed spends at most compactionRetries + 1 summaries per pre-step "
                                "and a landed summary strictly lowers the surface price"),
        ("smallest-compactable-span", "with unchanged prices the retry re-selects exactly the first checkpoint "
                                      "(spec 9.4): retries cannot reach the envelope or the retained tail")],
    "promise-pairing-by-id": [
        ("pairing-ids", "when call ids are unique and each result answers an earlier call, the model's count-"
                        "balanced cut equals the id-closed cut for every cut (up to N nodes): under that premise "
                        "no compaction edge splits a call from its result; a violation needs repeated or "
                        "unanswered ids"),
        ("cut-legality", "every range selection is head-anchored, keeps >= 1 node and has both edges balanced "
                         "(by count, spec 3)")],
    "promise-projection-nonnegative": [
        ("projection-equivalence", "on fully metered logs the projection equals the recount, a sum of "
                                   "non-negative node prices, so it cannot go below 0 there; only an unclaimed "
                                   "replace leaves the premise")],
    "promise-span-compactable": [
        ("cut-legality", "select_compactable_range returns null exactly when spec 7 says (no balanced cut "
                         "before the retained tail), never skipping a balanced cut"),
        ("smallest-compactable-span", "a span priced <= 103 never shrinks, so 'above the shrink floor' is the "
                                      "right bound for the promise")],
}
"""A static map, true by the obligations' statements (docs/proofs.md); a promise absent here has no
Z3 obligation covering it."""


def proofs_for(promise: str) -> list[dict]:
    """The Z3 obligations that cover ``promise`` (name, spec section, what it proves about it)."""
    from surfacecheck.properties.proofs import obligations

    sections = {o.name: o.section for o in obligations()}
    return [{"name": name, "section": sections.get(name, "?"), "proves": proves}
            for name, proves in PROOFS.get(promise, [])]


def promise_info(name: str, seed: str | None = None) -> dict:
    """The promise as the monitor registry states it (name, description, spec section, level) + its seed."""
    from surfacecheck.properties.monitors import lookup

    spec = lookup(name)
    return {"name": name, "description": spec.description, "section": spec.section, "level": spec.level,
            "seed": seed}


COST_SIZES = (100, 10_000)
COST_PATHS = {
    # promise judged on operation counts -> [(cost-model variant, the dsh pressure-update path it reproduces)]
    "promise-pressure-update-constant": [
        ("model-projection", "the O(1) surface projection, foldSurfaceProjection (spec 5.1; "
                             "packages/llm/token-meter/src/surface-projection.ts)"),
        ("copy-on-append", "the token meter's surface fold that measure() reads, foldSurfaceTokens: "
                           "`{ nodes: [...nodes, { seq, tokens }] }` copies the node array on every surface append "
                           "(spec 4.2; packages/llm/token-meter/src/surface-fold.ts)")],
}
"""A promise about cost cannot be witnessed by a protocol trace (a runtime's answers do not show what an
append costs inside it), so its evidence is the deterministic cost model of ``benchmarks/`` (operations per
append, no timing) run on the variant that reproduces each dsh path. A path that grows with the surface makes
the promise ``measured``: broken by dsh, measured rather than traced, reported but not a registry entry."""


def cost_evidence(name: str) -> list[dict]:
    """Operations per append at :data:`COST_SIZES` for each dsh path of a cost promise, with its growth."""
    if name not in COST_PATHS:
        return []
    from surfacecheck.bench.costmodel import growth, ops_per_append
    from surfacecheck.bench.variants import VARIANTS

    series = ops_per_append([VARIANTS[v] for v, _ in COST_PATHS[name]], COST_SIZES)
    return [{"variant": v, "path": path, "growth": growth(series[v]),
             "ops_per_append": {str(p.size): p.ops for p in series[v].points}} for v, path in COST_PATHS[name]]


def promises_section(findings: list[dict], discovery: dict, watched: dict) -> list[dict]:
    """Every ``promise-*`` monitor: ``violated`` with its finding ids, ``measured`` (a cost promise one of
    dsh's paths breaks in the cost model), or ``held``; with what was explored while it watched (logs,
    Hypothesis, explorer), the cost model, and the Z3 obligations covering it."""
    out = []
    for name in promise_names():
        mine = [f for f in findings if f["promise"]["name"] == name]
        seed = next((f["promise"]["seed"] for f in mine if f["promise"]["seed"]), None)
        searched = watched.get(name, {"examples": 0, "steps": 0, "levels": []})
        cost = cost_evidence(name)
        status = "violated" if mine else "measured" if any(c["growth"] != "constant" for c in cost) else "held"
        out.append({**promise_info(name, seed), "status": status,
                    "findings": [f["id"] for f in mine],
                    "evidence": {"logs": {"logs": discovery.get("logs", 0), "events": discovery.get("events", 0)},
                                 "hypothesis": {**searched, "seed": discovery.get("seed")},
                                 "explore": discovery.get("explore"), "proofs": proofs_for(name),
                                 "cost_model": cost,
                                 "found_by": sorted({w for f in mine for w in f["found_by"]})}})
    return out


def cost_lines(promise: dict) -> list[str]:
    """Human lines for a cost promise's cost-model evidence."""
    return [f"    {c['growth']:8} {c['variant']}: "
            + ", ".join(f"{ops:g} ops/append at {size}" for size, ops in c["ops_per_append"].items())
            + f" ({c['path']})" for c in promise["evidence"].get("cost_model", [])]


def summary(evidence: dict) -> str:
    """One line: what was explored while a promise watched."""
    logs, hyp, exp = evidence["logs"], evidence["hypothesis"], evidence.get("explore")
    parts = [f"{logs['logs']} logs ({logs['events']} events)",
             f"{hyp['examples']} Hypothesis examples, {hyp['steps']} steps"
             + (f" ({', '.join(hyp['levels'])} machines, seed {hyp['seed']})" if hyp["levels"] else "")]
    if exp:
        parts.append(f"explorer {exp['bounds']}: {exp['states']} states along {exp['paths']} paths, "
                     f"{exp['steps']} steps")
    if evidence["proofs"]:
        parts.append("Z3: " + ", ".join(p["name"] for p in evidence["proofs"]))
    return "; ".join(parts)
