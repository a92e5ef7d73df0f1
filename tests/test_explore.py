"""`surfacecheck explore`: the correct model holds, the quotient is sound, the result is order-independent."""
from __future__ import annotations

import random

import pytest

from surfacecheck.explore.bfs import explore
from surfacecheck.explore.progress import context_missing
from surfacecheck.explore.run import run_explore
from surfacecheck.explore import oracle
from surfacecheck.explore.tracegen import Concretiser
from surfacecheck.explore.variants import VARIANTS
from surfacecheck.explore.world import EVENTS, ROUTED, SURF, Bounds, World

SMALL = Bounds(4, 2, 1)


@pytest.fixture(scope="module")
def small_report():
    return run_explore(SMALL)


def test_correct_model_has_no_violation_at_small_bounds(small_report):
    assert small_report["verdict"] == "ok" and small_report["exit_code"] == 0
    assert small_report["violations"] == []
    assert small_report["complete"]
    assert small_report["states"] > 1000 and small_report["edges"] > small_report["states"]
    assert small_report["depth"] >= 10 and small_report["states_per_second"] > 0
    assert small_report["graph"]["nodes"] == small_report["states"]
    assert "explore-no-compaction-loop" in small_report["progress"]
    assert "pairing-balanced-at-replacement-edges" in small_report["invariants"]


def test_correct_model_has_no_violation_at_default_bounds():
    report = run_explore(Bounds())
    assert report["verdict"] == "ok", report["violations"]
    assert report["complete"] and report["states"] > 10_000


def test_world_reaches_every_behaviour_it_claims():
    """The bounded world is not vacuous: pressure compactions, overflow retries and failures,
    manual compactions, prunes, reloads and runtime-context shadowing all occur."""
    exp = explore(World(SMALL))
    kinds = {(e.kind, e.pkind) for _s, _d, _a, e in exp.edges}
    for expected in [("step", "compacted"), ("step", "pruned"), ("step", "warned"), ("overflow", "retry"),
                     ("overflow", "next"), ("manual", "success"), ("manual", "error"), ("reload", "reload")]:
        assert expected in kinds, expected
    assert any(context_missing(s) for s in exp.states)
    assert any("K" in s[2] for s in exp.states) and any("N" in s[2] for s in exp.states)


@pytest.mark.parametrize("variant", ["correct", "retry-without-progress", "unbalanced-cut"])
def test_concrete_runs_simulate_the_abstract_world(variant):
    """α(model runtime after the concrete requests) == the abstract successor, and the runtime's
    measured total == the abstract price, on random paths (the quotient is sound on them)."""
    from surfacecheck.explore.variants import variant as lookup

    world = World(Bounds(6, 2, 2), variant=lookup(variant))
    rng, acted = random.Random(7), 0
    for _ in range(12):
        state, driver = world.initial(), Concretiser(world.settings, world.variant)
        for _ in range(14):
            moves = world.successors(state)
            if not moves:
                break
            action, state, _edge = rng.choice(moves)
            driver.act(action)
            acted += 1
            assert driver.abstract() == state[:EVENTS], action
            measured = driver.runtime.call("measure", {})
            if "error" not in measured:
                assert measured["total"] == oracle.total(state[SURF], state[ROUTED])
    assert acted > 100


def test_symmetry_reduction_changes_the_count_not_the_verdict():
    reduced = run_explore(Bounds(3, 1, 1))
    full = run_explore(Bounds(3, 1, 1, max_seq=60), symmetry=False)
    assert full["states"] > reduced["states"]
    assert reduced["verdict"] == full["verdict"] == "ok"
    bug = VARIANTS["no-shrink-rule"]
    reduced = run_explore(Bounds(2, 0, 1), variant=bug)
    full = run_explore(Bounds(2, 0, 1, max_seq=60), variant=bug, symmetry=False)
    assert full["states"] > reduced["states"]
    pick = lambda r: [(v["property"], v["actions"]) for v in r["violations"]]  # noqa: E731
    assert pick(reduced) == pick(full) and pick(full)


@pytest.mark.parametrize("variant", [None, "retry-without-progress", "pressure-skipped"])
def test_exploration_order_does_not_change_the_result(variant):
    kwargs = {"variant": VARIANTS[variant]} if variant else {}
    bounds = Bounds(3, 1, 1) if variant != "retry-without-progress" else Bounds(3, 0, 0)
    forward = run_explore(bounds, **kwargs)
    backward = run_explore(bounds, reverse=True, **kwargs)
    for key in ("states", "edges", "depth", "verdict"):
        assert forward[key] == backward[key]
    assert [(v["property"], v["actions"], v["loop"]) for v in forward["violations"]] == \
           [(v["property"], v["actions"], v["loop"]) for v in backward["violations"]]
    assert bool(forward["violations"]) == bool(variant)


def test_transition_cache_gives_the_same_result_without_running_the_model(tmp_path):
    path = tmp_path / "transitions.pkl"
    first = run_explore(Bounds(3, 1, 1), cache=path)
    second = run_explore(Bounds(3, 1, 1), cache=path)
    assert first["model_runs"] > 0 and second["model_runs"] == 0 and second["cached_transitions"] > 0
    for key in ("states", "edges", "depth", "verdict"):
        assert first[key] == second[key]
    bug = run_explore(Bounds(3, 1, 1), cache=path, variant=VARIANTS["pressure-skipped"])
    assert bug["cached_transitions"] == 0 and bug["violations"]  # another variant never reuses the file
    path.write_bytes(b"not a pickle")
    assert run_explore(Bounds(3, 1, 1), cache=path)["cached_transitions"] == 0
