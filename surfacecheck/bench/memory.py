"""The projection's state size against log length (seed §16: "a running total plus one pending claim").

:func:`state_bytes` folds the first ``events`` events of the workload into a fresh variant with
``tracemalloc`` on, then measures the memory the variant *retains*: traced bytes with the variant
alive minus traced bytes once it is dropped (the workload's own bookkeeping and the freed events
cancel out). An O(1) projection retains the same few hundred bytes at 10^3 and 10^6 events; a
per-node table (the incremental meter) grows with the surface.
"""
from __future__ import annotations

import gc
import itertools
import tracemalloc
from typing import Callable

from .variants import Variant
from .workload import Workload


def state_bytes(variant: Variant, events: int, *, seed: int = 0,
                progress: Callable[[str], None] | None = None, repeat: int = 1) -> int:
    """Bytes retained by ``variant``'s state after folding ``events`` log events (tracemalloc); with
    ``repeat`` the median of that many foldings (tracemalloc counts every thread's allocations, so another
    thread allocating or freeing between the two readings moves one measurement either way)."""
    if repeat > 1:
        return sorted(state_bytes(variant, events, seed=seed, progress=progress) for _ in range(repeat))[repeat // 2]
    if variant.bulk:
        raise ValueError(f"{variant.name} is bulk-loaded; its state is measured by folding, not supported")
    workload = Workload(seed)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        gc.collect()
        state = variant.make()
        prepare = getattr(state, "prepare", None)
        for event in itertools.islice(workload.events(), events):
            state.observe(prepare(event) if prepare is not None else event)
        if progress:
            progress(f"memory: {variant.name} folded {events} events")
        gc.collect()
        alive = tracemalloc.get_traced_memory()[0]
        del state
        gc.collect()
        dropped = tracemalloc.get_traced_memory()[0]
    finally:
        if started:
            tracemalloc.stop()
    return max(0, alive - dropped)
