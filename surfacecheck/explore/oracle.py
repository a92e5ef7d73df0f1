"""The model as the oracle of every compaction transition of the bounded world (spec 6, 8-11, 1.5, 12).

Each expensive transition — the pressure listener (spec 9), the overflow listener (spec 10.2),
``/compact`` (spec 11), the pruner (spec 6), crash and reload (spec 1.5) — is *run by the
executable model* on γ(state): the canonical concretisation of an abstract state, a real session
whose surface is the state's codes (see :mod:`.concrete`) inside a turn that is open or closed as
the phase says, with the model's pure helpers memoised (:func:`memoised`, a named set of seams).
The new events are mapped back with α (:func:`.concrete.classify`) into an
:class:`Effect`. Results are memoised per (op, shape, outcome) by the world (:mod:`.shape`
says which surfaces share a run and why), so the model runs once per distinct shape and outcome
however many states share it. The simulation test checks that running the
concrete trace through the model gives α-equal states (the quotient is sound on those paths).
"""
from __future__ import annotations

import json
import operator
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from surfacecheck.model import manual as manual_mod
from surfacecheck.model import policy as policy_mod
from surfacecheck.model import pruner as pruner_mod
from surfacecheck.model import runtime_context as rc
from surfacecheck.model.config import RuntimePolicy
from surfacecheck.model.estimate import canonical_header, estimate_header
from surfacecheck.model.meter import node_price
from surfacecheck.model.policy import Environment, OverflowState
from surfacecheck.model.runtime_context import NEVER, NONE, RetainedSnapshot, is_replacement_surface_event
from surfacecheck.model.seams import REAL, Seams, active
from surfacecheck.model.session import Session, append, seeded
from surfacecheck.model.summarizer import ScriptedSummarizer, SummaryScript, checkpoint_message

from . import concrete as C
from . import prefix
from .safety import check_outcome

HEADER_TOKENS = estimate_header(canonical_header(C.HEADER))


def _memo_length(original):
    cache: dict = {}

    def js_length(text):
        n = cache.get(text)
        if n is None:
            n = cache[text] = original(text)
        return n

    return js_length


def _memo_stringify(original):
    cache: dict = {}

    def js_stringify(value, *args, **kw):
        if args or kw:
            return original(value, *args, **kw)
        try:
            key = json.dumps(value)
        except (TypeError, ValueError):
            return original(value)
        text = cache.get(key)
        if text is None:
            text = cache[key] = original(value)
        return text

    return js_stringify


def _memo_replay(original):
    """`replay_meter` resumed from the longest already-folded prefix (:mod:`.prefix` says why that is
    the same state)."""
    from surfacecheck.model.meter import MeterState

    after: dict[int, tuple] = {}

    def replay_meter(events, event_at=None):
        log = events if isinstance(events, (list, tuple)) else list(events)
        lookup = event_at or (lambda seq: log[seq] if 0 <= seq < len(log) else None)
        fold = active().fold_meter
        return prefix.resume(log, after, MeterState, lambda state, event: fold(state, event, lookup))

    return replay_meter


def _same_header(original):
    """`headerEquals` (spec 4.4) is an equality of JSON values (no NaN: spec 1.3 refuses them), so a
    header is equal to itself; γ's sessions share one header object, so most calls are that case."""

    def header_equals(left, right):
        return True if left is right else original(left, right)

    return header_equals


def _memo_price(original):
    """`node_price` (spec 4.2) of an event object, kept with the object: an event is frozen, so its price
    is a function of it, and γ's events are shared by every run on a surface with that prefix."""
    priced: dict[int, tuple] = {}

    def node_price(event):
        hit = priced.get(id(event))
        if hit is not None and hit[0] is event:
            return hit[1]
        tokens = original(event)
        priced[id(event)] = (event, tokens)
        return tokens

    return node_price


def _memo_by_identity(original):
    """A pure function of immutable model values (a session, a measurement, a policy), called again with the
    very same objects, gives the same answer: the summary outcomes of one shape group run the same prefix
    of an op (measure, prune, select the range, check the entry) on the same γ session before the
    summarizer is asked (spec 8.2 step 8), so the runs after the first reuse it. Keyed by the arguments'
    identities, kept with the entry so an id is never mistaken for another's; an error is not kept."""
    cache: dict = {}

    def memoised(*args):
        key = tuple(map(id, args))
        hit = cache.get(key)
        if hit is not None and all(map(operator.is_, hit[0], args)):
            return hit[1]
        value = original(*args)
        cache[key] = (args, value)
        return value

    return memoised


SPEEDUPS = (("js_length", _memo_length), ("js_stringify", _memo_stringify), ("replay_meter", _memo_replay),
            ("header_equals", _same_header), ("node_price", _memo_price), ("measure", _memo_by_identity),
            ("prune_session", _memo_by_identity), ("select_compactable_range", _memo_by_identity),
            ("validate_surface_region", _memo_by_identity), ("inspect_entry_state", _memo_by_identity))
"""Memoised pure helpers, per seam (same results: a string's JS length, a JSON value's stringification, the
meter state after a log prefix, a header compared with itself, an event's price, an op's steps before
the summarizer on the very same session): the seams the oracle runs the model with."""


def memoised(memos: tuple = SPEEDUPS, base: Seams = REAL) -> Seams:
    """``base`` with each of ``memos`` memoised: fresh tables, kept for as long as the value is (a search's)."""
    return base.wrapped(**dict(memos))


@dataclass(frozen=True)
class Settings:
    """The runtime policy of the world: window W, threshold 0.8·W, retain 0.16·W, retries 1/1, pruner."""

    context_window: int = 1000
    compaction_retries: int = 1
    max_overflow_retries: int = 1

    @property
    def policy_json(self) -> dict:
        return {"compactionRetries": self.compaction_retries, "maxOverflowRetries": self.max_overflow_retries,
                "contextWindow": self.context_window, "toolResultPruner": dict(C.PRUNER)}

    @property
    def policy(self) -> RuntimePolicy:
        return _policy(self.context_window, self.compaction_retries, self.max_overflow_retries)

    @property
    def threshold(self) -> int:
        return int(self.context_window * 0.8)


@lru_cache(maxsize=None)
def _policy(window: int, retries: int, overflow_retries: int) -> RuntimePolicy:
    return RuntimePolicy.from_json(Settings(window, retries, overflow_retries).policy_json)


class Effect(NamedTuple):
    """What one model-run transition did, in abstract terms, plus the checks made on its real events.
    (A named tuple: the world makes one per shared run per surface, :func:`.shape.rebase`.)"""

    surf: tuple
    ret: tuple  # old surface index -> new index, -1 when shadowed (see follow_retained)
    retries: int
    seen: bool
    kind: str
    failure: bool
    events: int
    gen: int
    checkpoints: int
    concurrent: bool
    violations: tuple
    label: str
    consulted: bool = True  # a summary was requested (so the outcome mattered)


# -- γ: the canonical concretisation -------------------------------------------------------------
def _node(code: str, i: int) -> tuple[str, dict]:
    mid = f"g-{i}"
    if code in ("U", "V", "N"):
        return "user/message", C.user_message(code, mid)
    if code[0] == "c":
        return "user/message", C.snapshot_message("" if code == "c0" else code[1], mid)
    if code in ("K", "KB"):
        text = C.SUMMARY_TEXTS["good" if code == "K" else "big"]
        return "user/message", checkpoint_message([{"type": "text", "text": text}], f"compaction-{mid}", None, mid)
    if code in ("A", "T1", "T2"):
        ids = [f"call-{mid}-{k}" for k in range(int(code[1]) if code != "A" else 0)]
        return "assistant/message", C.assistant_data(1, 1, C.reply_blocks(code, ids), mid)
    return "tool/result", C.result_data(1, 1, code, f"call-{mid}", mid)


@lru_cache(maxsize=None)
def price(code: str) -> int:
    """A node code's price (spec 4.1/4.2 `estimateMessage` of its derived message)."""
    session, event = append(Session(), *_node(code, 0), surface_op="append")
    return node_price(event)


def total(surf: tuple, routed: bool = True) -> int:
    """`measure().totalTokens` of a state: header + Σ node prices (spec 4.3; usage stays below the estimate)."""
    return (HEADER_TOKENS if routed else 0) + sum(price(code) for code in surf)


@lru_cache(maxsize=1 << 16)
def _gamma_nodes(surf: tuple, routed: bool, window: int) -> tuple[Session, tuple[int, ...]]:
    """γ's node part, built on the cached γ of the surface minus its last node (prefixes are shared)."""
    if not surf:
        session = Session()
        if routed:
            session, _ = append(session, "request/header", {"header": C.HEADER, "reason": "initial"})
            session, _ = append(session, "request/context", {"provider": C.PROVIDER, "model": C.MODEL,
                                                             "contextWindow": window})
        session, _ = append(session, "turn/start", {"turn": 1})
        session, _ = append(session, "step/start", {"turn": 1, "step": 1})
        return session, ()
    session, seqs = _gamma_nodes(surf[:-1], routed, window)
    session, event = append(session, *_node(surf[-1], len(surf) - 1), surface_op="append")
    return session, seqs + (event.seq,)


@lru_cache(maxsize=1 << 14)
def gamma(phase: str, surf: tuple, routed: bool, window: int) -> tuple[Session, tuple[int, ...]]:
    """γ(state): a real session with this surface, turn open (P, S) or closed (I); the nodes' seqs."""
    session, seqs = _gamma_nodes(surf, routed, window)
    session, _ = append(session, "step/end", {"turn": 1, "step": 1})
    if phase == "I":
        session, _ = append(session, "turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    elif phase == "S":
        session, _ = append(session, "step/start", {"turn": 1, "step": 2})
    return session, seqs


def retained_of(ret: int, surf: tuple, seqs: tuple) -> object:
    """The concrete `retained` (spec 12 state) of an abstract one: -2 NEVER, -1 NONE, else a surface index."""
    if ret == -2:
        return NEVER
    if ret == -1:
        return NONE
    return RetainedSnapshot(seqs[ret], C.snapshot_text("" if surf[ret] == "c0" else surf[ret][1]))


def candidate(ret: int, surf: tuple, ctx: str) -> str | None:
    """Pre-step step 4 (spec 12, 13): the snapshot code `project` enters, or None. Uses the model's project."""
    retained = retained_of(ret, surf, tuple(range(len(surf))))
    message = rc.project_sections(retained, C.sections(ctx), id="candidate")
    if message is None:
        return None
    return "c" + (ctx or "0")


@lru_cache(maxsize=None)
def _script(outcome: str) -> SummaryScript:
    from surfacecheck.runtime.codec import summary_script

    return summary_script(C.summary_script(outcome))


def run(op: str, phase: str, surf: tuple, routed: bool, retries: int, seen: bool, outcome: str,
        settings: Settings) -> Effect:
    """Run ``op`` (pressure / overflow / manual / prune / reload) on γ(state) through the model.

    ``Effect.ret`` is not a retained state here but where each old surface index went: see
    :func:`follow_retained`, which applies it to any retained index (so one model run serves all)."""
    before, seqs = gamma(phase, surf, routed, settings.context_window)
    env = Environment(policy=settings.policy, summarizer=ScriptedSummarizer(default=_script(outcome))
                      if outcome else ScriptedSummarizer())
    state_after = OverflowState(retries, seen)
    retry, failure, kind, labels = False, False, op, ()
    try:
        if op == "pressure":
            out = active().compact_if_needed(before, policy_mod.PRESSURE, env)
            after, labels = out.session, out.labels
            failure = out.error is not None
            kind = ("warned" if failure else "compacted" if out.value is not None
                    else "pruned" if len(after.log) > len(before.log) else "noop")
            if kind == "noop" and any("no compactable range" in label for label in labels):
                kind = "null"
        elif op == "overflow":
            out, state_after, retry = active().on_request_error(before, OverflowState(retries, seen), C.OVERFLOW_CODE,
                                                                env)
            after, labels = out.session, out.labels
            kind, failure = ("retry" if retry else "next"), not retry
        elif op == "manual":
            after, result, labels = manual_mod.compact_command(before, "cmd-g", "", summarizer=env.summarizer)
            kind, failure = result.kind, result.kind == "error"
        elif op == "prune":
            out = pruner_mod.prune_session(before, settings.policy.pruner)
            after, labels, failure = out.session, out.labels, out.error is not None
        elif op == "reload":
            after = seeded(before.log)
            state_after = OverflowState()
        else:
            raise ValueError(op)
    except Exception as exc:  # a model error escaping an op is itself a finding (the run cannot go on)
        return Effect(surf, tuple(range(len(surf))), retries, seen, "model-error", True, 0, 0, 0, False,
                      (("model-error-free", f"{op}: {type(exc).__name__}: {exc}"),), f"{op}: model error")
    new = after.log[len(before.log):]
    codes = dict(zip(seqs, surf))
    new_surf = tuple(codes[s] if s in codes else C.classify(after.log[s]) for s in after.nodes)
    cited = {s for e in new if is_replacement_surface_event(e) and isinstance(e.source_event_seqs, list)
             for s in e.source_event_seqs}
    index_map = tuple(-1 if s in cited or s not in after.nodes else after.nodes.index(s) for s in seqs)
    violations = check_outcome(op, before, seqs, surf, after, retry, state_after, settings)
    checkpoints = sum(1 for e in new if e.type == "compaction/summary")
    concurrent = any(C.classify(e) == "N" for e in new if e.type == "user/message")
    label = f"{op}{':' + outcome if outcome else ''} -> {kind}" + (f" ({labels[-1]})" if labels else "")
    consulted = any(e.type == "compaction/start" for e in new)
    if not consulted:
        label = f"{op} -> {kind}" + (f" ({labels[-1]})" if labels else "")
    return Effect(new_surf, index_map, state_after.retries, state_after.seen_overflow, kind, failure, len(new),
                  after.generation - before.generation, checkpoints, concurrent, tuple(violations), label, consulted)


def follow_retained(op: str, ret: int, eff: Effect) -> int:
    """Spec 12: the retained state after ``eff``. Live: a replacement citing the retained snapshot
    clears it (NONE), otherwise it moves with its node. Reload: the constructor scan — the newest
    owned snapshot still visible, else NONE if one ever existed, else NEVER."""
    if op == "reload":
        visible = [i for i, code in enumerate(eff.surf) if code[0] == "c"]
        return visible[-1] if visible else (-2 if ret == -2 else -1)
    if ret < 0:
        return ret
    return eff.ret[ret]
