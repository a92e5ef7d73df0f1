"""Obligation 5, projection-equivalence, for logs of unbounded length, by k-induction (spec 5.1, 4.2).

State: the O(1) projection total T and its pending claim (spec 5.1), the recount R of the surface
(spec 4.2), and the price of the claimed span. Each event kind's transition is *derived* by running
the model's ``fold_claim`` (projection side) and ``fold_surface_tokens`` (recount side) with symbolic
prices. On a fully metered log (every replace consumes the exact claim armed by the event just
before it) T == R is proved k-inductive: base cases by bounded model checking from the empty
session, then the step for k consecutive states. Negative controls: an unclaimed replace, and a claim
expired by an intervening log-only event; each is refuted by a concrete drift trace from seq 0.
"""
from __future__ import annotations

from dataclasses import dataclass

import z3

from surfacecheck.model import meter
from surfacecheck.model.event import Event
from surfacecheck.model.projection import Claim

from .concrete import USER, min_price, realize
from .obligation import PROVED, REFUTED, UNKNOWN, Clause, ObligationResult, Stopwatch, check
from .symexec import SymInt, explore, expr, standing_in
from surfacecheck.core.trace import Step

NAME = "projection-equivalence"
SECTION = "spec 5.1, 4.2, 5.2 (D4); seed §15-16"
APPEND, ARM, LOG_ONLY, REPLACE = 0, 1, 2, 3
KINDS = {APPEND: "append", ARM: "arm (compaction/summary)", LOG_ONLY: "log-only event", REPLACE: "replace"}
SPAN = (5, 7)  # a representative claimed range; the claim fold compares ranges by equality only


@dataclass
class State:
    T: object
    R: object
    armed: object
    ctok: object
    cspan: object
    stale: object  # a claim was armed since the last surface event (then expired by a log-only event)

    @classmethod
    def fresh(cls, name: str) -> "State":
        return cls(z3.Int(f"{name}_T"), z3.Int(f"{name}_R"), z3.Bool(f"{name}_armed"), z3.Int(f"{name}_ctok"),
                   z3.Int(f"{name}_cspan"), z3.Bool(f"{name}_stale"))

    def eq(self, other: "State"):
        return z3.And(self.T == other.T, self.R == other.R, self.armed == other.armed, self.ctok == other.ctok,
                      self.cspan == other.cspan, self.stale == other.stale)


def _derive(claim_tokens, kind: int, price, shadow, span_price):
    """(projection delta, claim after, recount delta) of one event, from the model's folds; the claim
    before holds ``claim_tokens`` (None: no claim), an arm event shadows ``shadow`` tokens."""
    claim = Claim(*SPAN, SymInt(claim_tokens)) if claim_tokens is not None else None
    if kind == ARM:
        event = Event("compaction/summary", 1, 0, {"shadowedRange": {"start": SPAN[0], "end": SPAN[1]},
                                                   "shadowedTokenCount": SymInt(shadow)})
    elif kind == LOG_ONLY:
        event = Event("agent/status", 1, 0, {"status": "running"})
    elif kind == APPEND:
        event = Event("user/message", 9, 0, {}, "append")
    else:
        event = Event("user/message", 9, 0, {}, {"op": "replace", "start": SPAN[0], "end": SPAN[1]})
    price_of = lambda event: SymInt(price)  # noqa: E731 - the symbolic node price (spec 4.1 estimate)
    with standing_in(node_price=price_of) as seams:
        step = explore(lambda: seams.fold_claim(claim, event))
        nodes = ((1, SymInt(z3.IntVal(0))), (SPAN[0], SymInt(span_price)), (SPAN[1], SymInt(z3.IntVal(0))))
        recount = explore(lambda: meter.fold_surface_tokens(nodes, event)) if event.is_surface_type else None
    assert len(step) == 1 and step[0].error is None, "the claim fold branches on no symbolic value here"
    claim_step = step[0].value
    r_delta = expr(recount[0].value[2]) if recount else z3.IntVal(0)
    after = claim_step.claim
    return expr(claim_step.delta), after is not None, (expr(after.tokens) if after is not None else None), r_delta


def transition(s: State, t: State, name: str, mode: str = "metered", whole: bool = False):
    """One event from s to t; ``mode``: metered (the premise), unclaimed or expired (the controls).
    ``whole``: spans are the whole surface (so a bounded path is a concrete log at once)."""
    kind, price, shadow, span = (z3.Int(f"{name}_kind"), z3.Int(f"{name}_price"), z3.Int(f"{name}_shadow"),
                                 z3.Int(f"{name}_span"))
    options = []
    for kind_value in (APPEND, ARM, LOG_ONLY, REPLACE):
        for armed in (False, True):
            delta, armed_after, tokens_after, r_delta = _derive(s.ctok if armed else None, kind_value, price, shadow,
                                                                s.cspan if kind_value == REPLACE and armed else span)
            guard = [kind == kind_value, s.armed == armed]
            on_surface = [span >= 0, span <= s.R, s.R > 0] + ([span == s.R] if whole else [])
            if kind_value == ARM:
                guard += on_surface + [shadow == span]  # producers price claims exactly (spec 5.1)
            if kind_value == REPLACE:
                if armed:
                    pass  # consumes the claim armed just before (the span priced cspan)
                elif mode == "unclaimed":
                    guard += on_surface
                elif mode == "expired":
                    guard += [s.stale, span == s.cspan]
                else:
                    guard.append(z3.BoolVal(False))  # fully metered: no replace without its claim
            update = [t.T == s.T + delta, t.R == s.R + r_delta, t.armed == armed_after]
            update.append(t.ctok == (tokens_after if tokens_after is not None else s.ctok))
            update.append(t.cspan == (span if kind_value == ARM else s.cspan))
            if kind_value == ARM:
                update.append(t.stale == z3.BoolVal(True))
            elif kind_value == LOG_ONLY:
                update.append(t.stale == z3.Or(s.stale, s.armed))
            else:
                update.append(t.stale == z3.BoolVal(False))
            options.append(z3.And(guard + update))
    floor = min_price(USER, 0)
    domain = [price >= floor, price <= 1_000_000, z3.Or(kind == APPEND, kind == ARM, kind == LOG_ONLY, kind == REPLACE)]
    return z3.And(domain + [z3.Or(options)]), (kind, price, shadow, span)


def initial(s: State):
    return z3.And(s.T == 0, s.R == 0, z3.Not(s.armed), z3.Not(s.stale), s.ctok == 0, s.cspan == 0)


def prop(s: State):
    return s.T == s.R


def bmc(depth: int, mode: str, whole: bool = False):
    """A path of ``depth`` events from the empty session ending in T != R (or None)."""
    states = [State.fresh(f"b{mode}{i}") for i in range(depth + 1)]
    steps = [transition(states[i], states[i + 1], f"b{mode}e{i}", mode, whole) for i in range(depth)]
    solver = z3.Solver()
    solver.add(initial(states[0]), *[relation for relation, _ in steps], z3.Not(prop(states[-1])))
    if solver.check() != z3.sat:
        return None
    model = solver.model()
    value = lambda term: model.eval(term, model_completion=True)  # noqa: E731
    return [{"kind": value(v[0]).as_long(), "price": value(v[1]).as_long(), "shadow": value(v[2]).as_long(),
             "span": value(v[3]).as_long()} for _, v in steps] + [{"T": value(states[-1].T).as_long(),
                                                                    "R": value(states[-1].R).as_long()}]


def k_induction(max_k: int, mode: str = "metered") -> tuple[str, int, list | None]:
    """Smallest k for which T == R is k-inductive (base: no violation within k events of seq 0)."""
    for k in range(1, max_k + 1):
        for depth in range(k):  # base cases not yet covered
            path = bmc(depth + 1, mode, whole=True) or bmc(depth + 1, mode)
            if path is not None:
                return REFUTED, depth + 1, path
        states = [State.fresh(f"k{mode}{k}_{i}") for i in range(k + 1)]
        facts = [transition(states[i], states[i + 1], f"k{mode}{k}e{i}", mode)[0] for i in range(k)]
        facts += [prop(states[i]) for i in range(k)]
        status, _ = check(facts, prop(states[k]))
        if status == PROVED:
            return PROVED, k, None
    return UNKNOWN, max_k, None


def trace_steps(path: list[dict]) -> list[Step]:
    """A BMC path as real events: user messages, a compaction/summary arming the whole surface, a
    log-only agent/status, and a checkpoint replacing the whole surface."""
    from .concrete import NodeWriter, append_step

    writer = NodeWriter()
    surface: list[int] = []
    for number, event in enumerate(path[:-1]):
        kind = event["kind"]
        if kind == APPEND:
            surface.append(writer.node(USER, 0, event["price"]))
        elif kind == ARM:
            data = {"compactionId": f"c{number}", "summary": [{"type": "text", "text": "summary"}],
                    "shadowedRange": {"start": surface[0], "end": surface[-1]}, "shadowedSeqs": list(surface),
                    "shadowedTokenCount": event["shadow"], "provider": "prov", "model": "mod"}
            writer.event(append_step("compaction/summary", data, f"compaction/summary: shadow price "
                                     f"{event['shadow']} armed for {surface[0]}-{surface[-1]}"))
        elif kind == LOG_ONLY:
            writer.event(append_step("agent/status", {"status": "running"}, "agent/status: a log-only event"))
        else:
            type_, data = realize(USER, 0, event["price"], f"checkpoint-{number}")
            seq = writer.event(append_step(type_, data, f"checkpoint replaces {surface[0]}-{surface[-1]}, price "
                                           f"{event['price']}", surface_op={"op": "replace", "start": surface[0],
                                                                             "end": surface[-1]}, sources=surface))
            surface = [seq]
    return [Step("reset", {}, "a new empty session"), *writer.steps]


CONTROLS = (("unclaimed-replace", "a replace with no shadow-price claim (spec §15 G1)", "unclaimed"),
            ("claim-expired", "a claim expired by an intervening log-only event before its replace", "expired"))
MAX_K = 4


def run(bound: int | None = None) -> ObligationResult:
    """Unbounded: k-induction needs no bound (``bound`` is ignored)."""
    from .replay import replayed_control

    watch = Stopwatch()
    status, k, path = k_induction(MAX_K)
    result = ObligationResult(NAME, SECTION, status, "unbounded", 0.0,
                              [Clause(f"projection total == recount after every event (k-induction, k = {k})", status)],
                              notes={"k": k, "method": "k-induction over transitions derived from fold_claim and "
                                                       "fold_surface_tokens", "premise": "fully metered"})
    if path is not None:
        from .replay import attach_refutation
        result.notes["counterexample"] = path
        attach_refutation(result, trace_steps(path), "projection-drift", None, {"obligation": NAME}, "log")
    for name, description, mode in CONTROLS:
        control_watch = Stopwatch()
        c_status, depth, c_path = k_induction(MAX_K, mode)
        result.controls.append(replayed_control(
            name, description, c_status, trace_steps(c_path) if c_path else [], "model", "projection-drift", None,
            {"obligation": NAME, "path": c_path, "depth": depth}, control_watch.seconds, level="log"))
    result.seconds = watch.seconds
    return result
