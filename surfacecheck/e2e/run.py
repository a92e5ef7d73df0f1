"""Orchestration of ``surfacecheck e2e dsh``: per script, run the real runtime,
audit its log under the script's policy, compare its decisions with the model's, fold the verdicts.

Per script: (a) :func:`execute` runs it (``runner.run_script``: scripted server + the real dsh
runtime in a throwaway home); (b) the session log is audited (``surfacecheck.audit``, the script's
``RuntimePolicy``): zero error findings expected; (c) :func:`judge` predicts the model's decisions
for the same conversation and lists every difference with the first seq where they part;
(d) :func:`exercised` names the compaction paths the log shows and at which seqs; (e) :func:`scan_findings`
appends the log through the model with every ``promise-*`` monitor watching (``surfacecheck findings``'
own log scan) and classes each violation against ``properties/findings.json``: a registered promise is
a *known* finding (its id; informational), any other is NEW (exit 1, as ``surfacecheck findings``); (f) :func:`wire_on`
judges two promises on the provider requests the runtime sent (:mod:`.wire`: pairing by id, prompt verbatim), each
violation classed the same way. A difference or
an audit error keeps a counterexample bundle (:mod:`.bundle`). A runtime that is not installed,
crashed, hung or timed out makes the script inconclusive: never a pass. Violation beats
inconclusive beats agreement, as in ``check``.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable

from surfacecheck.coverage.situations import judged as judged_events, witnesses

from .promises import find_on, wire_on
from .unscripted import unscripted_failures

SPEC_VERSION = "0.1.1rc1"
INSTALL_HINT = "deepseek-harness-sdk not installed: pip install -e '.[dsh]'"
AGREED, DIFFERED, INCONCLUSIVE = "agreed", "differed", "inconclusive"
# the contract's paths (compare/paths_exercised): the four compaction paths, then two more outcomes
PATHS = ("pressure-prune", "pressure-summary", "overflow-retry", "manual-compact", "summary-failed",
         "second-generation")
FOUR_PATHS = PATHS[:4]


def difference_json(d) -> dict:
    """A Difference (kind, seq, expected, observed, message) as JSON."""
    if isinstance(d, dict):
        return d
    if hasattr(d, "to_json"):
        return d.to_json()
    return {k: getattr(d, k, None) for k in ("kind", "seq", "expected", "observed", "message")}


def script_counts(obj: dict) -> dict:
    """What a script asks for: turns, tool calls, scripted overflows, manual /compact requests."""
    turns = obj.get("turns") or []
    replies = [r for t in turns for r in (t.get("replies") or [])]
    return {"turns": len(turns), "tool_calls": sum(1 for r in replies if "tool" in r),
            "overflows": sum(1 for r in replies if r.get("overflow")),
            "compacts": sum(1 for t in turns if t.get("compact"))}


@dataclass
class ScriptOutcome:
    """One script's verdict with its evidence (the per-script object of ``--json``)."""

    name: str
    source: str = ""
    verdict: str = INCONCLUSIVE
    paths: dict[str, list[int]] = field(default_factory=dict)
    audit: dict = field(default_factory=lambda: {"errors": 0, "warnings": 0, "findings": []})
    differences: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    bundle: str | None = None
    run_dir: str | None = None
    message: str = ""
    runtime_version: str = ""
    turns: int = 0
    tool_calls: int = 0
    overflows: int = 0
    compacts: int = 0
    not_installed: bool = False
    connects: dict | None = None  # --trace-connect / --isolate-network evidence that nothing left loopback
    findings: list[dict] | None = None  # promise violations on the runtime's log (None: not scanned)
    findings_note: str = ""  # why the log was not scanned, when it was not
    wire: list[dict] | None = None  # promise violations on the recorded provider requests (None: not checked)
    wire_note: str = ""  # why the requests were not checked, when they were not
    situations: dict = field(default_factory=dict)  # sometimes-witness id -> first seq in the runtime's log
    judged: dict = field(default_factory=dict)  # audit rule / "type:<event type>" -> events (coverage)

    def to_json(self) -> dict:
        return {"name": self.name, "source": self.source, "verdict": self.verdict, "message": self.message,
                "runtime_version": self.runtime_version, "paths": self.paths,
                "audit": {"errors": self.audit.get("errors", 0), "warnings": self.audit.get("warnings", 0),
                          "findings": [f for f in self.audit.get("findings", []) if f.get("severity") == "error"]},
                "differences": self.differences, "seconds": self.seconds, "bundle": self.bundle,
                "run_dir": self.run_dir, "turns": self.turns, "tool_calls": self.tool_calls,
                "overflows": self.overflows, "compacts": self.compacts, "network": self.connects,
                "findings": self.findings, "findings_note": self.findings_note or None,
                "wire": self.wire, "wire_note": self.wire_note or None,
                "situations": self.situations, "judged": self.judged}


@dataclass
class E2EReport:
    """Every script's outcome, the totals, what the scripts covered, and the shrunk counterexample."""

    mode: str
    runtime: str
    seed: int | None = None
    scripts: list[ScriptOutcome] = field(default_factory=list)
    shrunk: dict | None = None
    error: str | None = None

    @property
    def verdict(self) -> str:
        verdicts = [o.verdict for o in self.scripts]
        if DIFFERED in verdicts or self.findings_summary()["new"] or self.wire_summary()["new"]:
            return "violated"
        if INCONCLUSIVE in verdicts or self.error or not verdicts:
            return "inconclusive"
        return "held"

    @property
    def exit_code(self) -> int:
        return {"held": 0, "violated": 1, "inconclusive": 3}[self.verdict]

    def totals(self) -> dict:
        s = self.scripts
        return {"scripts": len(s), "agreed": sum(o.verdict == AGREED for o in s),
                "differed": sum(o.verdict == DIFFERED for o in s),
                "inconclusive": sum(o.verdict == INCONCLUSIVE for o in s),
                "differences": sum(len(o.differences) for o in s),
                "audit_errors": sum(o.audit.get("errors", 0) for o in s),
                "audit_warnings": sum(o.audit.get("warnings", 0) for o in s),
                "seconds": round(sum(o.seconds for o in s), 3)}

    def coverage(self) -> dict:
        """How many scripts hit each path, and what the run scripts asked for in total."""
        ran = [o for o in self.scripts if o.verdict != INCONCLUSIVE]
        paths = {p: sum(1 for o in ran if o.paths.get(p)) for p in PATHS}
        return {"scripts_run": len(ran), "paths": paths,
                "all_four_paths": all(paths[p] for p in FOUR_PATHS),
                "turns": sum(o.turns for o in ran), "tool_calls": sum(o.tool_calls for o in ran),
                "overflows": sum(o.overflows for o in ran),
                "overflow_retries": sum(len(o.paths.get("overflow-retry", [])) for o in ran),
                "manual_compacts": sum(o.compacts for o in ran),
                "summaries_failed": sum(len(o.paths.get("summary-failed", [])) for o in ran)}

    def findings_summary(self) -> dict:
        """The promise findings over every scanned log: ``reproduced`` {known id: [scripts]} (informational),
        ``new`` [{promise, script, seq, message}] (a violation: exit 1), ``scanned``/``not_scanned`` logs."""
        reproduced: dict[str, list[str]] = {}
        new: list[dict] = []
        scanned = [o for o in self.scripts if o.findings is not None]
        for o in scanned:
            for f in o.findings:
                if f["status"] == "known":
                    names = reproduced.setdefault(f["id"], [])
                    if o.name not in names:
                        names.append(o.name)
                else:
                    new.append({"promise": f["promise"], "script": o.name, "seq": f["seq"], "step": f["step"],
                                "message": f["message"]})
        return {"scanned": len(scanned), "not_scanned": sum(1 for o in self.scripts if o.findings_note),
                "reproduced": dict(sorted(reproduced.items())), "new": new}

    def wire_summary(self) -> dict:
        """The wire checks over every checked run: ``reproduced`` {known id: [scripts]} (informational),
        ``new`` [{promise, script, request, turn, message}] (exit 1), ``checked`` runs."""
        reproduced: dict[str, list[str]] = {}
        new: list[dict] = []
        checked = [o for o in self.scripts if o.wire is not None]
        for o in checked:
            for w in o.wire:
                if w["status"] == "known":
                    names = reproduced.setdefault(w["id"], [])
                    if o.name not in names:
                        names.append(o.name)
                else:
                    new.append({"promise": w["promise"], "script": o.name, "request": w["request"],
                                "turn": w["turn"], "message": w["message"]})
        return {"checked": len(checked), "reproduced": dict(sorted(reproduced.items())), "new": new}

    def to_json(self) -> dict:
        return {"command": "e2e dsh", "mode": self.mode, "runtime": self.runtime, "seed": self.seed,
                "verdict": self.verdict, "exit_code": self.exit_code, "error": self.error,
                "scripts": [o.to_json() for o in self.scripts], "totals": self.totals(),
                "coverage": self.coverage(), "findings": self.findings_summary(), "wire": self.wire_summary(),
                "shrunk": self.shrunk}


# -- the other helpers' modules, resolved lazily (tests replace these four functions) ------------------
def execute(script, *, runtime: str, keep_dir: Path, timeout: float, **network):
    """Run ``script`` on the real runtime (H8a's ``runner.run_script``) -> RunResult; ``network`` is
    ``isolate_network`` (a net namespace holding only ``lo``) and/or ``trace_connect`` (strace connect())."""
    from .runner import run_script

    return run_script(script, runtime=runtime, keep_dir=keep_dir, timeout=timeout, **network)


def judge(script, run) -> list[dict]:
    """The model's prediction for the same conversation against the runtime's run (H8b)."""
    from .compare import compare
    from .predict import predict

    return [difference_json(d) for d in compare(predict(script, run), run)]


def exercised(events: list[dict]) -> dict[str, list[int]]:
    """Which compaction paths the runtime's log shows, with their seqs (H8b's ``paths_exercised``)."""
    try:
        from .paths import paths_exercised
    except ImportError:  # the contract allowed it in compare.py too
        from .compare import paths_exercised
    return {str(k): sorted(int(s) for s in v) for k, v in paths_exercised(events).items()}


def audit_run(script, run) -> dict:
    """Audit the runtime's session log under the script's policy (spec rules of ``surfacecheck audit``)."""
    from surfacecheck.audit.reader import AuditInputError
    from surfacecheck.audit.rules import ERROR, WARNING
    from surfacecheck.audit.run import audit_log

    try:
        log = audit_log(run.log_path, policy_of(script))
    except AuditInputError as exc:  # the runtime wrote something the audit cannot read as a log (spec 1.7)
        return {"errors": 1, "warnings": 0, "events": 0, "generation": None,
                "findings": [{"rule": "unreadable-log", "severity": "error", "seq": None, "message": str(exc)}]}
    findings = [f.to_json() for f in log.findings]
    return {"errors": sum(1 for f in log.findings if f.severity == ERROR),
            "warnings": sum(1 for f in log.findings if f.severity == WARNING),
            "events": log.events, "generation": log.generation, "findings": findings}


def policy_of(script):
    """The script's ``RuntimePolicy`` (H8b's ``Config.policy()``)."""
    return script.config.policy()


def failure_kind(exc: BaseException) -> str | None:
    """``not-installed`` / ``failed`` for the runner's RuntimeNotInstalled / RuntimeFailed (matched by
    class name, so fakes and the real runner agree), else None (a suite bug: re-raised)."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "RuntimeNotInstalled" in names:
        return "not-installed"
    if "RuntimeFailed" in names or "RuntimeUnavailable" in names:
        return "failed"
    return None


# -- one script ------------------------------------------------------------------------------------
@dataclass
class Options:
    """How scripts are run: runtime version, kept run dirs, bundles, per-script timeout, progress."""

    runtime: str = SPEC_VERSION
    keep: Path | None = None
    python: str | None = None  # the interpreter whose SDK runs another release (drift mode)
    network: dict = field(default_factory=dict)  # isolate_network / trace_connect / stall_timeout for runner.run_script
    bundle_dir: Path = Path("reports/out/e2e")
    timeout: float = 180.0
    err: Any = field(default_factory=lambda: sys.stderr)
    command: str = "surfacecheck e2e dsh"
    findings: bool = True  # scan each run's log with the promise monitors (--no-findings: off)
    registry: Path | None = None  # the findings registry (default properties/findings.json)


def script_json(script) -> dict:
    return script.to_json() if hasattr(script, "to_json") else dict(script)


def script_name(script) -> str:
    return str(getattr(script, "name", None) or script_json(script).get("name") or "script")


def run_one(script, options: Options, source: str = "") -> tuple[ScriptOutcome, Any]:
    """Run, audit, judge one script; returns its outcome and the RunResult (None when it did not run)."""
    name = script_name(script)
    started = time.perf_counter()
    outcome = ScriptOutcome(name=name, source=source, **script_counts(script_json(script)))
    scratch = None
    if options.keep is not None:
        keep_dir = Path(options.keep) / name
    else:
        scratch = Path(tempfile.mkdtemp(prefix=f"surfacecheck-e2e-{name}-"))
        keep_dir = scratch / "run"
    run = None
    try:
        if options.runtime != SPEC_VERSION:
            return drift_one(script, options, outcome, keep_dir), None
        try:
            run = execute(script, runtime=options.runtime, keep_dir=keep_dir, timeout=options.timeout, **options.network)
        except Exception as exc:  # noqa: BLE001 - classified below; anything else is re-raised
            kind = failure_kind(exc)
            if kind is None:
                raise
            outcome.verdict, outcome.message = INCONCLUSIVE, f"{kind}: {exc}"
            outcome.not_installed = kind == "not-installed"
            return outcome, None
        outcome.runtime_version = str(getattr(run, "version", "") or "")
        outcome.run_dir = str(keep_dir) if options.keep is not None else None
        if getattr(run, "connects", None) is not None:
            from .runner import outside_loopback

            outcome.connects = {"traced": len(run.connects), "outside_loopback": outside_loopback(run.connects)}
        if getattr(run, "isolated", False):
            outcome.connects = dict(outcome.connects or {}, isolated=True)
        if getattr(run, "server_errors", None):
            outcome.message = "scripted server: " + "; ".join(map(str, run.server_errors))[:500]
        try:
            outcome.paths = exercised(list(run.events))
            outcome.situations, outcome.judged = witnesses(run.events), judged_events(run.events)
            outcome.audit = audit_run(script, run)
            outcome.differences = judge(script, run)
            if options.findings:
                find_on(outcome, run, options)
                wire_on(outcome, script, run, options)
        except Exception as exc:  # noqa: BLE001 - a suite bug is inconclusive, never a pass or a traceback
            outcome.verdict = INCONCLUSIVE
            outcome.message = f"the suite could not judge this run: {type(exc).__name__}: {exc}"
            return outcome, run
        if outcome.connects and outcome.connects.get("outside_loopback"):
            outcome.differences.append({"kind": "network:outside-loopback", "seq": None, "expected": "loopback only",
                                        "observed": outcome.connects["outside_loopback"],
                                        "message": "the runtime or its tools connected outside 127.0.0.1"})
        failed = bool(outcome.differences) or outcome.audit["errors"] > 0
        outcome.verdict = DIFFERED if failed else AGREED
        off_script = unscripted_failures(run.events)
        if off_script and not failed:  # a difference stands (violation beats inconclusive); agreement would prove nothing
            outcome.verdict = INCONCLUSIVE
            outcome.message = ("the conversation left its script (the scripted server or the transport failed, so "
                               "agreement proves nothing about the scripted paths): " + "; ".join(off_script[:3])
                               + (f"; {len(off_script) - 3} more" if len(off_script) > 3 else ""))
            return outcome, run
        if failed:
            from .bundle import write_bundle

            outcome.bundle = str(write_bundle(options.bundle_dir, script, run, outcome, command=options.command))
        return outcome, run
    finally:
        outcome.seconds = round(time.perf_counter() - started, 3)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def execute_other(script, *, python: str | None, keep_dir: Path, timeout: float):
    """Run ``script`` on another release (its :mod:`.release` descriptor: 0.2.x SDK arguments and wire)."""
    from .drift_run import run_v2

    return run_v2(script, python=python, keep_dir=keep_dir, timeout=timeout)


def drift_one(script, options: Options, outcome: ScriptOutcome, keep_dir: Path) -> ScriptOutcome:
    """Drift mode: the script on the other release and on 0.1.1rc1 (else the spec's
    recorded facts); every change is a difference ``drift:<id>`` naming what changed (H8c's ``drift``)."""
    from .drift import SPEC_FACTS, audit_drift, drift

    try:
        other = execute_other(script, python=options.python, keep_dir=keep_dir / "other", timeout=options.timeout)
    except Exception as exc:  # noqa: BLE001 - classified; anything else is re-raised
        kind = failure_kind(exc)
        if kind is None:
            raise
        outcome.verdict, outcome.message, outcome.not_installed = INCONCLUSIVE, f"{kind}: {exc}", kind == "not-installed"
        return outcome
    try:
        reference = execute(script, runtime=SPEC_VERSION, keep_dir=keep_dir / "reference", timeout=options.timeout)
    except Exception as exc:  # noqa: BLE001
        if failure_kind(exc) is None:
            raise
        reference, outcome.message = SPEC_FACTS, f"{SPEC_VERSION} not runnable here ({exc}); compared with the spec's facts"
    outcome.runtime_version = str(getattr(other, "version", "") or options.runtime)
    outcome.run_dir = str(keep_dir) if options.keep is not None else None
    try:
        outcome.paths = exercised(list(other.events))
    except Exception as exc:  # noqa: BLE001 - the other release's events may not fit the spec's vocabulary
        outcome.message = (outcome.message + "; " if outcome.message else "") + f"paths not read: {exc}"
    found = drift(reference, other) + audit_drift(other, script_json(script)["config"])
    outcome.differences = [{"kind": f"drift:{f.id}", "seq": None, "expected": f.expected, "observed": f.observed,
                            "message": f"{f.what} ({f.evidence})"} for f in found]
    outcome.verdict = DIFFERED if found else AGREED
    return outcome


def run_scripts(scripts: Iterable[tuple[Any, str]], options: Options, *, mode: str, seed: int | None = None,
                progress: Callable | None = None) -> E2EReport:
    """Run every ``(script, source)``; stops early (inconclusive) when the runtime is not installed."""
    report = E2EReport(mode=mode, runtime=options.runtime, seed=seed)
    items = list(scripts)
    for script, source in (progress(items) if progress else items):
        outcome, _run = run_one(script, options, source)
        report.scripts.append(outcome)
        if outcome.not_installed:
            report.error = INSTALL_HINT if options.runtime == SPEC_VERSION else outcome.message
            break
    return report


# -- generated scripts -----------------------------------------------------------------------------
def failure_signature(outcome: ScriptOutcome) -> frozenset[str] | None:
    """What a failing script broke: its difference kinds and audit error rules (None when it agreed)."""
    if outcome.verdict != DIFFERED:
        return None
    kinds = {f"difference:{d.get('kind')}" for d in outcome.differences}
    kinds |= {f"audit:{f['rule']}" for f in outcome.audit.get("findings", []) if f.get("severity") == "error"}
    return frozenset(kinds)


def shrink_first_failure(report: E2EReport, generated: list[dict], options: Options, *, seed: int,
                         budget: int, load: Callable[[dict], Any]) -> None:
    """Shrink the first failing generated script with Hypothesis; keep the shrunk one as the counterexample."""
    from .generate import identity, shrink_script

    first = next((o for o in report.scripts if o.verdict == DIFFERED), None)
    if first is None:
        return
    target = failure_signature(first)
    known = {identity(s): (failure_signature(o) & target or None) if failure_signature(o) else None
             for s, o in zip(generated, report.scripts)}
    last: dict[str, ScriptOutcome] = {}

    def fails(script_dict: dict):
        quiet = replace(options, keep=None, findings=False, bundle_dir=Path(tempfile.mkdtemp(prefix="surfacecheck-e2e-shrink-")))
        outcome, _ = run_one(load(script_dict), quiet, "shrinking")
        shutil.rmtree(quiet.bundle_dir, ignore_errors=True)
        signature = failure_signature(outcome)
        hit = signature & target if signature else None
        if hit:
            last[identity(script_dict)] = outcome
        return hit or None

    options.err.write(f"surfacecheck e2e dsh: shrinking {first.name} (at most {budget} runs)\n")
    shrunk = shrink_script(fails, seed_value=seed, n=len(generated), budget=budget, known=known,
                           name=f"{first.name}-shrunk")
    if shrunk is None:
        report.shrunk = {"from": first.name, "script": None, "runs": budget,
                         "message": "the failure did not reproduce while shrinking"}
        return
    outcome, _run = run_one(load(shrunk.script), options, f"shrunk from {first.name}")
    report.shrunk = {"from": first.name, "runs": shrunk.runs, "turns": outcome.turns,
                     "tool_calls": outcome.tool_calls, "verdict": outcome.verdict, "bundle": outcome.bundle,
                     "script": shrunk.script, "differences": outcome.differences}


__all__ = ["AGREED", "DIFFERED", "INCONCLUSIVE", "PATHS", "Options", "E2EReport", "ScriptOutcome", "run_one",
           "run_scripts", "shrink_first_failure", "execute", "judge", "exercised", "audit_run"]
