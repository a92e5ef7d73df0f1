"""How a lockstep machine picks its next rule: one draw among the rules enabled now (issue 19 part 2).

Hypothesis's own rule strategy draws a rule index, asks its swarm feature flags about it (one more draw per
rule looked at) and retries when the rule's precondition is false or its flag is off: about seven choices per
rule, before any argument. Here the swarm is drawn once per example — a disabling rate and a seed, as
Hypothesis's ``FeatureFlags`` (each rule off with that rate; rate 0, every rule on, is where it shrinks) — and
each step is one integer over the rules whose bundles are non-empty, whose preconditions hold and which the
swarm left on (every valid rule when the swarm left none on). Arguments are drawn as before.
"""
from __future__ import annotations

import random

from hypothesis.stateful import RuleStrategy

SWARM_RATES = 254
"""A disabling rate is ``k / 255`` for ``k`` in ``0..254``, as Hypothesis's feature flags draw it."""


class SwarmRules(RuleStrategy):
    """:class:`RuleStrategy` with one draw per rule choice; the rules, their order and arguments unchanged."""

    def __init__(self, machine) -> None:
        super().__init__(machine)
        self._off: frozenset[str] | None = None  # the rules this example's swarm turned off (drawn at its first step)

    def _swarm(self, data) -> frozenset[str]:
        rate = data.draw_integer(0, SWARM_RATES) / 255
        rng = random.Random(data.draw_integer(0, 2**32 - 1))
        return frozenset(rule.function.__name__ for rule in self.rules if rng.random() < rate)

    def _valid(self, rule) -> bool:
        """A rule may run now: its bundles hold values and its preconditions are true (Hypothesis's ``is_valid``,
        without its observability counters)."""
        machine = self.machine
        return all(machine.bundle(b.name) for b in rule.bundles) and all(p(machine) for p in rule.preconditions)

    def do_draw(self, data):
        if self._off is None:
            self._off = self._swarm(data)
        valid = [rule for rule in self.rules if self._valid(rule)]
        if not valid:
            return super().do_draw(data)  # Hypothesis's own message: no rule can make progress
        enabled = [rule for rule in valid if rule.function.__name__ not in self._off] or valid
        rule = enabled[data.draw_integer(0, len(enabled) - 1)]
        return rule, {name: data.draw(strategy) for name, strategy in rule.arguments_strategies.items()}
