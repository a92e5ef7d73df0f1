"""Lockstep throughput at level ``log`` in steps/s.

One fixed, realistic step list (turns with tool rounds, prompts, prune and summary replacements
priced with their exact shadow prices) is replayed through :class:`~surfacecheck.properties.stateful.lockstep.Lockstep`
with the standard invariants, the way ``verify`` drives a runtime: after every step surface,
cuts, measure and projection are compared with the model. Variants:

* ``embedded`` — the in-process embedded runtime in lockstep with the model (the default of verify);
* ``model-only`` — the model alone under the monitors (no lockstep): the floor of the suite's own cost;
* ``cmd-embedded`` — the embedded runtime over the protocol (``python -m surfacecheck.serve embedded``):
  the variant that loses, paying a pipe round trip per request.

And the lockstep inside ``verify``: level ``log``'s Hypothesis machine on the embedded runtime, the figure
``verify --json`` prints as ``steps_per_second``, as a ratio against two slower configurations of the same run:
Hypothesis's own rule strategy (``verify-hypothesis-rules``, ``LockstepMachine.rule_selection = None``: a rule
index, a feature flag per rule looked at, retries) instead of one draw among the valid rules, and the embedded
runtime over the protocol (``verify-cmd-embedded``: a pipe round trip per batch of requests). Both lose. The
figures against older commits are in ``docs/performance-history.md``.
``SURFACECHECK_BENCH_PROFILE`` picks the verify profile (default ``ci``).

Run ``python -m pytest benchmarks/bench_lockstep.py`` (pytest-benchmark; steps/s in ``extra_info``)
or ``python benchmarks/bench_lockstep.py`` for a plain table.
"""
from __future__ import annotations

import os
import sys
import time

import pytest

from surfacecheck.properties.monitors import lookup
from surfacecheck.properties.stateful import events as ev
from surfacecheck.properties.stateful.base import LockstepMachine
from surfacecheck.runtime.select import open_runtime
from surfacecheck.core.trace import Step
from surfacecheck.properties.stateful.lockstep import Lockstep
from surfacecheck.verify.runner import CI_SEED, monitors_for, run_level

ROUNDS = 25
CMD_EMBEDDED = "cmd:python -m surfacecheck.serve embedded"
VARIANTS = {"embedded": ("embedded", True), "model-only": ("model", False), "cmd-embedded": (CMD_EMBEDDED, True)}
VERIFY_VARIANTS = {"verify": ("embedded", True), "verify-hypothesis-rules": ("embedded", False),
                   "verify-cmd-embedded": (CMD_EMBEDDED, True)}
"""(runtime under test, ``one_draw``): the embedded runtime in process or over the protocol (loses); the rule
choice, one draw (:class:`~properties.stateful.selection.OneDrawRules`) or Hypothesis's own rule strategy (loses)."""
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


def run_verify(spec: str, one_draw: bool = True, profile: str = VERIFY_PROFILE) -> tuple[int, float]:
    """One level-``log`` verify run on the runtime ``spec`` (seed ``CI_SEED``, unshrunk): (steps, seconds).
    ``one_draw=False``: Hypothesis's own rule strategy (its examples differ, so compare seconds per step)."""
    runtime, reference = open_runtime(spec), open_runtime("model")
    saved = LockstepMachine.rule_selection
    if not one_draw:
        LockstepMachine.rule_selection = None
    try:
        result = run_level(runtime, reference, "log", profile, CI_SEED, shrink=False)
    finally:
        LockstepMachine.rule_selection = saved
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
    """The figures tracked: each losing variant's seconds per step over ``verify``'s, best of interleaved runs
    (a burst of load on a shared machine hits all alike). Above 1 when ``verify`` wins."""
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
