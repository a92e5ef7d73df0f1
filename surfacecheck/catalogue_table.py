"""The property x engine table: which engine checks each catalogue property, and under which name.

Every engine names what it checks by catalogue id (:mod:`surfacecheck.core.catalogue`): verify's and the findings
search's monitors and the prover's replay monitors register against it (``properties/monitors.py``), the audit's
rules map to it (``audit/rules.py``), the explorer's safety and progress checks carry monitor names, each proof
obligation lists the properties it proves, and the compaction contract's promises are catalogue ids themselves
(``contract/promises.py``). :func:`coverage_table` reads them all, so the table is never written
by hand; :func:`unmapped` lists an engine check that names no catalogue property (a test keeps it empty).
"""
from __future__ import annotations

from typing import NamedTuple

from surfacecheck.core.catalogue import CATALOGUE, PROPERTIES

ENGINES = ("verify", "audit", "explore", "prove", "findings", "contract")


class Row(NamedTuple):
    id: str
    section: str
    kind: str
    engines: dict[str, str | None]  # engine -> its evaluators' names (comma-separated), None where it has none

    def to_json(self) -> dict:
        return {"id": self.id, "section": self.section, "kind": self.kind, "engines": self.engines}


def engine_checks() -> dict[str, list[tuple[str, str]]]:
    """Engine -> its checks as ``(check name, catalogue id)``; a check proving two properties appears twice."""
    from surfacecheck.audit.rules import RULES
    from surfacecheck.contract.promises import PROMISES
    from surfacecheck.explore.progress import PROGRESS_PROPERTIES
    from surfacecheck.explore.safety import SAFETY_PROPERTIES
    from surfacecheck.properties.monitors import all_monitors
    from surfacecheck.properties.proofs import PROPERTIES as PROVED
    from surfacecheck.properties.proofs import names as obligation_names

    monitors = all_monitors()
    checks: dict[str, list[tuple[str, str]]] = {engine: [] for engine in ENGINES}
    for name, spec in monitors.items():
        if spec.engine != "explore":  # the explorer's replay monitors: its checks below carry their names
            checks[spec.engine].append((name, spec.property.id))
    for name in SAFETY_PROPERTIES + PROGRESS_PROPERTIES:
        checks["explore"].append((name, monitors[name].property.id if name in monitors else name))
    checks["audit"] = [(rule.id, rule.property) for rule in RULES.values()]
    checks["prove"] += [(name, prop) for name in obligation_names() for prop in PROVED.get(name, (name,))]
    checks["contract"] = [(promise.id, promise.id) for promise in PROMISES]
    return checks


def unmapped() -> list[str]:
    """``engine:check`` for every engine check whose catalogue id is not in the catalogue."""
    return [f"{engine}:{name}" for engine, checks in engine_checks().items() for name, prop in checks
            if prop not in CATALOGUE]


def coverage_table() -> list[Row]:
    """One row per catalogue property, in catalogue order: which engines check it, under which names (a prover's
    monitor and its obligation of the same name are one name)."""
    by_property: dict[str, dict[str, list[str]]] = {}
    for engine, checks in engine_checks().items():
        for name, prop in checks:
            names = by_property.setdefault(prop, {}).setdefault(engine, [])
            if name not in names:
                names.append(name)
    rows = []
    for prop in PROPERTIES:
        found = by_property.get(prop.id, {})
        rows.append(Row(prop.id, prop.section, prop.kind,
                        {engine: ", ".join(found[engine]) if engine in found else None for engine in ENGINES}))
    return rows


def format_table(rows: list[Row]) -> str:
    """The table as text: one line per property, ``-`` where an engine has no evaluator."""
    width = max(len(row.id) for row in rows)
    lines = [f"{'property':<{width}}  {'kind':<9}  " + "  ".join(ENGINES)]
    for row in rows:
        marks = "  ".join(f"{'x' if row.engines[e] else '-':<{len(e)}}" for e in ENGINES)
        lines.append(f"{row.id:<{width}}  {row.kind:<9}  {marks}".rstrip())
    return "\n".join(lines)
