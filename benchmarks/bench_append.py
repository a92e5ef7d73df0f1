"""pytest-benchmark: the per-append cost of each variant at surface sizes 10^2..10^6.

Run with ``python -m pytest benchmarks/bench_append.py`` (add ``--benchmark-json FILE`` to keep the
figures). ``SURFACECHECK_BENCH_SIZES=100,10000`` shortens the run. For each (variant, size) the state
is built at that surface size (setup, untimed: folded for live variants, bulk-loaded for the linear
ones), then each round times one surface append; the events between appends (tool calls, step
markers, prune and summary replacements with their shadow prices) are folded in the untimed setup.
``extra_info`` records the surface size and the cost model's operations per append.
"""
from __future__ import annotations

import os

import pytest

from surfacecheck.bench.harness import DEFAULT_SIZES, linear_appends
from surfacecheck.bench.variants import EMBEDDED, VARIANTS
from surfacecheck.bench.workload import Workload, is_append

SIZES = tuple(int(s) for s in os.environ["SURFACECHECK_BENCH_SIZES"].split(",")) \
    if os.environ.get("SURFACECHECK_BENCH_SIZES") else DEFAULT_SIZES
LIVE_ROUNDS = 300


def _built(name: str, size: int):
    """(state, event stream, workload) with the surface at ``size`` nodes."""
    variant = VARIANTS[name]
    workload = Workload(track_surface=variant.bulk)
    stream = workload.events()
    if variant.bulk:
        for _ in workload.until_size(stream, size):
            pass
        return variant.load(list(workload.surface)), stream, workload
    state = variant.make()
    prepare = getattr(state, "prepare", None)
    for event in workload.until_size(stream, size):
        if not variant.stateless:
            state.observe(prepare(event) if prepare else event)
    return state, stream, workload


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"surface{s}")
@pytest.mark.parametrize("name", EMBEDDED)
def test_append(benchmark, name: str, size: int) -> None:
    state, stream, workload = _built(name, size)
    prepare = getattr(state, "prepare", None)
    rounds = linear_appends(size) if VARIANTS[name].bulk else LIVE_ROUNDS
    ops: list[int] = []

    def next_append():
        """Untimed: fold the events up to the next surface append; hand that append to the timed call."""
        event = next(stream)
        while not is_append(event):
            state.observe(prepare(event) if prepare else event)
            event = next(stream)
        ops.append(state.ops)
        return (prepare(event) if prepare else event,), {}

    benchmark.pedantic(state.observe, setup=next_append, rounds=rounds, iterations=1, warmup_rounds=0)
    benchmark.extra_info.update({"variant": name, "surface": size, "appends": rounds,
                                 "ops_per_append": state.ops - ops[-1]})
    if name != "bare-pricing":
        surface = state.surface_tokens if hasattr(state, "surface_tokens") else state.total
        assert surface == workload.total  # the fold stayed exact while being timed
