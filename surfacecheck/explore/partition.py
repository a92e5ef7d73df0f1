"""One partition of a BFS level expanded by the packed search's moves, on the worker that owns it, as arrays.

The distributed search (:mod:`.distributed`) hands each worker the frontier states it owns — those whose
surface's shape (:func:`.shape.signature`) hashes to it, so the surfaces that share model runs and move
templates meet one worker's caches — as arrays: the surface's number in the coordinator's table, and the
rest of the state packed in one integer (:mod:`.packed`: the core's other fields, then the bound counters).

Here the worker's own :class:`.packed.Packer` makes each core's relative moves, as the search in one process
does, and keeps every move once in a flat *move store* (one array per field); a state's moves are then a few
segments of that store (its groups, in the world's move order), and the partition's edges are gathered from
the store by NumPy: successor = source + Δstate, the bounds applied by masks. What goes back is arrays too —
per edge its source's position in the partition, its successor (a surface index into a small table, the rest
packed), its Δseq/Δturn/Δgeneration, its action and its edge record (indices into small tables) — and the
table of successor surfaces: the coordinator's number where the worker knows it, else the surface itself and
the stable hash of its shape (its owner at the next level).

A partition's answer is a function of its states and the world's configuration (the worker's caches change
only what it costs), so a task that Dask re-runs on another worker gives the same answer.
"""
from __future__ import annotations

import gc
from array import array
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from surfacecheck.core.cluster import stable_hash

from .layout import S_SURF
from .packed import Packer
from .shape import signature
from .world import World

_SEARCHES: dict = {}
"""World configuration -> this process's :class:`_Search` (kept between levels and runs: its caches warm up)."""
_RUNS_KEPT = 4


def owner_hash(surf: tuple) -> int:
    """The stable hash that places a surface's states on a worker: its shape's (:func:`.shape.signature`)."""
    return stable_hash(signature(surf, 0))


def world_config(world: World) -> tuple:
    """What a worker needs to build the same world (picklable, hashable)."""
    return (world.bounds, world.settings, world.variant.name, world.outcomes, world.shared)


@dataclass(frozen=True)
class Task:
    """One partition of one level: ``gsids``/``lows`` per state (surface number, rest packed), ``seqs`` (only
    under ``--max-seq``), and the surface of every number in ``gsids``."""

    config: tuple
    run: str
    reverse: bool
    gsids: np.ndarray
    lows: np.ndarray
    seqs: np.ndarray | None
    surfaces: tuple


@dataclass(frozen=True)
class Answer:
    """A partition's edges, in the search's order (its states in frontier order, each one's moves in move
    order): ``src`` (position in the partition), ``surface`` (index into ``surfaces``: an int is the
    coordinator's number, a pair ``(surface, owner hash)`` a surface it may not have), ``low``, ``ds``,
    ``dt``, ``dg``, ``action`` and ``edge`` (indices into ``actions`` and ``edges``); ``model_runs`` made."""

    src: np.ndarray
    surface: np.ndarray
    low: np.ndarray
    ds: np.ndarray
    dt: np.ndarray
    dg: np.ndarray
    action: np.ndarray
    edge: np.ndarray
    surfaces: list
    actions: list
    edges: list
    model_runs: int


class _Search:
    """A worker's packed moves for one world: the packer, the move store, and what it learnt of each run's
    surface numbers."""

    def __init__(self, world: World):
        self.world = world
        self.packer = Packer(world)
        self.span = S_SURF * self.packer.per_core
        self.dstate, self.fields = array("q"), tuple(array("i") for _ in range(8))  # de dc dk ds dt dg action edge
        self.segments: dict = {}  # id(a move list) -> (offset, length) in the store
        self.kept: list = []  # the lists whose ids are keys, kept alive so an id is never reused
        self.actions: dict = {}
        self.edges: list = []  # kept alive with the lists, so an id is never reused
        self.edge_ids: dict = {}
        self.runs: dict = {}  # run -> {this packer's surface number: the coordinator's}

    def segment(self, moves: list) -> tuple[int, int]:
        """Where ``moves`` (one group's relative moves) sit in the store, storing them the first time."""
        offset = len(self.dstate)
        self.segments[id(moves)] = found = (offset, len(moves))
        self.kept.append(moves)
        action, _dcore, dstate, de, dc, dk, ds, dt, dg, edge = zip(*moves)
        self.dstate.extend(dstate)
        for column, values in zip(self.fields, (de, dc, dk, ds, dt, dg)):
            column.extend(values)
        self.fields[6].extend(map(self._action, action))
        self.fields[7].extend(map(self._edge, map(id, edge), edge))
        return found

    def _action(self, action: str) -> int:
        found = self.actions.get(action)
        if found is None:
            found = self.actions[action] = len(self.actions)
        return found

    def _edge(self, key: int, edge) -> int:
        """An edge record's number, by identity (the move makers share one record among many moves)."""
        found = self.edge_ids.get(key)
        if found is None:
            found = self.edge_ids[key] = len(self.edges)
            self.edges.append(edge)
        return found

    def learnt(self, run: str) -> dict:
        found = self.runs.get(run)
        if found is None:
            if len(self.runs) >= _RUNS_KEPT:
                self.runs.pop(next(iter(self.runs)))
            found = self.runs[run] = {}
        return found


def _search(config: tuple) -> _Search:
    found = _SEARCHES.get(config)
    if found is None:
        from .variants import variant

        bounds, settings, name, outcomes, shared = config
        found = _SEARCHES[config] = _Search(World(bounds, settings, variant(name), outcomes, shared=shared))
    return found


def expand_partition(task: Task) -> Answer:
    """On a worker: the edges of one partition of a level (the module docstring)."""
    search = _search(task.config)
    world = search.world
    before = world.oracle_calls
    with _caches_unscanned(), world.speedups():
        sids, starts, lengths, owners = _segments(search, task)
        return _gather(search, task, sids, starts, lengths, owners, world.oracle_calls - before)


@contextmanager
def _caches_unscanned():
    """No cyclic collection while a task runs, and what it leaves (the caches: millions of acyclic tuples)
    moved out of the collector's sight for good (``gc.freeze``), so the worker's own allocations between
    tasks do not rescan them (as :func:`.bfs.no_cyclic_gc` does for one search, for a worker's life)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()


def _segments(search: _Search, task: Task) -> tuple[list, list, list, list]:
    """The packer's number of each state's surface, and per state of the partition, in order, the store
    segments of its groups' moves (made where new; reversed under ``--reverse``)."""
    packer, learnt = search.packer, search.learnt(task.run)
    per_core, b = packer.per_core, search.world.bounds
    span_e = packer.span_calls * packer.span_comps
    local = {}
    for gsid, surf in task.surfaces:
        sid = local[gsid] = packer.surf_id(surf)
        learnt[sid] = gsid
    recipe_of, recipe, big, make = packer.recipes.get, packer.recipe, packer.big, packer.make
    segments, segment = search.segments.get, search.segment
    starts: list = []
    lengths: list = []
    owners: list = []
    sids: list = []
    memo: dict = {}
    for position, (gsid, low) in enumerate(zip(task.gsids.tolist(), task.lows.tolist())):
        rest, counters = divmod(low, per_core)
        sid = local[gsid]
        sids.append(sid)
        room = counters // span_e < b.events
        key = (sid, rest, room)
        found = memo.get(key)
        if found is None:
            found = memo[key] = []
            for moves in (recipe_of(rest) or recipe(rest))[big[sid] + (0 if room else 2)]:
                if type(moves) is not list:  # a group's table: its moves on this surface
                    table, moves = moves, moves.get(sid)
                    if moves is None:
                        moves = make(table, sid, rest)
                if moves:
                    found.append(segments(id(moves)) or segment(moves))
            if task.reverse:
                found.reverse()
        for offset, length in found:
            starts.append(offset)
            lengths.append(length)
            owners.append(position)
    return sids, starts, lengths, owners


def _gather(search: _Search, task: Task, sids: list, starts: list, lengths: list, owners: list,
            runs: int) -> Answer:
    """The partition's edges from the store, bounded, with the tables they index."""
    packer, b = search.packer, search.world.bounds
    lengths_a = np.asarray(lengths, dtype=np.int64)
    total = int(lengths_a.sum())
    before = np.repeat(np.cumsum(lengths_a) - lengths_a, lengths_a)  # where each edge's segment starts in the list
    within = np.arange(total, dtype=np.int64) - before
    if task.reverse:
        within = np.repeat(lengths_a - 1, lengths_a) - within
    index = np.repeat(np.asarray(starts, dtype=np.int64), lengths_a) + within
    src = np.repeat(np.asarray(owners, dtype=np.int32), lengths_a)
    store = np.frombuffer(search.dstate, dtype=np.int64)
    de, dc, dk, ds, dt, dg, act, edg = (np.frombuffer(f, dtype=np.int32) for f in search.fields)
    counters = task.lows[src] % packer.per_core
    events = counters // (packer.span_calls * packer.span_comps)
    calls = (counters // packer.span_comps) % packer.span_calls
    comps = counters % packer.span_comps
    keep = ((events + de[index] <= b.events) & (calls + dc[index] <= b.tool_pairs)
            & (comps + dk[index] <= b.compactions))
    if b.max_seq is not None:
        keep &= task.seqs[src] + ds[index] <= b.max_seq
    src, index = src[keep], index[keep]
    learnt = search.learnt(task.run)
    successor = np.asarray(sids, dtype=np.int64)[src] * search.span + task.lows[src] + store[index]
    surface_ids, surface = np.unique(successor // search.span, return_inverse=True)
    surfaces = []
    for sid in surface_ids.tolist():
        gsid = learnt.get(sid)
        surfaces.append(gsid if gsid is not None else (packer.surfs[sid], owner_hash(packer.surfs[sid])))
    action_ids, action = np.unique(act[index], return_inverse=True)
    edge_ids, edge = np.unique(edg[index], return_inverse=True)
    action_list, edge_list = list(search.actions), search.edges
    return Answer(src.astype(np.int32), surface.astype(np.int32), successor % search.span,
                  ds[index].astype(np.int16), dt[index].astype(np.int16), dg[index].astype(np.int16),
                  action.astype(np.int32), edge.astype(np.int32), surfaces,
                  [action_list[i] for i in action_ids.tolist()], [edge_list[i] for i in edge_ids.tolist()], runs)

