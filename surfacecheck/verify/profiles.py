"""Settings profiles of ``verify``: ``ci`` bounded (the check stage runs it; fixed
seed, so derandomised), ``dev`` for a developer's run, ``deep`` for a long hunt."""
from __future__ import annotations

PROFILES: dict[str, dict] = {
    "smoke": {"max_examples": 15, "stateful_step_count": 15, "shrink_seconds": 10},
    "ci": {"max_examples": 150, "stateful_step_count": 30, "shrink_seconds": 20},
    "dev": {"max_examples": 300, "stateful_step_count": 40, "shrink_seconds": 60},
    "deep": {"max_examples": 3000, "stateful_step_count": 60, "shrink_seconds": 300},
}

LEVEL_SCALE = {"log": 1.0, "compaction": 0.4, "policy": 0.4}
"""Higher levels cost more per step (a transaction per compaction); they get fewer examples."""


def max_examples(profile: str, level: str) -> int:
    return max(10, int(PROFILES[profile]["max_examples"] * LEVEL_SCALE[level]))
