"""Issue 19: the packed search (surfacecheck/explore/packed.py) finds the very graph the compact search does.

A packed core must unpack to the core it was made from; a group's relative moves are made once per key,
so a key that leaves out a field its moves read or write would give other cores wrong successors: the
graphs are compared edge by edge against the compact loop (one move list per core tuple), and a key with a
field left out (the negative control) is caught by that comparison.
"""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from surfacecheck.explore import bfs, layout, packed
from surfacecheck.explore.stage import CONTROL_BOUNDS
from surfacecheck.explore.variants import CORRECT, VARIANTS
from surfacecheck.explore.world import Bounds, World

CODES = ("U", "V", "A", "T1", "T2", "R", "S", "p", "K", "KB", "cX", "cY", "c0", "N")
cores = st.tuples(st.sampled_from(layout.PHASES), st.sampled_from(layout.PENDS),
                  st.lists(st.sampled_from(CODES), max_size=12).map(tuple), st.integers(-2, 40),
                  st.sampled_from(layout.CONTEXTS), st.integers(0, layout.RETRIES_RADIX - 1), st.booleans(),
                  st.booleans())


def _compact(world: World, symmetry: bool = True, reverse: bool = False) -> bfs.Exploration:
    with bfs.no_cyclic_gc():
        return bfs._explore(world, symmetry, reverse, None, None, None)


def _same(a: bfs.Exploration, b: bfs.Exploration, least: int = 300) -> None:
    assert len(a.states) > least
    assert a.states == b.states and a.depth == b.depth and a.state_violations == b.state_violations
    assert a.edges == b.edges  # every edge, its action and its Edge (label included), in BFS order


@given(cores)
def test_a_packed_core_unpacks_to_itself(core):
    packer = packed.Packer(World(Bounds(3, 1, 1)))
    number = packer.pack(core)
    assert packer.unpack(number) == core
    assert packer.pack(packer.unpack(number)) == number


def test_a_core_outside_the_packed_ranges_is_refused():
    packer = packed.Packer(World(Bounds(3, 1, 1)))
    with pytest.raises(ValueError, match="retries 16"):
        packer.pack(("I", "", (), -2, "", 16, False, False))
    with pytest.raises(ValueError, match="retained 254"):
        packer.pack(("I", "", (), 254, "", 0, False, False))


@pytest.mark.parametrize("bounds, variant, reverse, symmetry", [
    (Bounds(5, 2, 1), CORRECT, False, True),
    (Bounds(4, 1, 2), CORRECT, True, True),
    (Bounds(3, 1, 1, max_seq=40), CORRECT, False, False),
    (Bounds(4, 2, 1), CORRECT, False, True),
])
def test_packed_search_finds_the_compact_graph(bounds, variant, reverse, symmetry):
    new = bfs.explore(World(bounds, variant=variant), symmetry=symmetry, reverse=reverse)
    _same(new, _compact(World(bounds, variant=variant), symmetry, reverse))


@pytest.mark.parametrize("name", sorted(CONTROL_BOUNDS))
def test_packed_search_finds_the_compact_graph_of_every_control(name):
    bounds = CONTROL_BOUNDS[name]
    new = bfs.explore(World(bounds, variant=VARIANTS[name]))
    _same(new, _compact(World(bounds, variant=VARIANTS[name])), least=10)


def test_a_group_key_without_the_queued_prompt_is_caught(monkeypatch):
    """Negative control: the pre-step enters the queued prompt (spec 13 step 7); a step table that forgets
    which prompt is queued serves one core's successor to another."""
    real = packed.Packer._table

    def forgetful(self, *key):
        if key[0] == "step":
            key = ("step", "") + key[2:]
        return real(self, *key)

    bounds = Bounds(4, 1, 1)
    monkeypatch.setattr(packed.Packer, "_table", forgetful)
    wrong = bfs.explore(World(bounds))
    monkeypatch.undo()
    right = _compact(World(bounds))
    assert (wrong.states, wrong.edges) != (right.states, right.edges)


def test_the_search_loop_is_the_packed_one_unless_workers_or_the_oracle():
    """The serial search runs the packed loop (its cores are never numbered in the world); the oracle mode
    keeps the compact loop, which re-checks every core's runs."""
    fast = World(Bounds(3, 1, 1))
    exp = bfs.explore(fast)
    assert not fast.cores and len(exp.states) > 300
    checked = World(Bounds(3, 1, 1), check_oracle=True)
    bfs.explore(checked)
    assert checked.cores and checked.oracle_checks > 0


@pytest.mark.parametrize("variant, bounds", [(CORRECT, Bounds(5, 2, 1)), (VARIANTS["unbalanced-cut"], Bounds(4, 2, 1))])
def test_every_state_is_checked_once_found(variant, bounds):
    """The state invariants hold in a state iff it has no recorded violation: the packed search checks each
    surface when a state first reaches it, whenever the surface was numbered."""
    from surfacecheck.explore.safety import check_state
    from surfacecheck.explore.world import RET, SURF

    exp = bfs.explore(World(bounds, variant=variant))
    expected = {i: found for i, state in enumerate(exp.states) if (found := check_state(state[SURF], state[RET]))}
    assert exp.state_violations == expected
    assert bool(expected) == (variant is not CORRECT)


def test_groups_that_share_their_runs_share_one_template(monkeypatch):
    """A template is kept per effects class (templates._effects_class): far fewer than shape groups. Negative
    control: a class that forgets the effects' labels lets one group's edges carry another's labels."""
    from surfacecheck.explore import templates

    made: list = []
    real_init = packed.Packer.__init__
    monkeypatch.setattr(packed.Packer, "__init__", lambda self, world: (real_init(self, world), made.append(self))[0])
    world = World(Bounds(5, 2, 1))
    bfs.explore(world)
    shared = made[-1].templates
    assert 0 < len(shared._members) * 4 < len(shared._classes) <= len(world._groups)

    real_class = templates._effects_class
    monkeypatch.setattr(templates, "_effects_class",
                        lambda group: real_class([(outcome, eff._replace(label="")) for outcome, eff in group]))
    wrong = bfs.explore(World(Bounds(4, 1, 1)))
    monkeypatch.undo()
    right = _compact(World(Bounds(4, 1, 1)))
    assert wrong.states == right.states and wrong.edges != right.edges
