"""Hypothesis stateful machines, one per protocol level, each run in lockstep with the model:
``log`` (:mod:`.log`), ``compaction`` (:mod:`.compaction`), ``policy`` (:mod:`.policy`)."""
from __future__ import annotations

from .log import LogMachine

MACHINES = {"log": LogMachine}

try:  # the higher levels land as their runtimes do
    from .compaction import CompactionMachine

    MACHINES["compaction"] = CompactionMachine
    from .policy import PolicyMachine

    MACHINES["policy"] = PolicyMachine
except ImportError:  # pragma: no cover
    pass
