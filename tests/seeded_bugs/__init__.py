"""Seeded bugs: one-idea broken variants of the embedded runtime (issue 4 point 6).

Each bug subclasses :class:`~surfacecheck.runtime.embedded.EmbeddedRuntime` (or one of its
incremental structures, through the runtime's ``*_class`` hooks) and breaks exactly one rule,
named by its spec / seed section. Importing this package registers every bug as the runtime
variant ``embedded:<name>`` (``surfacecheck verify --runtime embedded:<name>``). ``BUGS`` maps
each name to a :class:`Bug` record; ``tests/test_seeded_bugs.py`` asserts that ``verify`` finds
every one and that its trace replays (exit 1 on the bug, exit 0 on the correct runtime).
"""
from __future__ import annotations

from dataclasses import dataclass

from surfacecheck.runtime.select import register_variant

from . import compaction_bugs, log_bugs, policy_bugs


@dataclass(frozen=True)
class Bug:
    name: str
    level: str  # the lowest verify level that exercises it
    section: str
    idea: str
    runtime: type


BUGS: dict[str, Bug] = {}

for module in (log_bugs, compaction_bugs, policy_bugs):
    for name, (level, section, idea, cls) in module.BUGS.items():
        BUGS[name] = Bug(name, level, section, idea, cls)
        cls.name = f"embedded:{name}"
        register_variant(f"embedded:{name}", cls)
