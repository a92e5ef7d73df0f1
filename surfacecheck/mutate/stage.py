"""The ``mutate`` stage of ``surfacecheck check``: opt-in (``check --only mutate``), since mutation testing of dsh's
default files takes tens of minutes on two cores (docs/mutate.md has the measured times). Run, it is
``surfacecheck mutate`` with its defaults against the runtime under test (dsh, embedded, or a framework such as
langchain); the score is reported, a void run is inconclusive."""
from __future__ import annotations

import sys

from surfacecheck.core.cases import Outcome, TestCase
from surfacecheck.runtime.registry import mutable

from ..core.stage import INCONCLUSIVE, OK, SKIPPED, CheckContext, StageResult

CLASSNAME = "surfacecheck.mutate"


def stage(ctx: CheckContext) -> StageResult:
    runtime = "dsh" if ctx.runtime == "dsh" else ctx.runtime
    if "mutate" not in ctx.requested:
        why = "opt-in: run with --only mutate, or surfacecheck mutate; tens of minutes for dsh's default files"
        return StageResult("mutate", SKIPPED, {"skipped": why}, why)
    from .framework import runtimes as framework_runtimes

    if runtime not in mutable() + framework_runtimes():
        why = (f"mutation testing changes the runtime's own code: "
               f"{' or '.join(mutable() + framework_runtimes())}, not {ctx.runtime}")
        return StageResult("mutate", SKIPPED, {"skipped": why}, why)
    from .run import run_dsh
    from .units import STAGES

    def say(message: str) -> None:
        ctx.err.write(message + "\n")
        ctx.err.flush()
    out = ctx.report_dir / "mutate"
    out.mkdir(parents=True, exist_ok=True)
    if runtime == "dsh":
        from surfacecheck.runtime.dsh import explicit_modules

        run = run_dsh(None, STAGES, out, verify_profile="smoke", concurrency=2, incremental=False,
                      timeout=ctx.timeout, timeout_factor=2.0, timeout_ms=10000, corpus=ctx.corpus,
                      modules=explicit_modules("dsh"), keep_work=False, say=say, min_score=None)
    elif runtime in framework_runtimes():
        from .framework import run_framework

        run = run_framework(runtime, out, timeout=ctx.timeout, say=say, progress=False)
    else:
        from .embedded import run_embedded

        run = run_embedded(None, STAGES, out, verify_profile="smoke", concurrency=2, timeout=ctx.timeout,
                           timeout_factor=2.0, corpus=ctx.corpus, keep_work=False, say=say, min_score=None)
    document = run.to_json()
    if run.void:
        case = TestCase(name=f"mutate {runtime}", classname=CLASSNAME, error=Outcome(message=run.void, type="void"))
        return StageResult("mutate", INCONCLUSIVE, document, run.text(), [case])
    case = TestCase(name=f"mutate {runtime}", classname=CLASSNAME, time=run.minutes * 60,
                    properties={"score": str(run.figures.get("score")), "mutants": str(run.figures.get("mutants"))})
    return StageResult("mutate", OK, document, run.text(), [case])


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run through surfacecheck check --only mutate")
