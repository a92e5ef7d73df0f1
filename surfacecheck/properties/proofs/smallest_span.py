"""Obligation 6, smallest-compactable-span (spec 8.2 steps 9-10, 9.4; seed §8).

(a) The model's own checkpoint frame (``checkpoint_message``) priced by the model's estimator
(``estimate_message``), explored with summary texts of symbolic lengths (up to ``BLOCKS`` text
blocks, at least one non-empty), never costs less than 103 tokens — so by the shrink rule
(commit only when framed < shadowed) a span priced 103 or less can never be replaced — and 103 is
reached, so 104 is the smallest span price a summary can replace.
(b) With unchanged prices, a second pressure attempt (``compactionRetries`` 1) selects exactly the
first checkpoint: stated on spec 7 declaratively for every surface up to the bound (cut-legality
proves the model implements spec 7 there), and, up to ``RETRY_BOUND`` nodes, by exploring the
model's ``select_compactable_range`` on a surface, replacing the selected span by a checkpoint
(delta 0, cheaper than the span, at least the minimal frame) and exploring it again with the same
budget; the second range must be ``{checkpoint, checkpoint}``.
Negative control: a frame without its closing tag, which lets a span of 103 be replaced.
"""
from __future__ import annotations

import z3

from surfacecheck.model import estimate, region, summarizer
from surfacecheck.model.region import Range
from surfacecheck.model.seams import active

from .concrete import USER, delta_table
from .encoding import FakeMeasurement, FakeSession, Node, SymbolicSurface, pairing_patch
from .obligation import PROVED, REFUTED, Clause, ObligationResult, Stopwatch, check, fold_status
from .symexec import SymInt, explore, expr, standing_in
from surfacecheck.core.trace import Step

NAME = "smallest-compactable-span"
SECTION = "spec 8.2 steps 9-10, 9.4; seed §8"
BLOCKS = 3
SMALLEST_FRAME = 103  # the statement being proved (spec 8.2 step 10: spans <= 103 can never be summarized)


class SymText(str):
    """A summary text whose JS length is symbolic (the estimator reads only its length)."""

    length: SymInt


def _text(length) -> SymText:
    text = SymText("x")
    text.length = SymInt(length)
    return text


def framed_price(lengths, frame=None):
    """The model's price of the checkpoint for text blocks of the given symbolic lengths."""
    original = active().js_length

    def js_length(value):
        return value.length if isinstance(value, SymText) else original(value)

    frame_fn = frame or active().frame_summary
    blocks = [{"type": "text", "text": _text(length)} for length in lengths]
    with standing_in(js_length=js_length, frame_summary=frame_fn):
        paths = explore(lambda: estimate.estimate_message(summarizer.checkpoint_message(blocks, "c", None, "m")))
    assert len(paths) == 1 and paths[0].error is None, paths[0].error
    return expr(paths[0].value)


def frame_bound(frame=None) -> tuple[str, dict | None, int | None]:
    """min framed price over every summary of 1..BLOCKS text blocks is exactly SMALLEST_FRAME."""
    statuses, witness = [], None
    for count in range(1, BLOCKS + 1):
        lengths = [z3.Int(f"len{count}_{i}") for i in range(count)]
        price = framed_price(lengths, frame)
        facts = [length >= 0 for length in lengths] + [lengths[0] >= 1]  # non-whitespace text exists
        status, model = check(facts, price >= SMALLEST_FRAME)
        statuses.append(status)
        if status == REFUTED:
            value = lambda term: model.eval(term, model_completion=True).as_long()  # noqa: E731
            return REFUTED, {"lengths": [value(v) for v in lengths], "framed": value(price)}, None
        if count == 1:  # reached: the bound is the minimum, not just a lower bound
            solver = z3.Solver()
            solver.add(*facts, price == SMALLEST_FRAME)
            if solver.check() == z3.sat:
                witness = solver.model()[lengths[0]].as_long()
    return fold_status(statuses), None, witness


def second_attempt(n: int) -> str:
    """Spec 9.4 on surfaces of n nodes: re-selection after a landed checkpoint picks the checkpoint."""
    surface = SymbolicSurface(n, f"r{n}")
    budget, ckpt = z3.Int(f"r{n}_budget"), z3.Int(f"r{n}_ckpt")
    premises = surface.domain() + surface.well_formed() + [budget >= 0, ckpt >= SMALLEST_FRAME]
    ckpt_delta = delta_table()[(USER, 0)]

    def attempts():
        first = region.select_compactable_range(surface.session(), surface.measurement(), SymInt(budget))
        if first is None:
            return None
        cut = surface.seqs.index(first.end) + 1
        shadowed = sum((SymInt(p) for p in surface.price[:cut]), SymInt(0))
        if not (SymInt(ckpt) < shadowed):  # the shrink rule: only a smaller checkpoint lands
            return None
        nodes = (Node(9999, SymInt(z3.IntVal(ckpt_delta))),) + surface.nodes()[cut:]
        prices = [SymInt(ckpt)] + [SymInt(p) for p in surface.price[cut:]]
        second = region.select_compactable_range(FakeSession(nodes, 1), FakeMeasurement(
            tuple(node.seq for node in nodes), prices), SymInt(budget))
        return first, second

    with pairing_patch():
        paths = explore(attempts, premises=premises)
    goals = []
    for path in paths:
        ok = path.error is None and (path.value is None or path.value[1] == Range(9999, 9999))
        goals.append(z3.Implies(path.condition, z3.BoolVal(ok)))
    status, _ = check(premises, z3.And(goals))
    return status


def second_attempt_spec(n: int) -> str:
    """Spec 9.4 on spec 7 itself (which cut-legality proves the model implements, for every surface up
    to the bound): after the first range 0..C-1 is replaced by a cheaper checkpoint (delta 0), spec 7
    with the same budget selects exactly the checkpoint (its nearest balanced cut is 1)."""
    from .cut_legality import nearest_cut, spec_terms

    surface = SymbolicSurface(n, f"q{n}")
    budget, ckpt = z3.Int(f"q{n}_budget"), z3.Int(f"q{n}_ckpt")
    bal, R, facts = spec_terms(surface.price, surface.d, budget, f"q{n}")
    C, cut_facts = nearest_cut(bal, R, f"q{n}")
    facts += cut_facts + surface.domain() + surface.well_formed() + [budget >= 0, ckpt >= SMALLEST_FRAME]
    ckpt_delta = delta_table()[(USER, 0)]
    solver = z3.Solver()
    solver.add(*facts)
    for c in range(1, n):  # one first cut at a time (push/pop): the checks stay small
        prices = [ckpt] + surface.price[c:]
        bal2, R2, facts2 = spec_terms(prices, [z3.IntVal(ckpt_delta)] + surface.d[c:], budget, f"q{n}_{c}")
        C2, cut2 = nearest_cut(bal2, R2, f"q{n}_{c}")
        solver.push()
        solver.add(*facts2, *cut2, C == c, ckpt < z3.Sum(surface.price[:c]))  # the checkpoint landed
        if solver.check() != z3.sat:
            return "unknown"  # vacuous: this first cut cannot land a checkpoint
        solver.add(C2 != 1)
        answer = solver.check()
        solver.pop()
        if answer != z3.unsat:
            return REFUTED if answer == z3.sat else "unknown"
    return PROVED


def wrong_frame(summary):
    """Wrong on purpose: the checkpoint frame without its closing tag block."""
    return [{"type": "text", "text": summarizer.PREAMBLE + summarizer.OPEN_TAG}, *summary]


RETRY_BOUND = 8  # the nested exploration (two selections) grows fast; the largest n it checks


def trace_steps(cex: dict, span_price: int) -> list[Step]:
    """A span of user messages priced ``span_price`` plus a tail node, then ``compact`` of the span
    with a summary text of the counterexample's length."""
    from .concrete import NodeWriter

    writer = NodeWriter()
    first = writer.node(USER, 0, span_price - 9)
    last = writer.node(USER, 0, 9)
    writer.node(USER, 0, 9)
    text = "x" * max(1, cex["lengths"][0])
    summary = {"outcome": "text", "text": text}
    return [Step("reset", {}, "a new empty session"), *writer.steps,
            Step("compact", {"start": first, "end": last, "summary": summary},
                 f"compact {first}-{last} (priced {span_price}) with a {len(text)}-character summary")]


def run(bound: int) -> ObligationResult:
    from .replay import replayed_control

    watch = Stopwatch()
    status, cex, witness = frame_bound()
    retry_bound = min(bound, RETRY_BOUND)
    retry = fold_status([second_attempt(n) for n in range(retry_bound + 1)])
    retry_spec = fold_status([second_attempt_spec(n) for n in range(bound + 1)])
    clauses = [Clause(f"every framed checkpoint costs >= {SMALLEST_FRAME} (so spans <= {SMALLEST_FRAME} never "
                      f"shrink)", status),
               Clause(f"{SMALLEST_FRAME} is reached (a {witness}-character summary), so {SMALLEST_FRAME + 1} is the "
                      "smallest replaceable span price", PROVED if witness is not None else "unknown"),
               Clause(f"second attempt with unchanged prices selects exactly the first checkpoint: spec 7 "
                      f"(which cut-legality proves the model implements), n <= {bound}", retry_spec),
               Clause(f"the same, exploring the model's select_compactable_range twice, n <= {retry_bound}", retry)]
    overall = fold_status([c.status for c in clauses])
    result = ObligationResult(NAME, SECTION, overall, bound, 0.0, clauses,
                              notes={"frame_tokens": 98, "blocks": BLOCKS, "smallest_span": SMALLEST_FRAME + 1,
                                     "frame": "unbounded (any text lengths)", "retry_on_model": retry_bound})
    control_watch = Stopwatch()
    c_status, c_cex, _ = frame_bound(wrong_frame)
    steps = trace_steps(c_cex, SMALLEST_FRAME) if c_cex else []
    result.controls.append(replayed_control(
        "frame-without-closing-tag", "a checkpoint frame without its closing tag block", c_status, steps,
        "model:prove-frame-without-closing-tag", NAME, None, {"obligation": NAME, "counterexample": c_cex},
        control_watch.seconds))
    result.seconds = watch.seconds
    return result
