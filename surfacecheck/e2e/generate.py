"""Hypothesis strategies for e2e conversation scripts: bounded, shrinkable, and
aimed at every compaction path.

A script (``surfacecheck-e2e-script/1``) is drawn in two steps: a *kind* (:data:`KINDS`), then its
numbers, chosen with the spec's pricing so the path it aims at fires on the real runtime:

* pressure is checked at every step's start against ``floor(contextWindow * thresholdRatio)``
  (spec 9.1, 9.2 step 8, 13); the meter's total is the request envelope (:data:`ENVELOPE_TOKENS`,
  measured on dsh 0.1.1rc1) plus about ``ceil(chars / 4) + STEP_TOKENS`` per tool step (spec 4.1);
* the pruner cuts only results above ``thresholdChars`` to ``head + marker + tail`` (spec 6): a
  prune script crosses with prunable outputs, pruning alone brings it back; a summary script
  crosses with outputs the pruner leaves alone (spec 9.2 steps 9-11);
* after a summary the total is about envelope + checkpoint (``ratio`` x span) + retained tail
  (spec 7, 8.2): a generations script crosses again on top of that (spec 9.4);
* an overflow comes after enough unsummarised output that its retain-0 summary is smaller than
  the span, and only where ``maxOverflowRetries`` allows the same-step retry (spec 10.2).

Choices are ordered simplest first and counts beyond what a kind needs are drawn as "extra", so a
failing script shrinks towards one short turn (the ``free`` kind is the shrink target).
:func:`draw_scripts` draws ``N`` scripts reproducibly from a seed and deals them over the kinds;
:func:`shrink_script` re-runs the same seeded search with a predicate and lets Hypothesis shrink.
"""
from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from typing import Any, Callable

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis import strategies as st

FORMAT = "surfacecheck-e2e-script/1"
MAX_TURNS = 4
MAX_STEPS = 40  # tool calls in one script: bounds a real run to a few seconds
CROSSING_STEPS = 16  # at most this many tool steps to cross the threshold once
# the order of KINDS is the shrink order (simplest first); draw_scripts deals kinds in the DEAL cycle, so
# any 7 scripts hold every kind; 20 hold overflow 4 times, prune and summary twice, the others 3 times
# (pressure kinds may also /compact after their last turn or open it with an overflow); "free" (the
# shrink target) is never dealt
KINDS = ("free", "quiet", "prune", "summary", "generations", "overflow", "manual", "failing")
DEAL = ("generations", "overflow", "summary", "manual", "failing", "prune", "quiet", "overflow", "manual",
        "generations", "failing", "overflow", "quiet", "summary", "prune", "generations", "failing", "overflow",
        "manual", "quiet")
WINDOWS = (8000, 10000, 12000, 16000)
RATIOS = (0.5, 0.6, 0.75)
RETAINS = (1000, 2000, 3000)
OUTPUT_CHARS = (100, 500, 1000, 1500, 1900, 2500, 3000, 4500, 6000, 9000, 12000)
HEAD_TAIL_CHARS = 200
PRUNE_MARKER_CHARS = 39  # "\n\n[... tool result middle pruned ...]\n\n" (spec 6)
SUMMARY_RATIOS = (0.1, 0.05, 0.2)
# pricing (spec 4.1), measured on dsh 0.1.1rc1 logs: the request header's estimate and one tool step's overhead
ENVELOPE_TOKENS = 957 + 13  # system prompt + tool schemas (957), then the first user prompt
STEP_TOKENS = 43  # the assistant tool-call message and the tool-result wrapper, beyond ceil(chars / 4)
TURN_TOKENS = 40  # a turn's closing text reply and the next prompt
CHECKPOINT_TOKENS = 98 + 4  # checkpoint frame (spec 8.2 step 9) + block overhead
OVERFLOW_SPAN_CHARS = 3000  # output an overflow's retain-0 summary shadows, so the summary is smaller (spec 8.2)
SPAN_FACTOR = 1.15  # a summary of ratio r is r x the span's JSON characters, a little more than r x its tokens


def threshold_of(config: dict) -> int:
    """floor(contextWindow * thresholdRatio): the 0.1.1rc1 pressure threshold (spec 9.1)."""
    return math.floor(config["contextWindow"] * config["thresholdRatio"])


def _pruner_chars(config: dict) -> int | None:
    return None if config["pruner"] is None else config["pruner"]["thresholdChars"]


def step_tokens(chars: int) -> int:
    """About what one tool step adds to the meter's total (spec 4.1)."""
    return math.ceil(chars / 4) + STEP_TOKENS


def pruned_chars(chars: int, threshold: int | None) -> int:
    """A tool output's size after the pruner (spec 6): unchanged at or below ``thresholdChars``."""
    if threshold is None or chars <= threshold:
        return chars
    return 2 * HEAD_TAIL_CHARS + PRUNE_MARKER_CHARS


def after_summary(total: int, retain: int, last_step: int, ratio: float) -> int:
    """About the total after a pressure summary (spec 7, 8.2): envelope, checkpoint of ``ratio`` x the
    summarised span, and a retained tail of at least ``retainTokens`` (one step more at worst)."""
    retained = retain + last_step
    span = max(0, total - ENVELOPE_TOKENS - retained)
    return ENVELOPE_TOKENS + CHECKPOINT_TOKENS + math.ceil(ratio * SPAN_FACTOR * span) + retained


def estimated_totals(script: dict, pruned: bool = False) -> list[int]:
    """The meter's estimated total at the start of each step that follows a tool output, as if nothing
    were compacted (spec 4.1, 13); ``pruned``: with every output as the pruner leaves it (spec 6)."""
    limit = _pruner_chars(script["config"]) if pruned else None
    totals, total = [], ENVELOPE_TOKENS
    for number, turn in enumerate(script["turns"]):
        total += TURN_TOKENS if number else 0
        for reply in turn["replies"]:
            if "tool" in reply:
                total += step_tokens(pruned_chars(reply["tool"]["output_chars"], limit))
                totals.append(total)
    return totals


# -- the numbers of one kind -------------------------------------------------------------------------
@st.composite
def _config(draw, kind: str) -> dict:
    """A 0.1.1rc1 compaction-basic + pruner configuration (spec 9.1, 6). The retention leaves room under
    the threshold for the checkpoint and one step, so a summary brings the total back below it."""
    window, ratio = draw(st.sampled_from(WINDOWS)), draw(st.sampled_from(RATIOS))
    threshold = math.floor(window * ratio)
    room = 0.9 * threshold - ENVELOPE_TOKENS - CHECKPOINT_TOKENS - 800
    retain = draw(st.sampled_from([r for r in RETAINS if r <= room] or [RETAINS[0]]))
    pruners = {"free": (2000, 4000, 8000, None), "quiet": (2000, 4000, 8000, None), "prune": (2000, 4000),
               "summary": (2000, 4000), "generations": (2000, 8000, None, 4000), "overflow": (2000, 4000, 8000, None),
               "manual": (8000, 2000, None), "failing": (8000, None, 2000)}[kind]
    pruner = draw(st.sampled_from(pruners))
    overflow_retries = (1, 2) if kind == "overflow" else (1, 0, 2)
    return {"contextWindow": window, "thresholdRatio": ratio, "retainTokens": retain, "maxTokens": 1024,
            "compactionRetries": draw(st.sampled_from((1, 0, 2))),
            "maxOverflowRetries": draw(st.sampled_from(overflow_retries)), "requestMaxTokens": 1024,
            "pruner": None if pruner is None else {"thresholdChars": pruner, "headChars": HEAD_TAIL_CHARS,
                                                   "tailChars": HEAD_TAIL_CHARS}}


def _grow(draw, sizes: tuple, total: int, target: float, steps: list) -> int:
    """Append tool outputs drawn from ``sizes`` until the estimated total reaches ``target`` (at most
    :data:`MAX_STEPS` steps); returns the new estimated total."""
    while total < target and len(steps) < MAX_STEPS:
        chars = draw(st.sampled_from(sizes))
        steps.append(chars)
        total += step_tokens(chars)
    return total


def _fitting(sizes: tuple, threshold: int, fewest: int) -> tuple:
    """The sizes of which at least ``fewest`` and at most :data:`CROSSING_STEPS` steps cross ``threshold``
    (the largest one when none does): bounded scripts that still take a few steps to get there."""
    fit = tuple(c for c in sizes if fewest * step_tokens(c) <= threshold - ENVELOPE_TOKENS
                and CROSSING_STEPS * step_tokens(c) >= threshold - ENVELOPE_TOKENS)
    return fit or sizes[-1:]


def _extra(draw, sizes: tuple, steps: list[int], most: int) -> None:
    """Up to ``most`` more tool outputs beyond what the kind needs: shrinks to none."""
    for _ in range(draw(st.integers(0, most))):
        if len(steps) < MAX_STEPS:
            steps.append(draw(st.sampled_from(sizes)))


def _uniform_list(element: st.SearchStrategy, low: int, high: int) -> st.SearchStrategy[list]:
    """A list whose length is uniform in [low, high] (Hypothesis' own lists favour short ones); shrinks to ``low``."""
    return st.integers(low, high).flatmap(lambda k: st.lists(element, min_size=k, max_size=k))


_TEXT = st.builds(lambda r: {"outcome": "text", "ratio": r}, st.sampled_from(SUMMARY_RATIOS))
_MANUAL_SUMMARY = st.one_of(_TEXT, st.just({"outcome": "too-big"}), st.just({"outcome": "failure"}))


def _free(draw, config: dict) -> tuple[list, list]:
    """Free-form (never dealt by :func:`draw_scripts`): one to eight outputs of any size, maybe an
    overflow where it can be retried. Simplest kind, so any failing script can shrink into it."""
    steps = draw(_uniform_list(st.sampled_from(OUTPUT_CHARS), 1, 8))
    places = [at for at in range(2, len(steps) + 1) if sum(steps[:at - 1]) >= OVERFLOW_SPAN_CHARS]
    if places and config["maxOverflowRetries"] > 0 and draw(st.integers(0, 3)) == 3:
        at = draw(st.sampled_from(places))
        steps[at:at] = ["overflow"]
    return steps, draw(st.lists(_MANUAL_SUMMARY, max_size=2))


def _quiet(draw, config: dict) -> tuple[list, list]:
    """Below threshold (spec 9.2 step 8: no opportunistic pruning): outputs of any size, kept under 85%
    of the threshold."""
    steps, total, limit = [], ENVELOPE_TOKENS, 0.85 * threshold_of(config)
    for _ in range(draw(st.integers(1, 6))):
        chars = draw(st.sampled_from(OUTPUT_CHARS))
        if total + step_tokens(chars) + TURN_TOKENS * MAX_TURNS >= limit:
            break
        steps.append(chars)
        total += step_tokens(chars)
    return steps or [OUTPUT_CHARS[0]], []


def _prune(draw, config: dict) -> tuple[list, list]:
    """Prunable outputs cross the threshold; pruning them alone brings the total back under it (spec 9.2
    step 10), and more of them cross it again."""
    threshold, limit = threshold_of(config), _pruner_chars(config)
    big = tuple(c for c in OUTPUT_CHARS if c > limit)
    steps: list[int] = []
    _grow(draw, big, ENVELOPE_TOKENS, threshold, steps)
    _extra(draw, big, steps, 4)
    return steps, []


def _summary_steps(draw, config: dict, generations: int, ratio: float, prunable: bool = False) -> list:
    """Outputs the pruner leaves alone cross the threshold ``generations`` times (spec 9.2 step 11, 9.4);
    a prunable one may come first (``prunable``: does), so pressure prunes, then summarises (9.2 9-11)."""
    threshold, limit = threshold_of(config), _pruner_chars(config)
    small = _fitting(tuple(c for c in OUTPUT_CHARS if c <= min(limit or 6000, 6000)), threshold, 4)
    steps: list[int] = []
    total = ENVELOPE_TOKENS
    if limit is not None and limit < 6000 and (prunable or draw(st.integers(0, 3)) > 0):
        chars = draw(st.sampled_from(tuple(c for c in OUTPUT_CHARS if limit < c <= 6000)))
        steps.append(chars)
        total += step_tokens(pruned_chars(chars, limit))
    for generation in range(generations):
        total = _grow(draw, small, total, threshold, steps)
        total = after_summary(total, config["retainTokens"], step_tokens(steps[-1]), ratio)
        if generation < generations - 1:
            total -= step_tokens(steps[-1])  # pessimistic: grow one step more for the next crossing
    _extra(draw, small, steps, 2)
    return steps


def _summary(draw, config: dict, generations: bool = False) -> tuple[list, list]:
    """Summary after prune (a prunable output, then a crossing), or ``generations``: two or three
    crossings, each later summary's range starting at the previous checkpoint (spec 9.4)."""
    ratio = draw(st.sampled_from(SUMMARY_RATIOS))
    crossings = draw(st.integers(2, 3)) if generations else 1
    steps = _summary_steps(draw, config, crossings, ratio, prunable=not generations)
    return steps, [{"outcome": "text", "ratio": ratio}] * draw(st.integers(0, 1))


def _failing(draw, config: dict) -> tuple[list, list]:
    """A summary-heavy conversation whose first summaries fail: HTTP 500 or a summary not smaller than
    its span (spec 8.2 step 10, 8.3); the pre-step only warns and the next step tries again (spec 9.3)."""
    failures = draw(st.lists(st.sampled_from(({"outcome": "failure"}, {"outcome": "too-big"})), min_size=1,
                             max_size=3))
    steps = _summary_steps(draw, config, draw(st.integers(1, 2)), SUMMARY_RATIOS[0])
    _extra(draw, _fitting(tuple(c for c in OUTPUT_CHARS if c <= 1900), threshold_of(config), 4), steps, len(failures))
    return steps, failures


def _overflow(draw, config: dict) -> tuple[list, list]:
    """Overflow replies (spec 10), each after :data:`OVERFLOW_SPAN_CHARS` of output no earlier overflow
    summarised: the retain-0 summary shadows all but the latest step (spec 7) and must be smaller than
    that (spec 8.2), so the same step is retried; with ``maxOverflowRetries`` 2 maybe twice in a row."""
    threshold = threshold_of(config)
    sizes = _fitting(OUTPUT_CHARS, threshold, 3)[::-1]  # largest first: shrinks to few outputs before the overflow
    steps: list = []
    _grow(draw, sizes, ENVELOPE_TOKENS, draw(st.sampled_from((0, 0.5, 0.3, 1.1))) * threshold, steps)
    while sum(steps[:-1]) < OVERFLOW_SPAN_CHARS and len(steps) < MAX_STEPS:
        steps.append(draw(st.sampled_from(sizes)))
    _extra(draw, sizes, steps, 3)
    places = [at for at in range(2, len(steps) + 1) if sum(steps[:at - 1]) >= OVERFLOW_SPAN_CHARS]
    marks, previous = [], 0
    for at in sorted(set(draw(st.lists(st.sampled_from(places), min_size=1, max_size=3)))):
        if sum(steps[previous:at - 1]) >= OVERFLOW_SPAN_CHARS:
            marks.append(at)
            previous = at
    for at in reversed(marks):
        double = config["maxOverflowRetries"] >= 2 and draw(st.integers(0, 3)) == 3
        steps[at:at] = ["overflow"] * (2 if double else 1)
    return steps, draw(st.lists(_TEXT, max_size=2))


def _manual(draw, config: dict) -> tuple[list, list]:
    """Conversations below or around the threshold with `/compact` after turns (spec 11): the first
    /compact checkpoints, a second one re-summarises that checkpoint (second generation)."""
    sizes = _fitting(tuple(c for c in OUTPUT_CHARS if c <= 3000), threshold_of(config), 3)
    steps: list = []
    _grow(draw, sizes, ENVELOPE_TOKENS, draw(st.sampled_from((0.5, 0.8, 0.3))) * threshold_of(config), steps)
    return steps, draw(_uniform_list(_MANUAL_SUMMARY, 1, 3))


def _turns(draw, kind: str, steps: list, config: dict) -> list[dict]:
    """One to four turns (shrinks to one), each ending with a text reply. /compact: after most turns of a
    manual script, maybe after the last one of others but quiet (not resetting the planned pressure);
    a pressure kind's last turn may open with an overflow once it crossed (all before it compacts)."""
    breaks = sorted(set(draw(st.lists(st.integers(1, max(1, len(steps) - 1)), max_size=MAX_TURNS - 1))))
    breaks = [b for b in breaks if 0 < b < len(steps)]
    turns, start = [], 0
    for number, end in enumerate(breaks + [len(steps)], 1):
        replies = [{"overflow": True} if s == "overflow" else {"tool": {"output_chars": s}} for s in steps[start:end]]
        start = end
        replies.append({"text": f"turn {number} done"})
        compact = (draw(st.integers(0, 3)) > 0 if kind == "manual" else
                   kind != "quiet" and end == len(steps) and draw(st.integers(0, 3)) == 3)
        turns.append({"prompt": f"turn {number}: run the next workspace command", "replies": replies,
                      "compact": compact})
    if kind == "manual" and not any(t["compact"] for t in turns):
        turns[-1]["compact"] = True
    before = [c for c in steps[:breaks[-1] if breaks else 0] if c != "overflow"]  # the planned crossing first
    limit = None if kind == "prune" else _pruner_chars(config)
    crossed = ENVELOPE_TOKENS + sum(step_tokens(pruned_chars(c, limit)) for c in before) >= threshold_of(config)
    if (kind in ("prune", "summary", "generations") and crossed and config["maxOverflowRetries"] > 0
            and draw(st.integers(0, 3)) == 3):  # the last turn's first request overflows (spec 10): retried
        turns[-1]["replies"].insert(0, {"overflow": True})
    return turns


_KIND_STEPS = {"free": _free, "quiet": _quiet, "prune": _prune, "summary": _summary, "overflow": _overflow,
               "generations": lambda draw, config: _summary(draw, config, generations=True), "manual": _manual,
               "failing": _failing}


@st.composite
def kind_scripts(draw, kind: str) -> dict:
    """One script of ``kind`` (name ``generated``; the kind is in the description)."""
    config = draw(_config(kind))
    usage = draw(st.sampled_from(("fixed", "realistic")))
    steps, summaries = _KIND_STEPS[kind](draw, config)
    return {"format": FORMAT, "name": "generated", "description": f"generated {kind}", "config": config,
            "usage": usage, "turns": _turns(draw, kind, steps, config), "summaries": list(summaries)}


def scripts() -> st.SearchStrategy[dict]:
    """Contract-shaped script JSON dicts: a kind first (shrinks towards ``free``), then its numbers."""
    return st.sampled_from(KINDS).flatmap(kind_scripts)


def kind_of(script: dict) -> str:
    """The kind a generated script was drawn as (from its description)."""
    words = (script.get("description") or "").replace(":", " ").split()
    return next((w for w in words if w in KINDS), "")


def identity(script: dict) -> str:
    """What makes two scripts the same run: everything but name and description."""
    return json.dumps({k: v for k, v in script.items() if k not in ("name", "description")}, sort_keys=True)


def _settings(max_examples: int, phases) -> settings:
    return settings(max_examples=max_examples, database=None, derandomize=False, deadline=None, phases=phases,
                    verbosity=Verbosity.quiet, print_blob=False, report_multiple_bugs=False,
                    suppress_health_check=list(HealthCheck))


def _named(script: dict, name: str, description: str) -> dict:
    return dict(script, name=name, description=description)


def shape(script: dict) -> tuple:
    """A coarse signature (kind, turns, tool calls, overflows, /compact, usage, summaries): draws prefer new
    shapes, so N scripts are N different conversations rather than many small variations of one."""
    replies = [r for t in script["turns"] for r in t["replies"]]
    return (kind_of(script), len(script["turns"]), sum("tool" in r for r in replies),
            sum("overflow" in r for r in replies), sum(t["compact"] for t in script["turns"]), script["usage"],
            len(script["summaries"]))


def draw_scripts(n: int, seed_value: int) -> list[dict]:
    """``n`` distinct scripts drawn reproducibly from ``seed_value`` (same seed, same scripts): from a
    seeded run of ``20 n`` examples, dealt over the kinds in the :data:`DEAL` cycle: each kind's
    new :func:`shape` s first (in a seeded shuffle, so they are spread over the run), then the rest."""
    if n <= 0:
        return []
    examples: list[dict] = []

    @seed(seed_value)
    @_settings(max(1, n) * 20, [Phase.generate])
    @given(scripts())
    def collect(script: dict) -> None:
        examples.append(script)

    collect()
    seen: set[str] = set()
    queues: dict[str, list[dict]] = {kind: [] for kind in KINDS}
    for script in examples:  # distinct scripts, per kind
        if identity(script) not in seen:
            seen.add(identity(script))
            queues[kind_of(script)].append(script)
    order = random.Random(seed_value)  # Hypothesis draws neighbours in a row: take each kind's shapes spread out
    for kind, found in queues.items():
        shapes: set = set()
        fresh = [s for s in found if not (shape(s) in shapes or shapes.add(shape(s)))]
        order.shuffle(fresh)
        queues[kind] = fresh + [s for s in found if s not in fresh]
    chosen: list[dict] = []
    while len(chosen) < n and any(queues[kind] for kind in DEAL):
        for kind in DEAL:
            if queues[kind] and len(chosen) < n:
                chosen.append(queues[kind].pop(0))
    return [_named(s, f"gen-{seed_value}-{i:02d}",
                   f"generated {kind_of(s)}: surfacecheck e2e dsh --generate {n} --seed {seed_value} (#{i})")
            for i, s in enumerate(chosen)]


class _Failed(Exception):
    """Raised inside the shrink search so Hypothesis shrinks the script that carries it."""

    def __init__(self, script: dict, detail: Any):
        super().__init__("script failed")
        self.script, self.detail = script, detail


@dataclass
class Shrunk:
    """The shortest failing script found, its failure ``detail``, and how many runs it cost."""

    script: dict
    detail: Any
    runs: int


def shrink_script(fails: Callable[[dict], Any], *, seed_value: int, n: int, budget: int = 40,
                  known: dict[str, Any] | None = None, name: str = "shrunk") -> Shrunk | None:
    """Re-run the seeded search of :func:`draw_scripts` with ``fails(script) -> detail | None`` and let
    Hypothesis shrink the first failure (``None`` when nothing fails within the ``n`` draws).

    ``known`` maps :func:`identity` to a detail already measured (``None`` = passed), so the scripts
    the first pass ran cost nothing; at most ``budget`` new scripts are run (each one is a real
    runtime run), after which untried candidates count as passing and shrinking stops improving."""
    cache: dict[str, Any] = dict(known or {})
    runs = 0

    @seed(seed_value)
    @_settings(max(1, n) * 20, [Phase.generate, Phase.shrink])
    @given(scripts())
    def search(script: dict) -> None:
        nonlocal runs
        key = identity(script)
        if key not in cache:
            if runs >= budget:
                return
            runs += 1
            cache[key] = fails(_named(script, name, "shrunk by surfacecheck e2e dsh from a generated script"))
        if cache[key] is not None:
            raise _Failed(script, cache[key])

    try:
        search()
    except _Failed as exc:
        return Shrunk(_named(exc.script, name, "shrunk by surfacecheck e2e dsh from a generated script"),
                      exc.detail, runs)
    return None
