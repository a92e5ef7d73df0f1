"""How a lockstep machine picks its next rule: one draw among the rules that may run now.

Hypothesis's own rule strategy draws a rule index, asks its swarm feature flags about it (one more draw per
rule looked at) and retries when the rule's precondition is false or its flag is off: about seven choices per
rule, before any argument. Here a step is one integer over the rules whose bundles hold values and whose
preconditions are true (in Hypothesis's rule order); the arguments are the ones Hypothesis would draw.

No swarm: measured at seeds 1-10 on the slowest seeded bugs, turning rules off per example (Hypothesis's
feature flags, emulated with one rate per example) found fewer of them within the ci budget (policy level:
34 of 40 against 39 of 40) and later, since these bugs need several rules together.

The arguments are drawn inside the rule's own span: each argument strategy's ``do_draw`` is called directly
(:func:`argument_drawers`), not through ``data.draw``, which would open one more span per argument (and
validate the strategy again every time). The choices are the very ones ``data.draw`` makes: the same
``draw_integer`` / ``draw_boolean`` calls in the same order, so a choice sequence means the same rule and the
same arguments either way (``tests/test_rule_selection.py``). A bundle argument is still drawn through
``data.draw`` (Hypothesis's bundles read the machine through a nested draw).
"""
from __future__ import annotations

from typing import Any, Callable

from hypothesis.stateful import Bundle, RuleStrategy
from hypothesis.strategies._internal.lazy import unwrap_strategies

Drawer = Callable[[Any], Any]


def argument_drawers(rule) -> tuple[tuple[str, Drawer | None], ...]:
    """Each argument of ``rule`` with the ``do_draw`` of its (unwrapped, validated) strategy, or ``None`` for a
    bundle argument (drawn through ``data.draw``)."""
    drawers = []
    for name, strategy in rule.arguments_strategies.items():
        if isinstance(strategy, Bundle):
            drawers.append((name, None))
            continue
        strategy.validate()
        drawers.append((name, unwrap_strategies(strategy).do_draw))
    return tuple(drawers)


class OneDrawRules(RuleStrategy):
    """:class:`RuleStrategy` with one draw per rule choice; the rules, their order and arguments unchanged."""

    def __init__(self, machine) -> None:
        super().__init__(machine)
        self._drawers: dict[int, tuple] = {}  # id(rule) -> argument_drawers(rule), made on the rule's first draw
        self._guarded = [bool(rule.bundles or rule.preconditions) for rule in self.rules]  # else always valid

    def _valid(self, rule) -> bool:
        """A rule may run now: its bundles hold values and its preconditions are true (Hypothesis's ``is_valid``,
        without its observability counters)."""
        machine = self.machine
        for bundle in rule.bundles:
            if not machine.bundle(bundle.name):
                return False
        for holds in rule.preconditions:
            if not holds(machine):
                return False
        return True

    def do_draw(self, data):
        valid = [rule for rule, guarded in zip(self.rules, self._guarded) if not guarded or self._valid(rule)]
        if not valid:
            return super().do_draw(data)  # Hypothesis's own message: no rule can make progress
        rule = valid[data.draw_integer(0, len(valid) - 1)]
        drawers = self._drawers.get(id(rule))
        if drawers is None:
            drawers = self._drawers[id(rule)] = argument_drawers(rule)
        strategies = rule.arguments_strategies
        return rule, {name: data.draw(strategies[name]) if draw is None else draw(data) for name, draw in drawers}
