"""The smallest faithful fix of each registered dsh quirk (spec §15, ``properties/findings.json``), as a
context in which the reference model runs fixed: ``with PATCHES[finding_id]():``. Shared by
tests/test_findings_patched.py (the registry goes STALE) and the promise tests (tests/test_promises_context.py,
tests/test_promises_measure.py: the witness then holds). Each removes one rule: a rule of the model is
replaced through the model's seams (:mod:`surfacecheck.model.seams`, a named set of seams per fix); a rule
that lives in a model runtime's op is replaced on the runtime's class.
"""
from __future__ import annotations

import contextlib
import dataclasses
import inspect
import textwrap

import pytest

import surfacecheck.model.policy  # noqa: F401 (read as model.policy)
import surfacecheck.model.session  # noqa: F401
import surfacecheck.model.transaction  # noqa: F401
from surfacecheck import model
import surfacecheck.runtime.model_levels as model_levels
from surfacecheck.model.config import resolve_compact_spec, resolve_target_policy
from surfacecheck.model.errors import ModelError, ProjectionClaimError, SessionAppendError, TargetPressureConfigError
from surfacecheck.model.meter import measure, measure_state
from surfacecheck.model.projection import Buckets, Claim, ClaimStep, SurfaceProjection, TokenUsage, fold_claim, fold_usage
from surfacecheck.model.region import Range, assert_no_active_compaction
from surfacecheck.model.seams import REAL, active, using
from surfacecheck.model.runtime_context import NEVER, NONE, RetainedSnapshot, is_owned_snapshot, project_sections, text_of
from surfacecheck.model.transaction import Outcome
from surfacecheck.properties.promises import SHRINK_FLOOR
from surfacecheck.properties.promises_measure import _ids as call_ids
from surfacecheck.runtime.codec import claimed_messages, context_sections, snapshot_id, step_marker
from surfacecheck.runtime.model_runtime import ModelRuntime


# -- fixing helpers --------------------------------------------------------------------------------
@contextlib.contextmanager
def seams_wrapping(**makers):
    """The model runs with each named seam replaced by ``make(the function active on entry)``."""
    with using(active().wrapped(**makers)):
        yield


def seams_replacing(**functions):
    """The model runs with the named seams replaced by ``functions`` (on top of those active on entry)."""
    return seams_wrapping(**{name: (lambda _original, f=f: f) for name, f in functions.items()})


@contextlib.contextmanager
def on_class(cls, **methods):
    """A model runtime's op (a method of its class) replaced: the rule lives in the runtime, not the model."""
    with pytest.MonkeyPatch.context() as m:
        for name, method in methods.items():
            m.setattr(cls, name, method)
        yield


@contextlib.contextmanager
def both(first, second):
    """Two fixes at once (a rule that lives in two layers)."""
    with first, second:
        yield


def rewritten(function, *edits: tuple[str, str]):
    """``function`` recompiled in its own module with each ``(old, new)`` source edit applied: the
    smallest fix of a rule that sits inside a longer transition. Each ``old`` must occur exactly once."""
    source = textwrap.dedent(inspect.getsource(function))
    for old, new in edits:
        assert source.count(old) == 1, (f"{function.__qualname__}: the rule {old!r} no longer occurs exactly once; "
                                        "the model changed, update this patch")
        source = source.replace(old, new)
    namespace: dict = {}
    exec(compile(source, inspect.getsourcefile(function), "exec"), function.__globals__, namespace)
    return namespace[function.__name__]


# -- the original eight (G1, G2, G4, G7, G8, G11, G12, G16) ---------------------------------------
def price_unclaimed_replace():
    """G1/G1b (spec 5.1): arm the missing claim of an unclaimed replacement from the meter's recount of the
    nodes it shadows (spec 4.2), just before the fold; the O(1) fold itself is unchanged."""
    original = ModelRuntime._fold

    def _fold(self, event) -> None:
        op = event.replace if event.is_surface_type else None
        if op is not None and self.projection.claim is None and self.projection_error is None \
                and self.meter_error is None:
            nodes = measure_state(self.meter).nodes  # the surface before this event, priced per node
            seqs = [seq for seq, _ in nodes]
            if op.start in seqs and op.end in seqs:
                shadowed = sum(price for _, price in nodes[seqs.index(op.start): seqs.index(op.end) + 1])
                self.projection = SurfaceProjection(self.projection.total, Claim(op.start, op.end, shadowed))
        original(self, event)

    return on_class(ModelRuntime, _fold=_fold)


def context_after_pressure():
    """G2 (spec 12, 13 steps 4-7, D9): project the runtime-context candidate after the pressure listener."""
    project = "    candidate = None if sections is None else project_sections(self.rt.retained, sections)\n"
    enter = "    snapshot = self._enter(marker, claimed or [], candidate)\n"
    return on_class(model_levels._Ops, pre_step=rewritten(model_levels._Ops.pre_step, (project, ""),
                                                          (enter, project + enter)))


def envelope_is_a_config_error():
    """G4 (spec 9.2, 9.3, 4.3): an envelope that alone reaches the threshold is a configuration error."""
    original = REAL.compact_if_needed

    def compact_if_needed(session, mode, env, signal_aborted=False):
        target = model.policy.routed_target(session) if mode == model.policy.PRESSURE else None
        window = env.context_window(target) if target is not None else None
        if window is not None:
            policy = resolve_target_policy(env.policy.compaction, *target)
            try:
                spec = resolve_compact_spec(policy, window)
            except ModelError:
                spec = None
            measurement = measure(session)
            envelope = measurement.total_tokens - measurement.surface_tokens
            if spec is not None and envelope >= spec.threshold_tokens:
                error = TargetPressureConfigError(policy.key, f"compaction-basic: the request envelope ({envelope} "
                                                              f"tokens) alone reaches the threshold "
                                                              f"{spec.threshold_tokens} for {policy.key}")
                return Outcome(session, error=error, labels=(f"pressure check failed: {error.message}",))
        return original(session, mode, env, signal_aborted)

    return seams_replacing(compact_if_needed=compact_if_needed)


def skip_the_shrink_floor():
    """G7 (spec 7, 8.2 step 10): range selection returns null for a span priced <= the shrink floor."""
    original = REAL.select_compactable_range

    def select_compactable_range(session, measurement, retain_tokens):
        span = original(session, measurement, retain_tokens)
        if span is None:
            return None
        seqs = list(measurement.seqs)
        price = sum(p for _, p in measurement.nodes[seqs.index(span.start): seqs.index(span.end) + 1])
        return None if price <= SHRINK_FLOOR else span

    return seams_replacing(select_compactable_range=select_compactable_range)


def lock_before_overflow_pruning():
    """G8 (spec 10.2, 8.1 step 4): assertNoActiveCompaction before the overflow path prunes."""
    original = REAL.overflow_compaction

    def _overflow(session, env, signal_aborted):
        try:
            assert_no_active_compaction(session, "automatic overflow compaction")
        except ModelError as error:
            return Outcome(session, error=error, labels=(f"overflow check failed: {error.message}",))
        return original(session, env, signal_aborted)

    return seams_replacing(overflow_compaction=_overflow)


def transaction_success_wins():
    """G11, transaction half (spec 8.2 step 11): no final signal check after a clean close."""
    final_check = ("    if manual and caller_aborted:\n"
                   "        return Outcome(session, error=AbortError(), aborted=True, ")
    fixed = rewritten(model.transaction.compact_surface_region,
                      (final_check + "labels=tuple(labels)",
                       final_check.replace("caller_aborted:", "caller_aborted and result is None:")
                       + "labels=tuple(labels)"))
    return seams_replacing(compact_surface_region=fixed)


def command_reports_success():
    """G11, command half (spec 11.1-11.2): /compact reports the committed result it got."""
    original = REAL.command_result

    def command_result(outcome):
        if outcome.error is None and outcome.value is not None:  # committed and closed: report what happened
            outcome = dataclasses.replace(outcome, aborted=False)
        return original(outcome)

    return seams_replacing(command_result=command_result)


def automatic_checks_the_signal():
    """G12 (spec 8.2 step 11): owner 'current-turn' re-checks the signal before committing too."""
    fixed = rewritten(model.transaction.compact_surface_region,
                      ("        if manual and caller_aborted:\n            raise AbortError()",
                       "        if caller_aborted:\n            raise AbortError()"))
    return seams_replacing(compact_surface_region=fixed)


def retry_only_when_it_fits():
    """G16 (spec 10.2, 6): the overflow retry is authorized only when the remeasured request fits."""
    original = REAL.on_request_error

    def on_request_error(session, state, failure_code, env, signal_aborted=False):
        outcome, new_state, retry = original(session, state, failure_code, env, signal_aborted)
        target = model.policy.routed_target(outcome.session)
        window = env.context_window(target) if target is not None else None
        if retry and window is not None and measure(outcome.session).total_tokens > window:
            label = "overflow: the request still exceeds the context window; the request error stands"
            return dataclasses.replace(outcome, labels=outcome.labels + (label,)), \
                dataclasses.replace(state, seen_overflow=True), False
        return outcome, new_state, retry

    return seams_replacing(on_request_error=on_request_error)


# -- context, persistence, observability (properties/promises_context.py) ---------------------------
def _restore_like_live(session):
    """The live rule's snapshot: the NEWEST owned one, kept only while it is still on the surface."""
    owned = [event for event in session.log if is_owned_snapshot(event)]
    if not owned:
        return NEVER
    newest = owned[-1]
    return RetainedSnapshot(newest.seq, text_of(newest.data)) if newest.seq in session.nodes else NONE


def resume_restores_the_newest_snapshot():
    """G3 (spec 12): the constructor restores what the live rule holds, never an older visible snapshot."""
    return seams_replacing(restore_retained=_restore_like_live)


def retry_reprojects_runtime_context():
    """G2 overflow variant (spec 10.3 "not re-done: runtime-context projection"): before a same-step retry
    the runtime projects the current context again and enters the candidate."""
    pre_step, request_error = model_levels._Ops.pre_step, model_levels._Ops.request_error

    def remembering_pre_step(self, args):
        self.rt.h9a_sections = context_sections(args)
        return pre_step(self, args)

    def reprojecting_request_error(self, args):
        reply = request_error(self, args)
        sections = getattr(self.rt, "h9a_sections", None)
        if reply.get("kind") == "retry" and sections is not None:
            candidate = project_sections(self.rt.retained, sections)
            if candidate is not None:
                seq = self.rt.session.next_seq
                session, _ = model.session.append(self.rt.session, "user/message",
                                                  {**candidate, "id": snapshot_id(seq)}, surface_op="append")
                self.rt.adopt(session)
                reply["snapshot"] = seq
        return reply

    return on_class(model_levels._Ops, pre_step=remembering_pre_step, request_error=reprojecting_request_error)


def append_checks_message_shape():
    """G18 (spec 1.3, 1.5 step 3): live append applies the seed's message-shape check, so what it accepts reloads."""
    commit = model.session.commit

    def checked_commit(session, event):
        problem = model.session.message_shape_problem({"type": event.type, "data": event.data}, event.seq)
        if problem is not None:
            raise SessionAppendError(problem.replace("seed ", "session ", 1), seq=event.seq)
        return commit(session, event)

    return seams_replacing(commit=checked_commit)


def warn_once_per_cause():
    """G15 (spec 9.3): the warned set is keyed by target AND cause, so each configuration error is logged once."""
    original = model_levels._Ops._pressure_kind

    def per_cause(self, outcome, wrote):
        error = outcome.error
        if isinstance(error, TargetPressureConfigError):
            key = (error.target_key, error.message)
            if key in self.state.warned:
                return "silent"
            self.state.warned.add(key)
            return "warned"
        return original(self, outcome, wrote)

    return on_class(model_levels._Ops, _pressure_kind=per_cause)


def usage_counts_compaction():
    """G10 (spec 5.2, 8.2): `tokenUsage` also folds `compaction/summary.usage`."""
    def billing_fold(state, event):
        if event.type == "compaction/summary" and isinstance(event.data.get("usage"), dict):
            return TokenUsage(state.totals.plus(Buckets.of(event.data["usage"])), state.last)
        return fold_usage(state, event)

    return seams_replacing(fold_usage=billing_fold)


def mismatched_claim_expires():
    """G17 (spec 5.1, 6): a replace meeting a claim for another range expires the stale claim and folds as an
    unclaimed replace instead of throwing inside the contained listener."""
    def expiring_fold(claim, event):
        try:
            return fold_claim(claim, event)
        except ProjectionClaimError:
            return ClaimStep(0, None, "unpriced-replace")

    return seams_replacing(fold_claim=expiring_fold)


# -- measurement, progress, pairing (properties/promises_measure.py) ------------------------------
def price_unclaimed_replace_from_the_meter():
    """G1b (spec 5.1): an unclaimed replacement is priced from the meter's node prices, as if claimed."""
    original = ModelRuntime._fold

    def fold(self, event):
        op = event.replace
        if op is not None and event.is_surface_type and self.projection.claim is None and self.projection_error is None:
            seqs = [seq for seq, _ in self.meter.nodes]
            if op.start in seqs and op.end in seqs:
                i, j = seqs.index(op.start), seqs.index(op.end)
                price = sum(p for _, p in self.meter.nodes[i:j + 1])
                self.projection = SurfaceProjection(self.projection.total, Claim(op.start, op.end, price))
        original(self, event)

    return on_class(ModelRuntime, _fold=fold)


def batch_before_pressure():
    """G13 (spec 9.2, 13; seed S4.b): the pre-step enters its claimed batch before the pressure listener measures."""
    original = model_levels._Ops.pre_step

    def pre_step(self, args):
        marker, claimed = step_marker(args), claimed_messages(args)
        if marker is not None or claimed:
            self._enter(marker, claimed or [], None)
            args = {k: v for k, v in args.items() if k not in ("step", "claimed")}
        return original(self, args)

    return on_class(model_levels._Ops, pre_step=pre_step)


def rebase_step_start():
    """G9a/G9b (spec 4.2, 4.3, 10.3): the anchor's surface is the surface the request carried (stepStart rebased at the
    assistant/message), not the one at `step/start`."""
    original = REAL.fold_meter

    def fold(state, event, event_at):
        if event.type == "assistant/message" and state.step_start is not None:
            state = dataclasses.replace(state, step_start=dataclasses.replace(state.step_start,
                                                                              surface_tokens=state.surface_tokens))
        return original(state, event, event_at)

    return seams_replacing(fold_meter=fold)


def overflow_keeps_the_entered_batch():
    """G2b (spec 10.2, 7, 13): overflow recovery's retain-0 range stops before the open step's entered batch
    (what the pre-step entered after `step/start`, before the step's first answer: prompt + snapshot, D9)."""
    original = REAL.select_compactable_range

    def select(session, measurement, retain):
        span = original(session, measurement, retain)
        starts = [e.seq for e in session.log if e.type == "step/start"]
        if span is None or retain != 0 or not starts:
            return span
        answers = [e.seq for e in session.log if e.seq > starts[-1] and e.type in ("assistant/message", "tool/result")]
        batch_end = answers[0] if answers else session.next_seq
        nodes = list(session.nodes)
        entered = [i for i, seq in enumerate(nodes) if starts[-1] < seq < batch_end]
        if not entered or nodes.index(span.end) < entered[0]:
            return span
        return Range(nodes[0], nodes[entered[0] - 1]) if entered[0] > 0 else None

    return seams_replacing(select_compactable_range=select)


def indivisible_span_is_compactable():
    """G5 (spec 7 steps 3-4, 10.2): with retain 0 a balanced whole surface above the shrink floor is a range."""
    original = REAL.select_compactable_range

    def select(session, measurement, retain):
        span = original(session, measurement, retain)
        if span is None and retain == 0 and sum(p for _, p in measurement.nodes) > SHRINK_FLOOR \
                and REAL.fold_cuts(session).balanced[-1]:
            return Range(session.nodes[0], session.nodes[-1])
        return span

    return seams_replacing(select_compactable_range=select)


def cuts_judged_by_call_id():
    """S7.b (spec 3): a cut is balanced when no call/result pair (matched by id) straddles it, besides the count."""
    real = REAL.fold_cuts

    def by_id(session):
        cuts = real(session)
        ids = [call_ids(session.event_at(seq).to_json()) for seq in cuts.nodes]
        balanced = list(cuts.balanced)
        for i in range(len(ids) + 1):
            calls = {c for c_ids, _ in ids[:i] for c in c_ids}
            if any(answer in calls for _, answer in ids[i:]):
                balanced[i] = False
        return dataclasses.replace(cuts, balanced=tuple(balanced))

    return seams_replacing(fold_cuts=by_id)


PATCHES = {
    "G1-unclaimed-replace-drift": price_unclaimed_replace,
    "G2-one-request-context-window": context_after_pressure,
    "G4-uncompactable-envelope": envelope_is_a_config_error,
    "G7-shrink-floor": skip_the_shrink_floor,
    "G8-overflow-prune-bypasses-lock": lock_before_overflow_pruning,
    "G11-manual-cancellation-beats-success": lambda: both(transaction_success_wins(), command_reports_success()),
    "G12-automatic-ignores-cancellation": automatic_checks_the_signal,
    "G16-partial-prune-progress": retry_only_when_it_fits,
    "G3-resume-restores-older-snapshot": resume_restores_the_newest_snapshot,
    "G2-overflow-retries-widen-context-window": retry_reprojects_runtime_context,
    "G18-live-log-fails-reload": append_checks_message_shape,
    "G15-warn-once-key-collision": warn_once_per_cause,
    "G10-compaction-usage-unbilled": usage_counts_compaction,
    "G17-dangling-prune-claim": mismatched_claim_expires,
    "G1b-projection-goes-negative": price_unclaimed_replace_from_the_meter,
    "G13-entering-batch-blind-spot": batch_before_pressure,
    "G9a-anchor-double-count": rebase_step_start,
    "G9b-stale-step-start": rebase_step_start,
    "G2b-prompt-summarized-before-seen": overflow_keeps_the_entered_batch,
    "G5-indivisible-tool-unit": indivisible_span_is_compactable,
    "S7-pairing-counts-not-ids": cuts_judged_by_call_id,
}
"""Finding id -> its fix (G11's is both layers: the transaction, then the /compact executor)."""
