"""Breadth-first exploration into a state graph, and canonical shortest paths (TLC/stateright style).

Every reachable state of the bounded world is visited once, level by level, so the first time a
state is found its depth is its distance from the initial state and any violation reported is at
the least depth possible. The graph is kept as flat lists (fast) and converted to a
``networkx.DiGraph`` for the progress checks. Paths are made *canonical*: among all shortest
paths to a target the one whose action labels are lexicographically least, so the result does
not depend on the order in which actions were tried.
"""
from __future__ import annotations

import gc
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from surfacecheck.core.memory import MemoryLimitReached

from .packed import S_SURF, Packer
from .safety import check_state
from .world import EVENTS, RET, SURF, World


@dataclass
class Exploration:
    """The explored graph: ``states[i]`` (a representative), ``depth[i]``, ``edges`` as
    ``(src, dst, action, edge)``, state violations, timings; the checks' arrays are made once (:mod:`.arrays`)."""

    world: World
    symmetry: bool
    states: list = field(default_factory=list)
    depth: list = field(default_factory=list)
    edges: list = field(default_factory=list)
    state_violations: dict = field(default_factory=dict)  # state index -> [(property, message)]
    seconds: float = 0.0
    complete: bool = True
    stopped: str | None = None  # why the search stopped early (a memory limit), when it did
    _preds: list | None = None
    _succs: list | None = None
    cache: dict = field(default_factory=dict)  # the whole-graph arrays (:mod:`.arrays`)
    columns: object = None  # the graph as arrays, when the search kept it so (:class:`.columns.Columns`)

    @property
    def max_depth(self) -> int:
        return int(max(self.depth)) if len(self.depth) else 0

    @property
    def rate(self) -> float:
        return len(self.states) / self.seconds if self.seconds > 0 else float("inf")

    def preds(self):
        """Per state, its incoming edges as ``(src, action, index)`` (a list per state, or read from the columns)."""
        if self._preds is None:
            if self.columns is not None:
                self._preds = _Incidence(self.columns, incoming=True)
            else:
                self._preds = [[] for _ in self.states]
                for index, (src, dst, action, _edge) in enumerate(self.edges):
                    self._preds[dst].append((src, action, index))
        return self._preds

    # -- canonical shortest paths ---------------------------------------------------------------
    def path_to(self, target) -> list[int]:
        """Edge indices of the canonical shortest path from the initial state to ``target`` (a state, or
        a set of states of equal depth: the path to whichever the least labels reach)."""
        targets = {target} if isinstance(target, int) else set(target)
        preds, depth = self.preds(), self.depth
        useful, layer = set(targets), set(targets)
        while layer:
            nxt = set()
            for dst in layer:
                for src, _action, _index in preds[dst]:
                    if depth[src] == depth[dst] - 1 and src not in useful:
                        nxt.add(src)
            useful |= nxt
            layer = nxt
        current, path = {0}, []
        while not current & targets:
            options = [(action, index) for src in current for _d, action, index in self._forward(src)
                       if self.edges[index][1] in useful and depth[self.edges[index][1]] == depth[src] + 1]
            best = min(action for action, _index in options)
            chosen = sorted(index for action, index in options if action == best)
            path.append(chosen[0])
            current = {self.edges[index][1] for index in chosen}
        return path

    def _forward(self, src: int):
        if self._succs is None and self.columns is not None:
            self._succs = _Incidence(self.columns, incoming=False)
        if self._succs is None:
            self._succs = [[] for _ in self.states]
            for index, (s, d, action, _edge) in enumerate(self.edges):
                self._succs[s].append((d, action, index))
        return self._succs[src]

    def labels(self, path: list[int]) -> list[str]:
        return [self.edges[index][2] for index in path]


class _Incidence:
    """Each state's incoming (or outgoing) edges read from the columns: ``[state]`` is a list of
    ``(src, action, index)`` (or ``(dst, action, index)``) in edge order, as :meth:`Exploration.preds` lists them."""

    def __init__(self, columns, incoming: bool):
        import numpy as np

        self.columns, self.incoming = columns, incoming
        ends = columns.dst if incoming else columns.src
        self.order = np.argsort(ends, kind="stable")
        self.starts = np.searchsorted(ends[self.order], np.arange(columns.gsid.size + 1))

    def __getitem__(self, state: int) -> list:
        c = self.columns
        at = self.order[self.starts[state]:self.starts[state + 1]]
        other = (c.src if self.incoming else c.dst)[at]
        return list(zip(other.tolist(), map(c.actions.__getitem__, c.action[at].tolist()), at.tolist()))


@contextmanager
def no_cyclic_gc(stay_frozen: bool = False):
    """The BFS allocates millions of small acyclic tuples; CPython's cyclic collector would rescan the
    ever-growing visited set at every generation-2 pass (half the run time). Reference counting still
    frees everything. Afterwards the survivors are moved to the oldest generation unscanned
    (``freeze`` + ``unfreeze``) so re-enabling the collector does not trigger one huge pass; with
    ``stay_frozen`` they stay out of the collector's sight for good (a worker's caches, kept between tasks,
    are not rescanned by the worker's own allocations in between)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if not stay_frozen:
            gc.unfreeze()
        if was:
            gc.enable()


MEMORY_EVERY = 4096
"""New states between two looks at the resident set (reading /proc/self/statm costs ~10 us)."""


def explore(world: World, *, symmetry: bool = True, reverse: bool = False, max_states: int | None = None,
            on_level=None, memory=None) -> Exploration:
    """BFS over every reachable state of ``world``. ``reverse`` tries actions in the opposite order
    (results must not change); ``max_states`` or a ``memory`` bound (:class:`surfacecheck.core.memory.MemoryLimit`)
    stops early (``complete`` is then False, ``stopped`` says why). The search over packed cores
    (:func:`_explore_packed`) unless the oracle re-runs every shared model run (``world.check_oracle``: the
    compact loop, :func:`_explore`); :mod:`.distributed` searches level by level across workers."""
    with no_cyclic_gc(), world.speedups():
        if not world.check_oracle:
            return _explore_packed(world, symmetry, reverse, max_states, on_level, memory)
        return _explore(world, symmetry, reverse, max_states, on_level, memory)


def _stop_early(exp: Exploration, max_states: int | None, memory, next_look: int) -> tuple[bool, int]:
    """Whether a bound on the states or the resident set is reached (the exploration is then marked
    incomplete, and why), and when to look at the memory next."""
    count = len(exp.states)
    if max_states is not None and count >= max_states:
        exp.complete = False
        return True, next_look
    if memory is not None and count >= next_look:
        next_look = count + MEMORY_EVERY
        try:
            memory.check()
        except MemoryLimitReached as reached:
            exp.complete, exp.stopped = False, f"incomplete at {count} states: {reached}"
            return True, next_look
    return False, next_look


def _levels(exp: Exploration, start: float, expand_state, max_states: int | None, memory,
            on_level) -> Exploration:
    """Breadth-first, level by level, from the initial state (index 0): ``expand_state(src, level, nxt)``
    records the edges of one state and appends the states it finds first to ``nxt``. Stops early at a bound
    on the states or the memory."""
    frontier, level, next_look = [0], 0, 0
    while frontier:
        nxt: list = []
        bounded = max_states is not None or memory is not None
        for src in frontier:
            expand_state(src, level, nxt)
            if bounded:
                stop, next_look = _stop_early(exp, max_states, memory, next_look)
                if stop:
                    nxt = []
                    break
        frontier, level = nxt, level + 1
        if on_level is not None:
            on_level(level, len(exp.states), len(exp.edges))
    exp.seconds = time.perf_counter() - start
    return exp


def _surface_checks(exp: Exploration):
    """The state invariants (spec 3: they read the surface only), judged once per surface ``key``."""
    found_for: dict = {}

    def check(dst: int, key, surf: tuple, ret: int, numbered: list | None = None) -> None:
        """``numbered``: the findings by surface number as well, None where not checked yet (the packed search
        calls this only for those and for a surface that breaks an invariant)."""
        found = found_for.get(key)
        if found is None:
            found = found_for[key] = check_state(surf, ret)
            if numbered is not None:
                numbered.extend([None] * (key + 1 - len(numbered)))
                numbered[key] = found
        if found:
            exp.state_violations[dst] = found

    return check


def _explore_packed(world: World, symmetry: bool, reverse: bool, max_states: int | None, on_level,
                    memory) -> Exploration:
    """The search over packed cores (:mod:`.packed`): a state is its packed core and counters in one
    integer, and a move adds a constant to it. Only a state seen for the first time is unpacked into a
    tuple (its representative). The same states, edges and order as :func:`_explore`."""
    exp = Exploration(world, symmetry)
    start = time.perf_counter()
    packer = Packer(world)
    b = world.bounds
    max_events, max_calls, max_comps, max_seq = b.events, b.tool_pairs, b.compactions, b.max_seq
    initial = world.initial()
    states, depth, edges = exp.states, exp.depth, exp.edges
    cores: list = [packer.pack(initial[:EVENTS])]
    packed: list = [packer.state(cores[0], 0, 0, 0)]
    ids = {packed[0] if symmetry else (packed[0], 0, 0, 0): 0}
    states.append(initial)
    depth.append(0)
    surfaces, groups, get, check = packer.surfs, packer.groups, ids.get, _surface_checks(exp)
    findings: list = []  # surface number -> its state invariants' findings, for the surfaces checked so far
    fields_of, decode = packer.fields.get, packer.decode
    recipe_of, recipe, big, make = packer.recipes.get, packer.recipe, packer.big, packer.make

    def expand_state(src: int, level: int, nxt: list) -> None:
        events, calls, comps, seq, turn, gen = states[src][EVENTS:]
        room_e, room_c, room_k = max_events - events, max_calls - calls, max_comps - comps
        room_s = sys.maxsize if max_seq is None else max_seq - seq
        core, here = cores[src], packed[src]
        if reverse:
            lists = [list(reversed(moves)) for moves in reversed(groups(core))]
        else:  # Packer.groups, inline
            sid, rest = divmod(core, S_SURF)
            lists = (recipe_of(rest) or recipe(rest))[big[sid] + (0 if room_e else 2)]
        for moves in lists:
            if type(moves) is not list:  # a group's table: its moves on this surface
                table, moves = moves, moves.get(sid)
                if moves is None:
                    moves = make(table, sid, rest)
            for action, dcore, dstate, de, dc, dk, ds, dt, dg, edge in moves:
                if de > room_e or dc > room_c or dk > room_k or ds > room_s:
                    continue
                key = here + dstate if symmetry else (here + dstate, seq + ds, turn + dt, gen + dg)
                dst = get(key)
                if dst is None:
                    dst = ids[key] = len(states)
                    succ = core + dcore
                    to_sid, to_rest = divmod(succ, S_SURF)
                    f = fields_of(to_rest) or decode(to_rest)  # (phase, pend, ret, ctx, retries, seen, routed)
                    states.append((f[0], f[1], surfaces[to_sid], f[2], f[3], f[4], f[5], f[6],
                                   events + de, calls + dc, comps + dk, seq + ds, turn + dt, gen + dg))
                    cores.append(succ)
                    packed.append(here + dstate)
                    depth.append(level + 1)
                    nxt.append(dst)
                    known = findings[to_sid] if to_sid < len(findings) else None
                    if known is None or known:  # not checked yet, or it breaks an invariant
                        check(dst, to_sid, surfaces[to_sid], f[2], findings)
                edges.append((src, dst, action, edge))

    return _levels(exp, start, expand_state, max_states, memory, on_level)


def _explore(world: World, symmetry: bool, reverse: bool, max_states: int | None, on_level, memory) -> Exploration:
    """The search over compact states. A state's identity is one integer: its core's number
    (:meth:`World.core_id`, hashed once per core) packed with the three bounded counters — the VIEW
    (:mod:`.canonical`) — or, without the reduction, that integer with the log length, turn and
    generation. Only a state seen for the first time is built as a tuple (its representative)."""
    exp = Exploration(world, symmetry)
    start = time.perf_counter()
    b = world.bounds
    span_calls, span_comps = b.tool_pairs + 1, b.compactions + 1
    per_core = (b.events + 1) * span_calls * span_comps
    max_seq = b.max_seq
    initial = world.initial()
    first_core = world.core_id(initial[:EVENTS])
    states, depth, edges = exp.states, exp.depth, exp.edges
    cores: list = [first_core]
    first = first_core * per_core
    ids = {first if symmetry else (first, 0, 0, 0): 0}
    states.append(initial)
    depth.append(0)
    check = _surface_checks(exp)

    def expand_state(src: int, level: int, nxt: list) -> None:
        events, calls, comps, seq, turn, gen = states[src][EVENTS:]
        moves = world.compact_moves(cores[src])
        for action, core, de, dc, dk, ds, dt, dg, edge in (reversed(moves) if reverse else moves):
            e, c, k = events + de, calls + dc, comps + dk
            if e > b.events or c > b.tool_pairs or k > b.compactions or (max_seq is not None and seq + ds > max_seq):
                continue
            packed = core * per_core + (e * span_calls + c) * span_comps + k
            dst = ids.get(packed if symmetry else (packed, seq + ds, turn + dt, gen + dg))
            if dst is None:
                dst = len(states)
                ids[packed if symmetry else (packed, seq + ds, turn + dt, gen + dg)] = dst
                states.append(world.cores[core] + (e, c, k, seq + ds, turn + dt, gen + dg))
                cores.append(core)
                depth.append(level + 1)
                nxt.append(dst)
                surf = world.cores[core][SURF]
                check(dst, surf, surf, world.cores[core][RET])
            edges.append((src, dst, action, edge))

    return _levels(exp, start, expand_state, max_states, memory, on_level)
