"""The deterministic cost model: elementary operations per append, and what growth they show (seed §16).

Every variant counts, in ``ops``, the state cells and surface nodes it touches and the list elements
it copies. The counts do not depend on the machine, so an ordinary test can assert the claim the
timings only suggest: the O(1) projection touches a constant number of cells per append at every
size, while the copy-on-append fold and the recount grow linearly with the surface.
"""
from __future__ import annotations

from typing import Iterable

from surfacecheck.properties.promises_measure import CONSTANT_SLACK

from .harness import Series, run
from .variants import Variant

LINEAR_SHARE = 0.5  # linear: ops grow at least half as fast as the surface


def ops_per_append(variants: Iterable[Variant], sizes: Iterable[int], *, seed: int = 0,
                   batch_events: int = 200, linear_cap: int = 5) -> dict[str, Series]:
    """Fold the workload through ``variants`` to each size and count ops per surface append (no timing;
    the linear variants over ``linear_cap`` appends, the counts being exact)."""
    return run(variants, sizes, seed=seed, batch_events=batch_events, timed=False, linear_cap=linear_cap)


def growth(series: Series) -> str:
    """``constant`` (ops per append within :data:`CONSTANT_SLACK` at every size), ``linear`` (growing at least
    :data:`LINEAR_SHARE` as fast as the surface from the smallest to the largest size), else ``between``."""
    points = series.points
    if len(points) < 2:
        return "undecided"
    ops = [p.ops for p in points]
    if min(ops) > 0 and max(ops) / min(ops) <= CONSTANT_SLACK:
        return "constant"
    first, last = points[0], points[-1]
    if first.ops > 0 and last.ops / first.ops >= LINEAR_SHARE * last.size / first.size:
        return "linear"
    return "between"


def cost_model_failures(series: dict[str, Series]) -> list[str]:
    """Each variant's growth against its expectation (``Variant.expected``); the failures, worded."""
    failures = []
    for name, s in series.items():
        found = growth(s)
        if found != s.expected:
            shown = ", ".join(f"{p.ops:g} at {p.size}" for p in s.points)
            failures.append(f"{name}: expected {s.expected} operations per append, found {found} ({shown})")
    return failures
