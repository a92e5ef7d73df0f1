"""``run_findings(...) -> FindingsReport``: the registry's witnesses replayed, discovery run, every
promise violation classed as known (registered), NEW, or the registry entry as STALE (spec §15).

Verdict: a NEW finding or a STALE entry is a violation (exit 1); known findings are reported with
their class and reason and pass, unless ``strict``. For a runtime other than the model, the known
findings it does not reproduce are listed (informational: the lockstep stages judge conformance).
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from surfacecheck.runtime.api import RuntimeUnavailable
from surfacecheck.trace import TraceError, read_trace, write_trace

from . import registry
from .search import Discovery, hypothesis_search, scan_logs

SEED = 20261130
SEARCH_SECONDS = 15.0
"""A safety cap: the search normally ends well before it (a fixed number of examples per run)."""


@dataclass
class FindingsReport:
    runtime: str
    strict: bool
    known: list[dict] = field(default_factory=list)
    new: list[dict] = field(default_factory=list)
    stale: list[dict] = field(default_factory=list)
    differs: list[str] = field(default_factory=list)
    unavailable: list[str] = field(default_factory=list)
    discovery: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def verdict(self) -> str:
        if self.new or self.stale or (self.strict and self.known):
            return "violation"
        return "inconclusive" if self.unavailable else "ok"

    @property
    def exit_code(self) -> int:
        return {"ok": 0, "violation": 1, "inconclusive": 3}[self.verdict]

    def to_json(self) -> dict:
        return {"command": "findings", "verdict": self.verdict, "exit_code": self.exit_code, "runtime": self.runtime,
                "strict": self.strict, "known": self.known, "new": self.new, "stale": self.stale,
                "runtime_differs": self.differs, "unavailable": self.unavailable, "discovery": self.discovery,
                "seconds": round(self.seconds, 3)}

    def text(self) -> str:
        lines = [f"findings about dsh ({self.runtime}): {len(self.known)} known, {len(self.new)} new, "
                 f"{len(self.stale)} stale{' (strict)' if self.strict else ''}"]
        for k in self.known:
            lines.append(f"  known {k['class']:8} {k['gap']:4} {k['id']} ({k['promise']}, witness {k['steps']} steps"
                         f"{', also found by ' + ', '.join(k['found_by'][:3]) if k['found_by'] else ''})")
            lines.append(f"           {k['reason']}")
        for n in self.new:
            lines.append(f"  NEW {n['promise']} at {n['where']} step {n['step']}: {n['message']}")
            lines.append(f"      trace: {n['trace'] or '(not written: no --trace-dir)'}")
        for s in self.stale:
            lines.append(f"  STALE {s['id']}: {s['why']} (the registry must be kept true)")
        if self.differs:
            lines.append(f"  {self.runtime} does not reproduce {', '.join(self.differs)}: "
                         "the runtime differs from dsh here")
        for u in self.unavailable:
            lines.append(f"  inconclusive: {u}")
        d = self.discovery
        lines.append(f"discovery: {d.get('logs', 0)} logs scanned, {d.get('examples', 0)} Hypothesis "
                     f"examples (seed {d.get('seed')}, cap {d.get('search_seconds')} s); {self.seconds:.1f} s in all")
        return "\n".join(lines)


def _replay(path: Path, runtime: str):
    from surfacecheck.verify.replay import replay_trace

    trace = read_trace(path)
    return trace, replay_trace(trace, runtime)


def check_witnesses(report: FindingsReport, findings: list[registry.Finding]) -> None:
    """Each witness must still break its promise on the model (else STALE); on another runtime, note
    the ones it does not reproduce."""
    for f in findings:
        entry = {**f.to_json(), "steps": None, "found_by": [], "runtime_reproduces": None}
        try:
            trace, outcome = _replay(f.trace_path, "model")
        except (TraceError, KeyError, ValueError) as exc:
            report.stale.append({"id": f.id, "why": f"witness unreadable: {exc}"})
            continue
        entry["steps"] = len(trace.steps)
        if trace.property != f.promise:
            report.stale.append({"id": f.id, "why": f"witness checks {trace.property}, the entry names {f.promise}"})
            continue
        if not outcome.same:
            seen = outcome.violation.property if outcome.violation else "nothing"
            report.stale.append({"id": f.id, "why": f"witness no longer breaks {f.promise} on the model (saw {seen})"})
            continue
        if report.runtime != "model":
            try:
                entry["runtime_reproduces"] = reproduces(trace, report.runtime)
            except RuntimeUnavailable as exc:
                report.unavailable.append(f"{f.id} on {report.runtime}: {exc.kind}: {str(exc).splitlines()[0]}")
            if entry["runtime_reproduces"] is False:
                report.differs.append(f.id)
        report.known.append(entry)


def reproduces(trace, runtime_spec: str) -> bool | None:
    """Does ``runtime_spec`` do what dsh does on the witness: no divergence from the model before or at
    the step, and the promise broken there? ``None`` when the runtime lacks the witness's level."""
    from properties.monitors import lookup
    from surfacecheck.runtime.select import open_runtime
    from surfacecheck.verify.lockstep import Lockstep
    from surfacecheck.verify.replay import ensure_variants

    ensure_variants()
    runtime, reference = open_runtime(runtime_spec), open_runtime("model")
    try:
        if trace.level not in runtime.hello().get("levels", []):
            return None
        lockstep = Lockstep(runtime, reference, monitors=[lookup(trace.property).factory()])  # divergence first
        for step in trace.steps:
            _result, violation = lockstep.run(step)
            if violation is not None:
                return violation.property == trace.property
        return False
    finally:
        runtime.close()
        reference.close()


def classify(report: FindingsReport, findings: list[registry.Finding], found: list[Discovery],
             trace_dir: Path | None, command: str) -> None:
    """Known when the promise is registered (and its entry is live), else NEW with its trace written."""
    known = {k["id"]: k for k in report.known}
    stale = {s["id"] for s in report.stale}
    for d in found:
        entry = registry.match(findings, d.promise)
        if entry is not None:
            if entry.id in known and d.where not in known[entry.id]["found_by"]:
                known[entry.id]["found_by"].append(d.where)
            if entry.id in known or entry.id in stale:
                continue
        path = None
        if trace_dir is not None:
            slug = "".join(c if c.isalnum() or c in "-." else "-" for c in d.where)[-60:]
            path = str(write_trace(trace_dir / f"finding-{d.promise}-{slug}.jsonl", d.trace(command)))
        report.new.append({"promise": d.promise, "where": d.where, "step": d.violation.step,
                           "message": d.violation.message, "steps": len(d.steps), "trace": path})


def run_findings(runtime: str = "model", *, strict: bool = False, registry_path: str | Path | None = None,
                 corpus: Path | None = None, trace_dir: Path | None = None, search_seconds: float = SEARCH_SECONDS,
                 seed: int = SEED, scan: bool = True, logs: list[tuple[str, Path]] | None = None,
                 err: TextIO | None = None,
                 command: str = "surfacecheck findings") -> FindingsReport:
    """Everything above; ``logs`` (``(source, path)`` pairs) replaces the scenario + corpus logs;
    ``registry.RegistryError`` for a bad registry (usage error, exit 2)."""
    from tqdm import tqdm

    from surfacecheck.runtime.embedded.stage import log_paths

    err = err or sys.stderr
    began = time.perf_counter()
    findings = registry.load(registry_path)
    report = FindingsReport(runtime, strict)
    check_witnesses(report, findings)
    found: list[Discovery] = []
    paths = (list(logs) if logs is not None else log_paths(corpus)) if scan else []
    with tqdm(total=len(paths), desc="findings: logs", unit="log", file=err, disable=None, leave=False) as bar:
        from_logs, logs = scan_logs(paths, bar)
    found += from_logs
    examples = 0
    if search_seconds > 0:
        searched, examples = hypothesis_search(search_seconds, seed)
        found += searched
    report.discovery = {"logs": logs, "log_violations": len(from_logs), "examples": examples, "seed": seed,
                        "search_seconds": search_seconds, "violations": len(found)}
    classify(report, findings, found, trace_dir, command)
    report.seconds = time.perf_counter() - began
    return report
