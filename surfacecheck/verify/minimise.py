"""Step deletion after Hypothesis: a 1-minimal trace (delta debugging, Zeller's ddmin).

Hypothesis shrinks the *strategy choices*, under a time cap in the ``ci`` profile; what reaches the
trace file can still hold steps the failure does not need. Here the trace itself is cut: chunks,
then single steps (never the leading ``reset``) are deleted while replaying the rest against the
same runtime still fails with the *same* property. Deleting an ``append`` shifts later seqs, so a
candidate that now breaks differently (or not at all) is simply rejected. The result is 1-minimal:
no single step can go.
"""
from __future__ import annotations

import time
from dataclasses import replace

from surfacecheck.core.trace import Trace

from .replay import replay_trace


def minimise_trace(trace: Trace, runtime, *, budget_seconds: float = 20.0, timeout: float = 10.0) -> Trace:
    """``trace`` with every step deleted that the failure does not need, replayed on the open ``runtime``.

    The recorded violation is replaced by the one the minimal trace shows (its step number moves).
    Stops early (keeping the best so far) after ``budget_seconds`` or if the runtime fails."""
    deadline = time.monotonic() + budget_seconds

    def fails(steps) -> object | None:
        outcome = replay_trace(replace(trace, steps=tuple(steps)), trace.runtime, runtime=runtime, timeout=timeout)
        return outcome.violation if outcome.same and not outcome.unavailable else None

    found = {"violation": fails(trace.steps)}
    if found["violation"] is None:
        return trace  # does not replay to the same failure (flaky or order-dependent): keep it as found

    def still_fails(steps) -> bool:
        violation = fails(steps)
        if violation is not None:
            found["violation"] = violation
        return violation is not None

    steps = delete_steps(list(trace.steps), still_fails, deadline=deadline)
    return replace(trace, steps=tuple(steps), violation=found["violation"])


def delete_steps(steps: list, still_fails, *, deadline: float | None = None) -> list:
    """ddmin over ``steps``: delete chunks, then single steps (never the first, the ``reset``), keeping each
    deletion after which ``still_fails(candidate)`` holds; stops at ``deadline`` (monotonic) if given.
    The result is 1-minimal: no single further step can go."""
    current = list(steps)
    chunk = max(1, len(current) // 2)

    def in_time() -> bool:
        return deadline is None or time.monotonic() < deadline

    while chunk >= 1 and in_time():
        i, changed = 1, False
        while i < len(current) and in_time():
            candidate = current[:i] + current[i + chunk:]
            if len(candidate) < len(current) and still_fails(candidate):
                current, changed = candidate, True
            else:
                i += chunk
        if not changed:
            chunk //= 2
    return current
