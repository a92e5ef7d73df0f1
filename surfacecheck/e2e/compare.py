"""Compare the model's prediction with what the real runtime decided.

At every decision point of the run (see :mod:`.predict`) the runtime's compaction block and the
model's are reduced to *actions* — a prune pair (spec 6: shadowed seq, shadowedTokenCount, the
pruned replacement's price) or a summary bracket (spec 8: range, shadowed seqs, shadowedTokenCount,
checkpoint price, end status; equal replacements give the equal generation, spec 2.1) — plus the overflow
retry (spec 10.2) and `/compact`'s result (spec 11.1). Each difference names its kind, the first
runtime seq where the two part, what the model expected and what the runtime did.

Kinds: pressure-decision / overflow-compaction / manual-compaction (a different set of actions),
range, pruned-pairs, shadow-price, replacement-price, end-status, end-error (the close's message),
event (same actions, other event content), overflow-retry, manual-result, stray-compaction (compaction at no decision
point), model-refused (the model's session rules refused a logged event).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from surfacecheck.model.event import Event

from .actions import actions, comparable
from .predict import Decision, Point, Prediction, decision_points, run_events

SCRIPTED_FAILURE = "summarizer request failed (scripted)"  # model.summarizer's text for an HTTP failure
DECISION_KIND = {"pre-step": "pressure-decision", "overflow": "overflow-compaction", "manual": "manual-compaction"}


@dataclass(frozen=True)
class Difference:
    """One disagreement: `seq` is the first runtime seq where model and runtime part."""

    kind: str
    seq: int
    expected: Any
    observed: Any
    message: str

    def to_json(self) -> dict:
        return asdict(self)


def _brief(acts: list[dict]) -> list[str]:
    def one(a: dict) -> str:
        rng = "?" if a["range"] is None else f"{a['range'][0]}-{a['range'][1]}"
        return f"{a['kind']} {rng} ({a['shadowedTokenCount']} tok, {a['status']})"
    return [one(a) for a in acts] or ["nothing"]


FIELDS = (("range", "range"), ("shadowedSeqs", "pruned-pairs"), ("shadowedTokenCount", "shadow-price"),
          ("replacementTokens", "replacement-price"))


def _compare_point(point: Point, decision: Decision) -> list[Difference]:
    where = point.describe()
    ours, theirs = actions(decision.events), actions(point.events)
    end_seq = point.seq + len(point.events)
    if [a["kind"] for a in ours] != [a["kind"] for a in theirs]:
        k = next((n for n, (a, b) in enumerate(zip(ours, theirs)) if a["kind"] != b["kind"]), min(len(ours), len(theirs)))
        seq = theirs[k]["seq"] if k < len(theirs) else end_seq
        return [Difference(DECISION_KIND[point.kind], seq, _brief(ours), _brief(theirs),
                           f"{where}: the model {'/'.join(_brief(ours))}, the runtime {'/'.join(_brief(theirs))}"
                           + (f" (model: {decision.error})" if decision.error else ""))]
    for a, b in zip(ours, theirs):
        if a["status"] != b["status"]:  # the root cause: the rest of the bracket follows from it
            return [Difference("end-status", b["at"]["status"], a["status"], b["status"],
                               f"{where}: {b['kind']} at seq {b['seq']}: the model's bracket ends {a['status']}, "
                               f"the runtime's {b['status']}" + (f" (model: {decision.error})" if decision.error else ""))]
        found = []
        for key, kind in FIELDS:
            if a[key] == b[key]:
                continue
            if kind == "pruned-pairs" and a["kind"] == "summary":
                kind = "range"
            if any(d.kind == kind for d in found):
                continue
            at = b["at"].get(key, b["at"].get("range", b["seq"]))
            found.append(Difference(kind, at, a[key], b[key],
                                    f"{where}: {b['kind']} at seq {b['seq']}: {key} expected {a[key]}, observed {b[key]}"))
        if found:
            return found
    mine, logged = [comparable(e) for e in decision.events], [comparable(e) for e in point.events]
    if point.kind == "manual":  # command/done is judged as the command's result below
        mine, logged = [c for c in mine if c[0] != "command/done"], [c for c in logged if c[0] != "command/done"]
    if mine != logged:
        k = next((n for n, (x, y) in enumerate(zip(mine, logged)) if x != y), min(len(mine), len(logged)))
        seq = point.events[k].seq if k < len(point.events) else end_seq
        exp = mine[k] if k < len(mine) else None
        obs = logged[k] if k < len(logged) else None
        return [Difference("event", seq, _jsonable(exp), _jsonable(obs),
                           f"{where}: event {k + 1} of the block differs (ids and times aside)")]
    out = _end_errors(where, decision.events, point.events)
    if point.kind == "overflow" and decision.retry != point.retried:
        out.append(Difference("overflow-retry", end_seq, decision.retry, point.retried,
                              f"{where}: the model {'retries' if decision.retry else 'does not retry'} the same step "
                              f"(spec 10.2), the runtime {'retried' if point.retried else 'did not retry'}"))
    if point.kind == "manual":
        done = next((e for e in reversed(point.events) if e.type == "command/done"), None)
        logged_result = None if done is None else [done.data.get("kind"), done.data.get("text")]
        expected = None if decision.result is None else list(decision.result)
        if expected != logged_result:
            out.append(Difference("manual-result", end_seq - 1 if done is not None else end_seq, expected,
                                  logged_result, f"{where}: /compact result expected {expected}, observed {logged_result}"))
    return out


def _end_errors(where: str, mine: tuple[Event, ...], logged: tuple[Event, ...]) -> list[Difference]:
    """The error a failed bracket closes with (spec 8.3, 8.5 messages); an HTTP failure's text is the server's."""
    out = []
    for a, b in zip(mine, logged):
        if a.type != "compaction/end" or b.type != "compaction/end":
            continue
        expected, observed = a.data.get("error"), b.data.get("error")
        if expected != observed and expected != SCRIPTED_FAILURE:
            out.append(Difference("end-error", b.seq, expected, observed,
                                  f"{where}: compaction/end at seq {b.seq}: error expected {expected!r}, "
                                  f"observed {observed!r}"))
    return out


def _jsonable(value: Any) -> Any:
    if value is None:
        return None
    kind, seq, op, sources, data = value
    out = {"type": kind, "seq": seq, "data": data}
    if op is not None and not (hasattr(op, "__class__") and op.__class__.__name__ == "_Absent"):
        out["surfaceOp"] = op
    if isinstance(sources, (list, tuple)):
        out["sourceEventSeqs"] = list(sources)
    return out


def compare(prediction: Prediction, run: Any) -> list[Difference]:
    """Every difference between the model's decisions and the runtime's, ordered by seq."""
    events = run_events(run)
    by_key = {d.point.key: d for d in prediction.decisions}
    out: list[Difference] = []
    for problem in prediction.problems:
        seq = int(problem.split(":", 1)[0].split()[-1]) if problem.startswith("seq ") else 0
        out.append(Difference("model-refused", seq, "a log the model's session accepts", problem, problem))
    for _, point in decision_points(events):
        if point.kind == "feed":
            continue
        if point.kind == "stray":
            out.append(Difference("stray-compaction", point.seq, [], _brief(actions(point.events)),
                                  f"{point.describe()}: the runtime compacted where no policy decides "
                                  "(not before a step/start, after an overflow, or inside /compact)"))
            continue
        decision = by_key.get(point.key)
        if decision is None:
            if prediction.problems:
                continue  # the model stopped at the refused event
            out.append(Difference(DECISION_KIND[point.kind], point.seq, None, _brief(actions(point.events)),
                                  f"{point.describe()}: no prediction for this point"))
            continue
        out.extend(_compare_point(point, decision))
    return sorted(out, key=lambda d: d.seq)
