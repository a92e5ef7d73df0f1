"""The ``bench`` stage for a conversation-level runtime: what its own trigger check costs per appended message.

The runtime times its trigger check in its own process (the ``bench`` request of ``docs/conversation-protocol.md``:
after one appended message, the count and the decision to compact, on histories of 10^2..10^4 messages). Beside it,
in one run, the suite times two baselines on the same sizes: an incremental meter (a running total: constant per
append) and a full neutral recount (linear) — the variant that loses. The growth of each series is the slope of
log(cost) against log(size): about 0 is constant, about 1 linear. The baselines must come out constant and linear
or the timing itself is not trustworthy (inconclusive); the runtime's growth is reported, never judged: it is a
cost, not a broken promise.
"""
from __future__ import annotations

import math
import time

from ..core.cases import Outcome, TestCase
from ..core.protocol import ProtocolError, RuntimeUnavailable
from ..core.stage import INCONCLUSIVE, OK, SKIPPED, CheckContext, StageResult
from ..runtime.conversation.peer import message_tokens, tool_result
from ..runtime.registry import open_spec

SIZES = (10**2, 10**3, 10**4)
REPEATS = 200
CLASSNAME = "surfacecheck.contract.bench"


def exponent(points: list[tuple[int, float]]) -> float:
    """The least-squares slope of log(seconds) against log(size)."""
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(max(s, 1e-12)) for _, s in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0


def growth(points: list[tuple[int, float]]) -> str:
    """``constant`` (slope < 0.35), ``linear`` (0.65..1.4), ``superlinear`` above, ``sublinear`` between."""
    k = exponent(points)
    return ("constant" if k < 0.35 else "sublinear" if k < 0.65 else "linear" if k <= 1.4 else "superlinear")


def _history(n: int) -> list[dict]:
    out = []
    for i in range(n):
        role = ("user", "assistant", "tool")[i % 3]
        message = {"role": role, "text": tool_result({"size": 40, "tag": f"m{i}"})}
        if role == "tool":
            message["call_id"] = f"c{i}"
        out.append(message)
    return out


def _time_baseline(kind: str, n: int, repeats: int) -> float:
    """Seconds per append of a suite-side meter: ``incremental`` adds one message's size to a running total,
    ``recount`` counts the whole history again."""
    history = _history(n)
    extra = {"role": "user", "text": "one more message"}
    total = sum(message_tokens(m) for m in history)
    started = time.perf_counter()
    for _ in range(repeats):
        if kind == "incremental":
            total += message_tokens(extra)
        else:
            total = sum(message_tokens(m) for m in history) + message_tokens(extra)
    return (time.perf_counter() - started) / repeats


def baselines(sizes=SIZES, repeats: int = REPEATS) -> dict[str, list[tuple[int, float]]]:
    return {kind: [(n, _time_baseline(kind, n, max(3, repeats * SIZES[0] // n if kind == "recount" else repeats)))
                   for n in sizes] for kind in ("incremental", "recount")}


def stage(ctx: CheckContext) -> StageResult:
    started = time.perf_counter()
    try:
        runtime = open_spec(ctx.runtime, max(ctx.timeout, 120.0))
    except RuntimeUnavailable as exc:
        return _inconclusive(f"the runtime could not start: {exc}", started)
    try:
        answer = runtime.call("bench", {"sizes": list(SIZES), "repeats": REPEATS})
    except ProtocolError as exc:
        if exc.type in ("unknown-op", "unsupported"):
            why = f"{ctx.runtime} does not time its trigger check (the bench request: {exc.message})"
            return StageResult("bench", SKIPPED, {"skipped": why}, why + "\n", [], time.perf_counter() - started)
        return _inconclusive(f"bench request refused: {exc.message}", started)
    except RuntimeUnavailable as exc:
        return _inconclusive(f"the runtime failed during the bench request: {exc}", started)
    finally:
        runtime.close()
    try:
        points = [(int(p["messages"]), float(p["seconds_per_append"])) for p in answer["points"]]
    except (KeyError, TypeError, ValueError):
        return _inconclusive(f"the bench answer is not {{points: [{{messages, seconds_per_append}}]}}: {answer!r:.200}",
                             started)
    base = baselines()
    series = {ctx.runtime: points, **base}
    found = {name: growth(s) for name, s in series.items()}
    summary = {"subject": ctx.runtime, "what": answer.get("what", "the runtime's trigger check after one append"),
               "timing_ns": {str(n): round(s * 1e9) for n, s in points},
               "growth": found, "exponent": {name: round(exponent(s), 2) for name, s in series.items()},
               "baselines_ns": {name: {str(n): round(s * 1e9) for n, s in pts} for name, pts in base.items()}}
    lines = [f"{name}: {found[name]} (slope {summary['exponent'][name]}): "
             + ", ".join(f"{s * 1e6:.2f} µs at {n}" for n, s in pts) for name, pts in series.items()]
    cases = [TestCase(name=f"trigger-cost {ctx.runtime}", classname=CLASSNAME,
                      properties={"growth": found[ctx.runtime]})]
    sane = found["incremental"] == "constant" and found["recount"] == "linear"
    if not sane:
        why = (f"the baselines came out {found['incremental']} and {found['recount']} (expected constant and "
               f"linear): the timing is not trustworthy on this machine now")
        cases.append(TestCase(name="baselines", classname=CLASSNAME, error=Outcome(message=why, type="bench-harness")))
        summary["error"] = why
        return StageResult("bench", INCONCLUSIVE, summary, "\n".join(lines + [why]) + "\n", cases,
                           time.perf_counter() - started)
    return StageResult("bench", OK, summary, "\n".join(lines) + "\n", cases, time.perf_counter() - started)


def _inconclusive(why: str, started: float) -> StageResult:
    return StageResult("bench", INCONCLUSIVE, {"error": why}, why + "\n",
                       [TestCase(name="bench", classname=CLASSNAME, error=Outcome(message=why, type="runtime"))],
                       time.perf_counter() - started)
