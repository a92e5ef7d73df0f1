"""The lockstep machines' rule choice (``properties/stateful/selection.py``, issue 19 part 2): arguments drawn
by their strategies' ``do_draw`` inside the rule's span make exactly the choices ``data.draw`` makes, so a choice
sequence means the same arguments either way (and a shrunk or replayed example still reads the same)."""
from __future__ import annotations

from random import Random

import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.errors import StopTest
from hypothesis.internal.conjecture.data import ConjectureData
from hypothesis.stateful import Bundle

from surfacecheck.properties.stateful import MACHINES
from surfacecheck.properties.stateful.selection import OneDrawRules, argument_drawers

RULES = [(level, rule) for level, machine in MACHINES.items()
         for rule in OneDrawRules._setup_for(machine)[0]]


def _draw_all(data: ConjectureData, rule, flat: bool) -> dict:
    strategies = rule.arguments_strategies
    if not flat:
        return {name: data.draw(strategy) for name, strategy in strategies.items() if not isinstance(strategy, Bundle)}
    return {name: draw(data) for name, draw in argument_drawers(rule) if draw is not None}


def _choices_and_values(rule, seed: int):
    data = ConjectureData(random=Random(seed))
    values = _draw_all(data, rule, flat=False)
    return tuple(node.value for node in data.nodes), values


@pytest.mark.parametrize("level, rule", RULES, ids=[f"{lv}-{r.function.__name__}" for lv, r in RULES])
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_flat_arguments_read_the_choices_as_data_draw_does(level, rule, seed):
    choices, values = _choices_and_values(rule, seed)
    replay = ConjectureData.for_choices(choices)
    flat = _draw_all(replay, rule, flat=True)
    assert flat == values
    assert tuple(node.value for node in replay.nodes) == choices  # every choice read, none more


def test_the_comparison_can_fail():
    """Negative control: an argument read from a shifted choice sequence differs from the original."""
    rule = next(r for lv, r in RULES if r.function.__name__ == "summary_pair")
    choices, values = _choices_and_values(rule, 7)
    replay = ConjectureData.for_choices((choices[0] ^ 1,) + choices[1:])
    try:
        flat = _draw_all(replay, rule, flat=True)
    except StopTest:
        flat = None
    assert flat != values


def test_every_argument_but_a_bundle_is_drawn_flat():
    for _level, rule in RULES:
        for name, draw in argument_drawers(rule):
            assert (draw is None) == isinstance(rule.arguments_strategies[name], Bundle), (rule, name)


def test_a_level_collects_less_often_and_gives_the_collector_back():
    import gc

    from surfacecheck.verify.runner import GC_THRESHOLD, few_collections

    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    with few_collections():
        inside = gc.get_threshold(), gc.get_freeze_count()
    assert inside[0] == GC_THRESHOLD != before and inside[1] > frozen
    assert (gc.get_threshold(), gc.get_freeze_count()) == (before, frozen)
