"""Packed cores and relative moves: what the search loop reads, as integers (issue 19).

A core (a state minus its bound counters, :mod:`.world`) is packed into one integer: its surface as
the number of an interned surface, then the retained index, whether a header is routed, the overflow
bookkeeping, the runtime context, the queued prompt or pending results, and the phase, each in a
fixed radix. A transition changes a few of those fields; the moves of one *group* (the runtime
context moves, an op of the model, the step, the request, the tool results) read only some fields
of the core — its *key* — and change only fields of that key, so the successor is the source plus a
constant: the group's moves are made once per key, as ``(action, Δcore, Δevents, Δcalls,
Δcompactions, Δseq, Δturn, Δgeneration, edge)``, and a state's moves are the concatenation of its
groups' lists, in :meth:`.world.World._moves` order. Which fields each group reads and writes:

=========== ======= ============================================ ============================
group       phases  key (fields read)                            fields written
=========== ======= ============================================ ============================
ctx         I, P    runtime context                              runtime context
prune       I, P    phase, surface, retained, routed (spec 6)    surface, retained
prompt      I       queued prompt, overflow retries              phase, queued, retries
manual      I       surface, retained, routed (spec 11)          surface, retained
reload      I       surface, retained, retries, seen, routed     surface, retained, retries, seen
step        P       queued, surface, retained, context, retries, phase, queued, surface, retained
                    routed (spec 9, 12, 13)
request     S       queued, surface, retained, retries, seen,    phase, queued, surface, retained,
                    routed (spec 10, 13)                         retries, seen, routed
result      T       pending, surface                             phase, pending, surface
=========== ======= ============================================ ============================

Each group's list is built by the world's own move makers on the first core with that key, so the
moves are the world's; only the bookkeeping differs (one integer addition per edge instead of a
core tuple hashed per move). ``tests/test_explore_packed.py`` compares the graphs edge by edge.
"""
from __future__ import annotations

from . import oracle
from .shape import rebase_plan
from .world import _CONTEXT_MOVES, _PROMPT_MOVES, _RESULT_MOVES, Edge, World, _comps

PHASES = ("I", "P", "S", "T")
PENDS = ("", "U", "V", 1, 2)
CONTEXTS = ("", "X", "Y")
RETRIES_RADIX = 16
RET_RADIX = 256  # retained index + 2 (-2 NEVER, -1 NONE): surfaces stay far shorter at any bound we run

_PHASE = {p: i for i, p in enumerate(PHASES)}
_PEND = {p: i for i, p in enumerate(PENDS)}
_CTX = {c: i for i, c in enumerate(CONTEXTS)}
S_PEND = 4
S_CTX = S_PEND * len(PENDS)
S_RETRIES = S_CTX * len(CONTEXTS)
S_SEEN = S_RETRIES * RETRIES_RADIX
S_ROUTED = S_SEEN * 2
S_RET = S_ROUTED * 2
S_SURF = S_RET * RET_RADIX


class Packer:
    """Interned surfaces, packed cores, and the relative move lists of each group (memoised on its key)."""

    def __init__(self, world: World):
        self.world = world
        b = world.bounds
        self.span_calls, self.span_comps = b.tool_pairs + 1, b.compactions + 1
        self.per_core = (b.events + 1) * self.span_calls * self.span_comps  # a state: core * per_core + counters
        self.surfs: list[tuple] = []
        self._surf_ids: dict[tuple, int] = {}
        self._big: list[bool] = []  # whether the surface holds a big tool result (the pruner has work)
        self._groups: dict = {}
        self.fields: dict = {}  # the core but its surface -> its fields
        self._recipes: dict = {}  # the same -> its groups (:meth:`_recipe`)
        self._tables: dict = {}  # a group's key but the surface -> {surface number: relative moves}
        self._templates: dict = {}  # a shape group (World.group_key) -> its moves' template (:meth:`_template`)
        self._snapshots: dict = {}  # surface number -> the index of its newest snapshot (None: none)
        self._ctx = [self._relative_ctx(ctx) for ctx in CONTEXTS]

    # -- packing ------------------------------------------------------------------------------------
    def surf_id(self, surf: tuple) -> int:
        number = self._surf_ids.get(surf)
        if number is None:
            number = self._surf_ids[surf] = len(self.surfs)
            self.surfs.append(surf)
            self._big.append("S" in surf)
        return number

    def pack(self, core: tuple) -> int:
        phase, pend, surf, ret, ctx, retries, seen, routed = core
        if not (0 <= retries < RETRIES_RADIX and -2 <= ret < RET_RADIX - 2):
            raise ValueError(f"core out of the packed ranges: retries {retries}, retained {ret}")
        sid = self._surf_ids.get(surf)
        return ((self.surf_id(surf) if sid is None else sid) * S_SURF + (ret + 2) * S_RET + routed * S_ROUTED
                + seen * S_SEEN + retries * S_RETRIES + _CTX[ctx] * S_CTX + _PEND[pend] * S_PEND + _PHASE[phase])

    def unpack(self, core: int) -> tuple:
        sid, rest = divmod(core, S_SURF)
        f = self.fields.get(rest) or self.decode(rest)
        return (f[0], f[1], self.surfs[sid], f[2], f[3], f[4], f[5], f[6])

    def decode(self, packed: int) -> tuple:
        """The fields of a core but its surface: (phase, pend, ret, ctx, retries, seen, routed)."""
        rest, phase = divmod(packed, S_PEND)
        rest, pend = divmod(rest, len(PENDS))
        rest, ctx = divmod(rest, len(CONTEXTS))
        rest, retries = divmod(rest, RETRIES_RADIX)
        rest, seen = divmod(rest, 2)
        ret, routed = divmod(rest, 2)
        found = self.fields[packed] = (PHASES[phase], PENDS[pend], ret - 2, CONTEXTS[ctx], retries, bool(seen),
                                      bool(routed))
        return found

    # -- the moves of a core, as its groups' relative lists ------------------------------------------
    def groups(self, core: int) -> list:
        """The relative move lists of ``core``, in the world's move order."""
        sid, rest = divmod(core, S_SURF)
        recipe = self._recipes.get(rest)
        if recipe is None:
            recipe = self._recipe(rest)
        lists = []
        for table in recipe[self._big[sid]]:
            if type(table) is list:
                lists.append(table)
            else:
                found = table.get(sid)
                lists.append(self._make(table, sid, rest) if found is None else found)
        return lists

    def _recipe(self, rest: int) -> tuple:
        """Per the fields but the surface: the groups in move order, each a constant list (it reads no
        surface) or the table of its key (surface -> moves), for a surface without and with a big result."""
        phase, pend, ret, ctx, retries, seen, routed = self.fields.get(rest) or self.decode(rest)
        table = self._table
        context = self._ctx[_CTX[ctx]]
        if phase == "I":
            prune = table("prune", phase, ret, routed)
            rest_of = [self._constant(("prompt", pend, retries), rest), table("manual", ret, routed),
                       table("reload", ret, retries, seen, routed)]
            found = ([context] + rest_of, [context, prune] + rest_of)
        elif phase == "P":
            prune, step = table("prune", phase, ret, routed), table("step", pend, ret, ctx, retries, routed)
            found = ([context, step], [context, prune, step])
        elif phase == "S":
            request = table("request", pend, ret, retries, seen, routed)
            found = ([request], [request])
        else:
            result = table("result", pend)
            found = ([result], [result])
        self._recipes[rest] = found
        return found

    def _table(self, *key) -> "_Table":
        found = self._tables.get(key)
        if found is None:
            found = self._tables[key] = _Table(key[0])
        return found

    def _constant(self, key: tuple, rest: int) -> list:
        """A group that reads no surface (the prompt): one list for every surface."""
        found = self._groups.get(key)
        if found is None:
            found = self._groups[key] = self._make(_Table(key[0]), 0, rest)
        return found

    def _make(self, table: "_Table", sid: int, rest: int) -> list:
        """A group's relative moves, made by the world's move makers on the core ``sid``, ``rest`` (the first
        with this key) and kept in the group's table."""
        world, core = self.world, sid * S_SURF + rest
        phase, pend, surf, ret, ctx, retries, seen, routed = self.unpack(core)
        name, moves = table.name, []
        if name == "prune":
            world._effect_moves(moves, "prune", ("",), phase, pend, surf, ret, ctx, retries, seen, routed, False)
        elif name == "prompt":
            for code, action, edge in _PROMPT_MOVES:
                moves.append((action, ("P", code, surf, ret, ctx, 0, seen, routed), 1, 0, 0, 1, 1, 0, edge))
        elif name == "manual":
            found = self._templated("manual", sid, surf, ret, routed)
            if found is not None:
                table[sid] = found
                return found
            world._effect_moves(moves, "manual", world.outcomes, phase, pend, surf, ret, ctx, retries, seen, routed,
                                False)
        elif name == "reload":
            found = self._reload_templated(sid, surf, ret, retries, seen, routed)
            if found is not None:
                table[sid] = found
                return found
            world._effect_moves(moves, "reload", ("",), phase, pend, surf, ret, ctx, retries, seen, routed, False)
        elif name == "step":
            found = self._step_templated(sid, surf, pend, ret, ctx, retries, routed) if routed else None
            if found is not None:
                table[sid] = found
                return found
            world._step_moves(moves, pend, surf, ret, ctx, retries, seen, routed)
        elif name == "request":
            found = self._overflow_templated(sid, surf, ret, retries, seen, routed)
            if found is not None:
                table[sid] = found
                return found
            world._request_moves(moves, surf, ret, ctx, retries, seen, routed)
        else:  # result
            last = pend == 1
            for code, action, edge in _RESULT_MOVES[last]:
                moves.append((action, ("P" if last else "T", "" if last else pend - 1, surf + (code,), ret, ctx,
                                       retries, seen, routed), 1, 0, 0, 3 if last else 2, 0, 0, edge))
        found = table[sid] = self._relative(core, moves)
        return found

    def _templated(self, op: str, sid: int, surf: tuple, ret: int, routed: bool) -> list | None:
        """``/compact``'s relative moves from its shape group's template (spec 11; :mod:`.shape`): per outcome
        the group's action, deltas and edge, and the successor surface the group's effect rebased onto this one
        — the same moves the world makes (its ``_made``: the retained index follows its node, spec 12; one move
        per distinct successor, deltas and kind), without an effect, an edge or a core tuple per surface.
        None where the group's runs found a violation (those are re-run on each real surface) or runs are
        not shared (``--exact``): the world makes those moves."""
        key = self._group_of(op, "I", surf, routed, 0)
        if key is None:
            return None
        template = self._templates.get(key)
        if template is None:
            template = self._templates[key] = self._template(op, self.world._groups[key])
        if not template:
            return None
        moves, made = [], set()
        for action, plan, eff_surf, eff_ret, same_sid, deltas, kind, edge, _reset in template:
            new_sid = same_sid if plan is None else self.surf_id(plan(surf + eff_surf))
            new_ret = ret if ret < 0 else eff_ret[ret]
            if (new_sid, new_ret, deltas, kind) not in made:
                made.add((new_sid, new_ret, deltas, kind))
                moves.append(self._move(action, (new_sid - sid) * S_SURF + (new_ret - ret) * S_RET, *deltas, edge))
        return moves

    def _group_of(self, op: str, phase: str, surf: tuple, routed: bool, retries: int,
                  outcomes: tuple | None = None) -> tuple | None:
        """The key of the shape group ``surf`` belongs to for ``op``, its effects run if it has none yet;
        None when runs are not shared (``--exact``)."""
        world = self.world
        if not world.shared:
            return None
        outcomes = world.outcomes if outcomes is None else outcomes
        key = world.group_key(op, phase, surf, routed, retries, outcomes)
        if key not in world._groups:
            world._effects(op, phase, surf, routed, retries, outcomes)  # runs the model: the group's effects
        return key

    def _step_templated(self, sid: int, surf: tuple, pend, ret: int, ctx: str, retries: int, routed: bool):
        """The pre-step's relative moves (spec 13 steps 4-7, as ``World._step_moves``: the candidate first, the
        pressure listener's effect rebased, then the claimed prompt and the snapshot entered, one move per
        distinct successor, deltas and kind) from a template per shape group, queued prompt and candidate."""
        group = self._group_of("pressure", "P", surf, routed, retries)
        if group is None:
            return None
        cand = self.world._candidate(ret, surf, ctx)
        key = (group, pend, cand)
        template = self._templates.get(key)
        if template is None:
            template = self._templates[key] = self._step_template(self.world._groups[group], pend, cand)
        if not template:
            return None
        moves, made = [], set()
        shift = _PHASE["S"] - _PHASE["P"] - _PEND[pend] * S_PEND  # phase P -> S, the queue emptied
        for action, plan, eff_surf, eff_ret, entered, last, same_sid, deltas, kind, edge in template:
            new_sid = same_sid if plan is None else self.surf_id(plan(surf + eff_surf) + entered)
            new_ret = last if cand else ret if ret < 0 else eff_ret[ret]
            if (new_sid, new_ret, deltas, kind) not in made:
                made.add((new_sid, new_ret, deltas, kind))
                moves.append(self._move(action, (new_sid - sid) * S_SURF + (new_ret - ret) * S_RET + shift, *deltas,
                                        edge))
        return moves

    def _reload_templated(self, sid: int, surf: tuple, ret: int, retries: int, seen: bool, routed: bool):
        """Crash and reopen (spec 1.5, as the world's ``_made`` for reload): the surface re-derived, the retained
        snapshot found again by the constructor scan (the newest visible snapshot, else NONE once one existed,
        else NEVER; spec 12), the overflow bookkeeping reset; no move when nothing changes."""
        group = self._group_of("reload", "I", surf, routed, 0, ("",))
        if group is None:
            return None
        template = self._templates.get(group)
        if template is None:
            template = self._templates[group] = self._template("reload", self.world._groups[group])
        if not template:
            return None
        moves = []
        for action, plan, eff_surf, _eff_ret, same_sid, deltas, _kind, edge, reset in template:
            new_sid = same_sid if plan is None else self.surf_id(plan(surf + eff_surf))
            newest = self._newest_snapshot(new_sid)
            new_ret = newest if newest is not None else -2 if ret == -2 else -1
            if deltas[3] == 0 and new_sid == sid and new_ret == ret:
                continue
            moves.append(self._move(action, (new_sid - sid) * S_SURF + (new_ret - ret) * S_RET + reset
                                    - retries * S_RETRIES - seen * S_SEEN, *deltas, edge))
        return moves

    def _newest_snapshot(self, sid: int) -> int | None:
        found = self._snapshots.get(sid, False)
        if found is False:
            visible = [i for i, code in enumerate(self.surfs[sid]) if code[0] == "c"]
            found = self._snapshots[sid] = visible[-1] if visible else None
        return found

    def _overflow_templated(self, sid: int, surf: tuple, ret: int, retries: int, seen: bool, routed: bool):
        """A request at or over the window (spec 10, as ``World._request_moves``): the overflow listener's
        effect rebased, a same-step retry (phase S, its retry count) or the turn ended (phase I), routed from
        then on; one move per distinct successor, deltas and kind. None under the window (a reply lands:
        the world makes those moves) and where the group's runs found a violation."""
        if oracle.total(surf) < self.world.settings.context_window:
            return None
        group = self._group_of("overflow", "S", surf, True, retries)
        if group is None:
            return None
        key = (group, routed)
        template = self._templates.get(key)
        if template is None:
            template = self._templates[key] = self._overflow_template(self.world._groups[group], routed)
        if not template:
            return None
        moves, made = [], set()
        shift = retries * S_RETRIES + seen * S_SEEN + routed * S_ROUTED  # what the successor's fields replace
        for action, plan, eff_surf, eff_ret, same_sid, fields, deltas, kind, edge in template:
            new_sid = same_sid if plan is None else self.surf_id(plan(surf + eff_surf))
            new_ret = ret if ret < 0 else eff_ret[ret]
            if (new_sid, new_ret, fields, deltas, kind) not in made:
                made.add((new_sid, new_ret, fields, deltas, kind))
                moves.append(self._move(action, (new_sid - sid) * S_SURF + (new_ret - ret) * S_RET + fields - shift,
                                        *deltas, edge))
        return moves

    def _overflow_template(self, group: list, routed: bool) -> list:
        template, route = [], 0 if routed else 2
        for outcome, eff in group:
            if eff.violations:
                return []
            retry = eff.kind == "retry"
            plan = rebase_plan(eff.ret, len(eff.surf))
            fields = ((_PHASE["S"] if retry else _PHASE["I"]) - _PHASE["S"]  # phase, retries, seen, routed after
                      + (eff.retries if retry else 0) * S_RETRIES + eff.seen * S_SEEN + S_ROUTED)
            template.append((f"overflow:{outcome}", plan, eff.surf, eff.ret,
                             self.surf_id(eff.surf) if plan is None else None, fields,
                             (0, 0, _comps(eff), route + 1 + eff.events + (0 if retry else 3), 0, eff.gen),
                             (eff.violations, eff.failure, eff.kind),
                             Edge("overflow", eff.failure, eff.kind, not retry, eff.violations,
                                  f"request overflowed; {eff.label}")))
        return template

    def _step_template(self, group: list, pend, cand) -> list:
        template = []
        entered = ((pend,) if pend else ()) + ((cand,) if cand else ())  # D9: snapshot last
        for outcome, eff in group:
            if eff.violations:
                return []
            plan = rebase_plan(eff.ret, len(eff.surf))
            label = f"pre-step {eff.label}; step/start" + (f"; entered {' '.join(entered)}" if entered else "")
            template.append((f"step:{outcome}", plan, eff.surf, eff.ret, entered, len(eff.surf) + len(entered) - 1,
                             self.surf_id(eff.surf + entered) if plan is None else None,
                             (0, 0, _comps(eff), eff.events + 1 + len(entered), 0, eff.gen),
                             (eff.violations, eff.failure, eff.kind),
                             Edge("step", eff.failure, eff.kind, False, eff.violations, label)))
        return template

    def _template(self, op: str, group: list) -> list:
        """Per outcome of a shape group: the action, the rebase plan (None: no node survives, so every surface
        of the group gets the run's own surface), the run's surface and index map, deltas, kind and edge;
        empty when a run found a violation."""
        template = []
        for outcome, eff in group:
            if eff.violations:
                return []
            plan = rebase_plan(eff.ret, len(eff.surf))
            template.append((f"{op}:{outcome}" if outcome else op, plan, eff.surf, eff.ret,
                             self.surf_id(eff.surf) if plan is None else None,
                             (0, 0, _comps(eff), eff.events, 0, eff.gen), (eff.violations, eff.failure, eff.kind),
                             Edge(op, eff.failure, eff.kind, False, eff.violations, eff.label),
                             eff.retries * S_RETRIES + eff.seen * S_SEEN))  # a reload's overflow bookkeeping
        return template

    def _relative(self, core: int, moves: list) -> list:
        """``(action, Δcore, Δstate, Δevents, Δcalls, Δcompactions, Δseq, Δturn, Δgeneration, edge)``: Δstate
        is what the move adds to a packed state (core and counters), :meth:`state`."""
        pack, move = self.pack, self._move
        return [move(action, pack(nxt) - core, de, dc, dk, ds, dt, dg, edge)
                for action, nxt, de, dc, dk, ds, dt, dg, edge in moves]

    def _move(self, action, dcore, de, dc, dk, ds, dt, dg, edge) -> tuple:
        return (action, dcore, dcore * self.per_core + (de * self.span_calls + dc) * self.span_comps + dk,
                de, dc, dk, ds, dt, dg, edge)

    def state(self, core: int, events: int, calls: int, compactions: int) -> int:
        """A state as one integer: its packed core and its bound counters (the VIEW, :mod:`.canonical`)."""
        return core * self.per_core + (events * self.span_calls + calls) * self.span_comps + compactions

    def _relative_ctx(self, ctx: str) -> list:
        """The runtime-context moves: only the context changes (spec 12: the candidate is projected later)."""
        return [self._move(action, (_CTX[c] - _CTX[ctx]) * S_CTX, 0, 0, 0, 0, 0, 0, edge)
                for c, action, edge in _CONTEXT_MOVES if c != ctx]


class _Table(dict):
    """One group's relative moves per surface number, for one value of the rest of its key."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name
