"""The ``bench`` stage of ``surfacecheck check``: the O(1) claim, quickly (seed §16; spec 5.1).

Verdict from the deterministic cost model only (machine-independent): at surface sizes 10^2..10^4
the runtime's projection must touch a constant number of cells per append, and the suite's own
linear baselines must grow linearly (else the harness itself is broken and the stage is
inconclusive). A small timing (10^2 and 10^4 nodes) is reported for information: timings never
decide ``check``. A ``cmd:`` runtime gets a small ``bench`` request; a runtime that does not
implement it (protocol error ``unsupported``) skips the stage.
"""
from __future__ import annotations

import time

from surfacecheck.bench.costmodel import growth, ops_per_append
from surfacecheck.bench.harness import run
from surfacecheck.bench.variants import FLOOR, lookup
from surfacecheck.core.cases import Outcome, TestCase
from surfacecheck.core.stage import INCONCLUSIVE, OK, SKIPPED, VIOLATION, CheckContext, StageResult

from . import measure

COST_SIZES = (10**2, 10**3, 10**4)
TIMING_SIZES = (10**2, 10**4)
CLASSNAME = "surfacecheck.bench"


def stage(ctx: CheckContext) -> StageResult:
    """Cost model (verdict) + a small timing (information) for ``ctx.runtime``."""
    started = time.perf_counter()
    if measure.in_process(ctx.runtime):
        result = _in_process(ctx)
    else:
        result = _over_protocol(ctx)
    result.seconds = time.perf_counter() - started
    return result


def _in_process(ctx: CheckContext) -> StageResult:
    subject = measure.default_gated(ctx.runtime)
    names = [subject, "copy-on-append", "recount"]
    series = ops_per_append(lookup(names), COST_SIZES)
    found = {name: growth(s) for name, s in series.items()}
    cases, lines = [], []
    for name, s in series.items():
        shown = ", ".join(f"{p.ops:g} at {p.size}" for p in s.points)
        ok = found[name] == s.expected
        message = f"{name}: {found[name]} operations per append (expected {s.expected}): {shown}"
        lines.append(("" if ok else "UNEXPECTED ") + message)
        outcome = None if ok else Outcome(message=message, type="cost-model")
        cases.append(TestCase(name=f"cost-model {name}", classname=CLASSNAME,
                              failure=outcome if name == subject else None,
                              error=outcome if name != subject else None))
    timing = run(lookup([subject, FLOOR]), TIMING_SIZES, batch_events=600)
    medians = {name: {p.size: round(p.median_ns) for p in s.points} for name, s in timing.items()}
    lines.append("timing (information only): " + "; ".join(
        f"{name} " + ", ".join(f"{ns / 1000:.1f} µs at {size}" for size, ns in by_size.items())
        for name, by_size in medians.items()))
    if found[subject] != "constant":
        status = VIOLATION
    elif any(found[n] != "linear" for n in ("copy-on-append", "recount")):
        status = INCONCLUSIVE  # the baselines did not rise: the harness cannot tell O(1) from O(n)
    else:
        status = OK
    summary = {"subject": subject, "cost_model": found, "sizes": list(COST_SIZES),
               "ops_per_append": {n: [p.ops for p in s.points] for n, s in series.items()},
               "timing_ns": {n: {str(k): v for k, v in m.items()} for n, m in medians.items()}}
    return StageResult("bench", status, summary, "\n".join(lines), cases)


def _over_protocol(ctx: CheckContext) -> StageResult:
    try:
        series = measure.bench_protocol(ctx.runtime, list(COST_SIZES), 100)
    except measure.ProtocolError as exc:
        status = SKIPPED if exc.type in ("unsupported", "unknown-op") else INCONCLUSIVE
        message = f"runtime {ctx.runtime} does not bench: {exc}"
        case = TestCase(name="bench", classname=CLASSNAME, skipped=Outcome(message=message))
        return StageResult("bench", status, {"error": message}, message, [case])
    except (measure.RuntimeUnavailable, ValueError) as exc:
        message = f"runtime {ctx.runtime} could not bench: {exc}"
        case = TestCase(name="bench", classname=CLASSNAME, error=Outcome(message=message, type="runtime-unavailable"))
        return StageResult("bench", INCONCLUSIVE, {"error": message}, message, [case])
    subject = series["runtime"]
    timing = ", ".join(f"{p.median_ns / 1000:.1f} µs at {p.size}" for p in subject.points)
    summary = {"subject": "runtime", "timing_ns": {str(p.size): p.median_ns for p in subject.points},
               "ratio": round(subject.ratio, 3)}
    if all(p.ops is not None for p in subject.points):
        found = growth(subject)
        summary["cost_model"] = found
        message = f"runtime: {found} operations per append ({', '.join(f'{p.ops:g}' for p in subject.points)})"
        outcome = None if found == "constant" else Outcome(message=message, type="cost-model")
        case = TestCase(name="cost-model runtime", classname=CLASSNAME, failure=outcome)
        status = OK if outcome is None else VIOLATION
    else:
        message = "runtime reports no operation counts: timing only (information)"
        case = TestCase(name="cost-model runtime", classname=CLASSNAME, skipped=Outcome(message=message))
        status = OK
    text = f"{message}\ntiming (information only): {timing}; ratio {subject.ratio:.2f}"
    return StageResult("bench", status, summary, text, [case])
