"""How much of a ``verify`` step is Hypothesis's own: the floor under the lockstep's figure.

A step of ``verify --level log`` pays for two things: Hypothesis and the machine choosing the step (the rule and its
arguments as choices, the example's bookkeeping: the choice tree, span groups, mutations, the test case around each
example) and the lockstep running it (the step and the state questions on the runtime and on the model, their
comparison, the watchers). Here the second is taken away: every step is counted and answered as an accepted append
and every state question as an empty surface, so what is left is the first, the same machine under the same seed and
profile. Its steps differ a little (a rule that reads the surface, e.g. ``prune_pair``, finds nothing to price and
appends nothing), so the figures are compared per step.

``test_verify_hypothesis_share`` reports both rates and the floor's share of a verify step, best of interleaved runs;
it fails if the floor is not faster than verify (the stub not in effect). Run ``python -m pytest
benchmarks/bench_verify_floor.py`` or ``python benchmarks/bench_verify_floor.py`` for a plain table.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager

from benchmarks.bench_lockstep import VERIFY_PROFILE, run_verify
from surfacecheck.properties.stateful.base import LockstepMachine
from surfacecheck.runtime.select import open_runtime
from surfacecheck.verify.runner import CI_SEED, run_level


def _counted(self, op: str, args: dict, label: str = "") -> dict:
    """A step with nothing under it: counted, and answered as an accepted append."""
    self.context.steps += 1
    return {"seq": self.context.steps, "generation": 0}


def _empty_surface(self, op: str, args: dict | None = None) -> dict:
    """Every state question answered as an empty surface (no nodes, no prices, one balanced cut)."""
    return {"nodes": [], "prices": [], "balanced": [True]}


@contextmanager
def without_lockstep():
    """Level log's machine with its lockstep taken away (:func:`_counted`, :func:`_empty_surface`)."""
    saved = LockstepMachine.do, LockstepMachine.ask
    LockstepMachine.do, LockstepMachine.ask = _counted, _empty_surface
    try:
        yield
    finally:
        LockstepMachine.do, LockstepMachine.ask = saved


def run_floor(profile: str = VERIFY_PROFILE) -> tuple[int, float]:
    """One level-``log`` run of the machine alone (seed ``CI_SEED``, unshrunk): (steps, seconds)."""
    runtime, reference = open_runtime("embedded"), open_runtime("model")
    try:
        with without_lockstep():
            result = run_level(runtime, reference, "log", profile, CI_SEED, shrink=False)
    finally:
        runtime.close()
    assert result.status == "ok" and result.steps > 0, result.to_json()
    return result.steps, result.seconds


def best_rates(rounds: int) -> dict[str, float]:
    """Steps per second of ``verify`` and of its floor, the best of ``rounds`` interleaved runs each (a burst of load
    on a shared machine hits both alike)."""
    best = {"verify": float("inf"), "floor": float("inf")}
    for _ in range(rounds):
        for name, run in (("verify", lambda: run_verify(True)), ("floor", run_floor)):
            steps, seconds = run()
            best[name] = min(best[name], seconds / steps)
    return {name: 1 / per_step for name, per_step in best.items()}


def test_verify_hypothesis_share(benchmark):
    rates: dict[str, float] = {}
    benchmark.pedantic(lambda: rates.update(best_rates(1)), rounds=2, iterations=1)
    share = rates["verify"] / rates["floor"]
    benchmark.extra_info.update(profile=VERIFY_PROFILE, verify_steps_per_second=round(rates["verify"], 1),
                                floor_steps_per_second=round(rates["floor"], 1), hypothesis_share=round(share, 2))
    assert share < 1.0, f"the floor is not faster than verify ({rates})"


def main() -> int:
    rates = best_rates(3)
    print(f"verify at level log, profile {VERIFY_PROFILE} (best of 3, interleaved)")
    print(f"  verify                   {rates['verify']:8.0f} steps/s")
    print(f"  floor (no lockstep)      {rates['floor']:8.0f} steps/s")
    print(f"  Hypothesis and the machine: {rates['verify'] / rates['floor']:.0%} of a verify step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
