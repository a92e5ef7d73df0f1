"""The bounded world: abstract states and the alphabet of actions over the model (seed §4; spec 9-13).

A state is a flat tuple (cheap to hash)::

    (phase, pend, surf, ret, ctx, retries, seen, routed, events, calls, compactions, seq, turn, gen)

``phase`` I idle, P turn open between steps (pre-step next), S step open (request next), T tool
results pending (``pend`` of them; in P ``pend`` is the queued prompt code). ``surf`` the surface
as node codes (:mod:`.concrete`), ``ret`` the runtime-context retained state (-2 NEVER, -1 NONE,
else the surface index of the retained snapshot; spec 12), ``ctx`` the active runtime context
('', 'X', 'Y'), ``retries``/``seen`` compaction-basic's overflow bookkeeping (spec 10.2),
``routed`` whether a request header is logged (spec 4.4). Then the bound counters (message
events, tool calls, compactions) and the *absolute* fields (log length, turn number, generation)
that the VIEW reduction drops (:mod:`.canonical`).

Actions (``name:argument``): ``prompt:U|V`` (idle), ``ctx:X|Y|-`` (idle or between steps),
``step:<summary outcome>`` (pre-step: runtime-context candidate, then the pressure listener, then
``step/start`` and the entered batch, claimed prompt then snapshot, dsh order; the protocol's
``pre_step {claimed}`` writes them so — spec 13 steps 4-7), ``reply:A|T1|T2`` (a request that fits),
``overflow:<outcome>`` (a request at or over the window fails, spec 10), ``result:R|S``,
``manual:<outcome>`` (``/compact``, idle), ``prune`` and ``reload`` (crash + reopen with
`session/end-seed`, idle). Summary outcomes: good, big (not smaller), fail, cancel, concurrent.
Compaction transitions run the model through :mod:`.oracle`; the rest is bookkeeping.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from surfacecheck.model.seams import using

from . import oracle
from .shape import SHARED_OPS, masked, pruned_at, rebase, retain_tokens, signature, view
from .variants import CORRECT, Variant

OUTCOMES = ("good", "big", "fail", "cancel", "concurrent")
VIEW_LEN = 11  # fields before the absolute ones
(PHASE, PEND, SURF, RET, CTX, RETRIES, SEEN, ROUTED, EVENTS, CALLS, COMPS, SEQ, TURN, GEN) = range(14)


@dataclass(frozen=True)
class Bounds:
    """``--events`` message events (prompts, replies, results), ``--tool-pairs`` tool calls,
    ``--compactions`` successful checkpoints (+ concurrent-change attempts); ``max_seq`` caps the
    log length (needed only without the VIEW reduction, where seqs make every state distinct)."""

    events: int = 5
    tool_pairs: int = 2
    compactions: int = 1
    max_seq: int | None = None


class Edge(NamedTuple):
    """What a transition did: its kind, whether a typed failure was recorded, the pressure result
    kind (step edges), whether a step completed, the invariant violations found, and a label."""

    kind: str
    failure: bool
    pkind: str
    completes: bool
    violations: tuple
    label: str


@dataclass
class World:
    bounds: Bounds = field(default_factory=Bounds)
    settings: oracle.Settings = field(default_factory=oracle.Settings)
    variant: Variant = CORRECT
    outcomes: tuple = OUTCOMES
    shared: bool = True  # share model runs across surfaces of one shape (.shape); False: one run per surface
    check_oracle: bool = False  # also run the model on every real surface and record any difference
    memos = oracle.SPEEDUPS  # the seams memoised while the model runs (a class attribute, not a field)

    def __post_init__(self):
        self._cache: dict = {}
        self._runs: dict = {}
        self._candidates: dict = {}
        self.oracle_calls = 0
        self.oracle_checks = 0
        self.oracle_mismatches: list = []
        self._retain = retain_tokens(self.settings)
        self._groups: dict = {}
        self._memoised = oracle.memoised(self.memos)  # the pure helpers memoised, for the whole search
        self._seams = self.variant.seams(self._memoised)  # and the variant's bug on top
        self._surface_effects: dict = {}  # (op, phase, surf, routed, retries, outcomes) -> [(outcome, effect)]
        self._retained_moves: dict = {}  # the same + the retained index -> the op's moves, core fields aside
        self._core_ids: dict = {}  # core -> its number (:meth:`core_id`)
        self.cores: list = []  # number -> core
        self._compact: list = []  # number -> its moves with successor cores as numbers (None: not yet built)
        self._view = view  # the memo key of a shared run (:func:`.shape.view`)

    def speedups(self):
        """The model's memoised pure helpers (:data:`.oracle.SPEEDUPS`) active, for a whole search (each
        model run makes them active too, with the variant's bug on top)."""
        return using(self._memoised)

    def initial(self) -> tuple:
        return ("I", "", (), -2, "", 0, False, False, 0, 0, 0, 0, 0, 0)

    # -- the model-run part, memoised ---------------------------------------------------------------
    def _run(self, op, phase, surf, routed, retries, seen, outcome) -> oracle.Effect:
        """The model's effect, memoised on what the op reads: overflow bookkeeping only for overflow,
        the summary outcome only when the summarizer is consulted (a `compaction/start` written),
        and for the compaction ops and reload the surface's *shape* only (:mod:`.shape`)."""
        if not (self.shared and op in SHARED_OPS):
            return self._exact(op, phase, surf, routed, retries, outcome)
        eff = self._memo(op, phase, self._view(op, surf, outcome, routed, self.settings), surf, routed, retries, outcome)
        if eff.violations:  # re-run on the real surface: violation messages name its own seqs
            return self._exact(op, phase, surf, routed, retries, outcome)
        eff = rebase(eff, surf)
        if self.check_oracle:
            exact = self._exact(op, phase, surf, routed, retries, outcome)
            self.oracle_checks += 1
            if _semantic(exact) != _semantic(eff):
                self.oracle_mismatches.append({"op": op, "phase": phase, "surface": list(surf), "routed": routed,
                                               "retries": retries, "outcome": outcome,
                                               "model": _describe(exact), "shared": _describe(eff)})
        return eff

    def _exact(self, op, phase, surf, routed, retries, outcome) -> oracle.Effect:
        return self._memo(op, phase, surf, surf, routed, retries, outcome)

    def _memo(self, op, phase, view, surf, routed, retries, outcome) -> oracle.Effect:
        base = (op, phase, view, routed) + ((retries,) if op == "overflow" else ())  # spec 10.2 reads retries only
        eff = self._runs.get(base)  # set when the summarizer was not consulted: any outcome is the same
        if eff is not None:
            return eff
        key = base + (outcome,)
        eff = self._runs.get(key)
        if eff is None:
            self.oracle_calls += 1
            with using(self._seams):
                eff = self._runs[key] = oracle.run(op, phase, surf, routed, retries, op == "overflow", outcome,
                                                   self.settings)
            if not eff.consulted:
                self._runs[base] = eff
        return eff

    def _candidate(self, ret, surf, ctx):
        key = (surf[ret] if ret >= 0 else ret, ctx)
        if key not in self._candidates:
            with using(self._seams):
                self._candidates[key] = oracle.candidate(ret, surf, ctx)
        return self._candidates[key]

    # -- compact cores: what the search loop reads ------------------------------------------------
    def core_id(self, core: tuple) -> int:
        """The number of a core (the state minus its counters); a new core gets the next number."""
        number = self._core_ids.get(core)
        if number is None:
            number = self._core_ids[core] = len(self.cores)
            self.cores.append(core)
            self._compact.append(None)
        return number

    def compact_moves(self, number: int) -> list:
        """The moves of core ``number`` as ``(action, core number', Δevents, Δcalls, Δcompactions, Δseq, Δturn,
        Δgeneration, edge)``: the same list, in the same order, as :meth:`successors` reads, with each
        successor core hashed once here instead of once per explored edge."""
        moves = self._compact[number]
        if moves is None:
            ids, moves = self._core_ids, []
            for action, nxt, de, dc, dk, ds, dt, dg, edge in self._moves(*self.cores[number]):
                found = ids.get(nxt)
                moves.append((action, self.core_id(nxt) if found is None else found, de, dc, dk, ds, dt, dg, edge))
            self._compact[number] = moves
        return moves

    # -- transitions ------------------------------------------------------------------------------
    def successors(self, state: tuple, bounded: bool = True) -> list[tuple[str, tuple, Edge]]:
        """Every enabled action and its successor; bounds are applied here, per state (``bounded``)."""
        core = state[:EVENTS]
        moves = self._cache.get(core)
        if moves is None:
            moves = self._cache[core] = self._moves(*core)
        b, out = self.bounds, []
        events, calls, comps, seq, turn, gen = state[EVENTS:]
        for action, new_core, de, dc, dk, ds, dt, dg, edge in moves:
            if not bounded:
                pass
            elif events + de > b.events or calls + dc > b.tool_pairs or comps + dk > b.compactions:
                continue
            if bounded and b.max_seq is not None and seq + ds > b.max_seq:
                continue
            out.append((action, new_core + (events + de, calls + dc, comps + dk, seq + ds, turn + dt, gen + dg), edge))
        return out

    def _moves(self, phase, pend, surf, ret, ctx, retries, seen, routed) -> list:
        """The transitions of one core (the state minus counters): (action, core', Δevents, Δcalls,
        Δcompactions, Δseq, Δturn, Δgeneration, edge). Outcomes that do the same are one edge: each
        group of moves that could coincide (one op's outcomes) is deduplicated where it is made; moves
        of different groups never coincide (they differ in phase, runtime context or result kind)."""
        moves: list = []
        if phase in ("I", "P"):
            for c, action, edge in _CONTEXT_MOVES:
                if c != ctx:
                    moves.append((action, (phase, pend, surf, ret, c, retries, seen, routed), 0, 0, 0, 0, 0, 0, edge))
            if "S" in surf:
                self._effect_moves(moves, "prune", ("",), phase, pend, surf, ret, ctx, retries, seen, routed)
        if phase == "I":
            for code, action, edge in _PROMPT_MOVES:
                moves.append((action, ("P", code, surf, ret, ctx, 0, seen, routed), 1, 0, 0, 1, 1, 0, edge))
            self._effect_moves(moves, "manual", self.outcomes, phase, pend, surf, ret, ctx, retries, seen, routed)
            self._effect_moves(moves, "reload", ("",), phase, pend, surf, ret, ctx, retries, seen, routed)
        elif phase == "P":
            self._step_moves(moves, pend, surf, ret, ctx, retries, seen, routed)
        elif phase == "S":
            self._request_moves(moves, surf, ret, ctx, retries, seen, routed)
        else:  # T: tool results pending
            last = pend == 1
            for code, action, edge in _RESULT_MOVES[last]:
                moves.append((action, ("P" if last else "T", "" if last else pend - 1, surf + (code,), ret, ctx,
                                       retries, seen, routed), 1, 0, 0, 3 if last else 2, 0, 0, edge))
        return moves

    def _effects(self, op, phase, surf, routed, retries, outcomes) -> list:
        """``(outcome, effect)`` per summary outcome, memoised on the surface itself: the many cores that
        share a surface (and differ in runtime context, retained snapshot, queued prompt) share it."""
        if self.check_oracle:  # every core's runs are re-checked, as they always were
            return self._shaped_effects(op, phase, surf, routed, retries, outcomes)
        key = (op, phase, surf, routed, retries if op == "overflow" else 0, outcomes)
        found = self._surface_effects.get(key)
        if found is None:
            found = self._surface_effects[key] = self._shaped_effects(op, phase, surf, routed, retries, outcomes)
        return found

    def _shaped_effects(self, op, phase, surf, routed, retries, outcomes) -> list:
        """``(outcome, effect)`` per summary outcome; a run that consulted no summarizer is listed once
        (every outcome does the same). Shared runs are grouped by the surface's shape (:mod:`.shape`),
        so a new surface of a known shape costs one lookup and a positional rebase per outcome."""
        shared = self.shared and op in SHARED_OPS and not self.check_oracle
        if shared:
            group_key = self.group_key(op, phase, surf, routed, retries, outcomes)
            group = self._groups.get(group_key)
            if group is not None:
                return [(outcome, self._exact(op, phase, surf, routed, retries, outcome) if eff.violations
                         else rebase(eff, surf)) for outcome, eff in group]
        out = []
        for outcome in outcomes:
            eff = self._run(op, phase, surf, routed, retries, False, outcome)
            out.append((outcome, eff))
            if not eff.consulted:
                break
        if shared:
            self._groups[group_key] = out
        return out

    def group_key(self, op, phase, surf, routed, retries, outcomes) -> tuple:
        """The shape group of ``op``'s shared runs that ``surf`` belongs to (:mod:`.shape`): its effects are
        the group's, rebased."""
        return (op, phase, len(surf) if op == "reload" else pruned_at(surf) if op == "prune"
                else signature(surf, self._retain if op == "pressure" else 0),
                routed, retries if op == "overflow" else 0, outcomes)

    def _effect_moves(self, moves, op, outcomes, phase, pend, surf, ret, ctx, retries, seen, routed, memo=True):
        """An op's moves from a core (``memo``: keep them per surface and retained index, for the cores that
        share those; the packed search keeps its own, :mod:`.packed`)."""
        made = self._retained(op, outcomes, phase, surf, ret, retries, routed) if memo else \
            self._made(op, outcomes, phase, surf, ret, retries, routed)
        for action, new_surf, new_ret, reloaded, deltas, edge in made:
            new_retries, new_seen = reloaded if reloaded else (retries, seen)
            moves.append((action, (phase, pend, new_surf, new_ret, ctx, new_retries, new_seen, routed)) + deltas
                         + (edge,))

    def _retained(self, op, outcomes, phase, surf, ret, retries, routed) -> list:
        """An op's moves from a surface and retained index (what they depend on; spec 12 moves the index):
        ``(action, surface', retained', (retries', seen') after a reload or None, deltas, edge)``."""
        key = (op, outcomes, phase, surf, ret, retries if op == "overflow" else 0, routed)
        found = None if self.check_oracle else self._retained_moves.get(key)
        if found is None:
            found = self._made(op, outcomes, phase, surf, ret, retries, routed)
            if not self.check_oracle:
                self._retained_moves[key] = found
        return found

    def _made(self, op, outcomes, phase, surf, ret, retries, routed) -> list:
        found, made = [], set()  # what tells two moves apart (the successor, deltas, and the edge's kind)
        for outcome, eff in self._effects(op, phase, surf, routed, retries, outcomes):
            new_ret = oracle.follow_retained(op, ret, eff)
            if op in ("prune", "reload") and eff.events == 0 and eff.surf == surf and new_ret == ret and not eff.violations:
                continue
            reloaded, deltas = (eff.retries, eff.seen) if op == "reload" else None, (0, 0, _comps(eff), eff.events, 0, eff.gen)
            key = (eff.surf, new_ret, reloaded, deltas, eff.violations, eff.failure, eff.kind)
            if key not in made:
                made.add(key)
                found.append((f"{op}:{outcome}" if outcome else op, eff.surf, new_ret, reloaded, deltas,
                              Edge(op, eff.failure, eff.kind, False, eff.violations, eff.label)))
        return found

    def _step_moves(self, into, pend, surf, ret, ctx, retries, seen, routed):
        """Pre-step (spec 13 steps 4-7): candidate first, then the pressure listener, then the entries."""
        moves: list = []
        cand = self._candidate(ret, surf, ctx)
        if routed:
            effects = self._effects("pressure", "P", surf, routed, retries, self.outcomes)
        else:  # spec 9.2 step 1: no routed target, no events
            effects = [(self.outcomes[0], oracle.Effect(surf, tuple(range(len(surf))), retries, seen, "unrouted", False,
                                                        0, 0, 0, False, (), "pressure: no route"))]
        for outcome, eff in effects:
            entered = ((pend,) if pend else ()) + ((cand,) if cand else ())  # D9: snapshot last
            new_surf = eff.surf + entered
            new_ret = len(new_surf) - 1 if cand else oracle.follow_retained("pressure", ret, eff)
            label = f"pre-step {eff.label}; step/start" + (f"; entered {' '.join(entered)}" if entered else "")
            moves.append((f"step:{outcome}", ("S", "", new_surf, new_ret, ctx, retries, seen, routed),
                          0, 0, _comps(eff), eff.events + 1 + len(entered), 0, _gen(surf, eff),
                          Edge("step", eff.failure, eff.kind, False, eff.violations, label)))
        into.extend(_dedupe(moves))

    def _request_moves(self, moves, surf, ret, ctx, retries, seen, routed):
        """A request (spec 13 step 8): it fits and a reply lands, or it overflows (spec 10.1)."""
        route = 0 if routed else 2
        if oracle.total(surf) < self.settings.context_window:
            after_retries = 0 if seen else retries  # spec 10.2 (D3): reset on an assistant/message after overflow
            moves.append(("reply:A", ("I", "", surf + ("A",), ret, ctx, 0, seen, True), 1, 0, 0, route + 5 + 1 + 3, 0, 0,
                          _REPLY_EDGES[0]))
            for k in (1, 2):
                moves.append((f"reply:T{k}", ("T", k, surf + (f"T{k}",), ret, ctx, after_retries, seen, True), 1, k, 0,
                              route + 3 * k + 2 + 1, 0, 0, _REPLY_EDGES[k]))
            return
        overflows: list = []
        for outcome, eff in self._effects("overflow", "S", surf, True, retries, self.outcomes):
            retry = eff.kind == "retry"
            new_ret = oracle.follow_retained("overflow", ret, eff)
            nxt = ("S", "", eff.surf, new_ret, ctx, eff.retries, eff.seen, True) if retry else \
                  ("I", "", eff.surf, new_ret, ctx, 0, eff.seen, True)
            overflows.append((f"overflow:{outcome}", nxt, 0, 0, _comps(eff), route + 1 + eff.events + (0 if retry else 3),
                          0, _gen(surf, eff), Edge("overflow", eff.failure, eff.kind, not retry, eff.violations,
                                                   f"request overflowed; {eff.label}")))
        moves.extend(_dedupe(overflows))


# The moves that run no model: their edges are constants (made once, not once per core).
_CONTEXT_MOVES = tuple((c, f"ctx:{c or '-'}", Edge("ctx", False, "", False, (), f"runtime context -> {c or 'none'}"))
                       for c in ("", "X", "Y"))
_PROMPT_MOVES = tuple((code, f"prompt:{code}", Edge("prompt", False, "", False, (), f"turn/start; prompt {code} queued"))
                      for code in ("U", "V"))
_RESULT_MOVES = {last: tuple((code, f"result:{code}", Edge("result", False, "", last, (), f"tool/call + tool/result {code}"
                                                           + ("; step/end" if last else "")))
                             for code in ("R", "S")) for last in (False, True)}
_REPLY_EDGES = (Edge("reply", False, "", True, (), "request; assistant text; step/end; turn/end"),) + tuple(
    Edge("reply", False, "", False, (), f"request; assistant with {k} tool call(s)") for k in (1, 2))


def _semantic(eff: oracle.Effect) -> tuple:
    """Everything of an effect that decides the state graph, and its label but for the numbers in it (a
    shared run reports its representative's token counts, :func:`.shape.masked`)."""
    return (eff.surf, eff.ret, eff.retries, eff.seen, eff.kind, eff.failure, eff.events, eff.gen, eff.checkpoints,
            eff.concurrent, eff.violations, masked(eff.label), eff.consulted)


def _describe(eff: oracle.Effect) -> dict:
    return {"surface": list(eff.surf), "moved": list(eff.ret), "kind": eff.kind, "events": eff.events,
            "generation": eff.gen, "violations": [list(v) for v in eff.violations], "label": eff.label}


def _comps(eff: oracle.Effect) -> int:
    return eff.checkpoints + (1 if eff.concurrent and not eff.checkpoints else 0)


def _gen(surf, eff) -> int:
    return eff.gen


def _kind(edge: Edge) -> tuple:
    """What :func:`_dedupe` compares of two edges besides successor and deltas."""
    return edge.violations, edge.failure, edge.pkind


def _dedupe(moves: list) -> list:
    """Keep the first action per distinct (successor, deltas): outcomes that do the same are one edge."""
    seen, out = set(), []
    for move in moves:
        key = move[1:8] + _kind(move[8])
        if key not in seen:
            seen.add(key)
            out.append(move)
    return out
