"""The gate a mutant must get past, as named units (a mutation tool's "tests").

A unit is one check ``surfacecheck check`` runs anyway, small enough to be told apart in coverage: the protocol
conformance sample (``protocol``), one log appended event by event next to the model (``log:SOURCE/NAME``, the
runtime stage's corpus equivalence), one registered finding's witness replayed in lockstep (``witness:ID``, the
findings stage: dsh must still do what the registry says it does), the Hypothesis lockstep machines at a fixed
seed (``verify``). Units run cheapest first and the gate stops at the first failure (a kill needs one).

Each outcome is ``passed``, ``failed`` (the runtime did something the model or the registry does not: the mutant
is killed) or ``inconclusive`` (the runtime hung, died or broke the protocol: not a kill, reported apart).
"""
from __future__ import annotations

import functools
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

STAGES = ("runtime", "findings", "verify")
"""The stages a gate may be built from (``--gate``): the ones a runtime team's CI runs against its runtime."""
PASSED, FAILED, INCONCLUSIVE = "passed", "failed", "inconclusive"
SEED = 20261130  # verify's seed inside the gate (the ci profile's): fixed, so the examples are the same every time


@dataclass(frozen=True)
class Unit:
    """One gate unit: ``id`` (what the mutation tool's report names), the stage it comes from, how to run it."""

    id: str
    stage: str
    run: Callable[["Shared"], "Outcome"]


@dataclass(frozen=True)
class Outcome:
    status: str
    message: str = ""
    kind: str = ""  # for inconclusive: the RuntimeUnavailable kind (timeout, exited, protocol, unsupported)
    seconds: float = 0.0


class Shared:
    """What units of one gate run share: the runtime spelling, the per-call timeout, and one runtime process for
    the protocol, log and witness units, reset between them (a process per unit would cost its start-up ~200
    times per mutant). ``name_unit`` tells that process which unit is running (mutation coverage per unit); it is
    a no-op unless coverage is collected."""

    def __init__(self, spec: str, timeout: float, corpus: Path | None, verify_profile: str, collect: bool):
        self.spec, self.timeout, self.corpus, self.verify_profile, self.collect = (
            spec, timeout, corpus, verify_profile, collect)
        self._runtime = None
        self.recorder = None  # while set (pristine.record), units see the runtime through it

    def runtime(self):
        from surfacecheck.runtime.select import open_runtime

        if self._runtime is None:
            self._runtime = open_runtime(self.spec, timeout=self.timeout)
        return self._runtime if self.recorder is None else self.recorder

    @property
    def batched(self) -> bool:
        """A dsh adapter serving mutation testing answers ``replay`` (many requests, one round trip)."""
        return self.spec.startswith("dsh") and bool(os.environ.get("SURFACECHECK_MUTATE"))

    def name_unit(self, unit_id: str) -> None:
        if self.collect and self.spec.startswith("dsh"):
            self.runtime().call("stryker_test", {"test": unit_id})

    def close(self) -> None:
        if self._runtime is not None:
            try:
                self._runtime.close()
            finally:
                self._runtime = None


def _guarded(body: Callable[[], Outcome]) -> Outcome:
    from surfacecheck.core.protocol import RuntimeUnavailable

    started = time.perf_counter()
    try:
        outcome = body()
    except RuntimeUnavailable as exc:
        outcome = Outcome(INCONCLUSIVE, f"{exc.kind}: {str(exc).splitlines()[0] if str(exc) else exc.kind}", exc.kind)
    return Outcome(outcome.status, outcome.message, outcome.kind, round(time.perf_counter() - started, 3))


def _protocol(shared: Shared) -> Outcome:
    from surfacecheck.runtime.stage import conformance

    def body():
        runtime = shared.runtime()
        shared.name_unit("protocol")
        run = conformance(shared.spec, timeout=shared.timeout, runtime=runtime)
        if run["divergences"]:
            d = run["divergences"][0]
            return Outcome(FAILED, f"protocol step {d['step']} {d['op']}: expected {str(d['expected'])[:300]}, "
                                   f"observed {str(d['observed'])[:300]}")
        if run["schema_problems"]:
            return Outcome(FAILED, f"protocol: {run['schema_problems'][0]}")
        return Outcome(PASSED)
    return _guarded(body)


@dataclass(frozen=True)
class Transcript:
    """A log's requests in the order the runtime stage's comparison makes them (``compare_log``: each append, the
    state after every replacement or refusal, the state at the end) with the model's answers, computed once per
    gate process: the model's answers do not depend on the runtime under test."""

    calls: tuple[tuple[str, dict], ...]
    expected: tuple[tuple[object, str, object], ...]  # (seq or "end", op, the model's answer)


_TRANSCRIPTS: dict[Path, Transcript] = {}


def transcript(path: Path) -> Transcript:
    from surfacecheck.model.event import ABSENT
    from surfacecheck.model.jsonl import read_log
    from surfacecheck.runtime.embedded.stage import END_CALLS, STATE_CALLS, _answer
    from surfacecheck.runtime.model_runtime import ModelRuntime

    if path not in _TRANSCRIPTS:
        model, calls, expected = ModelRuntime(), [], []
        for event in read_log(path).events:
            wire = {k: v for k, v in event.to_json().items() if v is not ABSENT and k not in ("seq", "ignorable")}
            answer = _answer(model, "append", {"event": wire})
            calls.append(("append", {"event": wire}))
            expected.append((event.seq, "append", answer))
            if isinstance(event.surface_op, dict) or "error" in answer:
                for op, args in STATE_CALLS:
                    calls.append((op, args))
                    expected.append((event.seq, op, _answer(model, op, args)))
        for op, args in END_CALLS + STATE_CALLS:  # compare_log's order
            calls.append((op, args))
            expected.append(("end", op, _answer(model, op, args)))
        _TRANSCRIPTS[path] = Transcript(tuple(calls), tuple(expected))
    return _TRANSCRIPTS[path]


def _shown(result):
    """The runtime stage's reading of an answer: a ``message-shape`` refusal is compared by its rule alone."""
    error = result.get("error") if isinstance(result, dict) else None
    if isinstance(error, dict) and error.get("rule") == "message-shape":
        return {**result, "error": {"rule": "message-shape"}}
    return result


def replay_divergence(path: Path, runtime, *, batched: bool = True) -> dict | None:
    """``compare_log``'s verdict (its first divergence, or None) against the model's recorded answers: the same
    requests, order and comparisons. ``batched``: every request of the log in one ``replay`` round trip (a dsh
    adapter serving mutation testing); else one request at a time, as ``compare_log`` makes them."""
    from surfacecheck.core.protocol import OPTIONAL_OPS
    from surfacecheck.runtime.embedded.stage import _answer, _optional_answer, not_served

    script = transcript(path)
    runtime.call("reset", {})
    if batched:
        answers = runtime.call("replay", {"calls": [list(call) for call in script.calls]})["answers"]
    else:
        answers = []
        for op, args in script.calls:
            if op in OPTIONAL_OPS:  # the end-of-log persistence views: compared where the runtime serves them
                answers.append({"result": _optional_answer(runtime, op, args)})
            else:
                answers.append({"result": _answer(runtime, op, args)})  # a ProtocolError propagates: a crash
            if _shown(answers[-1]["result"]) != script.expected[len(answers) - 1][2]:
                break
    for index, (seq, op, expected) in enumerate(script.expected):
        if index >= len(answers):
            return {"seq": seq, "op": op, "expected": expected, "observed": "(no answer: the replay stopped)"}
        answer = answers[index]
        if op in OPTIONAL_OPS and (answer.get("error", {}).get("type") == "unknown-op" or not_served(answer.get("result"))):
            continue  # an optional view the runtime does not serve (a batched replay serves them all)
        if "error" in answer:  # what a per-request client raises as ProtocolError: the runtime stage's crash
            return {"seq": seq, "op": "crash", "error": f"ProtocolError({answer['error']['type']!r}, "
                                                        f"{answer['error']['message']!r})"}
        observed = _shown(answer["result"])
        if observed != expected:
            return {"seq": seq, "op": op, "expected": expected, "observed": observed}
    return None


def _log(source: str, path: Path) -> Callable[[Shared], Outcome]:
    def run(shared: Shared) -> Outcome:
        from surfacecheck.core.protocol import RuntimeUnavailable
        from surfacecheck.runtime.stage import _tools_template_divergence

        def body():
            runtime = shared.runtime()
            shared.name_unit(f"log:{source}/{path.name}")

            try:
                divergence = replay_divergence(path, runtime, batched=shared.batched)
            except RuntimeUnavailable:
                raise
            except Exception as exc:  # noqa: BLE001 - a shape the runtime chokes on (the runtime stage's rule)
                divergence = None if type(exc).__name__ == "LogFormatError" else {"op": "crash", "error": repr(exc)}
            if divergence is None or _tools_template_divergence({"source": source, "log": path.name, **divergence},
                                                                shared.corpus):
                return Outcome(PASSED)
            return Outcome(FAILED, f"{source}/{path.name} seq {divergence.get('seq')} {divergence['op']}: expected "
                                   f"{str(divergence.get('expected'))[:300]}, observed "
                                   f"{str(divergence.get('observed', divergence.get('error')))[:300]}")
        return _guarded(body)
    return run


def _witness(finding) -> Callable[[Shared], Outcome]:
    def run(shared: Shared) -> Outcome:
        from surfacecheck.findings.run import reproduces
        from surfacecheck.properties.trace_check import read_valid_trace

        def body():
            trace = read_valid_trace(finding.trace_path)
            runtime = shared.runtime()
            shared.name_unit(f"witness:{finding.id}")
            if reproduces(trace, shared.spec, shared.timeout, runtime=runtime):
                return Outcome(PASSED)
            return Outcome(FAILED, f"witness {finding.id} ({finding.promise}) no longer reproduces on {shared.spec}: "
                                   f"the runtime diverges from the model or keeps the promise dsh breaks")
        return _guarded(body)
    return run


_RECORDED: dict[str, dict[str, list]] = {}


def recorded_examples(profile: str) -> dict[str, list]:
    """Every example verify's machines run at ``profile`` and the gate's fixed seed, per level, as steps.

    The machines build each next step from the oracle — the model, whenever a model is in lockstep — so with a
    fixed seed Hypothesis generates the same examples against any runtime until the first divergence, and a
    divergence is all a kill needs. The examples are therefore generated once per gate process, on the model, and
    replayed in lockstep on each mutant: the same steps and comparisons as verify, without Hypothesis's per-step
    cost (``tests/test_mutate_units.py`` checks the recording equals a verify run on dsh, step for step)."""
    from surfacecheck.core.protocol import LEVELS
    from surfacecheck.runtime.select import open_runtime
    from surfacecheck.verify.runner import run_level
    from surfacecheck.verify.replay import ensure_variants

    if profile not in _RECORDED:
        ensure_variants()
        levels = {}
        for level in LEVELS:
            model, steps = open_runtime("model"), []
            try:
                result = run_level(model, None, level, profile, SEED, shrink=False, record=steps)
            finally:
                model.close()
            if result.status != "ok":
                raise RuntimeError(f"verify's {level} machine does not pass on the model: {result.to_json()}")
            levels[level] = steps
        _RECORDED[profile] = levels
    return _RECORDED[profile]


def case_of(step) -> str:
    """What kind of step a step is: its operation and its label with every unsigned number masked (a boundary's
    signed offset, a failure class, a citation form, an input form stay apart; seqs and sizes do not)."""
    label = re.sub(r"(\s[+-])?[0-9]+", lambda m: m.group(0) if m.group(1) else "#", step.label or "")
    return f"{step.op} {label}"


@functools.cache
def sweep_examples() -> dict[str, list]:
    """Per level, the fewest ``ci`` examples (shortest first) that together meet every kind of step the ``ci``
    profile generates (:func:`case_of`). The gate replays them after the smoke examples: every boundary case, rare
    path and input form the machines write, for about a third of the ``ci`` profile's steps."""
    cover = {}
    for level, examples in recorded_examples("ci").items():
        met, kept = set(), []
        for steps in sorted(examples, key=len):
            cases = {case_of(step) for step in steps}
            if cases - met:
                kept.append(steps)
                met |= cases
        cover[level] = kept
    return cover


def _verify(shared: Shared) -> Outcome:
    from surfacecheck.properties.monitors import lookup
    from surfacecheck.runtime.select import open_runtime
    from surfacecheck.properties.stateful.lockstep import Lockstep
    from surfacecheck.runtime.dsh import settled_traces
    from surfacecheck.verify.run import REGRESSIONS, replay_regressions
    from surfacecheck.verify.runner import monitors_for

    def body():
        examples = recorded_examples(shared.verify_profile)
        if shared.verify_profile == "smoke":
            sweep = sweep_examples()
            examples = {level: [*steps, *sweep.get(level, [])] for level, steps in examples.items()}
        runtime = shared.runtime()
        shared.name_unit("verify")
        levels = [lvl for lvl in examples if lvl in runtime.hello().get("levels", [])]
        for entry in replay_regressions(REGRESSIONS, shared.spec, levels, shared.timeout, runtime=runtime,
                                        also=settled_traces(shared.spec)):
            if entry["verdict"].startswith("failing"):
                return Outcome(FAILED, f"verify: regression {entry['trace'].rsplit('/', 1)[-1]}: {entry['detail']}")
            if entry["verdict"] == "inconclusive":
                return Outcome(INCONCLUSIVE, f"verify: regression {entry['trace']}: {entry['detail']}", "exited")
        reference = open_runtime("model")
        try:
            for level in levels:
                for number, steps in enumerate(examples[level], 1):
                    lockstep = Lockstep(runtime, reference, monitors=[lookup(n).factory() for n in monitors_for(level)])
                    for step in steps:
                        _result, violation = lockstep.run(step)
                        if violation is not None:
                            return Outcome(FAILED, f"verify {level} example {number} step {len(lockstep.steps)} "
                                                   f"{step.op}: {violation.property}: {violation.message}"[:600])
        finally:
            reference.close()
        return Outcome(PASSED)
    return _guarded(body)


def gate_units(stages: tuple[str, ...], corpus: Path | None) -> list[Unit]:
    """The units of a gate of ``stages``, in the fixed order they run (cheapest first, so a kill comes early and
    the order, hence which unit kills, never depends on timing): the registry's witnesses (a few steps each), the
    protocol sample, the logs from shortest to longest, verify."""
    units: list[Unit] = []
    if "findings" in stages:
        from surfacecheck.findings import registry

        units += [Unit(f"witness:{f.id}", "findings", _witness(f)) for f in registry.load()]
    if "runtime" in stages:
        from surfacecheck.runtime.embedded.stage import log_paths

        units.append(Unit("protocol", "runtime", _protocol))
        logs = sorted(log_paths(corpus), key=lambda sp: (sp[1].stat().st_size, sp[0], sp[1].name))
        units += [Unit(f"log:{source}/{path.name}", "runtime", _log(source, path)) for source, path in logs]
    if "verify" in stages:
        units.append(Unit("verify", "verify", _verify))
    return units
