"""Per-append cost at growing surface sizes: time and elementary operations (seed §16 "O(1) per append").

One deterministic :class:`~benchmarks.workload.Workload` stream is shared by every variant. For each
size S (ascending): the live variants fold the stream until the surface has S nodes and the bulk
variants are loaded from the workload's surface at S (setup, never timed); then a batch of the
next events is folded by each variant in turn (the same events for all), and each surface append
is timed on its own (``perf_counter_ns``, GC off, as
``timeit`` does). The figure per size is the **median** over those appends. Linear variants are
timed over fewer appends at large sizes (:func:`linear_appends`). The operation counter (``ops``)
is read around the same calls: the cost model is a by-product of the same run, and is exact.
"""
from __future__ import annotations

import gc
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable

from .variants import FLOOR, GATED, Variant
from .workload import Workload, is_append

DEFAULT_SIZES = (10**2, 10**3, 10**4, 10**5, 10**6)
BATCH_EVENTS = 1200  # ~420 surface appends, with prune and summary replacements among them
EVENTS_PER_APPEND = 2.85  # the workload writes ~2.85 log events per surface append
MAX_RATIO, MAX_FLOOR_FACTOR = 1.5, 2.0  # the gate


def batch_for(appends: int | None) -> int:
    """The batch (log events) that holds about ``appends`` surface appends (``None``: the default batch)."""
    return BATCH_EVENTS if appends is None else max(10, round(appends * EVENTS_PER_APPEND))


def linear_appends(size: int) -> int:
    """How many appends a linear variant is timed over at ``size``: enough for a median, bounded work."""
    return max(3, min(size // 2, 300, 10**6 // size))


@dataclass
class Point:
    """One variant at one size: ``median_ns`` per append over ``appends`` samples; ``ops`` per append (median)."""

    size: int
    appends: int
    median_ns: float
    ops: float | None


@dataclass
class Series:
    """A variant's curve; ``ratio`` is largest/smallest median over the sizes (the slope's summary)."""

    name: str
    label: str
    expected: str
    points: list[Point] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        medians = [p.median_ns for p in self.points]
        return max(medians) / min(medians) if medians and min(medians) > 0 else float("nan")

    @property
    def ops_ratio(self) -> float:
        ops = [p.ops for p in self.points]
        return max(ops) / min(ops) if ops and None not in ops and min(ops) > 0 else float("nan")

    def at(self, size: int) -> Point | None:
        return next((p for p in self.points if p.size == size), None)

    def to_json(self) -> dict:
        return {"label": self.label, "expected": self.expected, "ratio": _finite(self.ratio),
                "ops_ratio": _finite(self.ops_ratio),
                "points": [{k: _finite(v) if isinstance(v, float) else v for k, v in asdict(p).items()}
                           for p in self.points]}


def _finite(value: float) -> float | None:
    """JSON has no NaN: an unmeasured figure is ``null``."""
    return None if value != value else round(value, 3)


def _prepare(state) -> Callable | None:
    return getattr(state, "prepare", None)


def _measure(states: dict, budgets: dict[str, int], batch: list[dict], timed: bool) -> dict[str, tuple[list, list]]:
    """Fold ``batch`` into each state in turn (one variant at a time, so none disturbs another's caches);
    per surface append: (ns, ops delta). A variant stops after ``budgets[name]`` appends."""
    samples = {}
    clock = time.perf_counter_ns
    for name, state in states.items():
        times: list[int] = []
        ops: list[int] = []
        prepare, observe, budget = _prepare(state), state.observe, budgets[name]
        for event in batch:
            if len(ops) >= budget:
                break
            arg = prepare(event) if prepare is not None else event
            before = state.ops
            if timed:
                t0 = clock()
                observe(arg)
                t1 = clock()
            else:
                observe(arg)
                t0 = t1 = 0
            if is_append(event):
                times.append(t1 - t0)
                ops.append(state.ops - before)
        samples[name] = (times, ops)
    return samples


def run(variants: Iterable[Variant], sizes: Iterable[int] = DEFAULT_SIZES, *, seed: int = 0,
        batch_events: int = BATCH_EVENTS, timed: bool = True, linear_cap: int | None = None,
        progress: Callable[[str], None] | None = None) -> dict[str, Series]:
    """Measure every variant at every size (ascending); returns ``{name: Series}``. ``linear_cap`` bounds
    the appends of bulk-loaded (linear) variants further; ``timed=False`` counts operations only."""
    variants = list(variants)
    sizes = sorted(set(sizes))
    workload = Workload(seed, track_surface=any(v.bulk for v in variants))
    stream = workload.events()
    live = {v.name: v.make() for v in variants if not v.bulk}
    series = {v.name: Series(v.name, v.label, v.expected) for v in variants}
    for size in sizes:
        if progress:
            progress(f"surface {size}: building")
        folds = [(live[v.name].observe, _prepare(live[v.name])) for v in variants
                 if v.name in live and not v.stateless]
        for event in workload.until_size(stream, size):
            for observe, prepare in folds:
                observe(prepare(event) if prepare is not None else event)
        reached = workload.surface_size
        snapshot = list(workload.surface) if workload.track_surface else None
        batch = workload.take(stream, batch_events)
        states = {}
        for v in variants:
            states[v.name] = v.load(snapshot) if v.bulk else live[v.name]
        cap = linear_appends(size) if linear_cap is None else min(linear_cap, linear_appends(size))
        budgets = {v.name: cap if v.bulk else batch_events for v in variants}
        if progress:
            progress(f"surface {size}: timing")
        enabled = gc.isenabled()
        gc.disable()
        try:
            samples = _measure(states, budgets, batch, timed)
        finally:
            if enabled:
                gc.enable()
        for v in variants:
            times, ops = samples[v.name]
            median_ns = float(statistics.median(times)) if times and timed else float("nan")
            series[v.name].points.append(Point(reached, len(ops), median_ns, float(statistics.median(ops))))
        del states, snapshot
    return series


def gate(series: dict[str, Series], gated: str = GATED, floor: str = FLOOR, max_ratio: float = MAX_RATIO,
         max_floor_factor: float = MAX_FLOOR_FACTOR) -> list[str]:
    """The gate: the gated variant's largest/smallest median must be <= ``max_ratio`` and, at the
    largest size, its median <= ``max_floor_factor`` x the bare pricing's. Returns the failures."""
    failures = []
    subject = series[gated]
    if subject.ratio > max_ratio:
        failures.append(f"{gated}: per-append median rises {subject.ratio:.2f}x from the smallest to the largest "
                        f"size (limit {max_ratio}x): not O(1)")
    if floor in series and subject.points:
        last = subject.points[-1]
        base = series[floor].points[-1].median_ns
        if last.median_ns > max_floor_factor * base:
            failures.append(f"{gated}: {last.median_ns:.0f} ns per append at surface {last.size} is "
                            f"{last.median_ns / base:.2f}x the bare pricing ({base:.0f} ns; limit {max_floor_factor}x)")
    return failures
