"""Benchmark harness (issue 6): the workload is a real dsh log, the variants agree, the cost model
separates O(1) from O(surface) and would catch a linear variant, the projection's state does not grow.
No timing is asserted here (speed lives in ``surfacecheck bench`` and ``benchmarks/``)."""
from __future__ import annotations

import itertools

import pytest

from surfacecheck.bench.costmodel import cost_model_failures, growth, ops_per_append
from surfacecheck.bench.harness import Point, Series, gate, linear_appends
from surfacecheck.bench.memory import state_bytes
from surfacecheck.bench.variants import EMBEDDED, VARIANTS, CopyOnAppendFold, FullRecount, Variant, lookup
from surfacecheck.bench.workload import Workload, is_append
from surfacecheck.model.event import Event
from surfacecheck.model.replay import replay
from surfacecheck.runtime.embedded.projection import ShadowPriceProjection

COST_SIZES = (100, 1000, 10000)


def _events(count: int, **kw) -> tuple[Workload, list[dict]]:
    workload = Workload(**kw)
    return workload, list(itertools.islice(workload.events(), count))


def test_workload_is_a_clean_dsh_log_with_exact_shadow_prices():
    workload, events = _events(2500, track_surface=True)
    result = replay([Event.from_json(e) for e in events], check_shapes=True)
    assert result.ok, result.error
    assert result.fully_metered
    assert result.projection_total == result.recount_total == workload.total
    assert list(result.surface_nodes) == [seq for seq, _, _ in workload.surface]
    assert len(result.surface_nodes) == workload.surface_size
    assert result.generation == workload.replaces > 0
    kinds = {e["type"] for e in events}
    assert {"compaction/prune", "compaction/summary", "tool/call", "tool/result", "assistant/message"} <= kinds
    replaced = {e["type"] for e in events if isinstance(e.get("surfaceOp"), dict)}
    assert replaced == {"tool/result", "user/message"}  # pruned results and checkpoints


def test_workload_is_deterministic_per_seed():
    assert _events(600)[1] == _events(600)[1]
    assert _events(600)[1] != _events(600, seed=1)[1]


def test_workload_reaches_a_size_right_after_an_append():
    workload = Workload()
    stream = workload.events()
    last = list(workload.until_size(stream, 777))[-1]
    assert workload.surface_size == 777 and is_append(last)


def test_every_variant_folds_the_same_total():
    workload, events = _events(1200)
    states = {name: VARIANTS[name].make() for name in ("projection", "incremental", "copy-on-append", "recount",
                                                       "model-projection")}
    for event in events:
        for state in states.values():
            prepare = getattr(state, "prepare", None)
            state.observe(prepare(event) if prepare else event)
    assert states["projection"].metered
    assert {name: getattr(s, "surface_tokens", None) or s.total for name, s in states.items()} == \
        dict.fromkeys(states, workload.total)


def test_bulk_load_equals_folding_from_the_start():
    workload, events = _events(800, track_surface=True)
    folded_copy, folded_recount = CopyOnAppendFold(), FullRecount()
    for event in events:
        folded_copy.observe(event)
        folded_recount.observe(event)
    loaded_copy, loaded_recount = CopyOnAppendFold.load(workload.surface), FullRecount.load(workload.surface)
    assert loaded_copy.nodes == folded_copy.nodes and loaded_copy.total == folded_copy.total == workload.total
    assert loaded_recount.seqs == folded_recount.seqs and loaded_recount.total == folded_recount.total


@pytest.fixture(scope="module")
def costs() -> dict[str, Series]:
    return ops_per_append(lookup(list(EMBEDDED) + ["model-projection"]), COST_SIZES)


def test_projection_touches_a_constant_number_of_cells_at_every_size(costs):
    for name in ("projection", "incremental", "bare-pricing", "model-projection"):
        ops = [p.ops for p in costs[name].points]
        assert len(set(ops)) == 1 and ops[0] <= 4, (name, ops)
        assert growth(costs[name]) == "constant"


def test_copy_on_append_and_recount_grow_linearly(costs):
    for name in ("copy-on-append", "recount"):
        first, last = costs[name].points[0], costs[name].points[-1]
        assert last.ops >= 0.9 * last.size and first.ops < 2 * first.size  # O(surface) per append
        assert last.ops / first.ops >= 50
        assert growth(costs[name]) == "linear"
    assert cost_model_failures(costs) == []


class RecountingProjection(ShadowPriceProjection):
    """A linear variant in O(1) clothing: keeps every price and re-sums them on each append."""

    __slots__ = ("prices",)

    def __init__(self) -> None:
        super().__init__()
        self.prices: list[int] = []

    def _append(self, tokens: int) -> None:
        self.prices.append(tokens)
        self.running_total = sum(self.prices)
        self.ops += len(self.prices)
        self._expire_claim()


@pytest.mark.parametrize("impostor", [
    Variant("projection", "recounting projection", RecountingProjection),
    Variant("projection", "copy-on-append as projection", CopyOnAppendFold, CopyOnAppendFold.load),
], ids=["recounting-projection", "copy-on-append"])
def test_cost_model_catches_a_linear_variant_swapped_in(impostor):
    series = ops_per_append([impostor], COST_SIZES)
    assert growth(series["projection"]) == "linear"
    failures = cost_model_failures(series)
    assert len(failures) == 1 and failures[0].startswith("projection: expected constant")


def _series(name: str, medians: list[float], sizes=(100, 10**6)) -> Series:
    return Series(name, name, "constant", [Point(size, 10, ns, 1.0) for size, ns in zip(sizes, medians)])


def test_gate_passes_a_flat_projection_near_the_floor():
    assert gate({"projection": _series("projection", [4000, 4400]),
                 "bare-pricing": _series("bare-pricing", [3400, 3400])}) == []


def test_gate_fails_a_rising_curve_and_a_costly_projection():
    rising = gate({"projection": _series("projection", [4000, 6100]),
                   "bare-pricing": _series("bare-pricing", [3400, 3400])})
    assert len(rising) == 1 and "1.52x" in rising[0]
    costly = gate({"projection": _series("projection", [7000, 7000]),
                   "bare-pricing": _series("bare-pricing", [3400, 3400])})
    assert len(costly) == 1 and "bare pricing" in costly[0]
    assert len(gate({"copy-on-append": _series("copy-on-append", [4500, 6 * 10**7])}, "copy-on-append")) == 1


def test_linear_variants_are_timed_over_fewer_appends_at_large_sizes():
    assert [linear_appends(s) for s in (10**2, 10**3, 10**4, 10**5, 10**6)] == [50, 300, 100, 10, 3]


def test_projection_state_does_not_grow_with_the_log():
    # the median of three: under pytest-xdist another thread (execnet's) allocates while a state is measured
    small, large = (state_bytes(VARIANTS["projection"], n, repeat=3) for n in (10**3, 2 * 10**4))
    assert 0 < small < 1024 and abs(large - small) <= 64
    # negative control: the per-node table grows with the surface
    grows = state_bytes(VARIANTS["incremental"], 10**3), state_bytes(VARIANTS["incremental"], 2 * 10**4)
    assert grows[1] > 10 * grows[0]
