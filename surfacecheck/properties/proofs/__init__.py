"""Z3 proof obligations over the reference model, each with negative controls.

``OBLIGATIONS`` lists them in issue order; :func:`run_obligations` runs a selection at a bound and
writes every counterexample trace. Each module states its rule and cites its spec section:

1. :mod:`.cut_legality` — spec 7 range selection;      2. :mod:`.pairing_ids` — spec 3 count vs ids;
3. :mod:`.incremental_pairing` — spec 3 cache;          4. :mod:`.generation_progress` — spec 2.1, 9.2, 10.2;
5. :mod:`.projection_equivalence` — spec 5.1 (k-induction, unbounded);
6. :mod:`.smallest_span` — spec 8.2 frame and shrink rule, 9.4 retry.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from .obligation import UNKNOWN, Obligation, ObligationResult, Stopwatch
from .symexec import reset_terms

DEFAULT_BOUND = 24


def _obligations() -> tuple[Obligation, ...]:
    from . import (cut_legality, generation_progress, incremental_pairing, pairing_ids, projection_equivalence,
                   smallest_span)

    return (
        Obligation(cut_legality.NAME, cut_legality.SECTION, "range selection: balanced, head-anchored, nearest cut",
                   cut_legality.run, DEFAULT_BOUND),
        Obligation(pairing_ids.NAME, pairing_ids.SECTION, "count-balanced == id-closed under unique answering ids",
                   pairing_ids.run, DEFAULT_BOUND),
        Obligation(incremental_pairing.NAME, incremental_pairing.SECTION, "cached cuts == full fold",
                   incremental_pairing.run, DEFAULT_BOUND),
        Obligation(generation_progress.NAME, generation_progress.SECTION, "replaces count; retries need progress",
                   generation_progress.run, None),
        Obligation(projection_equivalence.NAME, projection_equivalence.SECTION, "projection == recount, any length",
                   projection_equivalence.run, None),
        Obligation(smallest_span.NAME, smallest_span.SECTION, "spans <= 103 never shrink; retry picks the checkpoint",
                   smallest_span.run, DEFAULT_BOUND),
    )


PROPERTIES = {
    # obligation -> the catalogue properties it proves
    "cut-legality": ("cut-legality",),
    "pairing-ids": ("pairing-ids",),
    "incremental-pairing": ("incremental-pairing",),
    "generation-progress": ("generation-counts-replaces", "overflow-retry-after-progress"),
    "projection-equivalence": ("projection-equals-recount",),
    "smallest-compactable-span": ("smallest-compactable-span",),
}


def obligations() -> tuple[Obligation, ...]:
    return _obligations()


def names() -> list[str]:
    return [o.name for o in obligations()]


def write_traces(result: ObligationResult, trace_dir: Path, command: str | None = None) -> None:
    """Write the obligation's own counterexample (if refuted) and each control's trace into ``trace_dir``."""
    from dataclasses import replace

    from surfacecheck.core.trace import write_trace

    if result.trace is not None:
        path = trace_dir / f"prove-{result.name}.jsonl"
        write_trace(path, replace(result.trace, command=command))
        result.trace_path = str(path)
    for control in result.controls:
        if control.trace is not None:
            path = trace_dir / f"prove-{result.name}--{control.name}.jsonl"
            write_trace(path, replace(control.trace, command=command))
            control.trace_path = str(path)


def run_obligations(bound: int = DEFAULT_BOUND, only: list[str] | None = None, trace_dir: Path | None = None,
                    command: str | None = None, progress: Callable[[str], None] | None = None) -> list[ObligationResult]:
    """Run the selected obligations (all by default) at ``bound``; unknown names raise ``KeyError``."""
    chosen = obligations()
    if only:
        known = {o.name: o for o in chosen}
        missing = [name for name in only if name not in known]
        if missing:
            raise KeyError(f"unknown obligation {', '.join(missing)}; known: {', '.join(known)}")
        chosen = tuple(o for o in chosen if o.name in only)
    results = []
    for obligation in chosen:
        if progress:
            progress(obligation.name)
        watch = Stopwatch()
        try:
            result = obligation.run(bound)
        except Exception as exc:  # noqa: BLE001 - a solver or exploration limit is "unknown", never a pass
            result = ObligationResult(obligation.name, obligation.section, UNKNOWN, bound, watch.seconds,
                                      notes={"error": f"{type(exc).__name__}: {exc}"})
        reset_terms()
        if trace_dir is not None:
            write_traces(result, Path(trace_dir), command)
        results.append(result)
    return results
