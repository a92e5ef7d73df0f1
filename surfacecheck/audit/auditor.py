"""The streaming audit of one log: events → the model's folds → one check per rule → findings.

Folds reused from the model: the surface plan/apply (`model.surface`, spec 1.4, 2), node prices
(`model.meter.node_price`, spec 4.2) and the meter fold itself (`fold_meter`), the shadow-price
claim (`model.projection.fold_claim`, spec 5.1), the tool-pairing delta (`model.pairing`, spec 3),
the retention walk (`model.region.retention_index`, spec 7), the policy resolution
(`model.config`, spec 9.1) and the runtime-context fold (`model.runtime_context`, spec 12).

Memory is bounded by the surface, as in `model/replay.py`: the only earlier events kept are the
current surface nodes and the open step's chunks (`model.replay.BoundedLookup`), plus per-node price and
pairing delta. Replacement records and findings go to callbacks (collected by default).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from surfacecheck.model.config import RuntimePolicy, resolve_target_policy
from surfacecheck.model.errors import ModelError, ProjectionClaimError
from surfacecheck.model.event import METERING_EVENT_TYPES, Event
from surfacecheck.model.meter import MeterState, fold_meter, measure_state, node_price
from surfacecheck.model.pairing import event_delta
from surfacecheck.model.projection import fold_claim
from surfacecheck.model.replay import BoundedLookup, Replacement
from surfacecheck.model.surface import Surface, apply_plan

from .brackets import Bracket, Brackets, field, is_compact_source
from .findings import AuditIssue, finding
from .policy_checks import PressureWatch, pressure_spec, select, selection_mismatch
from .steps import Attempts, RuntimeContext
from .surface_checks import Pairing, plan_event


def _readable(event: Event) -> tuple[str | None, int]:
    """Spec 2.3: (why dsh cannot derive or pair this surface event's message, else None; its price)."""
    try:
        price = node_price(event)
        event_delta(event)
        if event.type == "tool/result":
            event.data["message"].get("source")
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        return f"{type(exc).__name__}: {exc}", 0
    return None, price


@dataclass
class LogSummary:
    events: int
    surface_nodes: tuple[int, ...]
    generation: int


class Auditor:
    """Feed events in log order (`feed`), then `finish()`; findings/replacements go to the callbacks."""

    def __init__(self, policy: RuntimePolicy | None = None, *, on_finding: Callable[[AuditIssue], None] | None = None,
                 on_replacement: Callable[[Replacement], None] | None = None):
        self.policy = policy or RuntimePolicy()
        self.findings: list[AuditIssue] = []
        self.replacements: list[Replacement] = []
        self._on_finding = on_finding or self.findings.append
        self._on_replacement = on_replacement or self.replacements.append
        self.count = 0
        self.expected_seq = 0
        self.surface = Surface()
        self.lookup = BoundedLookup()
        self.prices: dict[int, int] = {}
        self.pairing = Pairing()
        self.unreadable: set[int] = set()
        self.meter: MeterState | None = MeterState()
        self.claim = None
        self.previous: Event | None = None
        self.brackets = Brackets()
        self.attempts = Attempts()
        self.pressure = PressureWatch()
        self._last_was_prune_replace = False
        self.context = RuntimeContext()
        self.gap_seen = False
        self.gap_warning: AuditIssue | None = None
        self.gap_error: AuditIssue | None = None
        self.header_config: dict | None = None
        self.context_window = None

    # -- public -------------------------------------------------------------------------------------
    def feed(self, event: Event, line: int | None = None) -> None:
        self._check_seq(event, line)
        planned = plan_event(self.surface, event, self.lookup)
        for item in planned.findings:
            self._emit(item)
        effective, plan = planned.effective, planned.plan
        is_replace = plan.kind == "replace"
        self._bracket_before(effective, is_replace)
        if effective.type in METERING_EVENT_TYPES:
            self._check_shadow_price(effective)
        shadow_tokens = sum(self.prices.get(seq, 0) for seq in plan.shadowed)
        readable = self._pricing_ok()
        if is_replace and event.type != "tool/result" and readable:
            self._check_cuts(effective, plan)
        unreadable_why, price = _readable(effective) if plan.kind != "none" else (None, 0)
        self._fold_meter(effective, unreadable_why)
        step = self._fold_claim(effective, plan, unreadable_why)
        self._apply(effective, plan, unreadable_why, price)
        if is_replace:
            self._record(effective, plan, shadow_tokens, step, readable)
        self._after(effective, plan)
        self.lookup.remember(effective, plan.kind != "none", plan.shadowed)
        self._last_was_prune_replace = is_replace and self.previous is not None and \
            self.previous.type == "compaction/prune"
        if effective.type == "step/start":
            self.pressure.step_started()
        self.previous = effective
        self.count += 1

    def finish(self) -> LogSummary:
        if self.gap_warning is not None:
            self._emit(self.gap_warning)
            self.gap_warning = self.gap_error = None
        for item in self.brackets.finish():
            self._emit(item)
        return LogSummary(self.count, self.surface.nodes, self.surface.generation)

    # -- spec 1.4 step 1, 1.7: contiguity -------------------------------------------------------------
    def _check_seq(self, event: Event, line: int | None) -> None:
        """Only the first gap is reported: dsh's scanner stops reading there (spec 1.7)."""
        if event.seq != self.expected_seq and not self.gap_seen:
            self.gap_seen = True
            where = f"line {line}: " if line is not None else ""
            message = (f"{where}session event seq {event.seq} is not contiguous; expected {self.expected_seq}, "
                       f"observed {event.seq}")
            self.gap_warning = finding("seq-gap-uncommitted", event.seq, message + "; no later turn/end "
                                       "follows, so dsh's scanner drops the log from here as an uncommitted tail "
                                       "(spec 1.7)")
            self.gap_error = finding("seq-contiguity", event.seq, message + " (a turn/end follows: dsh's load "
                                     "throws 'corrupt session log: seq gap in committed region', spec 1.7)")
        if event.type == "turn/end" and self.gap_error is not None:
            self._emit(self.gap_error)
            self.gap_error = self.gap_warning = None
        self.expected_seq = event.seq + 1

    # -- spec 8: brackets -----------------------------------------------------------------------------
    def _bracket_before(self, event: Event, is_replace: bool) -> None:
        found, checkpoint_of = self.brackets.after_summary(event, is_replace)
        self._checkpoint_of = checkpoint_of
        t = event.type
        if t == "compaction/start":
            found += self.brackets.start(event, self._new_bracket(event))
        elif t == "compaction/summary":
            more, bracket = self.brackets.summary(event)
            found += more + (selection_mismatch(event.seq, bracket) if bracket else [])
        elif t == "compaction/end":
            found += self.brackets.end(event)
        elif t == "session/end-seed":
            found += self.brackets.end_seed_seen(event)
        elif t == "compaction/prune" and not self._in_overflow():
            found += self._pressure_prune(event)
        elif is_replace and checkpoint_of is None and is_compact_source(event):
            found += self.brackets.stray_checkpoint(event)
        for item in found:
            self._emit(item)

    def _pressure_prune(self, event: Event) -> list[AuditIssue]:
        """A prune outside overflow recovery is pressure's (spec 9.2 steps 5, 8-9)."""
        found = []
        chained = self.previous is not None and self._last_was_prune_replace
        if not chained:
            spec, _ = pressure_spec(self.policy, self.header_config, self.context_window)
            found += self.pressure.qualify(event.seq, "prune", self._measured(), spec)
        if self.brackets.live():
            held = self.brackets.live()[-1]  # spec 9.2 step 5: pressure checks the lock before pruning
            found.append(finding("lock-overlap", event.seq, f"compaction/prune while {held.owner} "
                                 f"{held.compaction_id!r} (start seq {held.start_seq}) is still unmatched, outside "
                                 "overflow recovery: expected pressure to find the lock busy and not prune "
                                 "(spec 9.2 step 5; only overflow recovery prunes past the lock, §15 G8), observed "
                                 "a prune"))
        return found

    def _measured(self) -> int | None:
        """`measure().totalTokens` now (spec 4.3), None when the meter stopped or prices are unknown."""
        if self.meter is None or not self._pricing_ok():
            return None
        try:
            return measure_state(self.meter).total_tokens
        except (ModelError, KeyError, TypeError, AttributeError, ValueError, IndexError):
            return None  # a header dsh could not compare (corrupted config): no verdict on the threshold

    def _in_overflow(self) -> bool:
        pending = self.attempts.pending
        return pending is not None and self.attempts.step == (pending.turn, pending.step)

    def _new_bracket(self, event: Event) -> Bracket:
        data = event.data
        turn = field(data, "turn")
        pending = self.attempts.pending
        if turn is None:
            mode, retain, why = "manual", 0, "manual /compact selects with retain 0 (spec 11.2 step 3)"
        elif self._in_overflow():
            mode, retain, why = "context-overflow", 0, (f"overflow recovery after the failure at seq {pending.seq} "
                                                        "selects with retain 0 (spec 10.2)")
        else:
            mode = "pressure"
            spec, where = pressure_spec(self.policy, self.header_config, self.context_window)
            retain = None if spec is None else spec.retain_tokens
            why = where if spec is None else f"pressure selects with retainTokens {retain} ({where}; spec 9.2 step 11)"
            for item in self.pressure.qualify(event.seq, "compaction", self._measured(), spec) + \
                    self.pressure.attempt(event.seq, spec):
                self._emit(item)
        bracket = Bracket(field(data, "compactionId"), event.seq, turn, field(data, "sourceCommandId"), mode, why=why)
        if retain is not None and self._pricing_ok():
            nodes = self.surface.nodes
            bracket.expected = select(nodes, self.prices, self.pairing.balanced(nodes), retain)
        return bracket

    # -- spec 3: cuts ---------------------------------------------------------------------------------
    def _check_cuts(self, event: Event, plan) -> None:
        balanced = self.pairing.balanced(self.surface.nodes)
        edges = []
        if not balanced[plan.start_index]:
            edges.append(f"the cut before start seq {plan.start}")
        if not balanced[plan.end_index + 1]:
            edges.append(f"the cut after end seq {plan.end}")
        if edges:
            self._emit(finding("cut-unbalanced", event.seq, f"replace {plan.start}-{plan.end}: "
                               f"{' and '.join(edges)} splits a tool call from its result; expected balanced cuts "
                               "(open tool calls 0), observed unbalanced"))

    # -- spec 5.1: shadow prices ----------------------------------------------------------------------
    def _check_shadow_price(self, event: Event) -> None:
        if not self._pricing_ok():
            return
        data = event.data
        rng = field(data, "shadowedRange")
        start, end, logged = field(rng, "start"), field(rng, "end"), field(data, "shadowedTokenCount")
        nodes = self.surface.nodes
        if start not in nodes or end not in nodes or nodes.index(start) > nodes.index(end):
            self._emit(finding("shadow-price-wrong", event.seq, f"{event.type} prices range {start}-{end}, which is "
                               f"not a span of the current surface; expected a current span, observed none"))
            return
        span = nodes[nodes.index(start): nodes.index(end) + 1]
        price = sum(self.prices.get(seq, 0) for seq in span)
        if logged != price:
            self._emit(finding("shadow-price-wrong", event.seq, f"{event.type} shadowedTokenCount for range "
                               f"{start}-{end}: expected {price} (the meter's price of nodes {list(span)}), observed "
                               f"{logged}"))
        seqs = field(data, "shadowedSeqs")
        if seqs != list(span):
            self._emit(finding("shadowed-seqs-wrong", event.seq, f"{event.type} shadowedSeqs for range {start}-{end}: "
                               f"expected {list(span)}, observed {seqs}"))

    def _fold_claim(self, event: Event, plan, unreadable_why):
        try:
            if unreadable_why is not None:
                raise TypeError(unreadable_why)
            step = fold_claim(self.claim, event)
        except ProjectionClaimError as exc:
            self._emit(finding("shadow-price-mismatch", event.seq, f"{exc.message}; expected the replace right after "
                               f"the metering event to name range {self.claim.start}-{self.claim.end}, observed "
                               f"{plan.start}-{plan.end}"))
            self.claim = None
            return "mismatch"
        except (KeyError, TypeError, AttributeError, IndexError):
            self.claim = None
            return "unreadable"
        self.claim = step.claim
        return step.action

    # -- spec 4.2: meter ------------------------------------------------------------------------------
    def _fold_meter(self, event: Event, unreadable_why) -> None:
        if event.type == "request/header":
            self.header_config = field(field(event.data, "header"), "config")
        elif event.type == "request/context":
            self.context_window = field(event.data, "contextWindow")
        if self.meter is None:
            return
        if unreadable_why is not None:
            self.meter = None  # dsh's meter would throw here too; message-shape explains it
            return
        try:
            self.meter = fold_meter(self.meter, event, self.lookup)
        except ModelError as exc:
            self._emit(finding("meter-fold", event.seq, f"{exc.message}; expected an event the token meter can fold "
                               "(spec 4.2), observed this one; the meter folds no further events of this log"))
            self.meter = None
        except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
            self._emit(finding("meter-fold", event.seq, f"token meter: expected a {event.type} it can read "
                               f"(spec 4.2), observed {type(exc).__name__}: {exc}"))
            self.meter = None

    # -- spec 2.1: apply ------------------------------------------------------------------------------
    def _apply(self, event: Event, plan, unreadable_why, price: int) -> None:
        if plan.kind == "none":
            self.surface = apply_plan(self.surface, plan)
            return
        if unreadable_why is not None:
            if not self.unreadable:
                self._emit(finding("message-shape", event.seq, f"{event.type}: expected a message dsh can derive "
                                   f"(spec 2.3), observed {unreadable_why}; live append accepts it (spec 1.3), a reload "
                                   "refuses it (spec 1.5 step 3, §15 G18); price and pairing checks pause while such "
                                   "a node is on the surface"))
            self.unreadable.add(event.seq)
        self.surface = apply_plan(self.surface, plan)
        for seq in plan.shadowed:
            self.prices.pop(seq, None)
            self.unreadable.discard(seq)
        self.prices[event.seq] = price
        if unreadable_why is not None:
            return
        if plan.kind == "append":
            if not self.unreadable:
                for item in self.pairing.append(event):
                    self._emit(item)
            else:
                self.pairing.delta[event.seq] = event_delta(event)
        else:
            self.pairing.replace(event, plan.shadowed, self.surface.nodes)

    def _record(self, event: Event, plan, shadow_tokens: int, claim_action: str, readable: bool) -> None:
        previous = self.previous
        metered = previous is not None and previous.type in METERING_EVENT_TYPES
        kind = {"compaction/summary": "summary", "compaction/prune": "prune"}.get(previous.type) if metered else "other"
        replacement_tokens = self.prices.get(event.seq, 0)
        record = Replacement(
            seq=event.seq, kind=kind, start=plan.start, end=plan.end, shadowed_seqs=plan.shadowed,
            logged_shadow_tokens=field(previous.data, "shadowedTokenCount") if metered else None,
            recomputed_shadow_tokens=shadow_tokens, replacement_tokens=replacement_tokens,
            generation_after=self.surface.generation, claim_action=claim_action)
        self._on_replacement(record)
        if not readable:
            return
        if claim_action == "unpriced-replace":
            drift = shadow_tokens - replacement_tokens
            self._emit(finding("projection-drift", event.seq, f"replace {plan.start}-{plan.end}: expected an adjacent "
                               "compaction/summary|prune pricing it, observed "
                               f"{previous.type if previous else 'none'} before it; the O(1) projection "
                               f"folds it with delta 0 instead of {replacement_tokens - shadow_tokens}, so it drifts by "
                               f"{drift} tokens (shadowed {shadow_tokens} - replacement {replacement_tokens}); "
                               "measure() stays exact (spec 5.1, §15 G1)"))
        if self._checkpoint_of is not None and replacement_tokens >= shadow_tokens:
            self._emit(finding("summary-not-smaller", event.seq, f"checkpoint of compaction "
                               f"{self._checkpoint_of.compaction_id!r}: expected its price below the {shadow_tokens} "
                               f"tokens of the span it replaces, observed {replacement_tokens} (>=)"))

    # -- spec 10, 12: request attempts ------------------------------------------------------------------
    def _after(self, event: Event, plan) -> None:
        self.context.on_event(event, plan.kind != "none", plan.shadowed)
        found, starts = self.attempts.on_event(event, self.surface.generation, self._max_overflow_retries)
        if starts:
            found += self.context.gap(event)
        for item in found:
            self._emit(item)

    def _max_overflow_retries(self) -> int | None:
        provider, model = field(self.header_config, "provider"), field(self.header_config, "model")
        if not provider or not model:
            return self.policy.compaction.max_overflow_retries
        return resolve_target_policy(self.policy.compaction, provider, model).max_overflow_retries

    def _pricing_ok(self) -> bool:
        return not self.unreadable

    def _emit(self, item: AuditIssue) -> None:
        self._on_finding(item)
