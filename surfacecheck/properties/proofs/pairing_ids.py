"""Obligation 2, pairing-ids: on logs whose results answer earlier open calls with unique ids, a
count-balanced cut (spec 3, computed by the model's own ``fold_cuts``) is exactly an id-closed cut.

Id-closed cut c: every tool call before c is answered by a result before c. The premise: call ids
are unique, result ids are unique, and each result answers a call of an earlier assistant message.
Negative control: drop the premise; Z3 then produces a surface with a mismatched id that the count
accepts (spec 3: "Call ids are not matched"), and the real model, replayed, shows it.
"""
from __future__ import annotations

import z3

from surfacecheck.model import pairing

from .concrete import ASSISTANT, MAX_CALLS, RESULT, surface_steps
from .encoding import SymbolicSurface, pairing_patch
from .obligation import PROVED, REFUTED, UNKNOWN, Clause, ObligationResult, Stopwatch, check, check_all
from .symexec import explore
from surfacecheck.core.trace import Step

NAME = "pairing-ids"
SECTION = "spec 3; seed §7"


class IdSurface(SymbolicSurface):
    """A symbolic surface plus, per tool result, the id it answers.

    Under the premise call ids are unique and only id equality matters, so without loss of generality
    the call in slot s of node i has id ``i * MAX_CALLS + s``; a result's id ``rid`` is symbolic."""

    def __post_init__(self):
        super().__post_init__()
        self.rid = [z3.Int(f"{self.name}_rid_{i}") for i in range(self.n)]

    def call(self, i, s):
        return z3.And(self.kind[i] == ASSISTANT, s < self.calls[i])

    def result(self, j):
        return self.kind[j] == RESULT

    def answers(self, j, i, s):
        return z3.And(self.result(j), self.call(i, s), self.rid[j] == i * MAX_CALLS + s)

    def premise(self) -> list:
        """Unique result ids, and every result answers a call made before it."""
        facts = []
        for j in range(self.n):
            for k in range(j + 1, self.n):
                facts.append(z3.Implies(z3.And(self.result(j), self.result(k)), self.rid[j] != self.rid[k]))
            facts.append(z3.Implies(self.result(j), z3.Or([self.answers(j, i, s) for i in range(j)
                                                           for s in range(MAX_CALLS)] or [z3.BoolVal(False)])))
        return facts

    def answered(self, i, s, c):
        return z3.Or([self.answers(j, i, s) for j in range(i + 1, c)] or [z3.BoolVal(False)])

    def id_closed(self, c: int):
        """Every call before cut c is answered by a result before cut c."""
        return z3.And([z3.Implies(self.call(i, s), self.answered(i, s, c))
                       for i in range(c) for s in range(MAX_CALLS)] or [z3.BoolVal(True)])

    def open_calls(self, c: int):
        """How many calls before cut c are still unanswered there (the lemma's right-hand side)."""
        return z3.Sum([z3.If(z3.And(self.call(i, s), z3.Not(self.answered(i, s, c))), 1, 0)
                       for i in range(c) for s in range(MAX_CALLS)] or [z3.IntVal(0)])

    def count(self, c: int):
        return z3.Sum(self.d[:c]) if c else z3.IntVal(0)

    def decode_ids(self, model) -> dict:
        value = lambda term: model.eval(term, model_completion=True).as_long()  # noqa: E731
        out = self.decode(model)
        out["call_ids"] = [[f"call-{i * MAX_CALLS + s}" for s in range(out["calls"][i])] for i in range(self.n)]
        out["answers"] = [f"call-{value(self.rid[j])}" if out["kinds"][j] == RESULT else None for j in range(self.n)]
        return out


def check_length(n: int, with_premise: bool = True) -> tuple[str, dict | None]:
    """With the premise, by double counting (no pigeonhole search): 0/1 variables x[j][slot] for
    "result j answers slot"; lemmas (each proved first) say every result answers exactly one slot,
    every slot is answered at most once, and a node's slots hold its calls; then the count before a
    cut equals its unanswered calls, and count-balanced == id-closed follows per cut. Without the
    premise (negative control): the claim directly."""
    from .symexec import expr

    surface = IdSurface(n, f"p{n}")
    premises = surface.domain() + surface.well_formed()
    with pairing_patch():
        session = surface.session()
        paths = explore(lambda: pairing.fold_cuts(session), premises=premises)
    def claim_in(closed):
        """Per cut: on every path the model's count-balanced cut equals ``closed[c]``; no path raises."""
        out = []
        for c in range(n + 1):
            terms = []
            for path in paths:
                if path.error is not None:
                    terms.append(z3.Not(path.condition))  # the fold must not raise on a well-formed surface
                else:
                    terms.append(z3.Implies(path.condition, expr(path.value.balanced[c]) == closed[c]))
            out.append(z3.And(terms))
        return out

    claim = claim_in([surface.id_closed(c) for c in range(n + 1)])
    if not with_premise:
        status, model = check(premises, z3.And(claim))
        return status, (surface.decode_ids(model) if model is not None else None)
    slots = [(i, s) for i in range(n) for s in range(MAX_CALLS)]
    var = lambda *parts: z3.Int("_".join([f"p{n}", *map(str, parts)]))  # noqa: E731
    x = {(j, i, s): var("x", j, i, s) for j in range(n) for (i, s) in slots if i < j}
    call = {(i, s): var("call", i, s) for (i, s) in slots}
    ans = {(i, s, c): var("ans", i, s, c) for (i, s) in slots for c in range(i + 1, n + 1)}
    defs = ([v == z3.If(surface.answers(j, i, s), 1, 0) for (j, i, s), v in x.items()]
            + [v == z3.If(surface.call(i, s), 1, 0) for (i, s), v in call.items()]
            + [v == z3.If(surface.answered(i, s, c), 1, 0) for (i, s, c), v in ans.items()])
    facts = surface.domain() + surface.premise() + defs  # (the lemmas need no well-formedness)
    groups = []  # lemmas, grouped so that each check is local; each follows from the premise
    for j in range(n):  # a result answers exactly one earlier slot; a non-result none
        groups.append([z3.Sum([x[(j, i, s)] for (i, s) in slots if i < j] or [z3.IntVal(0)])
                       == z3.If(surface.result(j), 1, 0)])
    for (i, s) in slots:  # a slot is answered at most once, and only if it holds a call
        groups.append([ans[(i, s, c)] == z3.Sum([x[(j, i, s)] for j in range(i + 1, c)] or [z3.IntVal(0)])
                       for c in range(i + 1, n + 1)] + [ans[(i, s, c)] <= call[(i, s)] for c in range(i + 1, n + 1)]
                      + [call[(i, s)] >= 0, call[(i, s)] <= 1] + [ans[(i, s, c)] >= 0 for c in range(i + 1, n + 1)])
    for i in range(n):  # node i's slots hold exactly its calls; its delta is its calls minus being a result
        groups.append([z3.Sum([call[(i, s)] for s in range(MAX_CALLS)]) == z3.If(surface.kind[i] == ASSISTANT,
                                                                                 surface.calls[i], 0),
                       surface.d[i] == z3.Sum([call[(i, s)] for s in range(MAX_CALLS)]) - z3.If(surface.result(i), 1, 0)])
    closed = [z3.And([call[(i, s)] <= ans[(i, s, c)] for i in range(c) for s in range(MAX_CALLS)] or [z3.BoolVal(True)])
              for c in range(n + 1)]
    groups += [[surface.id_closed(c) == closed[c]] for c in range(n + 1)]  # id-closed, in the 0/1 variables
    status, _, _ = check_all(facts, [z3.And(group) for group in groups])
    if status != PROVED:  # a lemma fails (the model's deltas changed?): ask for the claim directly
        status, model = check(premises + surface.premise(), z3.And(claim), timeout_ms=20_000)
        return (UNKNOWN if status == PROVED else status), (surface.decode_ids(model) if model is not None else None)
    lemmas = [fact for group in groups for fact in group]
    counting = [surface.count(c) == z3.Sum([call[(i, s)] - ans[(i, s, c)] for i in range(c) for s in range(MAX_CALLS)]
                                           or [z3.IntVal(0)]) for c in range(n + 1)]
    status, _ = check(lemmas, z3.And(counting))  # double counting: linear algebra over the lemmas alone
    if status != PROVED:
        return (UNKNOWN if status == REFUTED else status), None
    # the claim over the 0/1 variables: the count is a sum of non-negative "call still open" terms
    status, _, model = check_all(premises + lemmas + counting, claim_in(closed))
    if status == REFUTED:  # a candidate from the variable view: confirm it against every fact
        status, model = check(facts + lemmas + counting, z3.And(claim))
    return status, (surface.decode_ids(model) if model is not None else None)


def prove(bound: int, with_premise: bool = True) -> tuple[str, dict | None, int]:
    """With the premise only n = bound is checked: the claim is prefix-closed (a cut's count and its
    id-closedness depend only on the nodes before it, and every shorter surface meeting the premise is
    the prefix of one of ``bound`` nodes, padded with user messages). The control searches n = 0.. up."""
    for n in ([bound] if with_premise else range(bound + 1)):
        status, cex = check_length(n, with_premise)
        if status != PROVED:
            return status, (dict(cex, n=n) if cex else None), n
    return PROVED, None, bound


def trace_steps(cex: dict) -> list[Step]:
    steps, _ = surface_steps(cex["kinds"], cex["calls"], cex["prices"], answers=cex["answers"],
                             call_ids=cex["call_ids"])
    return [Step("reset", {}, "a new empty session"), *steps, Step("cuts", {}, "the N+1 cuts (spec 3)")]


CONTROL_BOUND = 6


def run(bound: int) -> ObligationResult:
    """Obligation 2 for any length (:mod:`.pairing_ids_unbounded`), with the bounded proof at ``bound``
    nodes as its cross-check; the negative control (premise dropped) must fail the induction's
    consecution and be refuted by a concrete log, replayed through the model."""
    from . import pairing_ids_unbounded as unbounded
    from .induction import combine, control_status, notes as unbounded_notes
    from .replay import attach_refutation, replayed_control
    from .unbounded import describe

    watch = Stopwatch()
    proof = unbounded.prove()
    unbounded_seconds = watch.seconds
    b_status, cex, reached = prove(bound)
    status = combine(proof["status"], b_status)
    label = "count-balanced cut == id-closed cut, for every cut"
    clause_status = proof["clauses"][0]["status"] if proof["clauses"] else b_status
    result = ObligationResult(NAME, SECTION, status, "unbounded", 0.0, [Clause(label, clause_status)],
                              notes=dict(unbounded_notes(proof, unbounded_seconds, {**describe(), **unbounded.describe()}),
                                         cross_check={"bound": bound, "status": b_status,
                                                      "lengths": f"{reached} (prefix-closed: covers 0..{reached})"},
                                         premise="unique call ids, unique result ids, each result answers an earlier call"))
    if cex is not None:
        attach_refutation(result, trace_steps(cex), NAME, None, {"obligation": NAME, "counterexample": cex}, "log")
    control_watch = Stopwatch()
    failed = unbounded.prove(False, unbounded.CONTROL_TIMEOUT_MS, first_failure=True)
    c_status, c_cex, _ = prove(CONTROL_BOUND, with_premise=False)
    control = replayed_control(
        "ids-premise-dropped", "no premise on ids: a mismatched id that the count accepts",
        control_status(failed["status"], c_status), trace_steps(c_cex) if c_cex else [], "model",
        "pairing-ids-unpremised", None, {"obligation": NAME, "counterexample": c_cex}, control_watch.seconds, level="log")
    control.unbounded = {"status": failed["status"], "failed": failed["failed"]}
    result.controls.append(control)
    result.seconds = watch.seconds
    return result
