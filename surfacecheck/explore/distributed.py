"""``explore --workers N``: the packed search level by level, each level's frontier partitioned across workers.

The search stays breadth-first. Before a level is searched its frontier is cut into one partition per worker
by a stable hash of each state's surface's split and tail (:func:`.partition.owner_hash`: the surfaces that
share model runs and move templates mostly meet one worker's caches); each partition is one task pinned to its worker, which
makes the moves and gathers the edges there (:mod:`.partition`), and the answers come back as arrays. Here,
in this process, the answers are merged into the order the search in one process visits them — the frontier
in order, each state's moves in the world's order — by a stable sort on the source's frontier position; the
successors are told apart from the visited set by sorting (``numpy.unique``, ``searchsorted``), and the new
ones numbered in the order they are first reached. So the states, their numbers and depths, every edge with
its label, the state violations, the verdicts and the shortest traces are those of the search in one process
(:func:`.bfs.explore`) whatever the number of workers; only the cost figures differ.

A state is an integer here as in the packed search: the number of its surface in this process's table times
the span of the rest (its core's other fields and its counters, :mod:`.packed`), plus the rest; a worker sends
a successor's surface itself only where it does not know this process's number for it.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

import numpy as np

from surfacecheck.core.memory import MemoryLimitReached

from .bfs import Exploration, no_cyclic_gc
from .columns import Columns, Edges, States
from .layout import S_SURF
from .packed import Packer
from .safety import check_state
from .partition import Answer, Task, expand_partition, owner_hash, world_config
from .world import EVENTS, SURF, World

_EXTRA = 1 << 20
"""Radix of the log length, turn and generation in a state's identity without the VIEW reduction."""
_PAIR = np.dtype([("key", np.int64), ("absolute", np.int64)])


@dataclass(frozen=True)
class _Level:
    """One merged level: its edges (source, successor, action and edge numbers, in the search's order) and its
    new states (surface number, rest, log length, turn, generation, and their numbers, in order)."""

    src: np.ndarray
    dst: np.ndarray
    action: np.ndarray
    edge: np.ndarray
    gsid: np.ndarray
    low: np.ndarray
    seq: np.ndarray
    turn: np.ndarray
    gen: np.ndarray
    ids: np.ndarray


class _Map:
    """A worker's numbers to this process's, as far as the worker told them."""

    def __init__(self):
        self.values = np.full(0, -1, np.int64)

    def learn(self, pairs: list) -> None:
        if not pairs:
            return
        theirs, ours = (np.array(column, dtype=np.int64) for column in zip(*pairs))
        if theirs.max() >= self.values.size:
            self.values = np.concatenate([self.values, np.full(int(theirs.max()) + 1 - self.values.size, -1)])
        self.values[theirs] = ours

    def knows(self, numbers: np.ndarray) -> bool:
        return not numbers.size or (int(numbers.max()) < self.values.size and int(self.values[numbers].min()) >= 0)

    def __getitem__(self, numbers: np.ndarray) -> np.ndarray:
        return self.values[numbers]


@dataclass
class Figures:
    """What the distributed search cost: partitions per level, tasks, model runs made on the workers, tasks
    sent again with the whole surface table."""

    partitions: int
    tasks: int = 0
    model_runs: int = 0
    resent: int = 0  # tasks sent again with the whole surface table (their worker missed part of it)


def explore_partitioned(world: World, run_map, partitions: int, *, symmetry: bool = True, reverse: bool = False,
                        on_level=None, memory=None) -> tuple[Exploration, Figures]:
    """BFS over every reachable state of ``world``, each level's frontier in ``partitions`` partitions
    expanded by ``run_map(expand_partition, tasks)`` (``Pool.map`` pinned, or the builtin map in this
    process). ``memory`` stops the search at a level's end once the resident set passes its bound."""
    with no_cyclic_gc():
        return _Search(world, run_map, partitions, symmetry, reverse).run(on_level, memory)


class _Search:
    def __init__(self, world: World, run_map, partitions: int, symmetry: bool, reverse: bool):
        self.world, self.run_map, self.symmetry, self.reverse = world, run_map, symmetry, reverse
        self.figures = Figures(partitions)
        self.exp = Exploration(world, symmetry)
        self.packer = Packer(world)  # decodes a core's fields; its surface table is this process's
        self.span = S_SURF * self.packer.per_core
        self.config, self.run_id = world_config(world), uuid.uuid4().hex
        self.surfaces: list = []
        self.sent = 0  # the surfaces the workers were sent (numbered before the last level's tasks were made)
        self.surface_ids: dict = {}
        self.hashes: list = []  # surface number -> its owner hash
        self.actions: list = []
        self.action_ids: dict = {}
        self.edges: list = []
        self.edge_ids: dict = {}
        self.levels: list = []  # per level: its edges' source, target, action and edge-record numbers
        self.level_sizes: list = []  # per level: the states it found first
        self.edge_count = 0
        self.told: dict = {}  # worker token -> its surfaces', labels' and records' numbers here (_Map each)
        # per state, in state order: surface number, rest, log length, turn, generation
        self.gsid = np.zeros(0, np.int64)
        self.low = np.zeros(0, np.int64)
        self.seq = self.turn = self.gen = np.zeros(0, np.int64)
        self.keys = np.zeros(0, np.int64 if symmetry else _PAIR)  # the visited identities, sorted
        self.ids = np.zeros(0, np.int64)  # the state number of each, aligned

    def intern(self, surf: tuple, hashed: int | None = None) -> int:
        number = self.surface_ids.get(surf)
        if number is None:
            number = self.surface_ids[surf] = len(self.surfaces)
            self.surfaces.append(surf)
            self.hashes.append(owner_hash(surf) if hashed is None else hashed)
        return number

    def identity(self, gsid: np.ndarray, low: np.ndarray, seq, turn, gen) -> np.ndarray:
        """A state's identity: with the VIEW its surface and rest (one integer); without, that and its log length,
        turn and generation (a pair, sorted field by field)."""
        key = gsid * self.span + low
        if self.symmetry:
            return key
        pairs = np.empty(key.size, _PAIR)
        pairs["key"], pairs["absolute"] = key, (seq * _EXTRA + turn) * _EXTRA + gen
        return pairs

    def run(self, on_level, memory) -> tuple[Exploration, Figures]:
        """Level by level: the workers expand a level's frontier, this process merges their answers; the
        explored graph stays in columns (:mod:`.columns`)."""
        exp, start = self.exp, time.perf_counter()
        initial = self.world.initial()
        first = _Level(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                       np.array([self.intern(initial[SURF])]),
                       np.array([self.packer.pack(initial[:EVENTS]) % S_SURF * self.packer.per_core]),
                       np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64))
        self._number(first, None)
        self._keep(first)
        frontier, level = first.ids, 0
        while frontier.size:
            found = self._merge(frontier, self._expand(frontier), level)
            frontier, level = found.ids, level + 1
            self._keep(found)
            if on_level is not None:
                on_level(level, self.gsid.size, self.edge_count)
            if memory is not None and frontier.size:
                try:
                    memory.check()
                except MemoryLimitReached as reached:
                    exp.complete, exp.stopped = False, f"incomplete at {self.gsid.size} states: {reached}"
                    break
        self._columns()
        exp.seconds = time.perf_counter() - start
        return exp, self.figures

    def _keep(self, found: "_Level") -> None:
        """A level's edges (in order) and how many states it found first."""
        self.levels.append((found.src.astype(np.int32), found.dst.astype(np.int32), found.action.astype(np.int32),
                            found.edge.astype(np.int32)))
        self.level_sizes.append(found.ids.size)
        self.edge_count += found.src.size

    def _columns(self) -> None:
        """The explored graph in columns; the state invariants (they read the surface only) judged once per
        surface."""
        exp, packer = self.exp, self.packer
        counters = self.low % packer.per_core
        span_e = packer.span_calls * packer.span_comps
        edges = [np.concatenate([level[i] for level in self.levels]) for i in range(4)]
        columns = Columns(self.surfaces, self.gsid, self.low // packer.per_core, counters // span_e,
                          counters % span_e // packer.span_comps, counters % packer.span_comps, self.seq, self.turn,
                          self.gen, *edges, self.actions, self.edges)
        exp.columns, exp.states, exp.edges = columns, States(columns), Edges(columns)
        exp.depth = np.repeat(np.arange(len(self.level_sizes)), self.level_sizes).tolist()
        found = {g: check_state(surf, 0) for g, surf in enumerate(self.surfaces)}
        broken = np.array([g for g, judged in found.items() if judged], dtype=np.int64)
        for index in np.flatnonzero(np.isin(self.gsid, broken)).tolist():
            exp.state_violations[index] = found[int(self.gsid[index])]

    def _expand(self, frontier: np.ndarray) -> tuple[list, list]:
        """The frontier's partitions (positions in it) and their answers, from the workers. A task carries the
        surfaces numbered since the previous level's tasks; one that reached a worker without the earlier ones
        (:attr:`.partition.Answer.missing`) goes again with the whole table."""
        count = self.figures.partitions
        owner = np.asarray(self.hashes, dtype=np.int64)[self.gsid[frontier]] % count
        positions = [np.flatnonzero(owner == part) for part in range(count)]
        sent, self.sent = self.sent, len(self.surfaces)
        answers = list(self.run_map(expand_partition, [self._task(frontier[where], sent) for where in positions]))
        again = [part for part, answer in enumerate(answers) if answer.missing]
        if again:
            resent = self.run_map(expand_partition, [self._task(frontier[positions[part]], 0) for part in again])
            for part, answer in zip(again, resent):
                answers[part] = answer
            self.figures.resent += len(again)
        for answer in answers:  # first all of them: two partitions may come from one worker
            self._learn(answer)
        untold = [part for part, answer in enumerate(answers) if not self._understood(answer)]
        if untold:  # defensive: a worker's telling went astray (its answer was run twice, one kept)
            fresh = self.run_map(expand_partition, [self._task(frontier[positions[part]], 0, fresh=True)
                                                    for part in untold])
            for part, answer in zip(untold, fresh):
                self._learn(answer)
                answers[part] = answer
        self.figures.tasks += len(positions) + len(again) + len(untold)
        self.figures.model_runs += sum(answer.model_runs for answer in answers)
        return positions, answers

    def _learn(self, answer: Answer) -> None:
        """Record what a worker told: the meaning of its new surface, label and record numbers."""
        surfaces, actions, edges = self.told.setdefault(answer.token, (_Map(), _Map(), _Map()))
        surfaces.learn([(n, self.intern(surf, hashed)) for n, surf, hashed in answer.new_surfaces])
        actions.learn([(n, self._index(self.action_ids, self.actions, a)) for n, a in answer.new_actions])
        edges.learn([(n, self._index(self.edge_ids, self.edges, e)) for n, e in answer.new_edges])

    def _understood(self, answer: Answer) -> bool:
        maps = self.told[answer.token]
        return all(m.knows(numbers) for m, numbers in zip(maps, (answer.surface, answer.action, answer.edge)))

    def _merge(self, frontier: np.ndarray, expanded: tuple, level: int) -> "_Level":
        """One level's edges in the search's order, its successors told apart from the visited set, the new
        states numbered in the order they are first reached (arrays only)."""
        positions, answers = expanded
        src, gsid, low, ds, dt, dg, action, edge = self._merged(answers, positions)
        src = frontier[src]
        seq, turn, gen = self.seq[src] + ds, self.turn[src] + dt, self.gen[src] + dg
        keys = self.identity(gsid, low, seq, turn, gen)
        unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        where = np.searchsorted(self.keys, unique)
        seen = where < self.keys.size
        seen[seen] = self.keys[where[seen]] == unique[seen]
        ids = np.empty(unique.size, np.int64)
        ids[seen] = self.ids[where[seen]]
        fresh = np.flatnonzero(~seen)
        fresh = fresh[np.argsort(first[fresh], kind="stable")]  # numbered in the order first reached
        base = self.gsid.size
        ids[fresh] = np.arange(base, base + fresh.size)
        at = first[fresh]
        found = _Level(src, ids[inverse.reshape(-1)], action, edge, gsid[at], low[at], seq[at], turn[at], gen[at],
                       ids[fresh])
        self._number(found, unique[fresh])
        return found

    def _number(self, found: "_Level", keys) -> None:
        """Record a level's new states in the arrays the next level's tasks and merge read."""
        self.gsid = np.concatenate([self.gsid, found.gsid])
        self.low = np.concatenate([self.low, found.low])
        self.seq, self.turn, self.gen = (np.concatenate([self.seq, found.seq]), np.concatenate([self.turn, found.turn]),
                                         np.concatenate([self.gen, found.gen]))
        if keys is None:  # the initial state
            keys = self.identity(found.gsid, found.low, found.seq, found.turn, found.gen)
        order = np.argsort(keys, kind="stable")  # the visited set stays sorted: one merge per level
        where = np.searchsorted(self.keys, keys[order])
        self.keys = np.insert(self.keys, where, keys[order])
        self.ids = np.insert(self.ids, where, found.ids[order])

    def _task(self, states: np.ndarray, table_from: int, fresh: bool = False) -> Task:
        return Task(self.config, self.run_id, self.reverse, self.gsid[states], self.low[states],
                    None if self.world.bounds.max_seq is None else self.seq[states], table_from,
                    tuple(self.surfaces[table_from:self.sent]), fresh)

    def _merged(self, answers: list[Answer], positions: list[np.ndarray]) -> tuple:
        """Every partition's edges in this process's numbering, in the order of the search in one process."""
        parts = []
        for answer, where in zip(answers, positions):
            surfaces, actions, edges = self.told[answer.token]
            parts.append((where[answer.src], surfaces[answer.surface], answer.low, answer.ds, answer.dt, answer.dg,
                          actions[answer.action], edges[answer.edge]))
        columns = [np.concatenate([part[i] for part in parts]).astype(np.int64) for i in range(8)]
        order = np.argsort(columns[0], kind="stable")
        return tuple(column[order] for column in columns)

    @staticmethod
    def _index(ids: dict, values: list, value) -> int:
        found = ids.get(value)
        if found is None:
            found = ids[value] = len(values)
            values.append(value)
        return found
