"""How a lockstep machine picks its next rule: one draw among the rules that may run now (issue 19 part 2).

Hypothesis's own rule strategy draws a rule index, asks its swarm feature flags about it (one more draw per
rule looked at) and retries when the rule's precondition is false or its flag is off: about seven choices per
rule, before any argument. Here a step is one integer over the rules whose bundles hold values and whose
preconditions are true (in Hypothesis's rule order); arguments are drawn as before.

No swarm: measured at seeds 1-10 on the slowest seeded bugs, turning rules off per example (Hypothesis's
feature flags, emulated with one rate per example) found fewer of them within the ci budget (policy level:
34 of 40 against 39 of 40) and later, since these bugs need several rules together.
"""
from __future__ import annotations

from hypothesis.stateful import RuleStrategy


class OneDrawRules(RuleStrategy):
    """:class:`RuleStrategy` with one draw per rule choice; the rules, their order and arguments unchanged."""

    def _valid(self, rule) -> bool:
        """A rule may run now: its bundles hold values and its preconditions are true (Hypothesis's ``is_valid``,
        without its observability counters)."""
        machine = self.machine
        return all(machine.bundle(b.name) for b in rule.bundles) and all(p(machine) for p in rule.preconditions)

    def do_draw(self, data):
        valid = [rule for rule in self.rules if self._valid(rule)]
        if not valid:
            return super().do_draw(data)  # Hypothesis's own message: no rule can make progress
        rule = valid[data.draw_integer(0, len(valid) - 1)]
        return rule, {name: data.draw(strategy) for name, strategy in rule.arguments_strategies.items()}
