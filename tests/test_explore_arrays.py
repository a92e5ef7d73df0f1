"""The explored graph as arrays (surfacecheck/explore/arrays.py): the report's figures are networkx's, and the
masks pick exactly the edges the checks read, and the checks find what the golden data records."""
from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

from surfacecheck.explore import arrays, oracle
from surfacecheck.explore.bfs import explore
from surfacecheck.explore.variants import CORRECT, VARIANTS
from surfacecheck.explore.world import SURF, Bounds, World

from golden.make_explore_golden import HERE, PROGRESS_CASES, progress_record

CASES = [(CORRECT, Bounds(4, 2, 1)), (VARIANTS["retry-without-progress"], Bounds(4, 0, 1)),
         (VARIANTS["pressure-skipped"], Bounds(4, 1, 1))]


@pytest.mark.parametrize("variant, bounds", CASES, ids=[v.name for v, _b in CASES])
def test_graph_figures_are_networkx_figures(variant, bounds):
    exp = explore(World(bounds, variant=variant))
    graph = nx.DiGraph()
    graph.add_nodes_from(range(len(exp.states)))
    graph.add_edges_from((src, dst) for src, dst, _a, _e in exp.edges)
    figures = arrays.graph_figures(exp)
    assert figures == {"nodes": graph.number_of_nodes(), "arcs": graph.number_of_edges(),
                       "strongly_connected_components": nx.number_strongly_connected_components(graph)}
    assert figures["strongly_connected_components"] < figures["nodes"]  # the VIEW makes cycles


def test_prices_endpoints_and_masks():
    exp = explore(World(Bounds(4, 1, 1)))
    price = arrays.prices(exp)
    assert price.tolist() == [oracle.total(state[SURF]) for state in exp.states]
    src, dst = arrays.endpoints(exp)
    assert list(zip(src.tolist(), dst.tolist())) == [(s, d) for s, d, _a, _e in exp.edges]
    marked = np.array([i % 3 == 0 for i in range(len(exp.states))])
    assert arrays.both_ends(exp, marked).tolist() == [i for i, (s, d, _a, _e) in enumerate(exp.edges)
                                             if s % 3 == 0 and d % 3 == 0]


@pytest.mark.parametrize("variant, bounds", PROGRESS_CASES, ids=[v.name for v, _b in PROGRESS_CASES])
def test_the_checks_find_the_golden_findings(variant, bounds):
    """The progress findings (property, message, prefix, loop) and graph figures recorded in
    ``tests/golden/explore/`` (``tests/golden/make_explore_golden.py``)."""
    golden = json.loads((HERE / f"progress-{variant.name}-{bounds.events}-{bounds.tool_pairs}-"
                                f"{bounds.compactions}.json").read_text())
    assert progress_record(explore(World(bounds, variant=variant))) == golden
    for k in (1, 2):
        expected = variant is not CORRECT and not (k == 2 and variant.name != "retry-without-progress")
        assert bool(golden["progress"][str(k)]) == expected
