"""Hypothesis strategies for e2e conversation scripts (issue 8 item 3): bounded and shrinkable.

A generated script is the contract's JSON (``surfacecheck-e2e-script/1``): a runtime configuration
drawn from a few spec-legal values (retainTokens below ``floor(contextWindow * thresholdRatio)``,
the 0.1.1rc1 pressure threshold, spec 9.1), one to four turns of tool calls (output sizes chosen so
the pruner's ``thresholdChars`` and the pressure threshold are crossed or not, spec 7 and 9.2), an
overflow reply only where something is compactable (spec 10: the same-step retry needs progress),
manual ``/compact`` after some turns (spec 11) and scripted summary outcomes (spec 6).

Every choice is ordered simplest first, so Hypothesis shrinks a failing script towards one short
turn with small outputs. :func:`draw_scripts` draws ``N`` scripts reproducibly from a seed (a seeded,
database-less ``@given`` run); :func:`shrink_script` re-runs the same seeded search with a
predicate and lets Hypothesis shrink the failing example it finds.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis import strategies as st

FORMAT = "surfacecheck-e2e-script/1"
MAX_TURNS = 4
MAX_ACTIONS = 8
# simplest first: Hypothesis shrinks towards the front of each list
WINDOWS = (8000, 16000)  # small windows: a few turns reach the threshold
RATIOS = (0.5, 0.6, 0.75)
RETAINS = (2000, 1000, 3000)
OUTPUT_CHARS = (100, 1900, 3000, 6000, 12000)
PRUNER_THRESHOLDS = (2000, 4000, 8000)  # 8000: 6000-char outputs are not prunable, so pressure must summarise
SUMMARY_RATIOS = (0.1, 0.05, 0.3)


def _config() -> st.SearchStrategy[dict]:
    """A 0.1.1rc1 compaction-basic + pruner configuration (spec 9.1; every combination is legal:
    the largest retain, 3000, is below the smallest threshold, floor(8000 * 0.5))."""
    return st.fixed_dictionaries({
        "contextWindow": st.sampled_from(WINDOWS),
        "thresholdRatio": st.sampled_from(RATIOS),
        "retainTokens": st.sampled_from(RETAINS),
        "maxTokens": st.just(1024),
        "compactionRetries": st.sampled_from((1, 0, 2)),
        "maxOverflowRetries": st.sampled_from((1, 0, 2)),
        "requestMaxTokens": st.just(1024),
        "pruner": st.fixed_dictionaries({"thresholdChars": st.sampled_from(PRUNER_THRESHOLDS),
                                         "headChars": st.just(200), "tailChars": st.just(200)}),
    })


_TOOL = st.builds(lambda n: {"tool": {"output_chars": n}}, st.sampled_from(OUTPUT_CHARS))
_ACTION = st.one_of(_TOOL, _TOOL, _TOOL, st.just({"overflow": True}))  # one action in four is an overflow
# /compact after one turn in four: shrinks to "no /compact"
def _uniform_list(element: st.SearchStrategy, low: int, high: int) -> st.SearchStrategy[list]:
    """A list whose length is uniform in [low, high] (Hypothesis' own lists favour short ones); shrinks to ``low``."""
    return st.integers(low, high).flatmap(lambda k: st.lists(element, min_size=k, max_size=k))


_TURN = st.fixed_dictionaries({"actions": _uniform_list(_ACTION, 1, MAX_ACTIONS),
                               "compact": st.integers(0, 3).map(lambda k: k == 3)})
_SUMMARY = st.one_of(st.builds(lambda r: {"outcome": "text", "ratio": r}, st.sampled_from(SUMMARY_RATIOS)),
                     st.just({"outcome": "failure"}), st.just({"outcome": "too-big"}))


def _assemble(config: dict, usage: str, turns: list[dict], summaries: list[dict]) -> dict:
    """Build the script, keeping only overflows the runtime can recover from or refuse cleanly: at
    most one per turn, never a turn's last reply, and only after a tool output the pruner can cut
    (spec 10: recovery must make progress, else the turn ends and later replies would desynchronise)."""
    threshold = config["pruner"]["thresholdChars"]
    prunable = False
    out_turns = []
    for number, turn in enumerate(turns, 1):
        replies, overflowed = [], False
        for action in turn["actions"]:
            if "overflow" in action:
                if overflowed or not prunable:
                    continue
                overflowed = True
            replies.append(action)
            if overflowed and config["maxOverflowRetries"] == 0:
                break  # no same-step retry (spec 10.2): the overflow ends the turn
        for action in replies:
            if "tool" in action and action["tool"]["output_chars"] > threshold:
                prunable = True
        if not (overflowed and config["maxOverflowRetries"] == 0):
            replies.append({"text": f"turn {number} done"})
        out_turns.append({"prompt": f"turn {number}: run the next workspace command", "replies": replies,
                          "compact": turn["compact"]})
    order = ("contextWindow", "thresholdRatio", "retainTokens", "maxTokens", "compactionRetries", "maxOverflowRetries",
             "requestMaxTokens", "pruner")
    config = {key: config[key] for key in order}
    config["pruner"] = {key: config["pruner"][key] for key in ("thresholdChars", "headChars", "tailChars")}
    return {"format": FORMAT, "name": "generated", "description": "", "config": config, "usage": usage,
            "turns": out_turns, "summaries": summaries}


def scripts() -> st.SearchStrategy[dict]:
    """Contract-shaped script JSON dicts (name ``generated``; :func:`draw_scripts` names them)."""
    return st.builds(_assemble, _config(), st.sampled_from(("fixed", "realistic")),
                     _uniform_list(_TURN, 1, MAX_TURNS), st.lists(_SUMMARY, max_size=3))


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
    """A coarse signature (turns, tool calls, overflows, /compact, usage, summaries): draws prefer new shapes,
    so N scripts are N different conversations rather than Hypothesis' many small variations of one."""
    replies = [r for t in script["turns"] for r in t["replies"]]
    return (len(script["turns"]), sum("tool" in r for r in replies), sum("overflow" in r for r in replies),
            sum(t["compact"] for t in script["turns"]), script["usage"], len(script["summaries"]))


def draw_scripts(n: int, seed_value: int) -> list[dict]:
    """``n`` distinct scripts drawn reproducibly from ``seed_value`` (same seed, same scripts): from a
    seeded run of ``20 n`` examples, the first of each new :func:`shape`, then other distinct ones."""
    examples: list[dict] = []

    @seed(seed_value)
    @_settings(max(1, n) * 20, [Phase.generate])
    @given(scripts())
    def collect(script: dict) -> None:
        examples.append(script)

    if n <= 0:
        return []
    collect()
    chosen, seen, shapes = [], set(), set()
    for fresh_shape_only in (True, False):
        for script in examples:
            key = identity(script)
            if len(chosen) < n and key not in seen and (not fresh_shape_only or shape(script) not in shapes):
                seen.add(key)
                shapes.add(shape(script))
                chosen.append(script)
    return [_named(s, f"gen-{seed_value}-{i:02d}", f"generated: surfacecheck e2e dsh --generate {n} --seed {seed_value} (#{i})")
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
