"""``verify --workers N``: each level's examples in shards with derived seeds, run on Dask workers.

A level's Hypothesis run is split into :data:`SHARDS` shards, always the same ones whatever the
number of workers: shard ``i`` of level ``L`` under seed ``S`` runs ``ceil(examples / SHARDS)``
examples with the seed :func:`shard_seed` ``(S, L, i)``, against its own runtime and model
(opened in the worker process). The shards' results are merged in shard order: counts add up,
and the level's violation is the first shard's in that order (then minimised and written here,
as in a serial run). So the verdict, the trace and the counts are the same at any worker count;
they differ from a run without ``--workers`` (one Hypothesis run of all examples on one seed),
which stays what ``check`` and CI run.

A campaign (``--profile deep`` over every level) shows one progress bar for all its shards, every level's
(:func:`campaign_bar`), and prints the run's seed with the rule its shard seeds derive by and each level's
shard seeds; the workers' own bars and lines are dropped (a quiet map).
"""
from __future__ import annotations

import hashlib
import math
import time
from collections import Counter
from typing import Callable, TextIO

from tqdm import tqdm

from surfacecheck.core.cluster import Pool
from surfacecheck.core.protocol import RuntimeUnavailable
from surfacecheck.runtime.select import open_runtime
from surfacecheck.verify.profiles import max_examples
from surfacecheck.verify.runner import LevelResult, open_reference, run_level

SHARDS = 8


def shard_seed(seed: int, level: str, index: int) -> int:
    """The seed of shard ``index`` of ``level``: a hash of the run's seed, the level and the index."""
    return int(hashlib.sha256(f"{seed}:{level}:{index}".encode()).hexdigest()[:8], 16) % 2**31


def run_shard(task: tuple) -> tuple[int, LevelResult]:
    """On a worker: one shard against a runtime of its own; never raises for a runtime failure."""
    from surfacecheck.verify.replay import ensure_variants

    spec, timeout, level, profile, seed, shrink, max_memory, examples = task
    ensure_variants()  # the seeded-bug runtimes (embedded:<bug>, model:<variant>) are registered per process
    try:
        runtime = open_runtime(spec, timeout=timeout)
    except RuntimeUnavailable as exc:
        result = LevelResult(level)
        result.unavailable, result.stderr = f"{exc.kind}: {exc}", exc.stderr
        return seed, result
    reference = open_reference(spec)
    try:
        return seed, run_level(runtime, reference, level, profile, seed, shrink, max_memory, examples=examples)
    finally:
        for opened in (runtime, reference):
            try:
                if opened is not None:
                    opened.close()
            except Exception:  # noqa: BLE001 - closing a dead child must not hide the shard's result
                pass


SEED_RULE = "shard i of level L runs with seed int(sha256('SEED:L:i')[:8], 16) mod 2**31"


def campaign_bar(levels: list[str], seed: int, err: TextIO) -> tqdm:
    """The one bar of a sharded run (every level's shards), after the lines that say how its seeds derive."""
    err.write(f"verify: {SHARDS} shards per level on Dask; run seed {seed}; {SEED_RULE.replace('SEED', str(seed))}\n")
    return tqdm(total=SHARDS * len(levels), desc="verify", unit="shard", file=err, disable=None, leave=False)


def run_level_sharded(pool: Pool, spec: str, level: str, profile: str, seed: int, *, shrink: bool, timeout: float,
                      max_memory: int | None, say: Callable[[str], None] | None = None,
                      done: Callable[[str], None] | None = None) -> tuple[LevelResult, int]:
    """The level's shards on ``pool``, merged; and the seed of the shard whose violation is reported.
    ``done(summary)`` as each shard finishes (the campaign's bar); ``say(line)`` is told the shards' seeds."""
    per_shard = math.ceil(max_examples(profile, level) / SHARDS)
    seeds = [shard_seed(seed, level, i) for i in range(SHARDS)]
    if say is not None:
        say(f"verify: level {level}: {SHARDS} shards of {per_shard} examples, seeds {' '.join(map(str, seeds))}")
    tasks = [(spec, timeout, level, profile, seeds[i], shrink, max_memory, per_shard) for i in range(SHARDS)]

    def finished(index: int, result: tuple[int, LevelResult]) -> None:
        if done is not None:
            done(f"{level} shard {index}: {result[1].status}, {result[1].examples} examples")
    began = time.perf_counter()
    results = pool.map(run_shard, tasks, label=f"verify-{level}", done=finished, quiet=True)
    merged = LevelResult(level)
    merged.seconds = time.perf_counter() - began
    operations: Counter = Counter()
    chosen = seed
    for shard_seed_, result in results:
        merged.examples += result.examples
        merged.steps += result.steps
        operations.update(result.operations)
        if merged.violation is None and result.violation is not None:
            merged.violation, merged.trace_steps, chosen = result.violation, result.trace_steps, shard_seed_
        if merged.unavailable is None and result.unavailable is not None:
            merged.unavailable, merged.stderr = result.unavailable, result.stderr
        if merged.incomplete is None and result.incomplete is not None:
            merged.incomplete = result.incomplete
    merged.operations = dict(operations)
    return merged, chosen
