"""Packed cores and relative moves: what the search loop reads, as integers.

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

Each group's list is built on the first core with that key: for the model-run ops, the pre-step, the
request and reload from a template per shape group (:mod:`.templates`), otherwise (and where a template
cannot serve) by the world's own move makers; either way the moves are the world's, only the bookkeeping
differs (one integer addition per edge instead of a core tuple hashed per move). ``tests/test_explore_packed.py`` compares the graphs edge by edge.
"""
from __future__ import annotations

from .layout import (_CTX, _PEND, _PHASE, CONTEXTS, RET_RADIX, RETRIES_RADIX, S_CTX, S_PEND, S_RET,
                     S_RETRIES, S_ROUTED, S_SEEN, S_SURF, fields_of)
from .templates import Templates
from .world import _CONTEXT_MOVES, _PROMPT_MOVES, _RESULT_MOVES, World




TEMPLATED = frozenset({"manual", "reload", "step", "request", "overflow"})  # groups whose moves come from :mod:`.templates`


class Packer:
    """Interned surfaces, packed cores, and the relative move lists of each group (memoised on its key)."""

    def __init__(self, world: World):
        self.world = world
        b = world.bounds
        self.span_calls, self.span_comps = b.tool_pairs + 1, b.compactions + 1
        self.per_core = (b.events + 1) * self.span_calls * self.span_comps  # a state: core * per_core + counters
        self.surfs: list[tuple] = []
        self._surf_ids: dict[tuple, int] = {}
        self.big: list[bool] = []  # whether the surface holds a big tool result (the pruner has work)
        self._groups: dict = {}
        self.fields: dict = {}  # the core but its surface -> its fields
        self.recipes: dict = {}  # the same -> its groups (:meth:`recipe`)
        self._tables: dict = {}  # a group's key but the surface -> {surface number: relative moves}
        self._ctx = [self._relative_ctx(ctx) for ctx in CONTEXTS]
        self.templates = Templates(self)

    # -- packing ------------------------------------------------------------------------------------
    def surf_id(self, surf: tuple) -> int:
        number = self._surf_ids.get(surf)
        if number is None:
            number = self._surf_ids[surf] = len(self.surfs)
            self.surfs.append(surf)
            self.big.append("S" in surf)

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
        found = self.fields[packed] = fields_of(packed)
        return found

    # -- the moves of a core, as its groups' relative lists ------------------------------------------
    def groups(self, core: int) -> list:
        """The relative move lists of ``core``, in the world's move order."""
        sid, rest = divmod(core, S_SURF)
        recipe = self.recipes.get(rest)
        if recipe is None:
            recipe = self.recipe(rest)
        lists = []
        for table in recipe[self.big[sid]]:  # a group's moves over the bounds are skipped by the search
            if type(table) is list:
                lists.append(table)
            else:
                found = table.get(sid)
                lists.append(self.make(table, sid, rest) if found is None else found)
        return lists

    def recipe(self, rest: int) -> tuple:
        """Per the fields but the surface: the groups in move order, each a constant list (it reads no
        surface) or the table of its key (surface -> moves), for a surface without and with a big result,
        then the same for a state with no event left (``room``: a group whose every move is an event is
        left out, not made)."""
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
        elif phase == "S":  # with no event left, only an overflowing request fits (a reply is an event)
            request, overflow = table("request", pend, ret, retries, seen, routed), table("overflow", ret, retries,
                                                                                          seen, routed)
            found = ([request], [request], [overflow], [overflow])
        else:  # a tool result is an event
            result = table("result", pend)
            found = ([result], [result], [], [])
        if len(found) == 2:
            found += found
        self.recipes[rest] = found
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
            found = self._groups[key] = self.make(_Table(key[0]), 0, rest)
        return found

    def make(self, table: "_Table", sid: int, rest: int) -> list:
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
        elif name in TEMPLATED:
            found = self.templates.moves(name, sid, surf, pend, ret, ctx, retries, seen, routed)
            if found is not None:
                table[sid] = found
                return found
            if name == "manual":
                world._effect_moves(moves, "manual", world.outcomes, phase, pend, surf, ret, ctx, retries, seen,
                                    routed, False)
            elif name == "reload":
                world._effect_moves(moves, "reload", ("",), phase, pend, surf, ret, ctx, retries, seen, routed, False)
            elif name == "step":
                world._step_moves(moves, pend, surf, ret, ctx, retries, seen, routed)
            else:
                world._request_moves(moves, surf, ret, ctx, retries, seen, routed)
                if name == "overflow":  # the request's moves that are no event: an overflow's
                    moves = [move for move in moves if move[2] == 0]
        else:  # result
            last = pend == 1
            for code, action, edge in _RESULT_MOVES[last]:
                moves.append((action, ("P" if last else "T", "" if last else pend - 1, surf + (code,), ret, ctx,
                                       retries, seen, routed), 1, 0, 0, 3 if last else 2, 0, 0, edge))
        found = table[sid] = self._relative(core, moves)
        return found

    def _relative(self, core: int, moves: list) -> list:
        """``(action, Δcore, Δstate, Δevents, Δcalls, Δcompactions, Δseq, Δturn, Δgeneration, edge)``: Δstate
        is what the move adds to a packed state (core and counters), :meth:`state`."""
        pack, move = self.pack, self.move
        return [move(action, pack(nxt) - core, de, dc, dk, ds, dt, dg, edge)
                for action, nxt, de, dc, dk, ds, dt, dg, edge in moves]

    def move(self, action, dcore, de, dc, dk, ds, dt, dg, edge) -> tuple:
        return (action, dcore, dcore * self.per_core + (de * self.span_calls + dc) * self.span_comps + dk,
                de, dc, dk, ds, dt, dg, edge)

    def state(self, core: int, events: int, calls: int, compactions: int) -> int:
        """A state as one integer: its packed core and its bound counters (the VIEW, :mod:`.canonical`)."""
        return core * self.per_core + (events * self.span_calls + calls) * self.span_comps + compactions

    def _relative_ctx(self, ctx: str) -> list:
        """The runtime-context moves: only the context changes (spec 12: the candidate is projected later)."""
        return [self.move(action, (_CTX[c] - _CTX[ctx]) * S_CTX, 0, 0, 0, 0, 0, 0, edge)
                for c, action, edge in _CONTEXT_MOVES if c != ctx]


class _Table(dict):
    """One group's relative moves per surface number, for one value of the rest of its key."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name
