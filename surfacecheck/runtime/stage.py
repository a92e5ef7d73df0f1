"""The ``runtime`` stage of ``surfacecheck check``: protocol conformance of the runtime under test.

The sample session (:mod:`.sample`, every op, spec 1-11) is sent to the runtime under test and to
the reference model, restricted to the levels the runtime announces in ``hello``. Every result must
validate against its schema (``docs/schemas``) and equal the model's. For ``--runtime model`` the
sample also goes through a real child (``python -m surfacecheck.serve model``), so the process path
is exercised end to end. A runtime that hangs, dies or breaks the framing is inconclusive.
"""
from __future__ import annotations

import shlex
import sys
import time
from typing import Any

import jsonschema

from surfacecheck.core.cases import Outcome, TestCase

from ..core.stage import INCONCLUSIVE, OK, VIOLATION, CheckContext, StageResult
from ..core.protocol import OPTIONAL_OPS, ProtocolError, RuntimeUnavailable, ops_at
from .model_runtime import ModelRuntime
from .written import events_as_compared
from .sample import sample_requests
from .schemas import documents
from .select import open_runtime

MAX_SHOWN = 5


def _answer(runtime: Any, op: str, args: dict) -> Any:
    try:
        return runtime.call(op, args)
    except ProtocolError as exc:
        return {"protocol_error": exc.to_json()}


def conformance(spec: str, *, timeout: float = 10.0, runtime: Any = None) -> dict[str, Any]:
    """Run the sample against ``spec`` and the model; divergences and schema problems, in order. ``runtime``: an
    open runtime of that spelling to use (reset first, left open) instead of starting one."""
    validators = {name: jsonschema.Draft202012Validator(doc) for name, doc in documents().items()}
    started = time.perf_counter()
    owned = runtime is None
    if owned:
        runtime = open_runtime(spec, timeout=timeout)
    else:
        runtime.call("reset", {})
    try:
        hello = runtime.hello()
        problems = [f"hello: {e.message}" for e in validators["hello.result.json"].iter_errors(hello)]
        levels = [level for level in hello.get("levels", []) if level in ("log", "compaction", "policy")]
        allowed = set(ops_at(levels[-1])) if levels else set()
        allowed |= set(OPTIONAL_OPS) & set(hello.get("ops") or [])  # the optional views it announces
        requests = [(op, args) for op, args in sample_requests() if op in allowed]
        model = ModelRuntime()
        divergences = []
        for number, (op, args) in enumerate(requests, 1):
            expected, observed = _answer(model, op, args), _answer(runtime, op, args)
            if "protocol_error" not in observed:
                problems += [f"step {number} {op}: {e.message}"
                             for e in validators[f"{op}.result.json"].iter_errors(observed)]
            if op == "events":  # what the runtime mints or the model does not reproduce is left out (written.py)
                expected, observed = events_as_compared(expected), events_as_compared(observed)
            if observed != expected:
                divergences.append({"step": number, "op": op, "args": args, "expected": expected, "observed": observed})
    finally:
        if owned:
            runtime.close()
    return {"runtime": spec, "levels": levels, "requests": len(requests), "divergences": divergences,
            "schema_problems": problems, "seconds": round(time.perf_counter() - started, 3)}


def stage(ctx: CheckContext) -> StageResult:
    """``surfacecheck check`` stage ``runtime`` (loaded as ``surfacecheck.runtime.stage``): protocol conformance."""
    specs = [ctx.runtime]
    if ctx.runtime == "model":
        specs.append(f"cmd:{shlex.quote(sys.executable)} -m surfacecheck.serve model")
    runs, cases, lines, status = [], [], [], OK
    for spec in specs:
        name = f"protocol conformance ({spec})"
        try:
            run = conformance(spec, timeout=ctx.timeout)
        except RuntimeUnavailable as exc:
            status = VIOLATION if status == VIOLATION else INCONCLUSIVE
            cases.append(TestCase(name=name, classname="surfacecheck.protocol",
                                  error=Outcome(message=str(exc).splitlines()[0], type=f"runtime-{exc.kind}",
                                                text=str(exc))))
            runs.append({"runtime": spec, "inconclusive": str(exc)})
            lines.append(f"protocol: {spec}: inconclusive: {str(exc).splitlines()[0]}")
            continue
        runs.append({**run, "divergences": run["divergences"][:MAX_SHOWN],
                     "divergence_count": len(run["divergences"])})
        bad = run["divergences"] or run["schema_problems"]
        if bad:
            status = VIOLATION
            first = (f"step {run['divergences'][0]['step']} {run['divergences'][0]['op']} differs from the model"
                     if run["divergences"] else run["schema_problems"][0])
            cases.append(TestCase(name=name, classname="surfacecheck.protocol", time=run["seconds"],
                                  failure=Outcome(message=first, type="protocol-divergence",
                                                  text="\n".join(run["schema_problems"][:MAX_SHOWN]))))
        else:
            cases.append(TestCase(name=name, classname="surfacecheck.protocol", time=run["seconds"]))
        lines.append(f"protocol: {spec}: levels {','.join(run['levels'])}, {run['requests']} requests, "
                     f"{len(run['divergences'])} divergences, {len(run['schema_problems'])} schema problems "
                     f"({run['seconds']:.2f} s)")
    summary: dict[str, Any] = {"runs": runs}
    if ctx.runtime != "model":
        status = _corpus_equivalence(ctx, status, summary, lines, cases)
    return StageResult("runtime", status, summary, "\n".join(lines) + "\n", cases)


def _corpus_equivalence(ctx: CheckContext, status: str, summary: dict, lines: list, cases: list) -> str:
    """Every scenario and corpus log, event by event, through the runtime and the model: equal results
    and equal state at every replacement and at the end (the embedded stage's comparison, any runtime)."""
    from .embedded.stage import equivalence, log_paths

    try:
        shared = open_runtime(ctx.runtime, timeout=ctx.timeout)
    except (RuntimeUnavailable, ValueError) as exc:
        lines.append(f"corpus equivalence: inconclusive: {exc}")
        return VIOLATION if status == VIOLATION else INCONCLUSIVE

    def fresh():
        shared.call("reset", {})
        return shared

    try:
        run = equivalence(log_paths(ctx.corpus), fresh)
    except RuntimeUnavailable as exc:
        lines.append(f"corpus equivalence ({ctx.runtime}): inconclusive: {str(exc).splitlines()[0]}")
        cases.append(TestCase(name=f"corpus equivalence ({ctx.runtime})", classname="surfacecheck.runtime",
                              error=Outcome(message=str(exc).splitlines()[0], type=f"runtime-{exc.kind}", text=str(exc))))
        return VIOLATION if status == VIOLATION else INCONCLUSIVE
    finally:
        shared.close()
    explained = [d for d in run["divergent"] if _tools_template_divergence(d, ctx.corpus)]
    run["divergent"] = [d for d in run["divergent"] if d not in explained]
    run["explained"] = [{"source": d["source"], "log": d["log"], "why": EXPLAINED_D1} for d in explained]
    if explained:
        lines.append(f"corpus equivalence ({ctx.runtime}): {len(explained)} logs differ only as runtimes/dsh/"
                     f"DIVERGENCES.md D1 explains (measure() over the corpus's \"{{{{tools}}}}\" template)")
    summary["corpus_equivalence"] = {**run, "divergent": run["divergent"][:MAX_SHOWN],
                                     "explained": run["explained"][:MAX_SHOWN], "explained_count": len(explained)}
    for d in run["divergent"]:
        cases.append(TestCase(name=f"{d['source']}/{d['log']}", classname="surfacecheck.runtime.corpus",
                              failure=Outcome(message=f"seq {d.get('seq')} {d['op']}: {ctx.runtime} differs from the model",
                                              type="runtime-divergence", text=repr(d)[:2000])))
    cases.append(TestCase(name=f"{run['logs'] - len(run['divergent'])} logs equivalent to the model",
                          classname="surfacecheck.runtime.corpus", time=run["seconds"]))
    lines.append(f"corpus equivalence ({ctx.runtime}): {run['logs']} logs appended event by event, "
                 f"{len(run['divergent'])} divergent from the model ({run['seconds']:.2f} s)")
    for d in run["divergent"][:MAX_SHOWN]:
        lines.append(f"  {d['source']}/{d['log']} seq {d.get('seq')} {d['op']}: expected {str(d.get('expected'))[:200]}, "
                     f"observed {str(d.get('observed'))[:200]}")
    return VIOLATION if run["divergent"] else status


EXPLAINED_D1 = ("D1: dsh's headerEquals calls tools.every on the corpus's \"{{tools}}\" template string and "
                "throws, so its measure() refuses; the model reads the template as the tool list it stands for")


def _tools_template_divergence(d: dict, corpus) -> bool:
    """D1 (runtimes/dsh/DIVERGENCES.md): the only difference is ``measure`` refused by dsh with an unreadable
    shape and no seq (headerEquals over the corpus's ``"{{tools}}"`` placeholder), where the model measured."""
    observed, expected = d.get("observed"), d.get("expected")
    return (d.get("op") == "measure" and isinstance(observed, dict) and isinstance(observed.get("error"), dict)
            and observed["error"].get("rule") == "message-shape" and isinstance(expected, dict)
            and "error" not in expected and _has_tools_template(corpus, d))


def _has_tools_template(corpus, d: dict) -> bool:
    path = None if corpus is None else corpus / d["source"] / d["log"]
    try:
        return path is not None and '"tools":"{{tools}}"' in path.read_text(encoding="utf-8")
    except OSError:
        return False
