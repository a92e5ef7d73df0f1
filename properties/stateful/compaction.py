"""Level ``compaction``: range selection, the pruner and the compaction transaction, on top of the
log machine's events (spec 6, 7, 8).

``compact`` is driven mostly over the range the model's ``select_range`` proposes (so summaries
can commit) and sometimes over an arbitrary span (so the entry checks refuse), with every scripted
summary outcome, and a concurrent producer writing while the summary runs (spec 8.2 step 12).
Automatic compaction needs an open turn, manual compaction an idle one (spec 8.1 step 5); the
machine tries both.
"""
from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import rule

from . import events as ev
from .log import LogMachine

pruner_budgets = st.builds(
    lambda head, tail, slack: {"thresholdChars": head + 39 + tail + slack, "headChars": head, "tailChars": tail},
    st.integers(0, 60), st.integers(0, 40), st.integers(0, 200))
bad_budgets = st.sampled_from(({"thresholdChars": 0}, {"headChars": 500, "tailChars": 500, "thresholdChars": 600},
                               {"limit": 5}))


class CompactionMachine(LogMachine):
    level = "compaction"

    @rule(retain=st.integers(0, 600))
    def select_range(self, retain):
        self.do("select_range", {"retain_tokens": retain}, f"selectCompactableRange with retain {retain}")

    @rule(budgets=ev.weighted(pruner_budgets, bad_budgets, 5))
    def prune(self, budgets):
        self.do("prune", {"pruner": budgets}, f"pruneSession with {budgets}")

    @rule(retain=st.integers(0, 120), arbitrary=ev.rarely,
          a=st.integers(0, 50), b=st.integers(0, 50), manual=st.booleans(), script=ev.summary_scripts,
          concurrent=ev.weighted(st.none(), st.sampled_from(("append", "log-only", "replace")), 4),
          aborted=ev.rarely)
    def compact(self, retain, arbitrary, a, b, manual, script, concurrent, aborted):
        nodes = self.surface()
        if not nodes:
            return
        span = None if arbitrary else self.ask("select_range", {"retain_tokens": retain}).get("range")
        if span is None:
            i, j = sorted((a % len(nodes), b % len(nodes)))
            span = {"start": nodes[i], "end": nodes[j]}
        script = dict(script)
        if concurrent == "append":
            script["concurrent"] = [["user/message", ev.user_message("meanwhile", self.fresh("u"))["data"], "append"]]
        elif concurrent == "log-only":
            script["concurrent"] = [["agent/status", {"status": "busy"}, None]]
        elif concurrent == "replace":
            last = nodes[-1]
            script["concurrent"] = [["user/message", ev.user_message("rewritten", self.fresh("u"))["data"],
                                     {"op": "replace", "start": last, "end": last}]]
        args = {"start": span["start"], "end": span["end"], "manual": manual, "summary": script}
        if aborted:
            args["aborted"] = True
        self.do("compact", args, f"compactSurfaceRegion {span['start']}-{span['end']} "
                                 f"({'manual' if manual else 'automatic'}, summary {script.get('outcome')}"
                                 f"{', concurrent ' + concurrent if concurrent else ''})")
