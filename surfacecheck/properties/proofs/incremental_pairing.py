"""Obligation 3, incremental-pairing: the cached cut fold equals the full fold (spec 3 ``balanceCache``).

The model's ``refresh_cuts`` is explored symbolically with a cache built over a symbolic surface S of
n nodes: (a) after appending t new nodes (same generation) it must *extend* to exactly
``fold_cuts`` of the grown surface; (b) after a checkpoint replaces a span of L nodes at a symbolic
position a (generation + 1), followed by t appended nodes, it must equal ``fold_cuts`` of the new
surface (a rebuild). Negative control: a cache that extends on growth and ignores the generation.
"""
from __future__ import annotations

import z3

from surfacecheck.model.pairing import extend_cuts, fold_cuts
from surfacecheck.model.seams import active

from .concrete import USER, NodeWriter, append_step, delta_table, realize
from .encoding import FakeSession, Node, SymbolicSurface, pairing_patch
from .obligation import REFUTED, Clause, ObligationResult, Stopwatch, check, fold_status
from .symexec import SymInt, explore, expr
from surfacecheck.core.trace import Step

NAME = "incremental-pairing"
SECTION = "spec 3 (balanceCache: extend on append, rebuild per generation); seed §7"


def model_refresh(cached, session):
    """The model's ``refresh_cuts`` in the seams active now."""
    return active().refresh_cuts(cached, session)


def refresh_ignoring_generation(cached, session):
    """Wrong on purpose: extend whenever the surface grew, reuse when it did not, even after a replace."""
    if cached is None or len(cached.nodes) > len(session.nodes):
        return fold_cuts(session)
    if len(cached.nodes) < len(session.nodes):
        return extend_cuts(cached, session, session.nodes[len(cached.nodes):])
    return cached


def _claim(refresh, cache, new_session, deltas):
    """``refresh(cache, new)`` equals the spec 3 fold from scratch (running count before each cut is 0),
    on every path; a path that raises must be impossible."""
    expected = [z3.BoolVal(True)] + [z3.Sum(deltas[:k + 1]) == 0 for k in range(len(deltas))]
    total = z3.Sum(deltas) if deltas else z3.IntVal(0)
    claims = []
    for path in explore(lambda: refresh(cache, new_session)):  # raising paths end at their branch: cheap
        if path.error is not None:
            claims.append(z3.Not(path.condition))
            continue
        got = path.value
        same = [z3.BoolVal(len(got.balanced) == len(expected)), expr(got.open_calls) == total]
        same += [expr(x) == y for x, y in zip(got.balanced, expected)]
        claims.append(z3.Implies(path.condition, z3.And(same)))
    return z3.And(claims)


def check_length(n: int, refresh=model_refresh, name: str = "i") -> tuple[str, dict | None]:
    old = SymbolicSurface(n, f"{name}{n}")
    tail = SymbolicSurface(n + 1, f"{name}{n}t", seq_base=1000)  # appended nodes (seqs 1000..)
    a = z3.Int(f"{name}{n}_a")
    ckpt_delta = delta_table()[(USER, 0)]
    facts = old.domain() + old.well_formed() + tail.domain()
    cases = []  # (label, L, t, claim)
    with pairing_patch():
        base = old.session(0)
        built = explore(lambda: fold_cuts(base), premises=facts)  # the cache, as the model builds it
        if len(built) != 1 or built[0].error is not None:
            return REFUTED if any(p.error for p in built) else "unknown", None
        cache = built[0].value
        running = sum(old.d, z3.IntVal(0))
        for t in (1, 2):  # (a) append t nodes within the generation
            grown = FakeSession(old.nodes() + tail.nodes()[:t], 0)
            wf = [running + z3.Sum(tail.d[:k + 1]) >= 0 for k in range(t)]
            claim = _claim(refresh, cache, grown, old.d + tail.d[:t])
            cases.append((f"append {t}", 0, t, z3.Implies(z3.And(wf), claim)))
        for L in range(1, n + 1):  # (b) a checkpoint replaces L nodes at position a, then t appends:
            for t in ((0, 1) if L == 1 else (L,)):  # the same length or longer: where a stale cache survives
                size = n - L + 1
                deltas = []
                for k in range(size):
                    if k == 0:
                        term = z3.If(a == 0, z3.IntVal(ckpt_delta), old.d[0])
                    else:
                        term = z3.If(k < a, old.d[k], z3.If(k == a, z3.IntVal(ckpt_delta),
                                                            old.d[min(k + L - 1, n - 1)]))
                    deltas.append(term)
                nodes = tuple(Node(2000 + k, SymInt(d)) for k, d in enumerate(deltas)) + tail.nodes()[:t]
                all_d = deltas + tail.d[:t]
                wf = [a >= 0, a + L <= n] + [z3.Sum(all_d[:k + 1]) >= 0 for k in range(len(all_d))]
                claim = _claim(refresh, cache, FakeSession(nodes, 1), all_d)
                cases.append((f"replace {L} node(s) then append {t}", L, t, z3.Implies(z3.And(wf), claim)))
    status, model = check(facts, z3.And([claim for *_, claim in cases]))
    if model is None:
        return status, None
    for label, L, t, claim in cases:
        if z3.is_false(model.eval(claim, model_completion=True)):
            cex = {"old": old.decode(model), "tail": {k: v[:t] for k, v in tail.decode(model).items()},
                   "case": label, "L": L, "t": t, "a": model.eval(a, model_completion=True).as_long(), "n": n}
            return status, cex
    return status, None


def prove(bound: int, refresh=model_refresh, name: str = "i") -> tuple[str, dict | None, int]:
    statuses = []
    for n in range(bound + 1):
        status, cex = check_length(n, refresh, name)
        statuses.append(status)
        if status == REFUTED:
            return REFUTED, cex, n
    return fold_status(statuses), None, bound


def trace_steps(cex: dict) -> list[Step]:
    """The surface, a ``cuts`` read (the cache), the replace (if any) and the appends, a final ``cuts``."""
    writer = NodeWriter()
    old = cex["old"]
    for kind, calls, price in zip(old["kinds"], old["calls"], old["prices"]):
        writer.node(kind, calls, price)
    steps = [Step("reset", {}, "a new empty session"), *writer.steps, Step("cuts", {}, "the cuts, now cached")]
    writer.steps = []
    if cex["L"]:
        span = writer.seqs[cex["a"]: cex["a"] + cex["L"]]
        type_, data = realize(USER, 0, 9, "checkpoint")
        writer.event(append_step(type_, data, f"checkpoint replaces {span[0]}-{span[-1]} (generation +1)",
                                 surface_op={"op": "replace", "start": span[0], "end": span[-1]}, sources=span))
    tail = cex["tail"]
    for kind, calls, price in zip(tail["kinds"], tail["calls"], tail["prices"]):
        writer.node(kind, calls, price)
    return steps + writer.steps + [Step("cuts", {}, "the cuts after the change (spec 3 refresh)")]


CONTROL_BOUND = 6


def run(bound: int) -> ObligationResult:
    """Obligation 3 for any length and any number of appends (:mod:`.incremental_unbounded`), with the
    bounded proof up to ``bound`` nodes as its cross-check; the negative control must fail the unbounded
    proof and be refuted by a concrete log, replayed through its variant."""
    from . import incremental_unbounded as unbounded
    from .induction import combine, control_status, notes as unbounded_notes
    from .replay import attach_refutation, replayed_control
    from .unbounded import describe

    watch = Stopwatch()
    proof = unbounded.prove(model_refresh)
    unbounded_seconds = watch.seconds
    b_status, cex, reached = prove(bound)
    status = combine(proof["status"], b_status)
    clauses = [Clause(c["name"], c["status"]) for c in proof["clauses"]] or [
        Clause("extend on append == full fold (t = 1, 2 appended nodes)", b_status),
        Clause("refresh after a checkpoint replace (any span, any position) == full fold", b_status)]
    result = ObligationResult(NAME, SECTION, status, "unbounded", 0.0, clauses,
                              notes=dict(unbounded_notes(proof, unbounded_seconds, describe()),
                                         cross_check={"bound": bound, "status": b_status, "lengths": f"0..{reached}",
                                                      "position": "symbolic"}))
    if cex is not None:
        attach_refutation(result, trace_steps(cex), NAME, None, {"obligation": NAME, "counterexample": cex}, "log")
    control_watch = Stopwatch()
    failed = unbounded.prove(refresh_ignoring_generation, unbounded.CONTROL_TIMEOUT_MS, first_failure=True)
    c_status, c_cex, _ = prove(CONTROL_BOUND, refresh_ignoring_generation, "x")
    control = replayed_control(
        "cache-ignores-generation", "the cut cache extends or is reused after a replace instead of rebuilt",
        control_status(failed["status"], c_status), trace_steps(c_cex) if c_cex else [],
        "model:prove-cache-ignores-generation", NAME, None, {"obligation": NAME, "counterexample": c_cex},
        control_watch.seconds, level="log")
    control.unbounded = {"status": failed["status"], "failed": failed["failed"]}
    result.controls.append(control)
    result.seconds = watch.seconds
    return result
