"""The ``contract`` stage of ``surfacecheck check`` on a conversation-level runtime: the search, each promise held or
broken, each broken one known (registered in ``contract/findings.json``) or NEW.

The search runs with the check's seed and a budget of :data:`CHECK_BUDGET` seconds; every witness is written to
``REPORT_DIR/traces``. NEW fails the stage; known findings pass unless ``--strict``; a runtime that hangs or dies, or
a search that judged no session, is inconclusive. The findings stage replays the registry's witnesses and checks its
quotes (:mod:`.findings_stage`), so this stage does not.
"""
from __future__ import annotations

from ..core.cases import Outcome, TestCase
from ..core.stage import INCONCLUSIVE, OK, VIOLATION, CheckContext, StageResult
from ..runtime.registry import base
from . import registry
from .cli import status as promise_status, text as search_text

CHECK_BUDGET = 150.0
CLASSNAME = "surfacecheck.contract"


def stage(ctx: CheckContext) -> StageResult:
    from . import promises
    from .search import SEED, search, write_traces

    result = search(ctx.runtime, seed=SEED, deadline_seconds=CHECK_BUDGET, timeout=max(ctx.timeout, 60.0),
                    progress=lambda line: (ctx.err.write(line + "\n"), ctx.err.flush()),
                    command=f"surfacecheck check --runtime {ctx.runtime} (contract stage)")
    paths = write_traces(result, ctx.report_dir / "traces")
    findings = registry.for_runtime(registry.load(None, tuple(p.id for p in promises.PROMISES)), base(ctx.runtime))
    rows, cases, new, known = [], [], [], []
    for p in promises.PROMISES:
        found = result.found.get(p.id)
        finding = registry.match(findings, base(ctx.runtime), p.id) if found else None
        row = {"promise": p.id, "meaning": p.meaning, "verdict": promise_status(result, p.id),
               "finding": finding.id if finding else None, "class": finding.klass if finding else None,
               "issue": finding.issue if finding else None, "new": bool(found and finding is None)}
        if found:
            row.update(witness=str(paths[p.id]), steps=len(found.steps), messages=found.messages,
                       step=found.breach.step, message=found.breach.message,
                       expected=found.breach.expected, observed=found.breach.observed)
            (new if finding is None else known).append(p.id)
        rows.append(row)
        failure = None
        if row["new"]:
            failure = Outcome(message=f"NEW: {p.id} broken at step {found.breach.step}: {found.breach.message}",
                              type="new-finding", text=f"witness: {paths[p.id]}")
        elif found and ctx.strict:
            failure = Outcome(message=f"known {finding.klass} {finding.id}: {finding.reason}", type="known-finding")
        cases.append(TestCase(name=f"{row['verdict']} {p.id}", classname=CLASSNAME, failure=failure,
                              properties={"finding": row["finding"] or ("NEW" if found else "")}))
    summary = {**result.to_json(), "promises": rows, "new": new, "known": known, "budget": CHECK_BUDGET}
    lines = [search_text(result, paths)]
    for row in rows:
        if row["verdict"] == "broken":
            lines.append(f"  {row['promise']}: " + ("NEW (not in contract/findings.json)" if row["new"] else
                                                    f"known {row['class']} {row['finding']}"
                                                    + (f", {row['issue']}" if row["issue"] else "")))
    if new or (ctx.strict and known):
        status = VIOLATION
    elif result.inconclusive or result.examples == 0:
        status = INCONCLUSIVE
        why = result.inconclusive or "the search judged no session"
        summary.setdefault("error", why)
        cases.append(TestCase(name="search", classname=CLASSNAME, error=Outcome(message=why, type="inconclusive")))
    else:
        status = OK
    return StageResult("contract", status, summary, "\n".join(lines) + "\n", cases, result.seconds)
