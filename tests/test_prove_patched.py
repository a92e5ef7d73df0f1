"""Issue 5 "must show": break a rule of the executable model and the matching obligation becomes
refuted, with a counterexample trace that the (broken) model replays to the violation."""
from __future__ import annotations

from surfacecheck import model
from surfacecheck.model.seams import REAL, using
from surfacecheck.properties.proofs import (cut_legality, generation_progress, incremental_pairing, pairing_ids,
                               projection_equivalence, smallest_span)
from surfacecheck.properties.proofs.obligation import PROVED, REFUTED


def _unbounded_failed(result) -> None:
    """Issue 20: the unbounded proof fails on the broken model too, not only the bounded cross-check."""
    unbounded = result.notes["unbounded"]
    assert result.bound == "unbounded" and unbounded["status"] != PROVED and unbounded["failed"], unbounded


def test_cut_moved_one_node_toward_the_tail_refutes_cut_legality():
    original = REAL.retention_index
    with using(REAL.replace(retention_index=lambda prices, retain: min(original(prices, retain) + 1, len(prices)))):
        result = cut_legality.run(6)
    assert result.status == REFUTED
    assert result.trace is not None and result.replayed is True, result.replay_message
    assert result.trace.violation.property == "cut-legality"
    _unbounded_failed(result)


def test_skipping_the_balance_walk_refutes_cut_legality():
    with using(REAL.replace(select_compactable_range=cut_legality.select_without_balance_walk)):
        result = cut_legality.run(5)
    assert result.status == REFUTED and result.replayed is True
    assert "both edges balanced" in result.replay_message
    _unbounded_failed(result)
    assert "both edges balanced" in result.notes["unbounded"]["failed"]


def test_results_that_do_not_count_refute_pairing_ids():
    original = REAL.event_delta
    with using(REAL.replace(event_delta=lambda event: 0 if getattr(event, "type", None) == "tool/result"
                            else original(event))):
        result = pairing_ids.run(4)
    assert result.status == REFUTED and result.replayed is True, result.replay_message
    assert "count-balanced is False but id-closed is True" in result.replay_message
    _unbounded_failed(result)
    assert result.notes["unbounded"]["failed"] == "consecution of the id bijection"


def test_a_cache_that_ignores_the_generation_refutes_incremental_pairing():
    with using(REAL.replace(refresh_cuts=incremental_pairing.refresh_ignoring_generation)):
        result = incremental_pairing.run(4)
    assert result.status == REFUTED and result.replayed is True, result.replay_message
    _unbounded_failed(result)


def test_retry_without_progress_refutes_generation_progress():
    original = model.policy.on_request_error

    def on_request_error(session, state, code, env, signal_aborted=False):
        outcome, new_state, retry = original(session, state, code, env, signal_aborted)
        return outcome, new_state, retry or code == generation_progress.OVERFLOW_CODE  # no progress proof

    assert generation_progress.overflow_claims()[0] == PROVED
    with using(REAL.replace(on_request_error=on_request_error)):
        progress, ranking, _ = generation_progress.overflow_claims()
        assert progress == REFUTED and ranking == REFUTED
        assert generation_progress.run().status == REFUTED


def test_a_consume_that_ignores_the_claim_refutes_projection_equivalence():
    original = model.projection.fold_claim

    def fold_claim(claim, event):
        step = original(claim, event)
        if step.action == "consume":  # forgets to subtract the shadowed price
            return type(step)(step.delta + claim.tokens, None, "consume")
        return step

    with using(REAL.replace(fold_claim=fold_claim)):
        status, _, path = projection_equivalence.k_induction(3)
    assert status == REFUTED and path is not None
    assert [event["kind"] for event in path[:-1]][-1] == projection_equivalence.REPLACE


def test_a_cheaper_frame_refutes_smallest_compactable_span():
    with using(REAL.replace(frame_summary=smallest_span.wrong_frame)):
        status, cex, _ = smallest_span.frame_bound()
    assert status == REFUTED and cex["framed"] < smallest_span.SMALLEST_FRAME


def test_a_checkpoint_that_opens_a_call_refutes_the_second_attempt_clause(monkeypatch):
    """Spec 9.4 relies on the checkpoint being neutral (delta 0): make it open a call and the second
    attempt no longer selects it alone."""
    from surfacecheck.properties.proofs.concrete import USER, delta_table

    table = dict(delta_table())
    table[(USER, 0)] = 1
    monkeypatch.setattr(smallest_span, "delta_table", lambda: table)
    assert smallest_span.second_attempt_spec(4) == REFUTED
