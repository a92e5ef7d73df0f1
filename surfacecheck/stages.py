"""Running the capability stages of ``surfacecheck check`` and folding them into one report.

After the ``logs`` stage (every scenario and corpus log replayed, :mod:`.logcheck`), ``check``
runs each capability that is installed — ``surfacecheck.<name>.stage.stage(ctx)`` — in the
order of :data:`CAPABILITY_STAGES`. A stage that crashes is reported inconclusive with the
reason (a suite bug is never a pass, and never mistaken for a runtime violation).
"""
from __future__ import annotations

import contextlib
import importlib
import time
import traceback
from typing import Any, Sequence

from surfacecheck.core.cases import Outcome, TestCase

from .core.verdict import Verdict
from .core.words import count
from .core.stage import INCONCLUSIVE, SKIPPED, VIOLATION, CheckContext, StageResult, Terminated, fold_status

CAPABILITY_STAGES = ("runtime", "audit", "verify", "dsh", "findings", "prove", "explore", "e2e", "bench", "mutate")
ALL_STAGES = ("logs",) + CAPABILITY_STAGES


def _load(name: str):
    module = f"surfacecheck.{name}.stage"
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
            return None  # this capability has no stage (yet)
        raise


def run_stages(ctx: CheckContext, names: Sequence[str], interrupted: list | None = None,
               around=None) -> list[StageResult]:
    """Run the named capability stages in order; progress and stage notes go to ``ctx.err``. An interrupt
    (SIGINT, or SIGTERM as :class:`Terminated`) during a stage records it as inconclusive "interrupted", runs
    no further stage, and appends the signal's name to ``interrupted`` (the caller writes the partial report).
    ``around(name)``, when given, is a context manager each stage runs inside (coverage measurement)."""
    results = []
    for name in names:
        if name == "logs":
            continue
        started = time.perf_counter()
        try:
            module = _load(name)
            if module is None:
                continue
            ctx.err.write(f"surfacecheck check: stage {name} ...\n")
            ctx.err.flush()
            with around(name) if around is not None else contextlib.nullcontext():
                result = module.stage(ctx)
        except (KeyboardInterrupt, Terminated) as exc:
            if interrupted is None:
                raise
            signame = "SIGINT" if isinstance(exc, KeyboardInterrupt) else "SIGTERM"
            from surfacecheck.runtime.client import kill_all

            kill_all()  # the stage's runtime children, before anything is written
            message = f"stage {name} interrupted by {signame}"
            case = TestCase(name=name, classname="surfacecheck.core.stage",
                            error=Outcome(message=message, type="interrupted"))
            results.append(StageResult(name, INCONCLUSIVE, {"interrupted": signame}, message, [case],
                                       time.perf_counter() - started))
            ctx.err.write(f"surfacecheck check: {message}; writing the partial report\n")
            interrupted.append(signame)
            return results
        except Exception as exc:  # noqa: BLE001 - a crashing stage is reported, not raised
            tail = traceback.format_exception(exc)[-3:]
            message = f"stage {name} crashed: {type(exc).__name__}: {exc}"
            case = TestCase(name=name, classname="surfacecheck.core.stage",
                            error=Outcome(message=message, type="stage-crash", text="".join(tail)))
            result = StageResult(name, INCONCLUSIVE, {"error": message}, message, [case])
        result.seconds = result.seconds or time.perf_counter() - started
        ctx.err.write(f"surfacecheck check: stage {name}: {result.status} ({result.seconds:.1f} s)\n")
        results.append(result)
    return results


def add_stages(report: dict[str, Any], results: list[StageResult]) -> None:
    """Put each stage's summary under ``report["stages"]`` and fold the verdict and exit code."""
    report["stages"] = {
        r.name: {"status": r.status, "seconds": round(r.seconds, 3), "summary": r.summary} for r in results
    }
    report["logs_verdict"] = report["verdict"]
    logs_status = Verdict.from_word(report["verdict"])
    verdict = fold_status([logs_status] + [r.status for r in results if r.status != SKIPPED])
    report["verdict"], report["exit_code"] = verdict.word, verdict.exit_code


def verdict_line(report: dict[str, Any]) -> str:
    """The run's last word: the verdict, the stages that failed, and, when some did not run, which ran and
    which were skipped or not selected (never "every stage" unless every stage ran)."""
    stages = report.get("stages") or {}
    word = {"held": "ALL HELD", "violated": "VIOLATED", "inconclusive": "INCONCLUSIVE"}[report["verdict"]]
    logs = report.get("logs_verdict")
    failing = (["logs"] if logs not in (None, "held") else []) + [
        name for name, row in stages.items() if row["status"] in (VIOLATION, INCONCLUSIVE)]
    ran = ["logs"] + [name for name, row in stages.items() if row["status"] != SKIPPED]
    skipped = [name for name, row in stages.items() if row["status"] == SKIPPED]
    unselected = [name for name in CAPABILITY_STAGES if name not in stages]
    if failing:
        line = f"{word} ({', '.join(failing)})"
    elif skipped or unselected:
        line = f"{word}: {count(len(ran), 'stage')} ran ({', '.join(ran)})"
    else:
        line = f"{word}: logs and every stage"
    if skipped:
        line += f"; skipped: {', '.join(skipped)}"
    if unselected:
        line += f"; not selected: {', '.join(unselected)}"
    return f"{line} (exit {report['exit_code']})"


def format_stages(results: list[StageResult], verbose: bool = True) -> str:
    """Each stage's own text (``verbose``: every stage; otherwise only the stages that failed, in full, after one
    line per stage saying what it found)."""
    if not results:
        return ""
    out = []
    for r in results:
        if verbose or r.status in (VIOLATION, INCONCLUSIVE):
            out += [f"== {r.name}: {r.status} ({r.seconds:.1f} s)", r.text.rstrip(), ""]
    return "\n".join(out) + "\n"
