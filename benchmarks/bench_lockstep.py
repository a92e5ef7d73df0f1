"""Lockstep throughput at level ``log`` in steps/s (issue 4, "Must show").

One fixed, realistic step list (turns with tool rounds, prompts, prune and summary replacements
priced with their exact shadow prices) is replayed through :class:`~surfacecheck.verify.lockstep.Lockstep`
with the standard invariants, the way ``verify`` drives a runtime: after every step surface,
cuts, measure and projection are compared with the model. Variants:

* ``embedded`` — the in-process embedded runtime in lockstep with the model (the default of verify);
* ``model-only`` — the model alone under the monitors (no lockstep): the floor of the suite's own cost;
* ``cmd-embedded`` — the embedded runtime over the protocol (``python -m surfacecheck.serve embedded``):
  the variant that loses, paying a pipe round trip per request.

And the lockstep inside ``verify`` (issue 4 part 2): level ``log``'s Hypothesis machine on the embedded runtime,
the figure ``verify --json`` prints as ``steps_per_second``, as a ratio against the comparison path before
(``run_level(fast=False)``: every answer normalised and walked, every oracle question asked again), the variant
that loses; and (issue 19 part 2) against Hypothesis's own rule strategy (``verify-hypothesis-rules``: a rule
index, a feature flag per rule looked at, retries) instead of one draw among the valid rules, which loses too.
And (stop 31) against stop 30's draws and collector (``verify-stop-30``: each rule argument in a span of its own,
Python's default collector thresholds), which loses too. And (stop 32) against stop 31's cost per step
(``verify-stop-31``, :func:`as_at_stop_31`: texts from a seeded ``random.Random``, frozen model values made by the
dataclass's own ``__init__``, prices and header comparisons made afresh, every watcher deriving the surface itself,
compaction's watchers on a log run), which loses too.
``SURFACECHECK_BENCH_PROFILE`` picks the verify profile (default ``ci``).

Run ``python -m pytest benchmarks/bench_lockstep.py`` (pytest-benchmark; steps/s in ``extra_info``)
or ``python benchmarks/bench_lockstep.py`` for a plain table.
"""
from __future__ import annotations

import os
import random
import sys
import time
from contextlib import contextmanager, nullcontext

import pytest

from surfacecheck.model import meter, projection
from surfacecheck.model.event import Event
from surfacecheck.model.frozen import QUICK
from surfacecheck.properties.monitors import lookup
from surfacecheck.properties.stateful import words as stateful_words
from surfacecheck.properties.stateful import events as ev
from surfacecheck.properties.stateful.base import LockstepMachine
from surfacecheck.properties.stateful.selection import OneDrawRules
from surfacecheck.runtime import model_runtime
from surfacecheck.runtime.model_runtime import ModelRuntime
from surfacecheck.runtime.select import open_runtime
from surfacecheck.trace import Step
from surfacecheck.verify.lockstep import Lockstep, StepQuery
from surfacecheck.verify import runner
from surfacecheck.verify.runner import CI_SEED, monitors_for, run_level

ROUNDS = 25
VARIANTS = {"embedded": ("embedded", True), "model-only": ("model", False),
            "cmd-embedded": ("cmd:python -m surfacecheck.serve embedded", True)}
VERIFY_VARIANTS = {"verify": (True, True, True, True), "verify-old-path": (False, True, True, True),
                   "verify-hypothesis-rules": (True, False, True, True), "verify-stop-30": (True, True, False, False),
                   "verify-stop-31": (True, True, True, False)}
"""(``fast``, ``one_draw``, ``stop_31``, ``stop_32``): the verify lockstep's comparison path, the shortcut and the
reused answers or the old one (loses); the rule choice, one draw (:class:`~properties.stateful.selection.OneDrawRules`)
or Hypothesis's own rule strategy (loses); issue 19's stop-31 switches, the arguments drawn inside the rule's span and
the collector's thresholds while a level runs, or each argument in a span of its own and Python's default thresholds,
as at stop 30 (loses); and stop 32's, or stop 31's cost per step (:func:`as_at_stop_31`, loses)."""
VERIFY_PROFILE = os.environ.get("SURFACECHECK_BENCH_PROFILE", "ci")


def workload(rounds: int = ROUNDS) -> list[Step]:
    """The step list, built against the model so seqs and shadow prices are exact."""
    model = open_runtime("model")
    steps: list[Step] = []
    time_ms = [1_700_000_000_000]

    def add(event: dict) -> int:
        time_ms[0] += 1
        event = {**event, "time": time_ms[0]}
        steps.append(Step("append", {"event": event}))
        return model.call("append", {"event": event})["seq"]

    steps.append(Step("reset", {}))
    model.call("reset", {})
    results: list[tuple[int, dict]] = []
    add(ev.header())
    for turn in range(1, rounds + 1):
        add({"type": "turn/start", "data": {"turn": turn}})
        add(ev.user_message("please read the files " * 8, f"u{turn}"))
        add({"type": "step/start", "data": {"turn": turn, "step": 1}})
        calls = [f"c{turn}-{k}" for k in range(2)]
        add(ev.assistant_message(turn, 1, f"a{turn}", "reading", calls, {"inputTokens": 900, "outputTokens": 20}))
        for call in calls:
            call_seq = add(ev.tool_call(turn, 1, call))
            result = ev.tool_result(turn, 1, f"r{call}", call, "line of output " * 30, call_seq)
            results.append((add(result), result))
        add({"type": "step/end", "data": {"turn": turn, "step": 1}})
        add({"type": "turn/end", "data": {"turn": turn, "reason": {"kind": "completed"}}})
        if turn % 3 == 0:  # prune the oldest result still on the surface, priced exactly
            nodes = model.call("surface", {})["nodes"]
            prices = model.call("measure", {})["prices"]
            seq, original = next((s, e) for s, e in results if s in nodes)
            add(ev.metering("compaction/prune", seq, seq, [seq], prices[nodes.index(seq)]))
            results.append((add(ev.rewritten_result(original, "pruned", seq)), original))
        if turn % 8 == 0:  # summarize the balanced head (everything before this turn's prompt)
            nodes = model.call("surface", {})["nodes"]
            prices = model.call("measure", {})["prices"]
            end = nodes.index(next(s for s in nodes if s > len(steps) - 12)) - 1
            if end >= 1:
                summary = add(ev.metering("compaction/summary", nodes[0], nodes[end], nodes[:end + 1],
                                          sum(prices[:end + 1]), f"c{turn}"))
                add(ev.checkpoint(f"k{turn}", "so far: files read", nodes[0], nodes[end],
                                  [summary] + nodes[:end + 1], f"c{turn}"))
    return steps


def run_lockstep(spec: str, lockstep_with_model: bool, steps: list[Step]) -> float:
    """Replay ``steps`` once; returns the seconds taken (runtime opened beforehand, not timed)."""
    runtime = open_runtime(spec)
    reference = open_runtime("model") if lockstep_with_model else None
    try:
        lock = Lockstep(runtime, reference, monitors=[lookup(n).factory() for n in monitors_for("log")])
        began = time.perf_counter()
        for step in steps:
            _result, violation = lock.run(step)
            assert violation is None, violation
        return time.perf_counter() - began
    finally:
        runtime.close()


@pytest.fixture(scope="module")
def steps() -> list[Step]:
    return workload()


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_lockstep_throughput(benchmark, steps, variant):
    spec, with_model = VARIANTS[variant]
    seconds = benchmark.pedantic(run_lockstep, args=(spec, with_model, steps), rounds=3, iterations=1)
    benchmark.extra_info.update(steps=len(steps), steps_per_second=round(len(steps) / seconds, 1))


def _random_words(count: int, seed: int) -> str:
    """Stop 31's texts: ``count`` words picked by a ``random.Random`` seeded with ``seed`` (a third as fast)."""
    return " ".join(random.Random(seed).choices(stateful_words.WORDS, k=count))


def _every_standard_monitor(level: str) -> tuple[str, ...]:
    """Stop 31's monitors: the standard ones on every level, compaction's watchers included on a log run."""
    if level != "log":
        return monitors_for(level)
    return tuple(name for name in monitors_for("compaction") if name != "bracket-order")


def _priced_afresh(event) -> int:
    """Stop 31's ``node_price``: every fold prices the event again."""
    message = meter.derive_event_message(event)
    return 0 if message is None else meter.estimate_message(message)


def _compared_afresh(anchor, header) -> bool:
    """Stop 31's anchor check: `optionalHeaderEquals` walked on every measure."""
    return meter._optional_header_equals(anchor.header, header)


def _refreshed_afresh(self):
    """Stop 31's ``current_cuts``: a corrupt surface refolded on every query."""
    self.cuts = model_runtime.refresh_cuts(self.cuts, self.session)
    return self.cuts


@contextmanager
def as_at_stop_31():
    """Stop 31's cost per step: seeded-``Random`` texts made afresh, the dataclasses' own ``__init__`` for the model's
    frozen values, an event's predicates worked out on every read, every fold pricing the event and every measure
    comparing the anchor's header afresh, a corrupt surface refolded per query, no view shared by the watchers of a
    step (each asks its three queries), every standard monitor on a log run."""
    inits = [(cls, cls.__init__) for cls in QUICK]
    predicates = {name: Event.__dict__[name] for name in ("is_surface_type", "is_append", "replace")}
    saved = (stateful_words.words, runner.monitors_for, StepQuery.once, meter.node_price, projection.node_price,
             meter._anchor_matches, ModelRuntime.current_cuts)
    for cls in QUICK:
        cls.__init__ = cls._dataclass_init
    for name, once in predicates.items():
        setattr(Event, name, property(once.derive))
    stateful_words.words, runner.monitors_for = _random_words, _every_standard_monitor
    meter.node_price = projection.node_price = _priced_afresh
    meter._anchor_matches, ModelRuntime.current_cuts = _compared_afresh, _refreshed_afresh
    del StepQuery.once
    try:
        yield
    finally:
        for cls, init in inits:
            cls.__init__ = init
        for name, once in predicates.items():
            setattr(Event, name, once)
        (stateful_words.words, runner.monitors_for, StepQuery.once, meter.node_price, projection.node_price,
         meter._anchor_matches, ModelRuntime.current_cuts) = saved


def run_verify(fast: bool, one_draw: bool = True, stop_31: bool = True, stop_32: bool = True,
               profile: str = VERIFY_PROFILE) -> tuple[int, float]:
    """One level-``log`` verify run on the embedded runtime (seed ``CI_SEED``, unshrunk): (steps, seconds).
    ``one_draw=False``: Hypothesis's own rule strategy; ``stop_31=False``: a span per argument and the default
    collector; ``stop_32=False``: :func:`as_at_stop_31` (their examples differ, so compare seconds per step)."""
    runtime, reference = open_runtime("embedded"), open_runtime("model")
    saved = LockstepMachine.rule_selection, OneDrawRules.flat_arguments, runner.GC_THRESHOLD
    if not one_draw:
        LockstepMachine.rule_selection = None
    if not stop_31:
        OneDrawRules.flat_arguments, runner.GC_THRESHOLD = False, None
    try:
        with as_at_stop_31() if not stop_32 else nullcontext():
            result = run_level(runtime, reference, "log", profile, CI_SEED, shrink=False, fast=fast)
    finally:
        LockstepMachine.rule_selection, OneDrawRules.flat_arguments, runner.GC_THRESHOLD = saved
        runtime.close()
    assert result.status == "ok", result.to_json()
    return result.steps, result.seconds


@pytest.mark.parametrize("variant", sorted(VERIFY_VARIANTS))
def test_verify_lockstep_throughput(benchmark, variant):
    done: list[tuple[int, float]] = []
    benchmark.pedantic(lambda: done.append(run_verify(*VERIFY_VARIANTS[variant])), rounds=2, iterations=1)
    steps, seconds = min(done, key=lambda run: run[1])
    benchmark.extra_info.update(profile=VERIFY_PROFILE, steps=steps, steps_per_second=round(steps / seconds, 1))


def test_verify_lockstep_ratio(benchmark):
    """The figures tracked: each losing variant's seconds per step over the new path's, best of interleaved runs
    (a burst of load on a shared machine hits all alike). Above 1 when the new path wins."""
    best = {name: float("inf") for name in VERIFY_VARIANTS}

    def interleaved() -> None:
        for name, variant in VERIFY_VARIANTS.items():
            steps, seconds = run_verify(*variant)
            best[name] = min(best[name], seconds / steps)

    benchmark.pedantic(interleaved, rounds=2, iterations=1)
    ratios = {name: best[name] / best["verify"] for name in VERIFY_VARIANTS if name != "verify"}
    benchmark.extra_info.update(profile=VERIFY_PROFILE, **{f"ratio_{name}": round(r, 2) for name, r in ratios.items()},
                                **{f"{name}_steps_per_second": round(1 / spt, 1) for name, spt in best.items()})
    for name, ratio in ratios.items():
        assert ratio > 1.0, f"{name} is not slower: ratio {ratio:.2f}"


def main() -> int:
    steps = workload()
    print(f"lockstep at level log: {len(steps)} steps per run (best of 7, variants interleaved)")
    best = {name: float("inf") for name in VARIANTS}
    for _ in range(7):  # interleaved, so a burst of load on a shared machine hits every variant alike
        for name, (spec, with_model) in VARIANTS.items():
            best[name] = min(best[name], run_lockstep(spec, with_model, steps))
    for name, seconds in best.items():
        print(f"  {name:<13} {len(steps) / seconds:8.0f} steps/s  ({seconds * 1000:.0f} ms)")
    print(f"verify's lockstep at level log, profile {VERIFY_PROFILE} (best of 3, interleaved)")
    rate = {name: 0.0 for name in VERIFY_VARIANTS}
    for _ in range(3):
        for name, variant in VERIFY_VARIANTS.items():
            steps, seconds = run_verify(*variant)
            rate[name] = max(rate[name], steps / seconds)
    for name, per_second in rate.items():
        print(f"  {name:<24} {per_second:8.0f} steps/s  (ratio {rate['verify'] / per_second:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
