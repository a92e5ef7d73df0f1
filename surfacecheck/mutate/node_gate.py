"""The compaction contract as StrykerJS's gate over a Node framework (``mutate --runtime gemini``, ``ai``).

``python -m surfacecheck.mutate.gate serve --framework RUNTIME`` runs this worker behind the same Stryker test
runner as dsh (``runtimes/dsh/mutate/surfacecheck-runner.mjs``). Its units are the framework gate's scenarios
(:mod:`.framework_gate`: every registered finding's witness, then the fixed-seed contract search sessions), run
against the runtime's Node adapter on the working copy (``SURFACECHECK_CONVERSATION_NODE_MODULES``) with
``SURFACECHECK_MUTATE`` set, so the adapter answers the ops of ``runtimes/conversation-node/mutation.mjs``.

* ``prepare``: one adapter, unmutated; the search sessions are recorded on it, then every scenario runs twice
  (the first time as its own Stryker test, so the instrumented code counts the mutants it reaches for it); one
  whose verdict does not repeat is dropped, and a witness that no longer breaks its registered promise fails the
  dry run (the score is void).
* the dry run answers those units, their times and their coverage (``{static, perTest}``).
* a mutant: the units Stryker sends (those that reach it), witnesses first, each verdict compared with the
  unmutated one; the first that differs kills it. A mutant Stryker activates at run time is switched on in the
  one adapter (``stryker_mutant``); a static one gets a fresh adapter started with ``__STRYKER_ACTIVE_MUTANT__``.
  An adapter that hangs past ``--timeout`` or dies makes the run inconclusive (a timeout, a crash: never a kill)
  and is restarted for the next mutant.
"""
from __future__ import annotations

import os
import time

from surfacecheck.core.protocol import RuntimeUnavailable

from . import framework_gate as gate

ACTIVE_MUTANT = "__STRYKER_ACTIVE_MUTANT__"


class NodeWorker:
    """One serving gate process's adapter and unmutated verdicts (see the module docstring)."""

    def __init__(self, runtime: str, examples: int, timeout: float):
        from surfacecheck.contract.driver import default_provider

        self.runtime, self.examples, self.timeout = runtime, examples, timeout
        self.provider = default_provider(runtime)
        self.adapter = None
        self.baselines: list[gate.Baseline] = []
        self.coverage: dict = {"static": {}, "perTest": {}}
        self.dropped: list[str] = []
        self.void: tuple[str, str] | None = None
        self.seconds = 0.0

    def _open(self, mutant: str | None = None):
        from surfacecheck.runtime.conversation.node import open_node_runtime

        saved = os.environ.pop(ACTIVE_MUTANT, None)
        os.environ["SURFACECHECK_MUTATE"] = "1"
        if mutant is not None:
            os.environ[ACTIVE_MUTANT] = mutant
        try:
            return open_node_runtime(self.runtime, self.timeout)
        finally:
            os.environ.pop(ACTIVE_MUTANT, None)
            if saved is not None:
                os.environ[ACTIVE_MUTANT] = saved

    def persistent(self):
        if self.adapter is None:
            self.adapter = self._open()
        return self.adapter

    def drop_adapter(self) -> None:
        if self.adapter is not None:
            self.adapter.close()
            self.adapter = None

    def prepare(self) -> dict:
        started = time.perf_counter()
        try:
            adapter = self.persistent()
            scenarios = gate.witnesses(self.runtime)
            scenarios += gate.search_scripts(adapter, self.runtime, self.provider, examples=self.examples)
            adapter.call("stryker_coverage", {})  # what the recording reached is nobody's
            for scenario in scenarios:
                adapter.call("stryker_test", {"test": scenario.id})
                began = time.perf_counter()
                found = gate.verdict(adapter, scenario, self.runtime)
                seconds = time.perf_counter() - began
                adapter.call("stryker_test", {"test": None})
                if gate.verdict(adapter, scenario, self.runtime) != found:
                    self.dropped.append(scenario.id)
                    continue
                if scenario.promise and scenario.promise not in gate.broken(found):
                    self.void = (scenario.id, f"{scenario.id} does not break {scenario.promise} on the unmutated "
                                              f"(instrumented) code; its verdict: {found}")
                    break
                self.baselines.append(gate.Baseline(scenario, found, frozenset(), seconds))
            coverage = adapter.call("stryker_coverage", {})
        except RuntimeUnavailable as exc:
            self.void = ("prepare", f"the unmutated adapter is unavailable ({exc.kind}: {exc})")
            self.drop_adapter()
            coverage = {}
        kept = {b.scenario.id for b in self.baselines}
        self.coverage = {"static": coverage.get("static") or {},
                         "perTest": {t: hits for t, hits in (coverage.get("perTest") or {}).items() if t in kept}}
        self.seconds = time.perf_counter() - started
        return {"status": "prepared", "recorded": len(self.baselines), "units": len(self.baselines) + len(self.dropped),
                "not_recorded": {s: "verdict did not repeat" for s in self.dropped},
                "seconds": round(self.seconds, 2)}

    def summary(self) -> dict:
        kinds: dict[str, int] = {}
        for b in self.baselines:
            kind = b.scenario.id.split(":", 1)[0]
            kinds[kind] = kinds.get(kind, 0) + 1
        return {"by_kind": kinds, "dropped_unstable": self.dropped, "prepare_seconds": round(self.seconds, 1),
                "broken_in_search": sorted({p for b in self.baselines if b.scenario.id.startswith("search:")
                                            for p in gate.broken(b.verdict)}),
                "gate_settings": {"seed": gate.SEED, "examples": self.examples, "steps": gate.STEPS,
                                  "timeout_per_call_s": self.timeout}}

    def run(self, request: dict) -> dict:
        mutant = request.get("mutant")
        if mutant is None:
            return self.dry_run()
        wanted = request.get("tests")
        chosen = [b for b in self.baselines if wanted is None or b.scenario.id in set(wanted)]
        bail = request.get("bail", True)
        fresh = request.get("activation") != "runtime"
        ran, status, first, message, kind = [], "passed", None, "", ""
        adapter = None
        try:
            adapter = self._open(str(mutant)) if fresh else self.persistent()
            if not fresh:
                adapter.call("stryker_mutant", {"mutant": str(mutant)})
            for base in chosen:
                began = time.perf_counter()
                found = gate.verdict(adapter, base.scenario, self.runtime)
                same = found == base.verdict
                ran.append({"id": base.scenario.id, "status": "passed" if same else "failed",
                            "seconds": time.perf_counter() - began, "message": "" if same else _difference(base.verdict, found)})
                if not same and status == "passed":
                    status, first, message = "failed", base.scenario.id, ran[-1]["message"]
                    if bail:
                        break
            if not fresh:
                adapter.call("stryker_mutant", {"mutant": None})
        except RuntimeUnavailable as exc:
            status, kind = "inconclusive", exc.kind
            first = chosen[len(ran)].scenario.id if len(ran) < len(chosen) else "activation"
            message = f"{exc.kind}: {str(exc).splitlines()[0] if str(exc) else ''}"
            if not fresh:
                self.drop_adapter()
        finally:
            if fresh and adapter is not None:
                adapter.close()
        return {"status": status, "tests": ran, "first": first, "message": message, "kind": kind}

    def dry_run(self) -> dict:
        tests = [{"id": b.scenario.id, "status": "passed", "seconds": b.seconds, "message": ""}
                 for b in self.baselines]
        status, first, message = "passed", None, ""
        if self.void is not None:
            status, (first, message) = "failed", self.void
            tests.append({"id": first, "status": "failed", "seconds": 0.0, "message": message})
        return {"status": status, "tests": tests, "first": first, "message": message, "kind": "",
                "coverage": self.coverage, "framework": self.summary()}

    def close(self) -> None:
        self.drop_adapter()


def _difference(unmutated: tuple, mutant: tuple) -> str:
    """What a kill changed, short: the verdict items only one side has."""
    gone = [list(x) for x in unmutated if x not in mutant]
    new = [list(x) for x in mutant if x not in unmutated]
    return f"verdict differs: unmutated only {gone}; mutant only {new}"[:600]
