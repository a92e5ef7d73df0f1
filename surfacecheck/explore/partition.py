"""One partition of a BFS level expanded by the packed search's moves, on the worker that owns it, as arrays.

The distributed search (:mod:`.distributed`) hands each worker the frontier states it owns — those whose
surface's split and tail hash to it (:func:`owner_hash`), so the surfaces that share model runs and move
templates mostly meet one worker's caches — as arrays: the surface's number in the coordinator's table, and the
rest of the state packed in one integer (:mod:`.packed`: the core's other fields, then the bound counters).

Here the worker's own :class:`.packed.Packer` makes each core's relative moves, as the search in one process
does, and keeps every move once in a flat *move store* (one array per field); a state's moves are then a few
segments of that store (its groups, in the world's move order), and the partition's edges are gathered from
the store by NumPy: successor = source + Δstate, the bounds applied by masks. What goes back is arrays too —
per edge its source's position in the partition, its successor (its surface, and the rest packed), its Δseq/Δturn/Δgeneration, its action and its edge record — the surface, action and record as the
worker's own numbers, and once per run the surfaces (with their :func:`owner_hash`, their owner at the next
level), labels and records behind the numbers the coordinator has not been told yet.

A partition's edges are a function of its states and the world's configuration (the worker's caches change only
what they cost; the numbers they come in are the worker's own, named by its token), so a task that Dask re-runs
on another worker gives the same edges.
"""
from __future__ import annotations

import uuid
import zlib
from array import array
from dataclasses import dataclass

import numpy as np

from .arrays import distinct
from .bfs import no_cyclic_gc
from .layout import S_SURF
from .packed import Packer
from .shape import split
from .world import World

_SEARCHES: dict = {}
"""World configuration -> this process's :class:`_Search` (kept between levels and runs: its caches warm up)."""
_RUNS_KEPT = 4


def owner_hash(surf: tuple) -> int:
    """The stable hash that places a surface's states on a worker: of its split and tail (:func:`.shape.split`,
    the first and last parts of its shape, :func:`.shape.signature`), as CRC-32 of one string (the same in every
    process, unlike ``hash`` of a str). Surfaces of one shape meet one worker; so do most surfaces whose model
    runs are keyed alike though their prefix sums differ (a run is keyed on what it reads, :func:`.shape.view`):
    at 6/2/2 two partitions make 2,618 model runs between them where one makes 2,436 (3,539 when the prefix sum
    is hashed too), and hold 212k and 191k states."""
    m = split(surf, 0)
    return zlib.crc32(f"{m}:{' '.join(surf[m:])}".encode())


def world_config(world: World) -> tuple:
    """What a worker needs to build the same world (picklable, hashable)."""
    return (world.bounds, world.settings, world.variant.name, world.outcomes, world.shared)


@dataclass(frozen=True)
class Task:
    """One partition of one level: ``gsids``/``lows`` per state (surface number, rest packed), ``seqs`` (only
    under ``--max-seq``), and the coordinator's surface table from number ``table_from`` on (``table``): what
    it numbered since the previous level's tasks, or the whole table (``table_from`` 0) for a worker that
    missed some (:attr:`Answer.missing`)."""

    config: tuple
    run: str
    reverse: bool
    gsids: np.ndarray
    lows: np.ndarray
    seqs: np.ndarray | None
    table_from: int
    table: tuple
    fresh: bool = False  # tell every surface, label and record the answer uses, told before or not


@dataclass(frozen=True)
class Answer:
    """A partition's edges, in the search's order (its states in frontier order, each one's moves in move
    order): ``src`` (position in the partition), ``surface`` (the successor's surface), ``low``, ``ds``, ``dt``,
    ``dg``, ``action`` and ``edge`` (its label and record), the three as this worker's own numbers (``token``
    names the worker's numbering); what the coordinator cannot know yet comes with them, once per run:
    ``new_surfaces`` ``(number, surface, owner hash)``, ``new_actions`` ``(number, label)``, ``new_edges``
    ``(number, record)``. ``model_runs`` made. ``missing``: this worker lacks part of the surface table before
    ``table_from`` (the task came to a worker that did not run the earlier levels: Dask moved it, or restarted
    its worker); nothing was expanded, and the coordinator sends the task again with the whole table."""

    token: str
    src: np.ndarray
    surface: np.ndarray
    low: np.ndarray
    ds: np.ndarray
    dt: np.ndarray
    dg: np.ndarray
    action: np.ndarray
    edge: np.ndarray
    new_surfaces: list
    new_actions: list
    new_edges: list
    model_runs: int
    missing: bool = False


_EMPTY = np.zeros(0, np.int32)
_MISSING = Answer("", _EMPTY, _EMPTY, _EMPTY.astype(np.int64), _EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY, [], [], [], 0,
                  True)


class _Run:
    """What a worker keeps of one coordinator's run: the surface table it was sent, and which of its own
    surfaces, labels and records it has told that coordinator (a byte per number)."""

    def __init__(self):
        self.table: list = []
        self.told = (bytearray(), bytearray(), bytearray())  # surfaces, actions, edge records

    def untold(self, kind: int, numbers: np.ndarray, everything: bool) -> list[int]:
        """Those of ``numbers`` (distinct) not told yet (all of them when ``everything``), now marked told."""
        told = self.told[kind]
        top = int(numbers.max()) + 1 if numbers.size else 0
        if len(told) < top:
            told.extend(bytes(top - len(told)))
        flags = np.frombuffer(told, dtype=np.uint8)
        fresh = numbers if everything else numbers[flags[numbers] == 0]
        for number in fresh.tolist():
            told[number] = 1
        return fresh.tolist()


class _Numbering(dict):
    """Values numbered in the order first seen (a lookup of a known one stays in C)."""

    def __missing__(self, value) -> int:
        found = self[value] = len(self)
        return found


class _Search:
    """A worker's packed moves for one world: the packer, the move store, and what it learnt of each run's
    surface numbers."""

    def __init__(self, world: World):
        self.world = world
        self.packer = Packer(world)
        self.span = S_SURF * self.packer.per_core
        self.dstate, self.fields = array("q"), tuple(array("i") for _ in range(8))  # de dc dk ds dt dg action edge
        self.segments: dict = {}  # id(a move list) -> (offset, length) in the store
        self.size = 0
        self.queued: list = []
        self.kept: list = []  # the lists whose ids are keys, kept alive so an id is never reused
        self.actions = _Numbering()
        self.edges: list = []  # kept alive with the lists, so an id is never reused
        self.edge_ids: dict = {}
        self.runs: dict = {}  # run -> _Run
        self.token = uuid.uuid4().hex  # names this worker's numbering of surfaces, labels and records

    def segment(self, moves: list) -> tuple[int, int]:
        """Where ``moves`` (one group's relative moves) sit in the store, queued for it the first time (most
        lists hold two or three moves: :meth:`flush` writes the queue column by column)."""
        found = self.segments[id(moves)] = (self.size, len(moves))
        self.size += len(moves)
        self.queued.extend(moves)
        self.kept.append(moves)
        return found

    def flush(self) -> None:
        """Write the queued moves into the store's columns."""
        if not self.queued:
            return
        action, _dcore, dstate, de, dc, dk, ds, dt, dg, edge = zip(*self.queued)
        self.queued = []
        self.dstate.extend(dstate)
        for column, values in zip(self.fields, (de, dc, dk, ds, dt, dg)):
            column.extend(values)
        self.fields[6].extend(map(self.actions.__getitem__, action))
        edge_ids = self.edge_ids
        self.fields[7].extend([edge_ids[key] if key in edge_ids else self._edge(key, e) for key, e in
                               zip(map(id, edge), edge)])

    def _edge(self, key: int, edge) -> int:
        """A new edge record's number, by identity (the move makers share one record among many moves)."""
        found = self.edge_ids[key] = len(self.edges)
        self.edges.append(edge)
        return found

    def run(self, run: str) -> _Run:
        found = self.runs.get(run)
        if found is None:
            if len(self.runs) >= _RUNS_KEPT:
                self.runs.pop(next(iter(self.runs)))
            found = self.runs[run] = _Run()
        return found

    def table(self, task: Task) -> list | None:
        """The run's surface table with the task's part added; None when an earlier part never came here."""
        table = self.run(task.run).table
        if len(table) < task.table_from:
            return None
        table.extend(task.table[len(table) - task.table_from:])
        return table


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
    table = search.table(task)
    if table is None:
        return _MISSING
    before = world.oracle_calls
    with no_cyclic_gc(stay_frozen=True), world.speedups():
        sids, starts, lengths, counts = _segments(search, task, table)
        return _gather(search, task, sids, starts, lengths, counts, world.oracle_calls - before)


def _segments(search: _Search, task: Task, table: list) -> tuple[np.ndarray, list, list, list]:
    """The packer's number of each state's surface, and the store segments of the partition's states' groups
    (made where new), in order: their starts and lengths, and how many each state has (its groups reversed
    under ``--reverse``)."""
    packer = search.packer
    per_core, b = packer.per_core, search.world.bounds
    numbers, inverse = np.unique(task.gsids, return_inverse=True)
    found = []
    for gsid in numbers.tolist():
        found.append(packer.surf_id(table[gsid]))
    sids = np.asarray(found, dtype=np.int64)[inverse.reshape(-1)]
    rests = task.lows // per_core
    rooms = (task.lows % per_core) // (packer.span_calls * packer.span_comps) < b.events
    recipe_of, recipe, big, make = packer.recipes.get, packer.recipe, packer.big, packer.make
    segments, segment = search.segments.get, search.segment
    starts: list = []
    lengths: list = []
    counts: list = []
    for sid, rest, room in zip(sids.tolist(), rests.tolist(), rooms.tolist()):
        count = 0
        for moves in (recipe_of(rest) or recipe(rest))[big[sid] + (0 if room else 2)]:
            if type(moves) is not list:  # a group's table: its moves on this surface
                table, moves = moves, moves.get(sid)
                if moves is None:
                    moves = make(table, sid, rest)
            if moves:
                start, length = segments(id(moves)) or segment(moves)
                starts.append(start)
                lengths.append(length)
                count += 1
        counts.append(count)
        if task.reverse and count > 1:
            starts[-count:] = starts[:-count - 1:-1]
            lengths[-count:] = lengths[:-count - 1:-1]
    return sids, starts, lengths, counts


def _gather(search: _Search, task: Task, sids: np.ndarray, starts: list, lengths: list, counts: list,
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
    owners = np.repeat(np.arange(len(counts), dtype=np.int64), np.asarray(counts, dtype=np.int64))
    src = np.repeat(owners, lengths_a)
    search.flush()
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
    run = search.run(task.run)
    successor = sids[src] * search.span + task.lows[src] + store[index]
    surface, action, edge = successor // search.span, act[index], edg[index]
    surfs, labels, records = packer.surfs, list(search.actions), search.edges
    new_surfaces = [(sid, surfs[sid], owner_hash(surfs[sid]))
                    for sid in run.untold(0, distinct(surface), task.fresh)]
    new_actions = [(number, labels[number]) for number in run.untold(1, distinct(action), task.fresh)]
    new_edges = [(number, records[number]) for number in run.untold(2, distinct(edge), task.fresh)]
    return Answer(search.token, src.astype(np.int32), surface.astype(np.int32), successor % search.span,
                  ds[index].astype(np.int16), dt[index].astype(np.int16), dg[index].astype(np.int16),
                  action, edge, new_surfaces, new_actions, new_edges, runs)
