"""Issue 20: cut-legality, pairing-ids and incremental-pairing proved for surfaces of any length by inductive
invariants over the model's own walks; a model broken in a walk's step, in the code around the
walks, or in the cache makes the unbounded proof fail (the induction is shown able to fail)."""
from __future__ import annotations

import pytest

from surfacecheck import model
from surfacecheck.model.seams import REAL, using
from surfacecheck.properties.proofs import (cut_legality, cut_legality_unbounded, incremental_pairing, incremental_unbounded,
                               pairing_ids, pairing_ids_unbounded)
from surfacecheck.properties.proofs.induction import SymSeq
from surfacecheck.properties.proofs.obligation import PROVED, REFUTED


@pytest.fixture(scope="module")
def obligations():
    return {"cut-legality": cut_legality.run(4), "pairing-ids": pairing_ids.run(4),
            "incremental-pairing": incremental_pairing.run(4)}


UNBOUNDED = ["cut-legality", "pairing-ids", "incremental-pairing"]


@pytest.mark.parametrize("name", UNBOUNDED)
def test_proved_unbounded_with_every_induction_check(obligations, name):
    result = obligations[name]
    report = result.to_json()
    assert result.status == PROVED and report["bound"] == "unbounded", report
    unbounded = report["notes"]["unbounded"]
    assert unbounded["status"] == PROVED and unbounded["failed"] is None
    checks = unbounded["induction"]
    assert checks and set(checks.values()) == {PROVED}
    walks = {key.split(": ")[0] for key in checks}
    assert walks == set(unbounded["invariants"]) and all(unbounded["invariants"].values())
    assert {key.split(": ")[1] for key in checks} == {"initiation", "consecution"}
    assert report["notes"]["cross_check"]["status"] == PROVED


def test_the_walks_cut_legality_leans_on(obligations):
    walks = set(obligations["cut-legality"].to_json()["notes"]["unbounded"]["invariants"])
    assert walks == {model.region.RETENTION_WALK.name, model.region.BALANCE_WALK.name, model.pairing.PAIRING_FOLD.name}


@pytest.mark.parametrize("name", UNBOUNDED)
def test_each_control_fails_the_unbounded_proof_and_is_refuted_concretely(obligations, name):
    for control in obligations[name].controls:
        assert control.unbounded["status"] != PROVED and control.unbounded["failed"], control.to_json()
        assert control.status == REFUTED and control.replayed is True, control.to_json()


def _proof_fails(report, where):
    assert report["status"] != PROVED, report
    assert where in report["failed"], report["failed"]


def test_a_retention_step_that_forgets_the_price_fails_consecution():
    walk = model.region.RETENTION_WALK

    def step(state, prices, retain):
        kept = model.region.Retention(state.index - 1, state.accumulated, state.index, state.accumulated >= retain)
        return kept, None

    with using(REAL.replace(retention_walk=walk._replace(step=step))):
        _proof_fails(cut_legality_unbounded.prove(cut_legality.model_select, 3000, True),
                     f"consecution of the {walk.name}")


def test_a_balance_walk_that_stops_at_once_fails_at_the_exit():
    walk = model.region.BALANCE_WALK
    with using(REAL.replace(balance_walk=walk._replace(guard=lambda keep, balanced, start: False))):
        _proof_fails(cut_legality_unbounded.prove(cut_legality.model_select, 3000, True),
                     "at the exit: both edges balanced")


def test_a_cut_moved_toward_the_tail_fails_the_unbounded_proof():
    original = model.region.retention_index
    with using(REAL.replace(retention_index=lambda prices, retain: min(original(prices, retain) + 1, len(prices)))):
        _proof_fails(cut_legality_unbounded.prove(cut_legality.model_select, 3000, True), "at the exit")


def test_a_fold_that_writes_the_cut_before_the_node_fails_the_unbounded_proofs():
    walk = model.pairing.PAIRING_FOLD

    def step(fold, nodes, session, open_calls):
        after, _ = walk.step(fold, nodes, session, open_calls)
        return after, fold.running == 0  # the count before this node, not after it

    with using(REAL.replace(pairing_fold=walk._replace(step=step))):
        _proof_fails(cut_legality_unbounded.prove(cut_legality.model_select, 3000, True), f"of the {walk.name}")
        _proof_fails(incremental_unbounded.prove(incremental_pairing.model_refresh, 3000, True), f"of the {walk.name}")


def test_a_cache_that_ignores_the_generation_fails_the_unbounded_proof():
    with using(REAL.replace(refresh_cuts=incremental_pairing.refresh_ignoring_generation)):
        _proof_fails(incremental_unbounded.prove(incremental_pairing.model_refresh, 3000, True), "a new generation")


def test_a_cache_that_never_extends_is_still_exact():
    """Rebuilding on every refresh is slow but exact: the claim is about the cache's value, so it holds."""
    report = incremental_unbounded.prove(lambda cached, session: model.pairing.fold_cuts(session))
    assert report["status"] == PROVED, report


def test_a_symbolic_sequence_refuses_what_it_cannot_do():
    seq = SymSeq(3, lambda i: i)
    with pytest.raises(TypeError):
        len(seq)
    with pytest.raises(TypeError):
        list(seq)


def test_results_that_do_not_count_fail_the_id_bijections_consecution():
    original = model.pairing.event_delta
    with using(REAL.replace(event_delta=lambda event: 0 if getattr(event, "type", None) == "tool/result"
                            else original(event))):
        _proof_fails(pairing_ids_unbounded.prove(True, 3000, True), "consecution of the id bijection")


def test_dropping_the_id_premise_fails_the_id_bijections_consecution():
    _proof_fails(pairing_ids_unbounded.prove(False, 3000, True), "consecution of the id bijection")


def test_a_fold_that_writes_the_cut_before_the_node_fails_pairing_ids():
    walk = model.pairing.PAIRING_FOLD

    def step(fold, nodes, session, open_calls):
        after, _ = walk.step(fold, nodes, session, open_calls)
        return after, fold.running == 0

    with using(REAL.replace(pairing_fold=walk._replace(step=step))):
        _proof_fails(pairing_ids_unbounded.prove(True, 3000, True), f"of the {walk.name}")
