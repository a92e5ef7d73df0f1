"""Move templates per shape group: the model-run ops' moves made once per group, applied per surface.

Surfaces of one shape share their model runs (:mod:`.shape`): each gets the group's effects rebased onto
it. So what a move of such an op holds — its action, deltas, edge and kind, the effect's rebase plan and
index map — is the same for every surface of the group, and only the successor surface (the effect
rebased, then interned) and the retained index (followed through the index map, spec 12) are the
surface's own. A template keeps the first per group; :class:`Templates` applies it to a surface, as
relative moves of the packed search (:mod:`.packed`), for ``/compact`` (spec 11), reload (spec 1.5), the
pre-step (spec 9, 12, 13), an overflowing request (spec 10) and a reply (spec 13 step 8).

They make the moves the world's move makers make (``World._made``, ``_step_moves``, ``_request_moves``:
the same successors, deltas, edges and labels, one move per distinct successor, deltas and kind, in the
same order) without an effect, an edge or a core tuple per surface. ``tests/test_explore_packed.py``
compares the packed search with the compact loop, which reads the world's makers, edge by edge. Where a
group's runs found a violation (re-run on each real surface) or runs are not shared (``--exact``), a
template answers None and the world makes the moves.
"""
from __future__ import annotations

from . import oracle
from .layout import _PEND, _PHASE, S_PEND, S_RET, S_RETRIES, S_ROUTED, S_SEEN, S_SURF
from .shape import rebase_plan
from .world import _REPLY_EDGES, Edge, _comps


class Templates:
    """The templates of one packed search (``packer``: its interned surfaces, and how a move is packed)."""

    def __init__(self, packer):
        self.packer, self.world = packer, packer.world
        self.surf_id, self.move, self.per_core = packer.surf_id, packer.move, packer.per_core
        self._templates: dict = {}  # a group's effects class, with what else a template reads -> it
        self._classes: dict = {}  # a shape group (World.group_key) -> the number of its effects class
        self._class_numbers: dict = {}  # an effects class (:func:`_effects_class`) -> its number
        self._members: list = []  # an effects class's number -> the first group's (outcome, effect) list
        self._snapshots: dict = {}  # surface number -> the index of its newest snapshot (None: none)
        self._overflows: dict = {}  # surface number -> whether a request on it overflows (spec 10.1)
        self._kinds: dict = {}  # what tells two moves of a group apart but the successor -> a small number

    def _entry(self, action: str, deltas: tuple, kind: tuple, edge) -> tuple:
        """What a template keeps of a move but its successor: the action, a number for the deltas and kind
        (two moves to one successor with the same number are one move), the counters' part of Δstate, and
        the tail of the relative move (:meth:`.packed.Packer.move`)."""
        counters = self.packer.move(action, 0, *deltas, edge)[2]
        number = self._kinds.setdefault((deltas, kind), len(self._kinds))
        return action, number, counters, deltas + (edge,)

    def moves(self, name: str, sid: int, surf: tuple, pend, ret: int, ctx: str, retries: int, seen: bool,
              routed: bool) -> list | None:
        """The relative moves of group ``name`` (:mod:`.packed`) on this core, or None: the world makes them."""
        if name == "manual":
            return self.compact("manual", sid, surf, ret, routed)
        if name == "reload":
            return self.reload(sid, surf, ret, retries, seen, routed)
        if name == "step":
            return self.step(sid, surf, pend, ret, ctx, retries, routed) if routed else None
        if name in ("request", "overflow"):  # overflow: the request's moves that are no event
            over = self._overflows.get(sid)
            if over is None:  # spec 10.1: a request at or over W overflows
                over = self._overflows[sid] = oracle.total(surf) >= self.world.settings.context_window
            if over:
                return self.overflow(sid, surf, ret, retries, seen, routed)
            return self.reply(sid, surf, pend, retries, seen, routed) if name == "request" else []
        return None

    def reply(self, sid: int, surf: tuple, pend, retries: int, seen: bool, routed: bool) -> list:
        """A request under the window (spec 13 step 8, as ``World._request_moves``): assistant text ends the
        step and the turn (phase I, retries reset), or one or two tool calls wait for results (phase T; the
        retries reset once an overflow was seen, spec 10.2 D3); either way the header is routed from then on."""
        route = 0 if routed else 2
        after = (0 if seen else retries) - retries
        common = (1 - routed) * S_ROUTED - _PHASE["S"] - _PEND[pend] * S_PEND
        text = self.surf_id(surf + ("A",))
        moves = [self.move("reply:A", (text - sid) * S_SURF + common + _PHASE["I"] - retries * S_RETRIES,
                           1, 0, 0, route + 5 + 1 + 3, 0, 0, _REPLY_EDGES[0])]
        for k in (1, 2):
            calls = self.surf_id(surf + (f"T{k}",))
            moves.append(self.move(f"reply:T{k}", (calls - sid) * S_SURF + common + _PHASE["T"] + _PEND[k] * S_PEND
                                   + after * S_RETRIES, 1, k, 0, route + 3 * k + 2 + 1, 0, 0, _REPLY_EDGES[k]))
        return moves

    def compact(self, op: str, sid: int, surf: tuple, ret: int, routed: bool) -> list | None:
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
            template = self._templates[key] = self._template(op, self._members[key])
        if not template:
            return None
        moves, made, surf_id, per_core = [], set(), self.surf_id, self.per_core
        for plan, eff_surf, eff_ret, same_sid, (action, number, counters, tail), _reset in template:
            new_sid = same_sid if plan is None else surf_id(plan(surf + eff_surf))
            new_ret = ret if ret < 0 else eff_ret[ret]
            if (new_sid, new_ret, number) not in made:
                made.add((new_sid, new_ret, number))
                dcore = (new_sid - sid) * S_SURF + (new_ret - ret) * S_RET
                moves.append((action, dcore, dcore * per_core + counters) + tail)
        return moves

    def _group_of(self, op: str, phase: str, surf: tuple, routed: bool, retries: int,
                  outcomes: tuple | None = None) -> int | None:
        """The number of the effects of the shape group ``surf`` belongs to for ``op`` (the group's effects
        run if it has none yet); None when runs are not shared (``--exact``). Groups whose effects are the same
        runs share the number, and so their templates (:func:`_effects_class`)."""
        world = self.world
        if not world.shared:
            return None
        outcomes = world.outcomes if outcomes is None else outcomes
        key = world.group_key(op, phase, surf, routed, retries, outcomes)
        number = self._classes.get(key)
        if number is None:
            if key not in world._groups:
                world._effects(op, phase, surf, routed, retries, outcomes)  # runs the model: the group's effects
            group = world._groups[key]
            number = self._classes[key] = self._class_numbers.setdefault(_effects_class(group), len(self._members))
            if number == len(self._members):
                self._members.append(group)
        return number

    def step(self, sid: int, surf: tuple, pend, ret: int, ctx: str, retries: int, routed: bool):
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
            template = self._templates[key] = self._step_template(self._members[group], pend, cand)
        if not template:
            return None
        moves, made, surf_id, per_core = [], set(), self.surf_id, self.per_core
        shift = _PHASE["S"] - _PHASE["P"] - _PEND[pend] * S_PEND  # phase P -> S, the queue emptied
        for plan, eff_surf, eff_ret, entered, last, same_sid, (action, number, counters, tail) in template:
            new_sid = same_sid if plan is None else surf_id(plan(surf + eff_surf) + entered)
            new_ret = last if cand else ret if ret < 0 else eff_ret[ret]
            if (new_sid, new_ret, number) not in made:
                made.add((new_sid, new_ret, number))
                dcore = (new_sid - sid) * S_SURF + (new_ret - ret) * S_RET + shift
                moves.append((action, dcore, dcore * per_core + counters) + tail)
        return moves

    def reload(self, sid: int, surf: tuple, ret: int, retries: int, seen: bool, routed: bool):
        """Crash and reopen (spec 1.5, as the world's ``_made`` for reload): the surface re-derived, the retained
        snapshot found again by the constructor scan (the newest visible snapshot, else NONE once one existed,
        else NEVER; spec 12), the overflow bookkeeping reset; no move when nothing changes."""
        group = self._group_of("reload", "I", surf, routed, 0, ("",))
        if group is None:
            return None
        template = self._templates.get(group)
        if template is None:
            template = self._templates[group] = self._template("reload", self._members[group])
        if not template:
            return None
        moves, per_core = [], self.per_core
        for plan, eff_surf, _eff_ret, same_sid, (action, _number, counters, tail), reset in template:
            new_sid = same_sid if plan is None else self.surf_id(plan(surf + eff_surf))
            newest = self._newest_snapshot(new_sid)
            new_ret = newest if newest is not None else -2 if ret == -2 else -1
            if tail[3] == 0 and new_sid == sid and new_ret == ret:  # no event written, nothing changed
                continue
            dcore = (new_sid - sid) * S_SURF + (new_ret - ret) * S_RET + reset - retries * S_RETRIES - seen * S_SEEN
            moves.append((action, dcore, dcore * per_core + counters) + tail)
        return moves

    def _newest_snapshot(self, sid: int) -> int | None:
        found = self._snapshots.get(sid, False)
        if found is False:
            visible = [i for i, code in enumerate(self.packer.surfs[sid]) if code[0] == "c"]
            found = self._snapshots[sid] = visible[-1] if visible else None
        return found

    def overflow(self, sid: int, surf: tuple, ret: int, retries: int, seen: bool, routed: bool):
        """A request at or over the window (spec 10, as ``World._request_moves``): the overflow listener's
        effect rebased, a same-step retry (phase S, its retry count) or the turn ended (phase I), routed from
        then on; one move per distinct successor, deltas and kind (:meth:`moves` sends a request under the
        window to :meth:`reply`). None where the group's runs found a violation."""
        group = self._group_of("overflow", "S", surf, True, retries)
        if group is None:
            return None
        key = (group, routed)
        template = self._templates.get(key)
        if template is None:
            template = self._templates[key] = self._overflow_template(self._members[group], routed)
        if not template:
            return None
        moves, made, surf_id, per_core = [], set(), self.surf_id, self.per_core
        shift = retries * S_RETRIES + seen * S_SEEN + routed * S_ROUTED  # what the successor's fields replace
        for plan, eff_surf, eff_ret, same_sid, fields, (action, number, counters, tail) in template:
            new_sid = same_sid if plan is None else surf_id(plan(surf + eff_surf))
            new_ret = ret if ret < 0 else eff_ret[ret]
            if (new_sid, new_ret, number) not in made:  # the number covers the fields written too
                made.add((new_sid, new_ret, number))
                dcore = (new_sid - sid) * S_SURF + (new_ret - ret) * S_RET + fields - shift
                moves.append((action, dcore, dcore * per_core + counters) + tail)
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
            template.append((plan, eff.surf, eff.ret, self.surf_id(eff.surf) if plan is None else None, fields,
                             self._entry(f"overflow:{outcome}",
                                         (0, 0, _comps(eff), route + 1 + eff.events + (0 if retry else 3), 0, eff.gen),
                                         (fields, eff.violations, eff.failure, eff.kind),
                                         Edge("overflow", eff.failure, eff.kind, not retry, eff.violations,
                                              f"request overflowed; {eff.label}"))))
        return template

    def _step_template(self, group: list, pend, cand) -> list:
        template = []
        entered = ((pend,) if pend else ()) + ((cand,) if cand else ())  # D9: snapshot last
        for outcome, eff in group:
            if eff.violations:
                return []
            plan = rebase_plan(eff.ret, len(eff.surf))
            label = f"pre-step {eff.label}; step/start" + (f"; entered {' '.join(entered)}" if entered else "")
            template.append((plan, eff.surf, eff.ret, entered, len(eff.surf) + len(entered) - 1,
                             self.surf_id(eff.surf + entered) if plan is None else None,
                             self._entry(f"step:{outcome}", (0, 0, _comps(eff), eff.events + 1 + len(entered), 0, eff.gen),
                                         (eff.violations, eff.failure, eff.kind),
                                         Edge("step", eff.failure, eff.kind, False, eff.violations, label))))
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
            template.append((plan, eff.surf, eff.ret, self.surf_id(eff.surf) if plan is None else None,
                             self._entry(f"{op}:{outcome}" if outcome else op, (0, 0, _comps(eff), eff.events, 0, eff.gen),
                                         (eff.violations, eff.failure, eff.kind),
                                         Edge(op, eff.failure, eff.kind, False, eff.violations, eff.label)),
                             eff.retries * S_RETRIES + eff.seen * S_SEEN))  # a reload's overflow bookkeeping
        return template


def _effects_class(group: list) -> tuple:
    """What a template reads of a group's effects: per outcome everything but the surviving nodes' codes
    (the plan takes those from each surface, :func:`.shape.rebase_plan`), so groups that share their
    runs (:mod:`.shape`: a run is keyed on what it reads, coarser than a group) share one template."""
    out = []
    for outcome, eff in group:
        kept = {new for new in eff.ret if new >= 0}
        out.append((outcome, eff[1:], len(eff.surf), tuple(code for i, code in enumerate(eff.surf) if i not in kept)))
    return tuple(out)
