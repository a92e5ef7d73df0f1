"""Pristine recordings: each unit's requests with the unmutated runtime's answers, so that a mutant answering every
request the same, digest for digest, gets the unit's unmutated verdict in one round trip.

Why (the budget): a survivor runs every unit that reaches it, and most of a unit's time is not dsh's
work but the suite's — the model in lockstep, the monitors, one pipe round trip per request. A unit is a
deterministic function of the answers it gets (its requests are fixed data or follow from earlier answers; every
unit starts with ``reset``), so equal answers give the equal verdict. The shortcut never decides a kill: the first
answer that differs sends the unit down its real path, which gives the verdict it always gave.

A recording is kept only when it is sound: the unit passed on the unmutated runtime, began with ``reset``, saw no
protocol error, and replaying its requests gave back the answers it saw.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from .units import FAILED, PASSED, Outcome, Shared, Unit, _guarded

TIMING_KEYS = frozenset({"elapsed", "time_ns"})
"""Keys whose values are the clock's, not the runtime's behaviour: left out of comparisons and digests (the
adapter's replay drops them too, ``runtimes/dsh/adapter/stryker.mjs``)."""


def without_timing(value):
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


class Recorder:
    """The runtime as a unit sees it, keeping every request and answer (a ``replay`` counts as its requests)."""

    def __init__(self, inner):
        self.inner, self.name = inner, getattr(inner, "name", "recorded")
        self.calls: list[list] = []
        self.answers: list = []
        self.clean = True  # False once a request raised or a replay stopped at an error

    def hello(self):
        return self.inner.hello()

    def call(self, op: str, args: dict):
        try:
            answer = self.inner.call(op, args)
        except Exception:
            self.clean = False
            raise
        if op == "replay":
            inner = answer.get("answers") or []
            self.clean &= len(inner) == len(args.get("calls") or []) and all("error" not in a for a in inner)
            for (sub_op, sub_args), sub in zip(args.get("calls") or [], inner):
                self.calls.append([sub_op, json.loads(json.dumps(sub_args))])
                self.answers.append(sub.get("result"))
        else:
            self.calls.append([op, json.loads(json.dumps(args))])
            self.answers.append(answer)
        return answer

    def close(self) -> None:
        """The shared runtime outlives the unit: nothing to close."""


@dataclass(frozen=True)
class Recording:
    """One unit's requests and the digests of the unmutated answers (``replay {digest: true}``)."""

    calls: list
    digests: tuple[str, ...]


def record(units: list[Unit], shared: Shared) -> tuple[dict[str, Recording], dict[str, str]]:
    """Run every unit on ``shared``'s runtime — the unmutated one — and keep the sound recordings; the units left
    without one, with the reason."""
    recordings: dict[str, Recording] = {}
    skipped: dict[str, str] = {}
    for unit in units:
        recorder = Recorder(shared.runtime())
        shared.recorder = recorder
        try:
            outcome = unit.run(shared)
        finally:
            shared.recorder = None
        if outcome.status != PASSED:
            skipped[unit.id] = f"{outcome.status} on the unmutated runtime: {outcome.message[:200]}"
            continue
        if not recorder.clean or not recorder.calls or recorder.calls[0][0] != "reset":
            skipped[unit.id] = "a protocol error, no request, or a first request other than reset"
            continue
        runtime = shared.runtime()
        again = runtime.call("replay", {"calls": recorder.calls})["answers"]
        differs = next((i for i, (a, b) in enumerate(zip(again, recorder.answers))
                        if "error" in a or without_timing(a["result"]) != without_timing(b)), None)
        if len(again) != len(recorder.answers) or differs is not None:
            # the answers depend on more than the requests: no shortcut for this unit
            skipped[unit.id] = f"replaying its requests gave other answers (request {differs}: " \
                               f"{recorder.calls[differs][0] if differs is not None else 'count'})"
            continue
        digests = runtime.call("replay", {"calls": recorder.calls, "digest": True})["answers"]
        if len(digests) == len(recorder.calls) and all("digest" in d for d in digests):
            recordings[unit.id] = Recording(recorder.calls, tuple(d["digest"] for d in digests))
        else:
            skipped[unit.id] = "the digest replay stopped early"
    return recordings, skipped


def shortcut(recording: Recording, shared: Shared) -> Outcome | None:
    """The unit's unmutated verdict (passed) when the runtime answers every recorded request with the unmutated
    digest; ``None`` when an answer differs (run the unit). A runtime that hangs or dies is inconclusive, as the
    unit itself would find it."""
    def body() -> Outcome:
        answers = shared.runtime().call("replay", {"calls": recording.calls, "digest": True})["answers"]
        same = len(answers) == len(recording.digests) and \
            all(a.get("digest") == d for a, d in zip(answers, recording.digests))
        return Outcome(PASSED) if same else Outcome(FAILED, "an answer differs from the unmutated one")
    outcome = _guarded(body)  # timed; a hung or dead runtime is inconclusive
    return None if outcome.status == FAILED else outcome
