"""The gate process a mutation tool drives: ``python -m surfacecheck.mutate.gate serve|once``.

``serve`` (StrykerJS's test runner, ``runtimes/dsh/mutate/surfacecheck-runner.mjs``) answers one JSON request per
stdin line — ``{"mutant": ID or null, "tests": [unit ids] or null, "coverage": bool, "bail": bool}`` — with one
JSON line: the run's ``status`` (passed / failed / inconclusive), each unit run, the first failure, and with
``coverage`` the mutant coverage the runtime processes recorded per unit. The mutant is activated the way
Stryker's instrumented code expects, by ``__STRYKER_ACTIVE_MUTANT__`` in every runtime process the units start.
Python and the suite are loaded once per Stryker worker, not once per mutant.

``{"prepare": true}`` (the runner's first request, before any timed run) records every unit on the unmutated
runtime (``pristine.py``); afterwards a unit whose every answer has the unmutated digest passes in one round trip
instead of its full run, and any other goes down its full path — the same verdicts, a survivor several times
cheaper. ``--no-shortcut`` runs every unit in full.

``serve --framework --runtime gemini|ai`` serves the compaction contract's scenarios instead of the dsh gate's
stages (``node_gate.py``; ``mutate --runtime gemini``, ``ai``): the same requests and replies.

``once`` runs the whole gate and exits 0 (passed), 1 (failed: a kill) or 3 (inconclusive), for tools that run
a command per mutant (mutmut).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from .units import FAILED, INCONCLUSIVE, PASSED, STAGES, Shared, Unit, gate_units

ACTIVE_MUTANT = "__STRYKER_ACTIVE_MUTANT__"
COVERAGE_DIR = "SURFACECHECK_STRYKER_COVERAGE_DIR"
CURRENT_UNIT = "SURFACECHECK_STRYKER_TEST"


def merge_coverage(folder: Path) -> dict:
    """The ``{static, perTest}`` mutant coverage of every runtime process that left a dump in ``folder``."""
    merged: dict = {"static": {}, "perTest": {}}
    for dump in sorted(folder.glob("coverage-*.json")):
        data = json.loads(dump.read_text(encoding="utf-8")) or {}
        for mutant, hits in (data.get("static") or {}).items():
            merged["static"][mutant] = merged["static"].get(mutant, 0) + hits
        for test, counts in (data.get("perTest") or {}).items():
            into = merged["perTest"].setdefault(test, {})
            for mutant, hits in counts.items():
                into[mutant] = into.get(mutant, 0) + hits
    return merged


def run_gate(units: list[Unit], shared_args: dict, *, mutant: str | None, tests: list[str] | None = None,
             coverage: bool = False, bail: bool = True, recordings: dict | None = None,
             persistent: Shared | None = None) -> dict:
    """Run ``units`` (those named in ``tests``, in gate order) with ``mutant`` active; stop at the first failure
    when ``bail``. An inconclusive unit ends the run: nothing after a dead runtime can be trusted. A unit with a
    pristine recording tries its shortcut first (never while coverage is collected). ``persistent``: a runtime
    process that imported dsh unmutated, the mutant switched on in it (``stryker_mutant``) for this run only —
    else a fresh process per run, the mutant active from its start (``__STRYKER_ACTIVE_MUTANT__``)."""
    from surfacecheck.core.protocol import RuntimeUnavailable

    from .pristine import shortcut

    chosen = units if tests is None else [u for u in units if u.id in set(tests)]
    saved = {name: os.environ.get(name) for name in (ACTIVE_MUTANT, COVERAGE_DIR, CURRENT_UNIT)}
    folder = tempfile.mkdtemp(prefix="surfacecheck-mutant-coverage-") if coverage else None
    if mutant is None:
        os.environ.pop(ACTIVE_MUTANT, None)
    else:
        os.environ[ACTIVE_MUTANT] = str(mutant)
    if folder:
        os.environ[COVERAGE_DIR] = folder
    shared = persistent if persistent is not None else Shared(collect=coverage, **shared_args)
    ran, status, first, message, kind = [], PASSED, None, "", ""
    try:
        if persistent is not None:
            try:
                persistent.runtime().call("stryker_mutant", {"mutant": str(mutant)})
            except RuntimeUnavailable as exc:
                status, first, message, kind = INCONCLUSIVE, "activation", str(exc).splitlines()[0], exc.kind
                chosen = []
        for unit in chosen:
            os.environ[CURRENT_UNIT] = unit.id
            outcome = None
            if recordings and mutant is not None and not coverage and unit.id in recordings:
                outcome = shortcut(recordings[unit.id], shared)
            if outcome is None:
                outcome = unit.run(shared)
            ran.append({"id": unit.id, "status": outcome.status, "seconds": outcome.seconds,
                        "message": outcome.message})
            if outcome.status == INCONCLUSIVE:
                status, first, message, kind = INCONCLUSIVE, unit.id, outcome.message, outcome.kind
                break
            if outcome.status == FAILED and status == PASSED:
                status, first, message = FAILED, unit.id, outcome.message
                if bail:
                    break
    finally:
        if persistent is None or status == INCONCLUSIVE:
            shared.close()  # a persistent runtime that hung or died is reopened, unmutated, before the next run
        else:
            try:
                persistent.runtime().call("stryker_mutant", {"mutant": None})
            except RuntimeUnavailable:
                persistent.close()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    result = {"status": status, "tests": ran, "first": first, "message": message, "kind": kind}
    if folder:
        import shutil

        result["coverage"] = merge_coverage(Path(folder))
        shutil.rmtree(folder, ignore_errors=True)
    return result


class Worker:
    """What a serving gate keeps between runs (``serve`` with shortcuts): one runtime process that imported dsh
    unmutated, in which each mutant Stryker activates at run time is switched on for its run alone (a fresh process
    per mutant would cost its start-up, ~0.4 s, 2,600 times), and the pristine recordings of the units. A mutant
    in code that runs at import (Stryker's ``static`` activation) still gets a fresh process."""

    def __init__(self, units: list[Unit], shared_args: dict):
        self.units, self.shared_args = units, shared_args
        self.shared = Shared(collect=False, **shared_args)
        self.recordings: dict = {}

    def open(self) -> Shared:
        """The persistent runtime, (re)started with no mutant in its environment."""
        saved = os.environ.pop(ACTIVE_MUTANT, None)
        try:
            self.shared.runtime()
        finally:
            if saved is not None:
                os.environ[ACTIVE_MUTANT] = saved
        return self.shared

    def prepare(self) -> dict:
        """Record the units on the unmutated runtime; a log unit is left out: it already makes one round trip,
        checked against the model's answers, so a digest replay saves it nothing (measured: 2.2 s against 2.0 s
        for the 179 logs)."""
        from .pristine import record

        started = time.perf_counter()
        self.recordings, skipped = record([u for u in self.units if not u.id.startswith("log:")], self.open())
        return {"status": "prepared", "recorded": len(self.recordings), "units": len(self.units),
                "not_recorded": skipped, "seconds": round(time.perf_counter() - started, 2)}

    def run(self, request: dict) -> dict:
        runtime_activated = request.get("activation") == "runtime" and request.get("mutant") is not None \
            and not request.get("coverage")
        return run_gate(self.units, self.shared_args, mutant=request.get("mutant"), tests=request.get("tests"),
                        coverage=bool(request.get("coverage")), bail=request.get("bail", True),
                        recordings=self.recordings, persistent=self.open() if runtime_activated else None)

    def close(self) -> None:
        self.shared.close()


def _exit_with_parent() -> None:
    """The serving gate's runtimes lead their own sessions. So that none outlives a mutant nobody reads: SIGTERM
    (the Stryker runner's timeout) kills them and exits, and so does the death of the worker that started us."""
    import signal
    import threading

    from surfacecheck.runtime.client import kill_all

    def leave(*_args) -> None:
        kill_all()
        os._exit(143)

    signal.signal(signal.SIGTERM, leave)
    parent = os.getppid()

    def watch():
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                leave()
    threading.Thread(target=watch, daemon=True, name="exit-with-parent").start()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m surfacecheck.mutate.gate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=("serve", "once", "units"))
    p.add_argument("--runtime", required=True, help="the runtime spelling the units run against")
    p.add_argument("--gate", default=",".join(STAGES), help=f"comma-separated stages (of {', '.join(STAGES)})")
    p.add_argument("--verify-profile", default="smoke")
    p.add_argument("--corpus", type=Path, default=None)
    p.add_argument("--timeout", type=float, default=10.0, help="per-call runtime timeout (s)")
    p.add_argument("--no-shortcut", action="store_true", help="serve: run every unit in full for every mutant")
    p.add_argument("--framework", action="store_true",
                   help="serve: the units are the compaction contract's scenarios on a Node framework runtime "
                        "(--runtime gemini|ai; node_gate.py), not the dsh gate's stages")
    p.add_argument("--examples", type=int, default=30, help="--framework: contract search sessions in the gate")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    os.environ["SURFACECHECK_MUTATE"] = "1"  # the dsh adapter's mutation hooks (runtimes/dsh/adapter/stryker.mjs)
    if args.framework:
        if args.mode != "serve":
            print("--framework works with serve only", file=sys.stderr)
            return 2
        from .node_gate import NodeWorker

        return _serve([], {}, NodeWorker(args.runtime, args.examples, args.timeout))
    stages = tuple(s for s in args.gate.split(",") if s)
    units = gate_units(stages, args.corpus)
    shared_args = {"spec": args.runtime, "timeout": args.timeout, "corpus": args.corpus,
                   "verify_profile": args.verify_profile}
    if args.mode == "units":
        print(json.dumps([{"id": u.id, "stage": u.stage} for u in units]))
        return 0
    if args.mode == "once":
        result = run_gate(units, shared_args, mutant=os.environ.get(ACTIVE_MUTANT))
        print(json.dumps({k: v for k, v in result.items() if k != "tests"}), file=sys.stderr)
        return {PASSED: 0, FAILED: 1, INCONCLUSIVE: 3}[result["status"]]
    worker = None if args.no_shortcut or not args.runtime.startswith("dsh") else Worker(units, shared_args)
    return _serve(units, shared_args, worker)


def _serve(units: list[Unit], shared_args: dict, worker) -> int:
    """Answer the runner's requests, one JSON line each way, until stdin ends (``worker``: a :class:`Worker`,
    a ``node_gate.NodeWorker``, or None: every run in full)."""
    _exit_with_parent()
    out = sys.stdout
    sys.stdout = sys.stderr  # whatever a unit prints must not break the framing
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            if request.get("prepare"):
                result = worker.prepare() if worker else {"status": "prepared", "recorded": 0, "units": len(units),
                                                          "seconds": 0.0}
            elif worker is not None:
                result = worker.run(request)
            else:
                result = run_gate(units, shared_args, mutant=request.get("mutant"), tests=request.get("tests"),
                                  coverage=bool(request.get("coverage")), bail=request.get("bail", True))
        except Exception as exc:  # noqa: BLE001 - the gate itself broke: an error, never a kill
            import traceback

            traceback.print_exc(file=sys.stderr)
            result = {"status": "error", "tests": [], "first": None, "message": f"{type(exc).__name__}: {exc}",
                      "kind": "gate"}
        out.write(json.dumps(result) + "\n")
        out.flush()
    if worker is not None:
        worker.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
