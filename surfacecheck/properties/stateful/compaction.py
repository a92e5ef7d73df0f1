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

from surfacecheck.model.errors import ModelError
from surfacecheck.model.prune_content import PruneGuardError, prune_content, resolve_pruner_config
from surfacecheck.runtime.codec import CANCELLING

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
        """`pruneSession` over budgets `resolveConfig` takes or refuses (spec 6); no schema stands before it here (the
        pruner's methods over a resolved config), so its integer checks of every field are met here."""
        if budgets == {"thresholdChars": 0}:
            budgets = self.pick("refused pruner budget", (budgets, {"tailChars": 1.5}))
        self.do("prune", {"pruner": budgets}, f"pruneSession with {budgets}{self.outgrown(budgets)}")

    def outgrown(self, budgets: dict) -> str:
        """How the label tells a pass the pruner's own guard ends (spec 6 step 4): a tool result on the surface whose
        text is a list of strings, its kept strings outgrowing the threshold; a case of its own for the gate's sweep."""
        try:
            config = resolve_pruner_config(budgets)
        except ModelError:
            return ""
        for seq in self.surface():
            event = self.events.get(seq, {})
            if event.get("type") != "tool/result":
                continue
            content = event["data"]["message"]["content"][0]["content"]
            if not any(isinstance(block.get("text"), list) for block in content):
                continue
            try:
                prune_content(content, config)
            except PruneGuardError:
                return f" (the list text at {seq} outgrows the threshold)"
        return ""

    @rule(retain=st.integers(0, 120), arbitrary=ev.rarely,
          a=st.integers(0, 50), b=st.integers(0, 50), manual=st.booleans(), script=ev.summary_scripts,
          concurrent=ev.weighted(st.none(), st.sampled_from(ev.CONCURRENT), 2),
          aborted=ev.rarely)
    def compact(self, retain, arbitrary, a, b, manual, script, concurrent, aborted):
        nodes = self.surface()
        if not nodes:
            return
        span = None if arbitrary else self.ask("select_range", {"retain_tokens": retain}).get("range")
        if span is None:
            i, j = sorted((a % len(nodes), b % len(nodes)))
            span = {"start": nodes[i], "end": nodes[j]}
            # the entry checks' other refusals (spec 8.1 steps 2-3): a span given backwards, or ending off the surface
            shape = self.pick("arbitrary span", ("in order", "backwards", "off the surface", "ending inside a step"))
            balanced = self.ask("cuts").get("balanced") or []
            inside = [k for k in range(i, len(nodes)) if k + 1 < len(balanced) and not balanced[k + 1]]
            if shape == "backwards" and i < j:
                span = {"start": nodes[j], "end": nodes[i]}
            elif shape == "ending inside a step" and inside:  # the cut after its end splits a step (spec 3, 8.1)
                span = {"start": nodes[i], "end": nodes[inside[b % len(inside)]]}
            elif shape == "off the surface":
                off = [seq for seq in self.events if seq not in nodes]
                span = {"start": nodes[i], "end": off[b % len(off)] if off else max(self.events, default=0) + 1}
        self._compact(span, manual, script, concurrent, aborted)

    @rule(texts=st.lists(ev.long_texts, min_size=2, max_size=4))
    def prompt_burst(self, texts):
        """Several long prompts: a compactable, balanced head appears (spec 7)."""
        for text in texts:
            self.append(ev.user_message(text, self.fresh("u")), "user/message: a long prompt")

    @rule(retain=st.integers(0, 80), script=ev.summary_scripts, concurrent=st.sampled_from((None,) + ev.CONCURRENT),
          flip=ev.rarely, faults=ev.weighted(st.none(), ev.faults, 6))
    def compact_head(self, retain, script, concurrent, flip, faults):
        """The producers' usual call: the head span ``select_range`` proposes, automatic inside an open turn and
        manual between turns (spec 8.1 step 5), with another producer writing half the time (spec 8.2 step 12)
        and, rarely, the outside world failing an append or the flush (spec 8.3, 11.2)."""
        span = self.ask("select_range", {"retain_tokens": retain}).get("range")
        if span is not None:
            self._compact(span, self.turn_open == flip, script, concurrent, False, faults)

    def _compact(self, span, manual, script, concurrent, aborted, faults=None):
        script = ev.with_concurrent(script, concurrent, self.surface(), self.fresh)
        args = {"start": span["start"], "end": span["end"], "manual": manual, "summary": script}
        if aborted:
            args["aborted"] = True
        if faults:
            args["faults"] = faults
        unsignalled = manual and not aborted and script.get("outcome") not in CANCELLING and not (
            faults or {}).get("cancel_during_flush") and self.pick("a caller passing no signal", (True, True, False))
        if unsignalled:  # dsh's signal parameter is optional (spec 8.1): a manual caller may pass none
            args["signal"] = False
        elif manual and not faults and script.get("outcome") == "text" and self.pick(
                "a caller cancelling during the flush", (False, True)):  # spec 11.2: checked after the flush
            faults = args["faults"] = {"cancel_during_flush": True}
        self.do("compact", args, f"compactSurfaceRegion {span['start']}-{span['end']} "
                                 f"({'manual' if manual else 'automatic'}{', no signal' if unsignalled else ''}, "
                                 f"summary {script.get('outcome')}"
                                 f"{', concurrent ' + concurrent if concurrent else ''}"
                                 f"{', faults ' + str(faults) if faults else ''})")
