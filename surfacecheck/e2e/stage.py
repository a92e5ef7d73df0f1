"""The ``e2e`` stage of ``surfacecheck check``: the seed scripts against the real dsh runtime.

Runs every ``scenarios/e2e/*.json`` script through :func:`surfacecheck.e2e.run.run_scripts` on
deepseek-harness-sdk 0.1.1rc1 (the release the spec describes), whatever ``--runtime`` says: this
stage judges the shipped product, the protocol runtime is judged by the other stages. Without the
SDK the stage is skipped with the install hint; a runtime that crashed, hung or timed out makes it
inconclusive (never a pass); a difference with the model or an audit error is a violation and keeps
a bundle under ``REPORT_DIR/e2e/``.
"""
from __future__ import annotations

import importlib.util
import time

from surfacecheck.core.cases import Outcome, TestCase

from ..core.stage import INCONCLUSIVE, OK, SKIPPED, VIOLATION, CheckContext, StageResult
from .run import AGREED, DIFFERED, INSTALL_HINT, SPEC_VERSION, Options, run_scripts

SDK_MODULE = "deepseek_harness"


def sdk_installed() -> bool:
    """Whether the dsh SDK can be imported (``pip install -e '.[dsh]'``)."""
    return importlib.util.find_spec(SDK_MODULE) is not None


def _case(outcome) -> TestCase:
    case = TestCase(name=outcome.name, classname="surfacecheck.e2e", time=outcome.seconds,
                    properties={"paths": " ".join(p for p, seqs in outcome.paths.items() if seqs),
                                "bundle": outcome.bundle or ""})
    if outcome.verdict == DIFFERED:
        first = (outcome.differences or [{}])[0]
        text = "\n".join(f"seq {d.get('seq')}: {d.get('kind')}: {d.get('message', '')}" for d in outcome.differences)
        case.failure = Outcome(message=f"{len(outcome.differences)} differences, {outcome.audit.get('errors', 0)} audit "
                               f"errors; first: {first.get('kind')} at seq {first.get('seq')}", type="e2e-difference",
                               text=text + (f"\nbundle: {outcome.bundle}" if outcome.bundle else ""))
    elif outcome.verdict != AGREED:
        case.error = Outcome(message=outcome.message or "inconclusive", type="e2e-inconclusive")
    return case


def stage(ctx: CheckContext) -> StageResult:
    """Seed scripts on the real runtime; skipped without the SDK, inconclusive when it cannot run."""
    from .cli import _progress, human, load_scripts

    started = time.perf_counter()
    if not sdk_installed():
        return StageResult("e2e", SKIPPED, {"skipped": INSTALL_HINT}, f"skipped: {INSTALL_HINT}\n", [],
                           time.perf_counter() - started)
    scripts = load_scripts(None)
    options = Options(runtime=SPEC_VERSION, bundle_dir=ctx.report_dir / "e2e", err=ctx.err,
                      command="surfacecheck check --only e2e")
    report = run_scripts(scripts, options, mode="seeds", progress=lambda items: _progress(items, ctx.err))
    status = {"held": OK, "violated": VIOLATION, "inconclusive": INCONCLUSIVE}[report.verdict]
    summary = report.to_json()
    text, cases = human(report), [_case(o) for o in report.scripts]
    rows = shipped_claims(summary, {o.name for o in report.scripts if o.verdict != "inconclusive"})
    summary["shipped_runtime_claims"] = rows
    if rows:
        missing = [r for r in rows if not r["shows"]]
        text += (f"registry claims 'shipped-runtime': {len(rows) - len(missing)}/{len(rows)} reproduced by their "
                 f"e2e script" + "".join(f"\n  NOT reproduced: {r['id']} by {r['e2e']} (the registry must be kept "
                                         f"true)" for r in missing) + "\n")
        case = TestCase(name="registry shipped-runtime claims", classname="surfacecheck.e2e")
        if missing:
            case.failure = Outcome(message=f"{len(missing)} claims not reproduced", type="reachability-stale",
                                   text="\n".join(f"{r['id']}: {r['e2e']}" for r in missing))
            status = VIOLATION if status == OK else status
        cases.append(case)
    return StageResult("e2e", status, summary, text, cases, time.perf_counter() - started)


def shipped_claims(summary: dict, ran: set[str]) -> list[dict]:
    """The registry's shipped-runtime reachability claims checked against this run (log scan + wire checks)."""
    from surfacecheck.findings import registry
    from surfacecheck.findings.reachability import shipped_proof

    reproduced: dict[str, list[str]] = {}
    for part in ("findings", "wire"):
        for finding_id, names in summary[part]["reproduced"].items():
            reproduced.setdefault(finding_id, []).extend(names)
    return shipped_proof(registry.load(), reproduced, ran)
