"""The fast path of `surfacecheck explore`: model runs shared across surfaces of one shape.

The shared runs (surfacecheck/explore/shape.py) must give the very state graph that one model
run per real surface gives; the oracle mode re-runs the model on every real surface and must find
no difference; and the oracle must *notice* a key that is too coarse (its negative control).
"""
from __future__ import annotations

import gc
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from surfacecheck.explore import oracle, shape
from surfacecheck.explore.bfs import explore
from surfacecheck.explore.run import run_explore
from surfacecheck.explore.stage import CONTROL_BOUNDS
from surfacecheck.explore.variants import VARIANTS
from surfacecheck.explore.world import Bounds, World


def _graph(world: World):
    """The explored graph; edge labels with their numbers masked (a shared run's label reports its
    representative's token counts: shape.masked)."""
    exp = explore(world)
    edges = [(src, dst, action, edge._replace(label=shape.masked(edge.label))) for src, dst, action, edge in exp.edges]
    return exp.states, exp.depth, edges, exp.state_violations


@pytest.mark.parametrize("bounds", [Bounds(3, 1, 1), Bounds(4, 2, 1)])
def test_shared_runs_give_the_exact_state_graph(bounds):
    fast, exact = World(bounds), World(bounds, shared=False)
    assert _graph(fast) == _graph(exact)  # states, depths, every edge with its (masked) labels, in BFS order
    assert fast.oracle_calls < exact.oracle_calls


@pytest.mark.parametrize("name", sorted(CONTROL_BOUNDS))
def test_shared_runs_give_the_exact_graph_of_every_control(name):
    bounds = CONTROL_BOUNDS[name]
    fast, exact = World(bounds, variant=VARIANTS[name]), World(bounds, variant=VARIANTS[name], shared=False)
    assert _graph(fast) == _graph(exact)


def test_oracle_checks_every_shared_transition_at_small_bounds():
    world = World(Bounds(4, 2, 1), check_oracle=True)
    explore(world)
    assert world.oracle_checks > 10_000 and world.oracle_mismatches == []


def test_oracle_on_random_paths_at_the_default_bounds():
    """Random walks through the default world (5/2/1), every shared run re-run on its real surface."""
    world, rng, steps = World(Bounds(), check_oracle=True), random.Random(11), 0
    for _ in range(60):
        state = world.initial()
        for _ in range(25):
            moves = world.successors(state)
            if not moves:
                break
            _action, state, _edge = rng.choice(moves)
            steps += 1
    assert steps > 600 and world.oracle_checks > 500
    assert world.oracle_mismatches == []


def test_oracle_catches_a_key_that_is_too_coarse(monkeypatch):
    """Negative control for the sharing argument: drop the prefix price sum's shrink class from the key
    and the oracle reports differences (so its silence above means something)."""
    original = shape.view

    def coarse(op, surf, outcome, routed, settings):
        key = original(op, surf, outcome, routed, settings)
        return key[:2] + key[3:] if key[0] in ("~", "~s") else key

    monkeypatch.setattr("surfacecheck.explore.world.view", coarse)
    report = run_explore(Bounds(4, 1, 1), oracle=True)
    assert report["verdict"] == "oracle-mismatch" and report["exit_code"] == 1
    assert report["oracle"]["mismatch_count"] > 0
    assert {"op", "surface", "model", "shared"} <= set(report["oracle"]["mismatches"][0])


def test_oracle_catches_a_shrink_class_with_the_wrong_summary_price(monkeypatch):
    """Negative control for the shrink class: price every summary as the big one (so a good summary's
    success and rejection fall into one class) and the oracle reports /compact runs that differ."""
    breakpoints = shape._breakpoints.__wrapped__
    monkeypatch.setattr(shape, "_breakpoints", lambda framed, big, tail, prunes: breakpoints("KB", big, tail, prunes))
    report = run_explore(Bounds(3, 1, 1), oracle=True)
    assert report["verdict"] == "oracle-mismatch" and report["oracle"]["mismatch_count"] > 0
    assert {m["op"] for m in report["oracle"]["mismatches"]} >= {"manual"}


def test_shrink_class_is_the_shrink_rule_per_range_end():
    """Spec 8.2 step 10: rejected iff the framed price F >= the shadowed count; with no tail the count is
    the prefix sum, so the class flips between T = F and T = F + 1."""
    f = oracle.price("K")
    assert shape.shrink_class(f, "K", 0, (), False) == 0 and shape.shrink_class(f + 1, "K", 0, (), False) == 1
    # a tail node the range may take moves the breakpoint down by its price; a prunable big result adds
    # the breakpoints of its pruned price and of each pruned prefix result
    assert shape._breakpoints("K", 0, ("A",), False) == (f - oracle.price("A"), f)
    big, pruned = oracle.price("S"), oracle.price("p")
    assert shape._breakpoints("K", 1, ("S",), True) == tuple(sorted({f - c + k * (big - pruned)
                                                                     for c in (0, big, pruned) for k in (0, 1)}))
    assert shape.masked("compacted 1 history items (~483 tokens)") == "compacted # history items (~# tokens)"


def test_shape_split_is_a_balanced_cut_inside_every_range():
    """`m` never splits a tool pair and never reaches past the last node (spec 3, 7)."""
    assert shape.split((), 0) == 0
    assert shape.split(("U", "T1", "R", "A"), 0) == 3
    assert shape.split(("U", "T2", "R"), 0) == 1  # the open pair is never cut
    assert shape.split(("V", "A", "V", "A"), 160) == 2  # keeps the last V + A (500 >= 160 tokens)
    assert shape.split(("V", "A", "U", "A"), 160) == 0  # U + A (35) is below the budget: all is kept


def test_report_modes_and_gc_restored():
    assert gc.isenabled()
    exact = run_explore(Bounds(3, 1, 1), shared=False)
    fast = run_explore(Bounds(3, 1, 1), oracle=True)
    assert gc.isenabled()
    assert exact["model_runs_mode"] == "exact" and fast["model_runs_mode"] == "shared+oracle"
    for key in ("states", "edges", "depth", "verdict"):
        assert exact[key] == fast[key]
    assert fast["oracle"]["checked"] > 0 and fast["oracle"]["mismatch_count"] == 0


def test_cli_oracle_and_exact(capsys):
    from surfacecheck.cli import main

    assert main(["explore", "--events", "3", "--tool-pairs", "1", "--oracle"]) == 0
    out = capsys.readouterr().out
    assert "re-run on their real surface, 0 mismatches" in out and "verdict: ok" in out
    with pytest.raises(SystemExit) as exited:
        main(["explore", "--oracle", "--exact"])
    assert exited.value.code == 2


@given(st.lists(st.sampled_from(("U", "V", "A", "T1", "T2", "R", "S", "p", "K", "KB", "cX", "c0", "N")), max_size=14),
       st.integers(0, 3000))
def test_the_shape_retention_walk_is_the_models(codes, retain):
    """shape.retained_from walks spec 7 step 3 in one loop; it must be the model's retention_index of the
    pruned prices for every surface and budget."""
    from surfacecheck.model.region import retention_index

    surf = tuple(codes)
    assert shape.retained_from(surf, retain) == retention_index(tuple(shape._pruned_price(c) for c in surf), retain)


def test_oracle_catches_a_tail_read_by_its_length_only(monkeypatch):
    """Negative control for `alike`: key a consulted run on the tail's length alone (no prices) and the
    oracle reports pressure runs that differ at the default bounds."""
    monkeypatch.setattr(shape, "alike", lambda tail: len(tail))
    report = run_explore(Bounds(), oracle=True)
    assert report["verdict"] == "oracle-mismatch" and report["oracle"]["mismatch_count"] > 0
    assert "pressure" in {m["op"] for m in report["oracle"]["mismatches"]}


def test_tail_nodes_read_alike_and_an_op_without_events_keeps_any_surface():
    """`alike`: price (spec 4), pairing delta (spec 3), big (spec 6) — the two snapshots read alike, a user
    prompt and a one-call reply of the same price do not. `rebase`: no event, no change (spec 2)."""
    assert oracle.price("cX") == oracle.price("cY") and shape.alike(("cX",)) == shape.alike(("cY",))
    assert oracle.price("U") == oracle.price("T1") and shape.alike(("U",)) != shape.alike(("T1",))
    assert shape.alike(("S",)) != shape.alike(("p",)) and shape.pairing(("T2", "R", "S", "A")) == (2, -1, -1, 0)
    noop = oracle.Effect(("U", "A"), (0, 1), 0, False, "noop", False, 0, 0, 0, False, (), "pressure -> noop")
    moved = shape.rebase(noop, ("V", "A", "U"))
    assert moved.surf == ("V", "A", "U") and moved.ret == (0, 1, 2) and moved[2:] == noop[2:]
    assert shape.rebase(noop, ("U", "A")) is noop
