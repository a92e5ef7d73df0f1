"""Regenerate the explorer's golden data: ``python tests/golden/make_explore_golden.py``.

Each file under ``tests/golden/explore/`` holds what the explorer finds for one of the bounds and variants
the explore tests use: the graph (states, depths, edges with their labels' numbers masked) as counts and
SHA-256 digests, the state violations, the safety counterexamples, the verdict, and for the progress cases the findings and the graph
figures in full. The figures come from the explorer at the commit this script was run on; the tests
compare the current explorer against them, so a change that alters the explored graph shows as a diff of
these files, to be reviewed and committed with the change that makes it.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from surfacecheck.explore import arrays, progress
from surfacecheck.explore.bfs import Exploration, explore
from surfacecheck.explore.run import safety_findings
from surfacecheck.explore.shape import masked
from surfacecheck.explore.variants import CORRECT, VARIANTS
from surfacecheck.explore.world import Bounds, World

HERE = Path(__file__).resolve().parent / "explore"

GRAPH_CASES = [  # (name, bounds, variant, reverse, symmetry)
    ("correct-4-2-1", Bounds(4, 2, 1), CORRECT, False, True),
    ("correct-4-1-2-reverse", Bounds(4, 1, 2), CORRECT, True, True),
    ("correct-3-1-1-seq40-no-symmetry", Bounds(3, 1, 1, max_seq=40), CORRECT, False, False),
    ("unbalanced-cut-4-1-1", Bounds(4, 1, 1), VARIANTS["unbalanced-cut"], False, True),
    ("retry-without-progress-4-1-1-reverse", Bounds(4, 1, 1), VARIANTS["retry-without-progress"], True, True),
]
PROGRESS_CASES = [(CORRECT, Bounds(5, 2, 1)), (VARIANTS["retry-without-progress"], Bounds(4, 0, 1)),
                  (VARIANTS["pressure-skipped"], Bounds(4, 1, 1)),
                  (VARIANTS["never-reemit-runtime-context"], Bounds(4, 1, 1))]


def _digest(value) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()


def graph_record(exp: Exploration) -> dict:
    """The explored graph as counts and digests (states and edges in the order found; labels masked, since a
    shared model run reports its representative's token counts), the state violations, the shortest
    counterexample per violated safety property and the verdict."""
    edges = [(src, dst, action, edge._replace(label=masked(edge.label))) for src, dst, action, edge in exp.edges]
    violations = sorted((index, [list(found) for found in items]) for index, items in exp.state_violations.items())
    safety = [[f.property, f.message, f.actions] for f in safety_findings(exp)]
    return {"states": len(exp.states), "edges": len(exp.edges), "max_depth": exp.max_depth,
            "digests": {"states": _digest(list(exp.states)), "depth": _digest(list(exp.depth)), "edges": _digest(edges),
                        "labels": _digest(sorted(edge.label for _s, _d, _a, edge in edges))},
            "state_violations": [[index, found] for index, found in violations], "safety": safety,
            "verdict": "violation" if safety else "ok"}


def progress_record(exp: Exploration) -> dict:
    """The progress findings at k = 1 and 2 (property, message, prefix, loop) and the graph figures."""
    found = {str(k): [[f.property, f.message, list(f.prefix), list(f.loop)] for f in progress.check_progress(exp, k)]
             for k in (1, 2)}
    return {"progress": found, "figures": arrays.graph_figures(exp)}


def _name(bounds: Bounds) -> str:
    return "-".join(str(part) for part in (bounds.events, bounds.tool_pairs, bounds.compactions))


def cases() -> dict[str, dict]:
    """Every golden file's name and content, made with the current explorer."""
    made = {}
    for name, bounds, variant, reverse, symmetry in GRAPH_CASES:
        exp = explore(World(bounds, variant=variant), symmetry=symmetry, reverse=reverse)
        made[f"graph-{name}"] = graph_record(exp)
    for variant, bounds in PROGRESS_CASES:
        made[f"progress-{variant.name}-{_name(bounds)}"] = progress_record(explore(World(bounds, variant=variant)))
    return made


def main() -> int:
    HERE.mkdir(exist_ok=True)
    for name, record in cases().items():
        (HERE / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {HERE / name}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
