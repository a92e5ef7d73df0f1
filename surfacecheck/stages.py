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

CAPABILITY_STAGES = ("runtime", "audit", "verify", "dsh", "findings", "contract", "prove", "explore", "e2e", "bench",
                     "mutate")
ALL_STAGES = ("logs",) + CAPABILITY_STAGES
CONVERSATION_STAGES = {
    "contract": "surfacecheck.contract.stage",
    "findings": "surfacecheck.contract.findings_stage",
    "bench": "surfacecheck.contract.bench_stage",
}
"""The stages that apply to a conversation-level runtime (LangChain, Strands, ...), and their modules: the contract
search, the contract's findings, the cost of the runtime's own trigger check. Every other stage reads dsh's log."""


def not_applicable(name: str, runtime: str) -> str | None:
    """Why stage ``name`` does not apply to ``runtime`` (one sentence), or None when it does."""
    from surfacecheck.runtime.registry import conversation_runtimes, serves_conversation

    if serves_conversation(runtime):
        if name in CONVERSATION_STAGES:
            return None
        what = "judges dsh's recorded logs" if name == "logs" else "drives dsh's session log"
        return f"not applicable: {runtime} serves the conversation level; the {name} stage {what}"
    if name == "contract":
        return (f"not applicable: the compaction contract drives conversation-level runtimes "
                f"({', '.join(conversation_runtimes())}); {runtime} serves dsh's log levels, checked by every other stage")
    return None


def _module_name(name: str, runtime: str) -> str:
    from surfacecheck.runtime.registry import serves_conversation

    return CONVERSATION_STAGES[name] if serves_conversation(runtime) else f"surfacecheck.{name}.stage"


def _load(name: str, runtime: str = "embedded"):
    module = _module_name(name, runtime)
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
        why = not_applicable(name, ctx.runtime)
        if why:
            ctx.err.write(f"surfacecheck check: stage {name}: {why}\n")
            results.append(StageResult(name, SKIPPED, {"skipped": why}, why + "\n", [], 0.0))
            continue
        try:
            module = _load(name, ctx.runtime)
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
    ran = [r.status for r in results if r.status != SKIPPED]
    if report.get("logs_not_applicable") and not ran:  # nothing that applies ran: never a pass that checked nothing
        report["nothing_checked"] = "no stage that applies to this runtime ran"
        ran = [INCONCLUSIVE]
    verdict = fold_status(([] if report.get("logs_not_applicable") else [logs_status]) + ran)
    report["verdict"], report["exit_code"] = verdict.word, verdict.exit_code


def verdict_line(report: dict[str, Any]) -> str:
    """The run's last word: the verdict, the stages that failed, and, when some did not run, which ran and
    which were skipped or not selected (never "every stage" unless every stage ran)."""
    stages = report.get("stages") or {}
    word = {"held": "ALL HELD", "violated": "VIOLATED", "inconclusive": "INCONCLUSIVE"}[report["verdict"]]
    logs = report.get("logs_verdict")
    logs_ran = not report.get("logs_not_applicable")
    failing = (["logs"] if logs_ran and logs not in (None, "held") else []) + [
        name for name, row in stages.items() if row["status"] in (VIOLATION, INCONCLUSIVE)]
    ran = ["logs"] * logs_ran + [name for name, row in stages.items() if row["status"] != SKIPPED]
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
