"""One ``verify`` run: replay the regression folder first, then run each level's machine, and write
a trace + pytest reproducer for every failure.

Traces go to ``trace_dir`` as ``verify-<level>-<runtime>-<seed>.jsonl``. A new failure is also
kept in the regression folder (named by a hash of its steps, so a trace is kept once) and every
later run replays that folder first: a regression that fails again is a violation at once.
"""
from __future__ import annotations

import hashlib
from collections import Counter
import json
import re
import shlex
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from surfacecheck.core.verdict import Verdict
from surfacecheck.properties.stateful.inputs import report as input_report
from surfacecheck.core.words import count
from surfacecheck.core.protocol import RuntimeUnavailable
from surfacecheck.runtime.dsh import settled_traces
from surfacecheck.runtime.select import open_runtime
from surfacecheck.core.trace import Trace, TraceError, write_trace
from surfacecheck.properties.trace_check import read_valid_trace
from surfacecheck.verify.replay import ensure_variants, replay_trace
from surfacecheck.verify.minimise import minimise_trace
from surfacecheck.verify.reproducer import write_reproducer
from surfacecheck.verify.runner import LevelResult, levels_up_to, new_seed, open_reference, run_level

REGRESSIONS = Path(__file__).resolve().parents[1] / "properties" / "regressions"
LOCAL_REGRESSIONS = Path(".surfacecheck") / "regressions"


def default_regressions() -> Path:
    """Where new traces are kept: the committed ``properties/regressions`` in a checkout of this
    suite, else ``./.surfacecheck/regressions`` (an installed package is never written to)."""
    return REGRESSIONS if (REGRESSIONS.parents[2] / ".git").exists() else LOCAL_REGRESSIONS


@dataclass
class VerifyReport:
    runtime: str
    profile: str
    seed: int
    levels: list[LevelResult] = field(default_factory=list)
    regressions: list[dict] = field(default_factory=list)
    traces: list[str] = field(default_factory=list)
    unavailable: str | None = None
    stderr: str = ""
    seconds: float = 0.0
    distributed: dict | None = None  # with --workers/--scheduler: workers, scheduler, tasks, retries (a cost figure)

    @property
    def status(self) -> str:
        if any(lv.violation for lv in self.levels) or any(r["verdict"].startswith("failing") for r in self.regressions):
            return Verdict.VIOLATION
        if self.unavailable or any(lv.unavailable or lv.incomplete for lv in self.levels) or \
                any(r["verdict"] == "inconclusive" for r in self.regressions):
            return Verdict.INCONCLUSIVE
        return Verdict.OK

    @property
    def exit_code(self) -> int:
        return Verdict(self.status).exit_code

    @property
    def inputs(self) -> dict[str, dict]:
        """Per schema of dsh's input space, the kinds and forms the levels generated (:mod:`..inputs`)."""
        total: Counter = Counter()
        for lv in self.levels:
            total.update(lv.operations)
        return input_report(total)

    def to_json(self) -> dict:
        steps = sum(lv.steps for lv in self.levels)
        secs = sum(lv.seconds for lv in self.levels)
        return {"command": "verify", "verdict": self.status, "exit_code": self.exit_code, "runtime": self.runtime,
                "profile": self.profile, "seed": self.seed, "examples": sum(lv.examples for lv in self.levels),
                "steps": steps, "steps_per_second": round(steps / secs, 1) if secs else 0.0,
                "seconds": round(self.seconds, 3), "levels": [lv.to_json() for lv in self.levels],
                "regressions": self.regressions, "traces": self.traces, "unavailable": self.unavailable,
                "inputs": self.inputs,
                "stderr": self.stderr[-2000:] if self.stderr else "",
                **({"distributed": self.distributed} if self.distributed is not None else {})}

    def text(self) -> str:
        lines = [f"verify: runtime {self.runtime}, profile {self.profile}, seed {self.seed}"]
        if self.regressions:
            failing = [r for r in self.regressions if r["verdict"] != "fixed"]
            lines.append(f"  regressions: {len(self.regressions)} replayed, {len(failing)} not passing")
            lines += [f"    {r['trace']}: {r['verdict']}: {r['detail']}" for r in failing]
        for lv in self.levels:
            lines.append(f"  level {lv.level:<10} {lv.status:<12} {count(lv.examples, 'example')}, {count(lv.steps, 'step')}, "
                         f"{lv.steps_per_second:.0f} steps/s, {lv.seconds:.1f} s")
            if lv.violation:
                v = lv.violation
                lines.append(f"    {v.property} at step {v.step} of {len(lv.trace_steps)}: {v.message}")
            if lv.incomplete:
                lines.append(f"    {lv.incomplete.upper()[:10]}{lv.incomplete[10:]}")
            if lv.unavailable:
                lines.append(f"    runtime unavailable: {lv.unavailable}")
                if lv.stderr:
                    lines.append("    stderr: " + lv.stderr.strip().replace("\n", "\n            ")[-1500:])
        if self.levels:
            inputs = self.inputs
            lines.append("  inputs generated: " + ", ".join(f"{schema} {entry['generated']}/{entry['forms']}"
                                                            for schema, entry in inputs.items()))
        if self.unavailable:
            lines.append(f"  runtime unavailable: {self.unavailable}")
            if self.stderr:
                lines.append("    stderr: " + self.stderr.strip()[-1500:])
        lines += [f"  trace: {t}" for t in self.traces]
        lines.append(f"verdict: {self.status} (exit {self.exit_code})")
        return "\n".join(lines)


def slug(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z]+", "-", text).strip("-")[:60] or "runtime"


def replay_regressions(folder: Path | None, spec: str, levels: list[str], timeout: float,
                       runtime=None, also: tuple[Path, ...] = ()) -> list[dict]:
    """Replay every ``*.jsonl`` trace of ``also`` and ``folder`` whose level is being verified."""
    folders = [f for f in dict.fromkeys([*also, folder]) if f is not None and f.is_dir()]
    done = []
    for path in sorted(p for f in folders for p in f.glob("*.jsonl")):
        try:
            trace = read_valid_trace(path)
        except TraceError as exc:
            done.append({"trace": str(path), "verdict": "unreadable", "detail": str(exc)})
            continue
        if trace.level not in levels:
            continue
        try:
            outcome = replay_trace(trace, spec, runtime=runtime, timeout=timeout)
        except KeyError as exc:
            done.append({"trace": str(path), "verdict": "unreadable", "detail": str(exc)})
            continue
        v = outcome.violation  # where it fails now, for the report to draw this run's outcome
        done.append({"trace": str(path), "verdict": outcome.verdict, "detail": outcome.describe(),
                     "recorded": trace.property, "steps": len(trace.steps),
                     "now": {"property": v.property, "step": v.step, "message": v.message} if v else None})
    return done


def keep_regression(folder: Path, trace: Trace) -> Path:
    """Store ``trace`` in the regression folder once (file name = hash of level + steps)."""
    body = json.dumps([trace.level] + [[s.op, s.args] for s in trace.steps], sort_keys=True)
    digest = hashlib.sha256(body.encode()).hexdigest()[:12]
    path = folder / f"{trace.level}-{slug(trace.runtime)}-{slug(trace.property)}-{digest}.jsonl"
    if not path.exists():
        write_trace(path, trace)
    return path


def verify(runtime_spec: str, *, level: str | None = None, profile: str = "ci", seed: int | None = None,
           trace_dir: Path = Path("reports/out/traces"), regressions: Path | None = REGRESSIONS,
           save_regressions: bool = True, timeout: float = 10.0, err: TextIO = sys.stderr,
           command: str | None = None, shrink: bool = True, replay_also: tuple[Path, ...] = (),
           max_memory: int | None = None, workers: int | None = None, scheduler: str | None = None) -> VerifyReport:
    """Run verify; ``ValueError`` for an unknown runtime spelling (usage error). ``max_memory`` (bytes) stops a
    level, incomplete (exit 3), before an example would start above it; no further level runs. ``workers`` /
    ``scheduler``: each level's examples in shards on Dask (:mod:`.sharded`); a lost cluster raises
    :class:`surfacecheck.core.cluster.WorkerLost`."""
    ensure_variants()
    seed = new_seed(profile, seed)
    report = VerifyReport(runtime_spec, profile, seed)
    began = time.perf_counter()
    err.write(f"verify: runtime {runtime_spec}, profile {profile}, seed {seed}\n")
    try:
        runtime = open_runtime(runtime_spec, timeout=timeout)
    except RuntimeUnavailable as exc:  # it died or hung at the handshake: nothing was verified
        report.unavailable, report.stderr = f"{exc.kind}: {exc}", exc.stderr
        report.seconds = time.perf_counter() - began
        return report
    try:
        try:
            supported = list(runtime.hello().get("levels", []))
        except RuntimeUnavailable as exc:
            report.unavailable, report.stderr = f"{exc.kind}: {exc}", exc.stderr
            return report
        levels = levels_up_to(level, supported)
        missing = [lvl for lvl in levels if lvl not in supported]
        if missing:
            report.unavailable = f"unsupported: runtime supports levels {supported}, asked for {missing}"
            return report
        report.regressions = replay_regressions(regressions, runtime_spec, levels, timeout, runtime,
                                                (*replay_also, *settled_traces(runtime_spec)))
        if any(r["verdict"] == "inconclusive" for r in report.regressions):
            return report  # the runtime died replaying a regression: nothing more can be concluded
        reference = open_reference(runtime_spec)
        with _shards(workers, scheduler) as pool:
            _run_levels(report, pool, runtime, reference, runtime_spec, levels, profile, seed, trace_dir=trace_dir,
                        regressions=regressions, save_regressions=save_regressions, timeout=timeout, err=err,
                        command=command, shrink=shrink, max_memory=max_memory)
            if pool is not None:
                from surfacecheck.verify.sharded import SHARDS

                report.distributed = {"workers": len(pool.workers), "scheduler": None if pool.local else pool.address,
                                      "tasks": len(report.levels) * SHARDS, "retries": pool.retries()}
    finally:
        try:
            runtime.close()
        except Exception:  # noqa: BLE001 - closing a dead child must not hide the verdict
            pass
        report.seconds = time.perf_counter() - began
    return report


@contextmanager
def _shards(workers: int | None, scheduler: str | None):
    if workers is None and scheduler is None:
        yield None
        return
    from surfacecheck.core.cluster import pool

    with pool(workers, scheduler) as opened:
        yield opened


def _run_levels(report: VerifyReport, pool, runtime, reference, runtime_spec: str, levels: list[str], profile: str,
                seed: int, *, trace_dir, regressions, save_regressions, timeout, err, command, shrink, max_memory):
    """Each level in turn (in this process, or in shards on ``pool`` under one bar for every level's shards); a
    failure is minimised and kept."""
    bar = None
    if pool is not None:
        from surfacecheck.verify.sharded import campaign_bar

        bar = campaign_bar(levels, seed, err)
    try:
        _each_level(report, pool, bar, runtime, reference, runtime_spec, levels, profile, seed, trace_dir=trace_dir,
                    regressions=regressions, save_regressions=save_regressions, timeout=timeout, err=err,
                    command=command, shrink=shrink, max_memory=max_memory)
    finally:
        if bar is not None:
            bar.close()


def _each_level(report: VerifyReport, pool, bar, runtime, reference, runtime_spec: str, levels: list[str],
                profile: str, seed: int, *, trace_dir, regressions, save_regressions, timeout, err, command, shrink,
                max_memory):
    def say(line: str) -> None:  # a line on err, above the bar when there is one
        if bar is None:
            err.write(line + "\n")
        else:
            bar.write(line, file=err)

    for lvl in levels:
        say(f"verify: level {lvl} ...")
        if pool is None:
            result, trace_seed = run_level(runtime, reference, lvl, profile, seed, shrink, max_memory), seed
        else:
            from surfacecheck.verify.sharded import run_level_sharded

            def shard_done(summary: str) -> None:
                bar.set_postfix_str(summary, refresh=False)
                bar.update()
            result, trace_seed = run_level_sharded(pool, runtime_spec, lvl, profile, seed, shrink=shrink,
                                                   timeout=timeout, max_memory=max_memory, say=say,
                                                   done=shard_done)
        report.levels.append(result)
        say(f"verify: level {lvl}: {result.status}, {result.examples} examples, {result.steps} steps "
            f"in {result.seconds:.1f} s")
        if result.violation is not None:
            trace = Trace("verify", lvl, result.violation.property, tuple(result.trace_steps), result.violation,
                          runtime_spec, trace_seed, command or _command(runtime_spec, lvl, profile, trace_seed))
            if shrink:
                before = len(trace.steps)
                trace = minimise_trace(trace, runtime, timeout=timeout)
                say(f"verify: level {lvl}: trace cut from {before} to {len(trace.steps)} steps by step deletion")
                result.trace_steps, result.violation = list(trace.steps), trace.violation  # the summary names the
                # steps of the trace written, not of the example before shrinking
            path = write_trace(Path(trace_dir) / f"verify-{lvl}-{slug(runtime_spec)}-{trace_seed}.jsonl", trace)
            write_reproducer(path, trace)
            report.traces.append(str(path))
            if save_regressions and regressions is not None:
                keep_regression(regressions, trace)
        if result.unavailable or result.incomplete:
            break


def _command(spec: str, level: str, profile: str, seed: int) -> str:
    return f"surfacecheck verify --runtime {shlex.quote(spec)} --level {level} --profile {profile} --seed {seed}"

