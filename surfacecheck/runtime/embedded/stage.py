"""The ``embedded`` stage of ``surfacecheck check``: the embedded runtime equals the model on every log.

Every scenario log (``scenarios/logs``) and corpus log (``dsh-sessions``, ``dsh-generated``) is
appended event by event to the embedded runtime and to the reference model (``ModelRuntime``); each
append's result must be equal, and so must the full state (surface, cuts, measure, projection) at
every replacement, every refusal and at the end (and, at the end, the persistence views ``closers`` and
``rows`` where the runtime serves them). This is the issue's equivalence claim checked on
real logs (spec 1.3-5); the Hypothesis machines check it on generated ones.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterable

from surfacecheck.core.cases import Outcome, TestCase

from ...core.stage import OK, VIOLATION, CheckContext, StageResult
from ...core.protocol import RuntimeUnavailable

STATE_OPS = ("surface", "cuts", "measure", "projection")
STATE_CALLS = tuple((op, {}) for op in STATE_OPS) + (("projection", {"usage": True, "breakdown": True,
                                                                     "pressure": True}),)
"""The state compared at every replacement, refusal and at the end, with the cumulative token usage, the context
breakdown and the context pressure (spec 5.2; added when ``surfacecheck mutate`` showed no comparison read them)."""
END_CALLS = (("closers", {}), ("rows", {}))
"""Compared once, at the end of each log (before the end state), where the runtime serves them (``core.protocol.OPTIONAL_OPS``): the
crash-repair closers a reopen would append (spec 1.6) and the packed storage records (spec 1.7). Added when
``surfacecheck mutate`` showed dsh's `repair.js` and `chunk-rows.js` reached by no unit."""
SHAPE_ERRORS = (KeyError, TypeError, IndexError, AttributeError)


def not_served(answer: Any) -> bool:
    """An optional op the runtime does not serve (``unknown-op``): nothing to compare."""
    return isinstance(answer, dict) and (answer.get("protocol_error") or {}).get("type") == "unknown-op"


def _optional_answer(runtime, op: str, args: dict) -> Any:
    from ...core.protocol import ProtocolError

    try:
        return _answer(runtime, op, args)
    except ProtocolError as exc:
        return {"protocol_error": exc.to_json()}


def _answer(runtime, op: str, args: dict) -> Any:
    """The result; an unreported shape error is shown as the ``message-shape`` rule both must name."""
    try:
        result = runtime.call(op, args)
    except SHAPE_ERRORS:
        return {"error": {"rule": "message-shape"}}
    error = result.get("error") if isinstance(result, dict) else None
    if isinstance(error, dict) and error.get("rule") == "message-shape":
        return {**result, "error": {"rule": "message-shape"}}  # the reference raises some of these unreported
    return result


def compare_log(path: Path, factory=None) -> dict | None:
    """The first divergence replaying ``path`` through the model and ``factory()`` (default: the
    embedded runtime), or None."""
    from surfacecheck.model.event import ABSENT
    from surfacecheck.model.jsonl import read_log

    from ..model_runtime import ModelRuntime
    from .runtime import EmbeddedRuntime

    model, embedded = ModelRuntime(), (factory or EmbeddedRuntime)()
    for event in read_log(path).events:
        wire = {k: v for k, v in event.to_json().items() if v is not ABSENT and k not in ("seq", "ignorable")}
        expected, observed = _answer(model, "append", {"event": wire}), _answer(embedded, "append", {"event": wire})
        if observed != expected:
            return {"seq": event.seq, "op": "append", "expected": expected, "observed": observed}
        if isinstance(event.surface_op, dict) or "error" in expected:
            for op, args in STATE_CALLS:
                expected, observed = _answer(model, op, args), _answer(embedded, op, args)
                if observed != expected:
                    return {"seq": event.seq, "op": op, "expected": expected, "observed": observed}
    for op, args in END_CALLS:  # first: they do not read the folds an explained divergence (D1) stops at
        expected, observed = _answer(model, op, args), _optional_answer(embedded, op, args)
        if observed != expected and not not_served(observed):
            return {"seq": "end", "op": op, "expected": expected, "observed": observed}
    for op, args in STATE_CALLS:
        expected, observed = _answer(model, op, args), _answer(embedded, op, args)
        if observed != expected:
            return {"seq": "end", "op": op, "expected": expected, "observed": observed}
    return None


def log_paths(corpus: Path | None) -> list[tuple[str, Path]]:
    from surfacecheck import scenarios

    found = [("scenarios", path) for path in sorted(Path(scenarios.LOGS_DIR).glob("*.jsonl"))]
    if corpus is not None:
        for source in ("dsh-sessions", "dsh-generated"):
            found += [(source, path) for path in sorted((corpus / source).glob("*.jsonl"))]
    return found


def equivalence(paths: Iterable[tuple[str, Path]], factory=None) -> dict[str, Any]:
    started = time.perf_counter()
    logs, divergent = 0, []
    for source, path in paths:
        logs += 1
        try:
            divergence = compare_log(path, factory)
        except RuntimeUnavailable:
            raise  # the runtime itself failed: inconclusive, decided by the caller
        except Exception as exc:  # noqa: BLE001 - an unreadable log is the logs stage's business
            divergence = None if type(exc).__name__ == "LogFormatError" else {"op": "crash", "error": repr(exc)}
        if divergence is not None:
            divergent.append({"source": source, "log": path.name, **divergence})
    return {"logs": logs, "divergent": divergent, "seconds": round(time.perf_counter() - started, 3)}


def stage(ctx: CheckContext, factory=None) -> StageResult:
    """``surfacecheck check`` stage ``embedded``: log-by-log equivalence of the embedded runtime and the model."""
    run = equivalence(log_paths(ctx.corpus), factory)
    cases = [TestCase(name=f"{d['source']}/{d['log']}", classname="surfacecheck.embedded",
                      failure=Outcome(message=f"seq {d.get('seq')} {d['op']}: embedded differs from the model",
                                      type="embedded-divergence", text=repr(d)[:2000])) for d in run["divergent"]]
    cases.append(TestCase(name=f"{run['logs'] - len(run['divergent'])} logs equivalent",
                          classname="surfacecheck.embedded", time=run["seconds"]))
    status = VIOLATION if run["divergent"] else OK
    text = (f"embedded: {run['logs']} logs replayed through the embedded runtime and the model, "
            f"{len(run['divergent'])} divergent ({run['seconds']:.2f} s)\n")
    return StageResult("embedded", status, {**run, "divergent": run["divergent"][:5]}, text, cases)
