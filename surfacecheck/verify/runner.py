"""Run the lockstep machines of one or more levels against a runtime.

Profiles bound the run: ``ci`` (seeded with a fixed seed, so derandomised; the whole verify
stage in well under a minute), ``dev`` and ``deep``. The seed is always explicit and printed,
so a run is reproducible with ``--seed``; the Hypothesis example database is not used (a run
depends only on its seed; traces and the regression folder keep what was found).
"""
from __future__ import annotations

import gc
import random
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, settings as Settings
from hypothesis import seed as hypothesis_seed
from hypothesis.internal.conjecture import engine as _engine
from hypothesis.reporting import with_reporter
from hypothesis.stateful import run_state_machine_as_test
from tqdm import tqdm

from surfacecheck.core.catalogue import at_level
from surfacecheck.properties.monitors import evaluators
from surfacecheck.properties.stateful import MACHINES
from surfacecheck.properties.stateful.base import LockstepFailure, RunContext, RuntimeGone, bind
from surfacecheck.core.memory import MemoryLimit, MemoryLimitReached
from surfacecheck.core.protocol import LEVELS, Runtime, RuntimeUnavailable
from surfacecheck.runtime.select import open_runtime
from surfacecheck.core.trace import Step, Violation
from surfacecheck.verify.profiles import PROFILES, max_examples
from surfacecheck.verify.stream import seed_only_stream

CI_SEED = 20261130



def hypothesis_settings(profile: str, level: str = "log", shrink: bool = True, examples: int | None = None) -> Settings:
    spec = PROFILES[profile]
    return Settings(max_examples=examples or max_examples(profile, level), stateful_step_count=spec["stateful_step_count"],
                    deadline=None, database=None, derandomize=False, print_blob=False,
                    suppress_health_check=list(HealthCheck),
                    phases=(Phase.explicit, Phase.generate, Phase.target) + ((Phase.shrink,) if shrink else ()))


@dataclass
class LevelResult:
    """What one level's run did: examples, steps, seconds; the violation and its steps, or why it
    was inconclusive."""

    level: str
    examples: int = 0
    steps: int = 0
    seconds: float = 0.0
    violation: Violation | None = None
    trace_steps: list[Step] = field(default_factory=list)
    unavailable: str | None = None
    stderr: str = ""
    incomplete: str | None = None  # the memory bound stopped the run before its examples were done
    operations: dict = field(default_factory=dict)  # steps per protocol operation ("append <type>" per event type)

    @property
    def status(self) -> str:
        return "violation" if self.violation else "inconclusive" if self.unavailable or self.incomplete else "ok"

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict:
        return {"level": self.level, "status": self.status, "examples": self.examples, "steps": self.steps,
                "seconds": round(self.seconds, 3), "steps_per_second": round(self.steps_per_second, 1),
                "violation": self.violation.to_json() if self.violation else None,
                "trace_length": len(self.trace_steps) if self.violation else None,
                "unavailable": self.unavailable, "incomplete": self.incomplete,
                "operations": dict(sorted(self.operations.items()))}


def monitors_for(level: str) -> tuple[str, ...]:
    """The monitors a run at ``level`` checks: every catalogue invariant or promise of that level or a lower one
    that has a verify evaluator, in catalogue order. A property is checked only from the level it needs on: a
    watcher of compaction's replacements can never fire on a log-level run, whose only requests are ``reset``
    and ``append``."""
    verify = evaluators("verify")
    return tuple(name for prop in at_level(level) for name in verify.get(prop.id, ()))


def open_reference(spec: str) -> Runtime | None:
    """The model in lockstep, unless the runtime under test is the model itself."""
    return None if spec == "model" else open_runtime("model")


def run_level(runtime: Runtime, reference: Runtime | None, level: str, profile: str, seed: int,
              shrink: bool = True, max_memory: int | None = None, record: list | None = None,
              examples: int | None = None) -> LevelResult:
    """Run ``level``'s machine under ``profile`` with ``seed``; never raises for a runtime failure. With
    ``max_memory`` (bytes) the run stops, incomplete, before an example starts above it; ``record`` (a list)
    receives every example's steps; ``examples`` replaces the profile's number (a shard, :mod:`.sharded`)."""
    context = RunContext(runtime, reference, monitors_for(level), memory=MemoryLimit(max_memory) if max_memory else None,
                         record=record)
    context.progress = tqdm(total=examples or max_examples(profile, level), desc=f"verify {level}", unit="example",
                            file=sys.stderr, disable=None, leave=False)
    machine = hypothesis_seed(seed)(bind(MACHINES[level], context))
    result = LevelResult(level)
    began = time.perf_counter()
    try:
        with shrink_budget(PROFILES[profile]["shrink_seconds"]), seed_only_stream(), with_reporter(_to_stderr), \
                few_collections():
            run_state_machine_as_test(machine, settings=hypothesis_settings(profile, level, shrink, examples))
    except RuntimeGone as gone:
        result.unavailable, result.stderr = f"{gone.cause.kind}: {gone.cause}", gone.cause.stderr
    except MemoryLimitReached:
        pass  # reported below
    except LockstepFailure:
        pass
    except RuntimeUnavailable as exc:  # raised outside a step (e.g. while Hypothesis reports)
        result.unavailable, result.stderr = f"{exc.kind}: {exc}", exc.stderr
    except Exception:  # e.g. Hypothesis's Flaky when a nondeterministic runtime fails only sometimes
        if context.failure is None and not (context.memory and context.memory.reached):
            raise  # a machine bug with no failing example: never hidden (Hypothesis may replay a stopped example
            # and call it flaky: the memory bound, not the machine, stopped it)
    finally:
        context.progress.close()
    result.seconds = time.perf_counter() - began
    result.examples, result.steps, result.operations = context.examples, context.steps, dict(context.operations)
    if context.memory is not None and context.memory.reached is not None and context.failure is None:
        result.incomplete = (f"incomplete after {context.examples} of {examples or max_examples(profile, level)} examples "
                             f"({context.steps} steps): {context.memory.reached}")
    if context.failure is not None and result.violation is None and result.unavailable is None:
        result.trace_steps, result.violation = context.failure
    return result


def _to_stderr(text: str) -> None:
    """Hypothesis's own reports go to stderr: stdout carries only the command's result (``--json``)."""
    sys.stderr.write(f"{text}\n")


@contextmanager
def shrink_budget(seconds: float):
    """Bound Hypothesis's shrinking time for this run (its engine constant ``MAX_SHRINKING_SECONDS``,
    300 s by default); restored afterwards. Without the constant (another Hypothesis) it is a no-op."""
    saved = getattr(_engine, "MAX_SHRINKING_SECONDS", None)
    if saved is not None:
        _engine.MAX_SHRINKING_SECONDS = seconds
    try:
        yield
    finally:
        if saved is not None:
            _engine.MAX_SHRINKING_SECONDS = saved


GC_THRESHOLD: tuple[int, int, int] = (50_000, 20, 20)
"""The cyclic collector's thresholds while a level runs (Python's default is 700, 10, 10)."""


@contextmanager
def few_collections():
    """Collect cycles less often while a level runs; restored afterwards. A lockstep step allocates a few
    hundred short-lived containers (events, answers, Hypothesis's choice records), so at Python's default the
    collector runs ~200 times a level and walks the objects alive since start-up in its older generations
    (``docs/performance-history.md``). Those objects are set aside
    (``gc.freeze``) for the run and given back after it; garbage made during the run is still collected."""
    saved, ours = gc.get_threshold(), gc.get_freeze_count() == 0  # a caller's own frozen objects stay frozen
    if ours:
        gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*saved)
        if ours:
            gc.unfreeze()


def new_seed(profile: str, seed: int | None) -> int:
    if seed is not None:
        return seed
    return CI_SEED if profile == "ci" else random.SystemRandom().randrange(2**31)


def levels_up_to(level: str | None, supported: list[str]) -> list[str]:
    """``--level L`` runs L alone; no level runs every level the runtime supports."""
    if level is not None:
        return [level]
    return [lvl for lvl in LEVELS if lvl in supported]
