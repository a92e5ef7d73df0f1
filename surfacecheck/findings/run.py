"""``run_findings(...) -> FindingsReport``: the registry's witnesses replayed, discovery run, every
promise violation classed as known (registered), NEW, or the registry entry as STALE (spec §15).

Verdict: a NEW finding or a STALE entry is a violation (exit 1); known findings are reported with
their class and reason and pass, unless ``strict``. For a runtime other than the model, the known
findings it does not reproduce are listed (informational: the lockstep stages judge conformance).

The report lists every violation as a *finding* (``findings``: id, promise with its spec/seed
sections, class, witness trace with its replay command, observed vs expected, the dsh source
function, the explanation) and every ``promise-*`` monitor as ``violated`` (its finding ids) or
``held`` with what was explored while it watched (``promises``: :func:`.evidence.promises_section`).
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from surfacecheck.core.protocol import RuntimeUnavailable
from surfacecheck.core.trace import TraceError, write_trace
from surfacecheck.properties.trace_check import read_valid_trace

from . import reachability, registry
from .argument import argue, order, reproduced_on
from .paths import display_path
from .evidence import cost_lines, promise_info, promises_section, summary
from .search import EXPLORE_BOUNDS, Discovery, explore_search, hypothesis_search, scan_logs

SEED = 20261130
SEARCH_SECONDS = 60.0
"""A safety cap on starting new Hypothesis runs: the search normally ends before it (a fixed number of
examples per run, so the seed decides what is found: about 720 examples and 10-27 s with 23 promises on
a loaded 2-core machine). Hitting the cap makes the result depend on load."""


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
    findings: list[dict] = field(default_factory=list)
    promises: list[dict] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def verdict(self) -> str:
        measured = any(p["status"] == "measured" for p in self.promises)
        if self.new or self.stale or (self.strict and (self.known or measured)):
            return "violation"
        return "inconclusive" if self.unavailable else "ok"

    @property
    def exit_code(self) -> int:
        return {"ok": 0, "violation": 1, "inconclusive": 3}[self.verdict]

    def to_json(self) -> dict:
        return {"command": "findings", "verdict": self.verdict, "exit_code": self.exit_code, "runtime": self.runtime,
                "strict": self.strict, "findings": self.findings, "promises": self.promises, "known": self.known,
                "new": self.new, "stale": self.stale, "runtime_differs": self.differs,
                "unavailable": self.unavailable, "discovery": self.discovery, "seconds": round(self.seconds, 3)}

    def text(self, verbose: bool = True) -> str:
        """The human summary; ``verbose=False`` (the check stage) prints one line per finding."""
        lines = [f"findings about dsh ({self.runtime}): {len(self.known)} known, {len(self.new)} new, "
                 f"{len(self.stale)} stale{' (strict)' if self.strict else ''}"]
        for f in self.findings:
            lines += finding_lines(f) if verbose else [
                f"  {f['status']:5} {f['class']:15} {f['id']} ({f['promise']['name']}; "
                f"{(f.get('reachability') or {}).get('kind', 'reachability not stated')}; "
                f"witness {f['trace']['steps']} steps)"]
        for s in self.stale:
            lines.append(f"  STALE {s['id']}: {s['why']} (the registry must be kept true)")
        if self.differs:
            lines.append(f"  {self.runtime} does not reproduce {', '.join(self.differs)}: "
                         "the runtime differs from dsh here")
        for u in self.unavailable:
            lines.append(f"  inconclusive: {u}")
        held = [p for p in self.promises if p["status"] == "held"]
        measured = [p for p in self.promises if p["status"] == "measured"]
        lines.append(f"promises: {len(self.promises) - len(held) - len(measured)} violated, "
                     f"{len(measured)} broken in the cost model (no trace), {len(held)} held")
        for p in measured:
            lines += [f"  measured {p['name']}: a dsh path is not O(1) per append"] + cost_lines(p)
        for p in held if verbose else ():
            lines.append(f"  held {p['name']}: {summary(p['evidence'])}")
        d = self.discovery
        explored = d.get("explore") or {}
        lines.append(f"discovery: {d.get('logs', 0)} logs ({d.get('events', 0)} events) scanned, "
                     f"{d.get('examples', 0)} Hypothesis examples (seed {d.get('seed')}, "
                     f"cap {d.get('search_seconds')} s)"
                     + (f", explorer {explored['bounds']}: {explored['states']} states" if explored else "")
                     + f"; {self.seconds:.1f} s in all")
        return "\n".join(lines)


def check_arguments(report: FindingsReport, findings: list[registry.Finding], corpus: Path | None) -> None:
    """Each live entry's class quote and reachability claim checked (:func:`.argument.argue`); a quote dsh
    does not contain or a corpus log that does not show it makes the entry STALE."""
    if corpus is None:
        from surfacecheck.core.corpus import CorpusError, corpus_root

        try:
            corpus = corpus_root()
        except CorpusError:
            corpus = None
    known = {k["id"]: k for k in report.known}
    for f in findings:
        if f.id not in known:
            continue
        argument = argue(f, corpus)
        known[f.id]["checked"] = argument
        report.stale += [{"id": f.id, "why": why} for why in argument["problems"]]


def _replay(path: Path, runtime: str):
    from surfacecheck.verify.replay import replay_trace

    trace = read_valid_trace(path)
    return trace, replay_trace(trace, runtime)


def check_witnesses(report: FindingsReport, findings: list[registry.Finding], timeout: float = 10.0) -> None:
    """Each witness must still break its promise on the model (else STALE); on another runtime, note
    the ones it does not reproduce. A live witness's replayed violation is kept (observed/expected)."""
    dead: str | None = None  # once the runtime proved unusable, no further witness is tried on it
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
        entry["violation"] = outcome.violation.to_json()
        entry["trace_path"] = str(f.trace_path)
        if report.runtime != "model" and dead is None:
            try:
                entry["runtime_reproduces"] = reproduces(trace, report.runtime, timeout)
            except RuntimeUnavailable as exc:
                dead = f"{exc.kind}: {str(exc).splitlines()[0]}"
                report.unavailable.append(f"{f.id} on {report.runtime}: {dead}; the remaining witnesses were not "
                                          f"tried on it")
            if entry["runtime_reproduces"] is False:
                report.differs.append(f.id)
        report.known.append(entry)


def reproduces(trace, runtime_spec: str, timeout: float = 10.0, runtime=None) -> bool | None:
    """Does ``runtime_spec`` do what dsh does on the witness: no divergence from the model before or at
    the step, and the promise broken there? ``None`` when the runtime lacks the witness's level. ``runtime``: an
    open runtime of that spelling to use (reset first, left open) instead of starting one."""
    from surfacecheck.properties.monitors import lookup
    from surfacecheck.runtime.select import open_runtime
    from surfacecheck.properties.stateful.lockstep import Lockstep
    from surfacecheck.verify.replay import ensure_variants

    ensure_variants()
    owned = runtime is None
    if owned:
        runtime = open_runtime(runtime_spec, timeout=timeout)
    else:
        runtime.call("reset", {})
    reference = open_runtime("model")
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
        if owned:
            runtime.close()
        reference.close()


def classify(report: FindingsReport, findings: list[registry.Finding], found: list[Discovery],
             trace_dir: Path | None, command: str) -> None:
    """Known when the promise is registered (and its entry is live), else NEW: one per promise, its
    witness the shortest discovery (written to ``trace_dir``), every place it was found listed."""
    known = {k["id"]: k for k in report.known}
    stale = {s["id"] for s in report.stale}
    unregistered: dict[str, list[Discovery]] = {}
    for d in found:
        entry = registry.match(findings, d.promise)
        if entry is not None:
            if entry.id in known and d.where not in known[entry.id]["found_by"]:
                known[entry.id]["found_by"].append(d.where)
            if entry.id in known or entry.id in stale:
                continue
        unregistered.setdefault(d.promise, []).append(d)
    for promise, group in unregistered.items():
        d = min(group, key=lambda g: len(g.steps))
        path = None
        if trace_dir is not None:
            slug = "".join(c if c.isalnum() or c in "-." else "-" for c in d.where.split(" (")[0])[-60:]
            path = str(write_trace(trace_dir / f"finding-{d.promise}-{slug}.jsonl", d.trace(command)))
        report.new.append({"promise": d.promise, "where": d.where, "step": d.violation.step,
                           "message": d.violation.message, "steps": len(d.steps), "trace": path,
                           "violation": d.violation.to_json(), "source": d.source,
                           "found_by": [g.where for g in group]})


def run_findings(runtime: str = "model", *, strict: bool = False, registry_path: str | Path | None = None,
                 corpus: Path | None = None, trace_dir: Path | None = None, search_seconds: float = SEARCH_SECONDS,
                 seed: int = SEED, scan: bool = True, logs: list[tuple[str, Path]] | None = None,
                 explore_bounds: tuple[int, int, int] | None = EXPLORE_BOUNDS, examples_per_run: int | None = None,
                 err: TextIO | None = None,
                 command: str = "surfacecheck findings", timeout: float = 10.0) -> FindingsReport:
    """Everything above; ``logs`` (``(source, path)`` pairs) replaces the scenario + corpus logs;
    ``explore_bounds`` None skips the explorer pass; ``examples_per_run`` overrides the search's fixed
    count (tests); ``timeout``: seconds per call to a ``cmd:`` runtime; ``registry.RegistryError`` for a bad registry
    (usage error, exit 2)."""
    from tqdm import tqdm

    from surfacecheck.runtime.embedded.stage import log_paths

    err = err or sys.stderr
    began = time.perf_counter()
    findings = registry.load(registry_path)
    report = FindingsReport(runtime, strict)
    check_witnesses(report, findings, timeout)
    check_arguments(report, findings, corpus)
    found: list[Discovery] = []
    paths = (list(logs) if logs is not None else log_paths(corpus)) if scan else []
    log_stats: dict = {"events": 0}
    with tqdm(total=len(paths), desc="findings: logs", unit="log", file=err, disable=None, leave=False) as bar:
        from_logs, scanned = scan_logs(paths, bar, stats=log_stats)
    found += from_logs
    examples, watched = 0, {}
    if search_seconds > 0:
        per_run = {} if examples_per_run is None else {"examples_per_run": examples_per_run}
        searched, examples = hypothesis_search(search_seconds, seed, evidence=watched, **per_run)
        found += searched
    explored = None
    if explore_bounds is not None:
        err.write(f"findings: explorer pass at {'/'.join(map(str, explore_bounds))}\n")
        from_explore, explored = explore_search(explore_bounds)
        found += from_explore
    report.discovery = {"logs": scanned, "events": log_stats["events"], "log_violations": len(from_logs),
                        "examples": examples, "seed": seed, "search_seconds": search_seconds,
                        "explore": explored, "violations": len(found)}
    classify(report, findings, found, trace_dir, command)
    report.findings = findings_section(report.known, report.new)
    report.promises = promises_section(report.findings, report.discovery, watched)
    report.seconds = time.perf_counter() - began
    return report


# -- the findings and promises sections -------------------------------------------------------------------
def _trace_info(path: str | None, steps: int | None) -> dict:
    shown = display_path(path) if path else None
    return {"path": shown, "steps": steps,
            "replay": f"surfacecheck replay {shown} --runtime model" if shown else None}


def findings_section(known: list[dict], new: list[dict]) -> list[dict]:
    """Every violation as a finding: the known ones (class from the registry) and the NEW ones (class ``new``)."""
    out = []
    for k in known:
        v = k.get("violation") or {}
        argument = k.get("checked") or {}
        reach = argument.get("reachability", k.get("reachability"))
        out.append({"id": k["id"], "class": k["class"], "status": "known", "gap": k["gap"],
                    "evidence": argument.get("evidence", k.get("evidence")),
                    "evidence_also": argument.get("evidence_also", k.get("evidence_also", [])),
                    "design_source": k.get("design_source"), "searched": k.get("searched"),
                    "argument": k.get("argument"),
                    "reachability": reach, "reproduced_on": reproduced_on(k.get("shown_on"), reach),
                    "promise": promise_info(k["promise"], k.get("seed")), "reason": k["reason"],
                    "trace": _trace_info(k.get("trace_path"), k["steps"]), "step": v.get("step"),
                    "message": v.get("message"), "observed": v.get("observed"), "expected": v.get("expected"),
                    "source": k["source"], "explanation": k["explanation"], "found_by": k["found_by"],
                    "runtime_reproduces": k["runtime_reproduces"], "shown_on": k.get("shown_on")})
    for n in new:
        v = n["violation"]
        out.append({"id": f"NEW-{n['promise']}", "class": "new", "status": "new", "gap": None,
                    "promise": promise_info(n["promise"]),
                    "reason": f"Found by {len(n['found_by'])} discovery run(s); the witness is the shortest, "
                              f"by {n['where']}.",
                    "trace": _trace_info(n["trace"], n["steps"]), "step": v["step"], "message": v["message"],
                    "observed": v["observed"], "expected": v["expected"], "source": None,
                    "explanation": f"{v['message']}. Not in properties/findings.json: reproduce it with the replay "
                                   "command, then fix the behaviour or register it with its class, reason, dsh "
                                   "source function and explanation.",
                    "found_by": n["found_by"], "runtime_reproduces": None, "evidence": None,
                    "evidence_also": [], "design_source": None, "searched": None, "argument": None,
                    "reachability": None,
                    "reproduced_on": ["model"]})
    return sorted(out, key=order)


def finding_lines(f: dict) -> list[str]:
    """The human lines of one finding."""
    p = f["promise"]
    head = (f"  {f['status']:5} {f['class']:15} {f['id']}" if f["status"] == "known"
            else f"  NEW {f['id']}")
    lines = [f"{head}  [{p['name']}; {p['section']}{'; ' + p['seed'] if p['seed'] else ''}]",
             f"        observed {_short(f['observed'])}, expected {_short(f['expected'])} at step {f['step']}: "
             f"{f['message']}",
             f"        trace ({f['trace']['steps']} steps): {f['trace']['replay'] or '(not written: no --trace-dir)'}"]
    if f["source"]:
        lines.append(f"        dsh source: {f['source']}")
    lines.append(f"        {f['reason']}")
    if f.get("evidence"):
        lines.append(f"        dsh's words: {quote_line(f['evidence'])}")
    if f.get("reachability"):
        lines.append(f"        reachability: {reachability.text(f['reachability'])}")
        lines.append(f"        reproduced on: {', '.join(f['reproduced_on'])}")
    if f["found_by"]:
        lines.append(f"        also found by: {', '.join(f['found_by'][:3])}")
    return lines


def quote_line(evidence: dict) -> str:
    """A quote with where it stands and whether it was found there."""
    where = (f"dsh test inventory (spec §14.3)" if evidence.get("source") == "spec-14.3"
             else f"{evidence['package']}@{evidence['version']} {evidence['file']}"
             + (f":{evidence['line']}" if evidence.get("line") else ""))
    check = evidence.get("check") or {}
    seen = {True: "quoted verbatim", False: "NOT FOUND", None: "unchecked: " + check.get("why", "")}[check.get("found")]
    return f"\"{evidence['quote']}\" ({evidence['kind']}; {where}; {seen})"


def _short(value, limit: int = 60) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit - 1] + "…"
