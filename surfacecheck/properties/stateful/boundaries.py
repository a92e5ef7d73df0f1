"""Boundaries as rules: each lands one quantity of the compaction path one below its limit, on it, or one above,
computed from the current state, then runs the code that compares them.

A comparison moved by one (`<` for `<=`, `>` for `>=`) changes what dsh does only when its quantity lands exactly on
the limit, and prompts drawn at random almost never put it there. Each rule counts the cases it lands
(``boundary <name> ±N`` among the operations) and is enabled only while the state leaves room to land:

========================  =========================================================================  =========
rule                      quantity and limit                                                         spec
========================  =========================================================================  =========
pressure threshold        the meter's total against the threshold tokens (`total < threshold`)       9.2
overflow budget           the recovery count against `maxOverflowRetries` (`retries >= max`)         10.2
prune threshold           a tool result's text code points against `thresholdChars` (`<=`)          6
retention budget          the tail's summed prices against `retainTokens` (`acc >= retain`)          7
shrink rule               the framed summary's price against the shadowed price (`>=`)               8.2 step 10
retention threshold       `retainTokens` against the threshold tokens (`retain >= threshold` refused) 9.1
context window            the routed model's context window against zero (`window <= 0` refused)     9.1

The prune threshold, the last two and the retention walk itself land all three cases in one call.
========================  =========================================================================  =========

The meter's anchor (`P >= E`, spec 4.2) is drawn by the log machine (``usage_on_the_anchor``), so every level has it.
"""
from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from surfacecheck.model.config import RuntimePolicy, resolve_compact_spec, resolve_target_policy
from surfacecheck.model.errors import ModelError
from surfacecheck.model.estimate import estimate_message
from surfacecheck.model.summarizer import checkpoint_message

from . import events as ev
from .base import OFFSETS

OFFSETS_ASCENDING = tuple(sorted(OFFSETS))
"""One below first: a total below the threshold writes nothing, so the cases after it start from the same total."""

PRUNE_DEFAULT_CHARS, PRUNE_DEFAULT_HEAD, PRUNE_DEFAULT_TAIL = 8192, 4096, 1024
"""The pruner's default `thresholdChars`, `headChars` and `tailChars` (spec 6)."""


def code_point_text(points: int) -> str:
    """A text of exactly ``points`` code points whose UTF-16 length is larger (a quarter astral): a limit counted in
    code points and one counted by `.length` disagree on it."""
    astral = points // 4
    return "🙂" * astral + "p" * (points - astral)


def framed_price(text: str) -> int:
    """What the meter prices a checkpoint framing ``text`` at (spec 8.2 step 9: the 98-token frame + the text)."""
    return estimate_message(checkpoint_message([{"type": "text", "text": text}], "c", None, "m"))


def shrink_text(shadowed: int, offset: int) -> str | None:
    """A summary text whose framed checkpoint is priced ``shadowed + offset``; None when no text is."""
    target = shadowed + offset
    least = framed_price("s")
    if target < least:
        return None
    text = "s" * (1 + 4 * (target - least))
    return text if framed_price(text) == target else None


class Boundaries:
    """Boundary rules for the policy machine (mixed into it: they use its policy, window, routing and steps)."""

    # -- the resolved figures the rules aim at ------------------------------------------------------
    def target_policy(self, policy: dict | None = None):
        """`resolveTargetPolicy` for the routed target (spec 9.1), as the model resolves it; None when nothing is
        routed or the policy is refused."""
        headers = [self.events[seq] for seq in sorted(self.events) if self.events[seq].get("type") == "request/header"]
        config = (((headers[-1].get("data") or {}).get("header") or {}).get("config") or {}) if headers else {}
        if not (config.get("provider") and config.get("model")):
            return None
        try:
            compaction = RuntimePolicy.from_json(self.policy if policy is None else policy).compaction
            return resolve_target_policy(compaction, config["provider"], config["model"])
        except ModelError:
            return None

    def target_spec(self, policy: dict | None = None):
        """`resolveCompactSpec` for the routed target under ``policy`` (default: the one in force), as the model
        resolves it (spec 9.1); None when nothing is routed or the policy is refused."""
        target = self.target_policy(policy)
        try:
            return None if target is None else resolve_compact_spec(target, self.window)
        except ModelError:
            return None

    def threshold_at(self, window: int) -> int | None:
        """The threshold in tokens the routed target would have under ``window`` (spec 9.1)."""
        target = self.target_policy()
        try:
            return None if target is None else resolve_compact_spec(target, window).threshold_tokens
        except ModelError:
            return None

    def window_for(self, threshold: int) -> int | None:
        """A context window whose threshold is exactly ``threshold`` (floor(window × ratio)), None when none is."""
        target = self.target_policy()
        if target is None or threshold < 1:
            return None
        guess = int(threshold / target.threshold_ratio)
        return next((w for w in range(max(1, guess - 3), guess + 5) if self.threshold_at(w) == threshold), None)

    def threshold(self) -> int | None:
        """The pressure threshold in tokens for the routed target (spec 9.1: floor(window × ratio))."""
        spec = self.target_spec()
        return None if spec is None else spec.threshold_tokens

    def room_below_threshold(self) -> int | None:
        """Tokens the total can still grow before it reaches the threshold (None: no threshold or no total)."""
        threshold, total = self.threshold(), self.total()
        return None if threshold is None or total is None else threshold - total

    def at_or_above_threshold(self) -> bool:
        room = self.room_below_threshold()
        return room is not None and room <= 0

    def prune_chars(self) -> int | None:
        """The pruner's `thresholdChars` in force, None without a pruner (spec 6)."""
        pruner = self.policy.get("toolResultPruner") if isinstance(self.policy, dict) else None
        if not isinstance(pruner, dict):
            return None
        chars = pruner.get("thresholdChars", PRUNE_DEFAULT_CHARS)
        return chars if isinstance(chars, int) and chars > 0 else None

    def set_window(self, window: int, label: str) -> None:
        """Configure the policy in force under ``window`` (the window the next rules aim at)."""
        self.do("configure", {"policy": self.policy, "context_window": window}, label)
        self.window = window

    def leave_turn(self) -> None:
        """End the open step and turn, if any: `/compact` needs an idle agent (spec 11.1)."""
        if self.step_open:
            self.end_step(True)
        elif self.turn_open:
            self.append({"type": "turn/end", "data": {"turn": self.turn, "reason": {"kind": "completed"}}},
                        f"turn/end {self.turn}")
            self.turn_open = False

    def blocks_on_the_prune_span(self, offset: int) -> list[dict] | None:
        """Spec 6: the pruner keeps `headChars` code points, a marker and the last `tailChars`, cutting across text
        blocks (`blockStart < removedEnd && blockEnd > removedStart`): a result 10 code points over the threshold in
        four text blocks, the first ending at headChars + offset, the last starting at the removed span's end +
        offset, the two between them inside the span (the second removed whole: no block is left for it). None when
        a block would be empty."""
        pruner = self.policy.get("toolResultPruner") if isinstance(self.policy, dict) else None
        threshold = self.prune_chars()
        if not isinstance(pruner, dict) or threshold is None:
            return None
        head, tail = pruner.get("headChars", PRUNE_DEFAULT_HEAD), pruner.get("tailChars", PRUNE_DEFAULT_TAIL)
        total = threshold + 10
        first, last = head + offset, tail - offset
        middle = total - first - last
        if min(first, last, middle - 1) < 1:
            return None
        return [{"type": "text", "text": "h" * first}, {"type": "text", "text": "m" * (middle // 2)},
                {"type": "text", "text": "n" * (middle - middle // 2)}, {"type": "text", "text": "t" * last}]

    # -- the rules ---------------------------------------------------------------------------------
    def tail_balanced(self) -> bool:
        """No tool call is waiting for its result: the cut after the last node is balanced (spec 3)."""
        balanced = self.ask("cuts").get("balanced")
        return bool(balanced) and balanced[-1]

    def enter_turn(self) -> None:
        """Automatic compaction runs inside a turn (spec 8.1 step 5: without one it throws before writing): open a
        step when none is (its pre-step runs the pressure listener, spec 13)."""
        if not self.step_open:
            self.begin_step()

    @precondition(lambda self: (self.room_below_threshold() or 0) - 1 >= ev.least_prompt_price()
                  and self.tail_balanced())
    @rule()
    def pressure_on_the_threshold(self):
        """Spec 9.2 compares the total with the threshold (below is `total < threshold`): inside a turn, with no
        call waiting for its result (so a total at or above it compacts), a prompt priced so the total lands one
        below, on, or one above it, then the pressure listener; then the other two cases, each by a context window
        whose threshold puts the total there, and the window back."""
        self.enter_turn()
        threshold, total, offset = self.threshold(), self.total(), self.next_offset("pressure threshold")
        text = None if threshold is None or total is None else ev.priced_user_text(threshold + offset - total)
        if text is None:
            return
        self.append(ev.user_message(text, self.fresh("u")), f"user/message priced to put the total at the "
                                                            f"threshold {offset:+d}")
        if self.total() == threshold + offset:
            self.landed(f"pressure threshold {offset:+d}")
        self.do("pre_step", {}, f"agent/pre-step at the threshold {offset:+d} (compactIfNeeded 'pressure')")
        window = self.window
        for other in (o for o in OFFSETS_ASCENDING if o != offset):  # the other two: the threshold moved instead
            total = self.total()
            moved = None if total is None else self.window_for(total - other)
            if moved is None:
                continue
            self.set_window(moved, f"a context window of {moved}: the threshold {-other:+d} from the total")
            self.landed(f"pressure threshold {other:+d}")
            self.do("pre_step", {}, f"agent/pre-step at the threshold {other:+d} (compactIfNeeded 'pressure')")
        if self.window != window:
            self.set_window(window, f"the context window back at {window}")

    @precondition(lambda self: self.prune_chars() is not None)
    @rule()
    def result_on_the_prune_threshold(self):
        """Spec 6: a tool result prunes only when its text code points exceed `thresholdChars` (`<=` keeps it). A
        step whose three tool results have thresholdChars - 1, + 0 and + 1 code points (a quarter of them astral, so
        a count of UTF-16 units would land elsewhere), then a context overflow, whose recovery runs the pruner first
        (10.2) over each of them; in the same step, results of three text blocks whose edges land on the span the
        pruner removes, one below, on or one above its ends."""
        chars = self.prune_chars()
        edges = [blocks for offset in OFFSETS if (blocks := self.blocks_on_the_prune_span(offset))]
        self.tool_round([code_point_text(chars + offset) for offset in OFFSETS] + edges, None, None)
        for offset in OFFSETS:
            self.landed(f"prune threshold {offset:+d}")
        self.do("request_error", {"code": ev.OVERFLOW_CODE},
                f"agent/request-error {ev.OVERFLOW_CODE}: recovery prunes results of threshold -1, +0, +1 chars")

    @precondition(lambda self: self.surface_size >= 2 and self.at_or_above_threshold())
    @rule(pick=st.integers(0, 50))
    def retention_on_the_budget(self, pick):
        """Spec 7's walk from the tail stops at the first node where the summed prices reach `retainTokens`
        (`acc >= retain`): the walk asked at the price of the last k nodes - 1, + 0 and + 1, k such that the cut
        before them is balanced (so where the walk stops is where the range ends, spec 7 step 4); then a policy whose
        absolute retention is one of the three and the pressure listener over a total at or above the threshold; the
        next of the three the same way while the total is still at or above it."""
        for _ in OFFSETS:
            if not self.at_or_above_threshold() or not self.retention_case(pick):
                return

    def retention_case(self, pick: int) -> bool:
        """One case of :meth:`retention_on_the_budget`; whether it landed."""
        prices, threshold = self.prices(), self.threshold()
        if not prices or threshold is None:
            return False
        offset = self.next_offset("retention budget")
        balanced = self.ask("cuts").get("balanced") or []
        tails = [k for k in range(1, len(prices)) if sum(prices[-k:]) + offset < threshold
                 and len(balanced) > len(prices) and balanced[len(prices) - k]]  # a cut the walk's stop keeps
        if not tails:
            return False
        k = tails[pick % len(tails)]
        for near in OFFSETS:  # the walk itself (selectCompactableRange, spec 7) at each of the three budgets
            if sum(prices[-k:]) + near >= 0:
                self.do("select_range", {"retain_tokens": sum(prices[-k:]) + near},
                        f"selectCompactableRange: the last {k} node(s) priced {near:+d}")
        budget = sum(prices[-k:]) + offset
        policy = {key: value for key, value in self.policy.items() if key != "retainRatio"}
        policy["retainTokens"] = max(0, budget)
        spec = self.target_spec(policy)
        if spec is None or spec.retain_tokens != budget or budget >= spec.threshold_tokens:
            return False
        result = self.do("configure", {"policy": policy, "context_window": self.window},
                         f"retainTokens {budget}: the last {k} node(s) priced {offset:+d}")
        if "error" in result:
            return False
        self.policy = policy
        self.landed(f"retention budget {offset:+d}")
        if self.step_open:
            self.do("pre_step", {}, f"agent/pre-step: the retention walk meets its budget {offset:+d}")
        else:
            self.begin_step()  # its pre-step runs the pressure listener inside the new turn (spec 8.1 step 5, 13)
        return True

    @precondition(lambda self: self.surface_size >= 2)
    @rule()
    def summary_on_the_shrink_rule(self):
        """Spec 8.2 step 10 refuses a summary whose framed checkpoint is not smaller than what it shadows
        (`framed >= shadowed`): the turn ends, then `/compact` with a summary priced one below, on, or one above
        the span's price (the range dsh selects with no retention, spec 11.2)."""
        self.leave_turn()
        offset = self.next_offset("shrink rule")
        selected = self.ask("select_range", {"retain_tokens": 0}).get("range")
        nodes, prices = self.surface(), self.prices()
        if not selected or prices is None or selected["start"] not in nodes or selected["end"] not in nodes:
            return
        span = prices[nodes.index(selected["start"]):nodes.index(selected["end"]) + 1]
        text = shrink_text(sum(span), offset)
        if text is None:
            return
        self.landed(f"shrink rule {offset:+d}")
        self.do("manual_compact", {"args": "", "summary": {"outcome": "text", "text": text}},
                f"/compact with a summary framed at the shadowed price {offset:+d}")

    @precondition(lambda self: self.surface_size >= 1)
    @rule(reset=st.sampled_from(("idle", "assistant/message", "none")))
    def overflow_on_the_budget(self, reset):
        """Spec 10.2 grants recovery while the count is below `maxOverflowRetries` (`retries >= max` stops it) and
        counts each grant; an idle status or an assistant message resets the count, another status does not.
        Inside a turn, context overflows (each after a long prompt, so recovery has something to compact) until the
        count reaches the budget, then the reset (or none: a busy status), then one more overflow."""
        target = self.target_policy()
        if target is None or not 0 < target.max_overflow_retries <= 2:
            return
        self.enter_turn()
        for attempt in range(target.max_overflow_retries + 1):
            result = self.overflow_after_a_long_prompt(f"#{attempt + 1} of a budget of {target.max_overflow_retries}")
            if result.get("retries") == target.max_overflow_retries and result.get("kind") == "next":
                self.landed("overflow budget +0")
        if reset == "idle":
            self.append({"type": "agent/status", "data": {"status": "idle"}}, "agent/status idle (count reset)")
        elif reset == "assistant/message":
            if self.answered:
                self.end_step(False)
                self.begin_step()
            self.append(ev.assistant_message(self.turn, self.step, self.fresh("a"), "done", []),
                        "assistant/message (count reset)")
            self.answered = True
        else:
            self.append({"type": "agent/status", "data": {"status": "busy"}}, "agent/status busy (no reset)")
        self.overflow_after_a_long_prompt(f"after {reset}")

    def overflow_after_a_long_prompt(self, label: str) -> dict:
        """A long prompt (so recovery has something to compact), then a context overflow with a summary that
        shrinks (spec 10.2); the overflow's result."""
        self.append(ev.user_message("p" * 800, self.fresh("u")), "user/message: a long prompt")
        return self.do("request_error", {"code": ev.OVERFLOW_CODE, "summaries": [{"outcome": "text", "ratio": 0.1}]},
                       f"agent/request-error {ev.OVERFLOW_CODE} {label}")

    @precondition(lambda self: self.threshold() is not None)
    @rule(window=st.booleans())
    def target_spec_on_its_limits(self, window):
        """Spec 9.1's `resolveCompactSpec` refuses a context window that is not a positive integer
        (`contextWindow <= 0`) and a retention that is not below the threshold tokens (`retainTokens >=
        thresholdTokens`), each a TargetPressureConfigError the pressure listener warns once per target: one of the
        two at each of one below, on and one above its limit, each followed by the pressure listener."""
        if window:
            self.window_on_zero()
        else:
            self.retention_on_the_threshold()

    def retention_on_the_threshold(self):
        """`retainTokens` one above, on, then one below the threshold tokens, each followed by the pressure listener
        (the two refused first: the valid one may compact)."""
        threshold = self.threshold()
        for offset in (1, 0, -1):
            policy = {key: value for key, value in self.policy.items() if key != "retainRatio"}
            policy["retainTokens"] = threshold + offset
            if policy["retainTokens"] < 0:
                continue
            result = self.do("configure", {"policy": policy, "context_window": self.window},
                             f"retainTokens at the threshold {offset:+d} ({threshold + offset})")
            if "error" in result:
                continue
            self.policy = policy
            self.landed(f"retention threshold {offset:+d}")
            self.enter_turn()
            self.do("pre_step", {}, f"agent/pre-step with retainTokens at the threshold {offset:+d}")

    def window_on_zero(self):
        """The routed model's context window at -1, 0 and 1, each followed by the pressure listener; then the window
        back."""
        window = self.window
        for offset in OFFSETS:
            self.set_window(offset, f"a context window of {offset}")
            self.landed(f"context window {offset:+d}")
            self.enter_turn()
            self.do("pre_step", {}, f"agent/pre-step under a context window of {offset}")
        self.set_window(window, f"the context window back at {window}")
