"""``surfacecheck e2e dsh --workers N`` / ``--scheduler ADDRESS``: one script is one work item on Dask.

Rule: the report must not depend on the worker count. So the scripts are decided before anything is
handed out: ``--generate K`` draws its K scripts in this process (``draw_scripts(K, seed)``: one seeded
Hypothesis run, script i the same whatever runs it), and only their *execution* is distributed; each
work item is ``(script, source, options)`` and :func:`run_item` is :func:`.run.run_one` on it (a fresh
throwaway home, workspace, model server and runtime per script, nothing shared). Outcomes come back in
script order and are folded exactly as in one process, including the stop at the first script that
found the runtime not installed. Shrinking stays in this process: each Hypothesis shrink step depends
on the previous run's verdict, so there is nothing to spread, and the shrunk script is the same.

Bundles and ``--keep`` folders are written by the worker that ran the script; with ``--scheduler`` on
other machines they land on those machines' disks, at the same paths.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from surfacecheck.core import cluster

from .run import INSTALL_HINT, SPEC_VERSION, E2EReport, Options, ScriptOutcome, run_one


def run_item(item: tuple[Any, str, Options]) -> ScriptOutcome:
    """One work item: run, audit and judge one script (pure: its result depends on the item alone)."""
    script, source, options = item
    outcome, _run = run_one(script, options, source)
    return outcome


def run_scripts_on(pool: cluster.Pool, scripts, options: Options, *, mode: str, seed: int | None = None,
                   done=None) -> E2EReport:
    """:func:`.run.run_scripts` with every script on ``pool``; ``done(outcome)`` as each one finishes.
    Raises :class:`cluster.WorkerLost` when Dask gives up on a script (the caller reports inconclusive)."""
    portable = replace(options, err=None)  # a stream does not travel; run_one never writes to it
    items = [(script, source, portable) for script, source in scripts]
    outcomes = pool.map(run_item, items, label="e2e-script",
                        done=None if done is None else (lambda _index, outcome: done(outcome)))
    report = E2EReport(mode=mode, runtime=options.runtime, seed=seed)
    for outcome in outcomes:
        report.scripts.append(outcome)
        if outcome.not_installed:  # as run_scripts: the report stops at the first such script
            report.error = INSTALL_HINT if options.runtime == SPEC_VERSION else outcome.message
            break
    return report
