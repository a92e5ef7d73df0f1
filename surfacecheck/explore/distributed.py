"""``explore --workers N``: the frontier's new cores expanded on Dask workers, level by level.

The search stays breadth-first and in this process: the visited set, the numbering of states
and the order of edges are the serial search's (:mod:`.bfs`). What leaves the process is the
expensive part, a core's moves (the model runs of :mod:`.oracle` and their bookkeeping): before
a level is searched, the cores of its frontier that have no moves yet are partitioned by a
stable hash of their surface's shape (:mod:`.shape`: surfaces of one shape share their model
runs, so they meet the same worker's caches), each partition is one task pinned to one worker,
and the moves come back in partition order.

A core's moves are a function of the core and the world's configuration, so which worker made
them cannot change a state, an edge, a verdict or a shortest trace (the test compares the JSON
at 1, 2 and 4 workers). The cost figures (seconds, states per second, model runs) do vary.
"""
from __future__ import annotations

from surfacecheck.core.cluster import Pool, stable_hash

from .shape import signature
from .world import SURF, World

_WORLDS: dict = {}


def _config(world: World) -> tuple:
    return (world.bounds, world.settings, world.variant.name, world.outcomes, world.shared)


def _world(config: tuple) -> World:
    """This worker process's world for ``config`` (kept between levels: its model-run caches warm up)."""
    found = _WORLDS.get(config)
    if found is None:
        from .variants import variant

        bounds, settings, name, outcomes, shared = config
        found = _WORLDS[config] = World(bounds, settings, variant(name), outcomes, shared=shared)
    return found


def expand(task: tuple) -> tuple:
    """On a worker: the moves of each core of one partition, the model runs this took, and the tables the
    moves index into (successor cores, actions, edges: each sent once per task, so the answer is mostly
    small integers, cheap to pickle and to read back)."""
    from .bfs import no_cyclic_gc

    config, cores = task
    world = _world(config)
    before = world.oracle_calls
    tables: tuple[dict, dict, dict] = ({}, {}, {})  # core -> index, action -> index, edge -> index
    with no_cyclic_gc():  # as in the search: the world's memo tables are millions of acyclic tuples
        moves = [[(_index(tables[1], action), _index(tables[0], nxt), de, dc, dk, ds, dt, dg, _index(tables[2], edge))
                  for action, nxt, de, dc, dk, ds, dt, dg, edge in world._moves(*core)] for core in cores]
    return moves, world.oracle_calls - before, tuple(list(table) for table in tables)


def _index(table: dict, value) -> int:
    found = table.get(value)
    if found is None:
        found = table[value] = len(table)
    return found


class Expander:
    """Fills ``world``'s compact moves for a frontier's new cores through ``pool``."""

    def __init__(self, pool: Pool, world: World):
        self.pool, self.world, self.config = pool, world, _config(world)
        self.partitions = max(1, len(pool.workers))
        self.model_runs = 0
        self.tasks = 0

    def __call__(self, cores: list[int]) -> None:
        world = self.world
        todo = sorted({c for c in cores if world._compact[c] is None})
        if not todo:
            return
        parts: list[list[int]] = [[] for _ in range(self.partitions)]
        for number in todo:
            parts[stable_hash(signature(world.cores[number][SURF], 0)) % self.partitions].append(number)
        results = self.pool.map(expand, [(self.config, [world.cores[n] for n in part]) for part in parts],
                                pin=True, label="explore-expand")
        self.tasks += len(parts)
        for part, (moves, runs, (successors, actions, edges)) in zip(parts, results):
            self.model_runs += runs
            numbers = [world.core_id(core) for core in successors]
            for number, listed in zip(part, moves):
                world._compact[number] = [(actions[a], numbers[c], de, dc, dk, ds, dt, dg, edges[e])
                                          for a, c, de, dc, dk, ds, dt, dg, e in listed]
