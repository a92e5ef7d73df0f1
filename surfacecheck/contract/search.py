"""``search(spec, ...) -> SearchResult``: find, for each promise a runtime breaks, a small replayable witness.

A round runs the conversation machine (:mod:`.machine`) under Hypothesis from its own seed (the search's seed plus
the round's number; no database, no deadline, the ``ci`` profile's sizes); the first example that breaks a promise
not yet found is shrunk, minimized (:mod:`.minimize`) and kept as a witness (the steps and the breach, a trace of
the one format, :mod:`surfacecheck.core.trace`). The next round runs with that promise marked found, until
:data:`PATIENCE` rounds in a row find nothing new, every promise is found, or the time budget ends. One runtime process serves the whole search: each example's ``open`` starts a fresh session.

The seed and one line per round go to ``progress`` (stderr by default). A runtime that hangs or dies ends the
search inconclusive (its reason in :attr:`SearchResult.inconclusive`); the witnesses found before it stand.
"""
from __future__ import annotations

import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from hypothesis import HealthCheck, Phase, settings as Settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Unsatisfiable
from hypothesis.reporting import with_reporter
from hypothesis.stateful import run_state_machine_as_test
from tqdm import tqdm

from surfacecheck.core.protocol import CONVERSATION, RuntimeUnavailable
from surfacecheck.core.trace import Step, Trace, Violation, write_trace
from surfacecheck.properties.stateful.base import RuntimeGone
from surfacecheck.runtime.conversation.bridge import open_conversation
from surfacecheck.runtime.select import DEFAULT_TIMEOUT
from surfacecheck.verify.profiles import PROFILES
from surfacecheck.verify.runner import CI_SEED, new_seed, shrink_budget
from surfacecheck.verify.stream import seed_only_stream

from .driver import default_provider
from .machine import BudgetSpent, Judge, PromiseBroken, SearchContext, Witness, machine_class
from .minimize import minimize
from .settings import small
from .session import Breach

PROFILE = {**PROFILES["ci"], "stateful_step_count": 8}
"""The ``ci`` profile's examples and shrink time; a session of at most 8 turns and direct compactions after its
``open`` (each turn runs the runtime's whole agent loop: several model calls and compactions)."""
EXAMPLES = PROFILE["max_examples"]
"""Examples per round."""
MINIMIZE_SECONDS = 30.0
PATIENCE = 2
"""The search ends after so many rounds in a row find nothing new (each round draws from its own seed)."""
BUDGET_SECONDS = 300.0
SEED = CI_SEED


def default_judge() -> Judge:
    """The contract's promises (``surfacecheck/contract/promises.py``)."""
    from . import promises

    return promises.judge


def promise_ids(judge: Judge | None = None) -> tuple[str, ...]:
    """The promises a judge checks: its ``promises`` attribute, else (the default judge) the contract's."""
    if judge is not None:
        return tuple(getattr(judge, "promises", ()))
    from . import promises

    return tuple(p.id for p in promises.PROMISES)


@dataclass
class Found:
    """A broken promise's witness: the breach, the trace steps, the most messages a history held in it."""

    promise: str
    breach: Breach
    steps: tuple[Step, ...]
    messages: int
    round: int
    examples: int  # examples the search had run when it was found

    def to_json(self) -> dict:
        return {"promise": self.promise, "breach": self.breach.to_json(), "steps": len(self.steps),
                "messages": self.messages, "round": self.round, "examples": self.examples}


@dataclass
class SearchResult:
    """What a search found: per promise its witness; examples, seconds, rounds; the seed; why it is
    inconclusive (the runtime hung or died, or refused every session) or None."""

    runtime: str
    provider: str
    seed: int
    promises: tuple[str, ...] = ()  # the promises checked (empty: not known to the search)
    found: dict[str, Found] = field(default_factory=dict)
    examples: int = 0  # every example run, the shrinker's included
    steps: int = 0
    seconds: float = 0.0
    rounds: int = 0
    inconclusive: str | None = None
    stderr: str = ""
    out_of_time: bool = False
    refusals: dict = field(default_factory=dict)  # op -> protocol error answers, and the first one's words
    command: str | None = None
    known: tuple[str, ...] = ()  # promises not searched for (their witnesses are registered and replayed instead)
    exercised: dict = field(default_factory=dict)  # promise -> generated sessions where its premise occurred
    version: dict | None = None  # ``hello``'s ``runtime``: the name and version the runtime announces

    @property
    def exit_code(self) -> int:
        return 1 if self.found else 3 if self.inconclusive else 0

    @property
    def verdict(self) -> str:
        return "broken" if self.found else "inconclusive" if self.inconclusive else "held"

    def trace(self, promise: str) -> Trace:
        """The witness of ``promise`` as a replayable trace."""
        f = self.found[promise]
        b = f.breach
        return Trace(source="contract", level=CONVERSATION, property=promise, steps=f.steps,
                     violation=Violation(promise, b.message, b.step, b.expected, b.observed), runtime=self.runtime,
                     seed=self.seed, command=self.command or search_command(self.runtime, self.provider, self.seed),
                     provider=self.provider, notes={"messages": f.messages, "round": f.round})

    def to_json(self) -> dict:
        return {"runtime": self.runtime, "provider": self.provider, "seed": self.seed, "verdict": self.verdict,
                "exit_code": self.exit_code, "examples": self.examples, "steps": self.steps,
                "seconds": round(self.seconds, 3), "rounds": self.rounds, "out_of_time": self.out_of_time,
                "inconclusive": self.inconclusive, "refusals": self.refusals, "known": list(self.known),
                "exercised": dict(sorted(self.exercised.items())),
                "found": {p: f.to_json() for p, f in self.found.items()}}


def search_command(spec: str, provider: str, seed: int) -> str:
    return f"surfacecheck contract --runtime {shlex.quote(spec)} --provider {shlex.quote(provider)} --seed {seed}"


def trace_name(spec: str, promise: str) -> str:
    """``contract-<runtime>-<promise>.jsonl`` (the runtime's spelling made a file name)."""
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in spec).strip("-") or "runtime"
    return f"contract-{slug}-{promise}.jsonl"


def write_traces(result: SearchResult, directory: str | Path) -> dict[str, Path]:
    """Write every witness to ``directory/contract-<runtime>-<promise>.jsonl``; promise -> path."""
    return {p: write_trace(Path(directory) / trace_name(result.runtime, p), result.trace(p)) for p in result.found}


def hypothesis_settings(examples: int) -> Settings:
    return Settings(max_examples=examples, stateful_step_count=PROFILE["stateful_step_count"], deadline=None,
                    database=None, derandomize=False, print_blob=False, report_multiple_bugs=False,
                    suppress_health_check=list(HealthCheck),
                    phases=(Phase.explicit, Phase.generate, Phase.target, Phase.shrink))


def _stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def search(spec: str, *, seed: int | None = None, examples: int | None = None, provider: str | None = None,
           deadline_seconds: float | None = BUDGET_SECONDS, judge: Judge | None = None,
           progress: Callable[[str], None] | None = None, promises: Sequence[str] | None = None,
           timeout: float = DEFAULT_TIMEOUT, command: str | None = None, patience: int = PATIENCE,
           known: Sequence[str] = ()) -> SearchResult:
    """Search ``spec`` (a conversation-level runtime) for broken promises (see the module docstring).

    ``judge`` (default: the contract's) judges each session; ``promises`` are the ids it checks (default: the
    judge's ``promises``, else the contract's), so the search can stop once every one is found; ``known`` are
    promises it does not look for (a registered witness stands for them). Per promise, the sessions where its
    premise occurred are counted (:mod:`.premises`). ``ValueError`` for a spelling that names no
    conversation-level runtime."""
    say = progress or _stderr
    seed = new_seed("ci" if os.environ.get("CI") else "dev", seed)
    provider = provider or default_provider(spec)
    examples = examples or EXAMPLES
    checked = tuple(promises) if promises is not None else promise_ids(judge)
    judge = judge or default_judge()
    result = SearchResult(spec, provider, seed, checked, command=command, known=tuple(known))
    say(f"contract: runtime {spec}, provider {provider}, seed {seed}")
    began = time.monotonic()
    deadline = None if deadline_seconds is None else began + deadline_seconds
    quiet = 0  # rounds in a row that found nothing new
    try:
        runtime = open_conversation(spec, timeout)
    except RuntimeUnavailable as exc:
        result.inconclusive, result.stderr = f"{exc.kind}: {exc}", exc.stderr
        return result
    try:
        hello = runtime.hello() or {}
        levels = hello.get("levels") or []
        result.version = hello.get("runtime") if isinstance(hello.get("runtime"), dict) else None
        if CONVERSATION not in levels:
            raise ValueError(f"runtime {spec!r} does not serve the {CONVERSATION} level (it announces "
                             f"{', '.join(levels) or 'none'}); docs/conversation-protocol.md")
        while True:
            result.rounds += 1
            context = SearchContext(runtime, spec, provider, judge, frozenset(result.found) | set(known), deadline)
            stop = _round(context, seed, examples, result)
            result.examples += context.examples
            for promise, n in context.exercised.items():
                result.exercised[promise] = result.exercised.get(promise, 0) + n
            result.steps += context.steps
            for op, n in context.refusals.items():
                result.refusals[op] = result.refusals.get(op, 0) + n
            if context.first_refusal and "first" not in result.refusals:
                result.refusals["first"] = context.first_refusal
            witness = context.failure
            elapsed = time.monotonic() - began
            fresh = witness is not None and witness.breach.promise not in result.found
            if fresh:
                before = witness.messages
                witness, runs = minimize(runtime, spec, provider, witness, judge,
                                         deadline=_minimize_deadline(deadline), overlays=small(spec))
                result.examples += runs
                if witness.messages < before:
                    say(f"contract: {witness.breach.promise}: the witness minimized from {before} to "
                        f"{witness.messages} messages in {runs} replays")
                found = _found(witness, result.rounds, result.examples)
                result.found[found.promise] = found
                say(f"contract: round {result.rounds}: {found.promise} broken at step {found.breach.step} "
                    f"({len(found.steps)} steps, {found.messages} messages) after {context.examples} examples, "
                    f"{elapsed:.1f} s")
            else:
                say(f"contract: round {result.rounds}: nothing new in {context.examples} examples, {elapsed:.1f} s")
            quiet = 0 if fresh else quiet + 1
            if stop or quiet >= patience:
                break
            if checked and set(checked) <= set(result.found) | set(known):
                break
            if deadline is not None and time.monotonic() > deadline:
                result.out_of_time = True
                break
    except RuntimeUnavailable as exc:
        result.inconclusive, result.stderr = f"{exc.kind}: {exc}", exc.stderr
    finally:
        runtime.close()
    result.seconds = time.monotonic() - began
    if result.out_of_time:
        say(f"contract: the budget of {deadline_seconds:g} s ended the search after {result.rounds} rounds")
    if result.inconclusive:
        say(f"contract: inconclusive: {result.inconclusive}")
    return result


def _minimize_deadline(deadline: float | None) -> float:
    """Minimizing one witness takes at most ``MINIMIZE_SECONDS``, and never outlasts the search's budget."""
    cap = time.monotonic() + MINIMIZE_SECONDS
    return cap if deadline is None else min(cap, max(deadline, time.monotonic() + 5.0))


def _round(context: SearchContext, seed: int, examples: int, result: SearchResult) -> bool:
    """Run one round; True when the search must stop (the runtime is gone, the budget is spent, or every
    session was refused)."""
    context.progress = tqdm(total=examples, desc=f"contract round {result.rounds}", unit="example", file=sys.stderr,
                            disable=None, leave=False)
    # each round draws from its own seed: a round does not walk again the examples the last one already judged
    machine = hypothesis_seed(seed + result.rounds - 1)(machine_class(context))
    try:
        with shrink_budget(PROFILE["shrink_seconds"]), seed_only_stream(), with_reporter(lambda text: None):
            run_state_machine_as_test(machine, settings=hypothesis_settings(examples))
    except RuntimeGone as gone:
        result.inconclusive, result.stderr = f"{gone.cause.kind}: {gone.cause}", gone.cause.stderr
        context.failure = None if context.target is None else context.failure
        return True
    except BudgetSpent:
        result.out_of_time = True
        return True
    except Unsatisfiable:
        result.inconclusive = (f"the runtime refused every session it was offered ({context.first_refusal}); "
                               "the settings table may name keys it does not know (surfacecheck/contract/settings.py)")
        return True
    except PromiseBroken:
        pass
    except Exception:  # e.g. Hypothesis's Flaky when a nondeterministic runtime breaks a promise only sometimes,
        # or when a stop (the budget, a runtime gone: BaseExceptions) came mid-example and Hypothesis tried again
        if context.gone is not None:
            cause = context.gone.cause
            result.inconclusive, result.stderr = f"{cause.kind}: {cause}", cause.stderr
            return True
        if context.spent and context.failure is None:
            result.out_of_time = True
            return True
        if context.failure is None:
            raise
    finally:
        context.progress.close()
    return False


def _found(witness: Witness, round_: int, examples: int) -> Found:
    return Found(witness.breach.promise, witness.breach, tuple(witness.steps), witness.messages, round_, examples)
