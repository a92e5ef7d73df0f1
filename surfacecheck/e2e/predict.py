"""The model's prediction for one e2e run: fed the same conversation, what should the runtime have decided?

Approach (decision-level, log-fed). The reference model cannot regenerate the runtime's requests
byte for byte (its system prompt, tool schemas, message ids and chunking are the runtime's), and
prices depend on those bytes (spec 4.1). So the model is fed the *conversation* events the runtime
logged (prompts, request headers, assistant chunks and messages, tool calls and results, step and
turn brackets — everything but compaction), in order, into a model :class:`~model.session.Session`,
and at every point where dsh decides about compaction the model decides on its own under the
script's `RuntimePolicy` and context window:

* each `step/start`: the pressure listener at `agent/pre-step` (spec 9.2-9.3, 13): nothing, prune
  pairs, summary brackets (range, checkpoint, shadow prices), or an error that only warns;
* each `finish {kind:error, CONTEXT_WINDOW_EXCEEDED}` chunk: the `agent/request-error` listener
  (spec 10.2): prune, one retain-0 summary, and whether the same step is retried (generation
  advanced, retries below `maxOverflowRetries`; reset by an `assistant/message` or idle, 10.2);
* each `command/run` of `/compact`: `compactNow` and the command's result kind and text (spec 11).

The summarizer's answers are inputs, not decisions: the k-th bracket gets the summary text the
runtime logged for its k-th bracket (a bracket that failed the shrink rule gets a text of the size
its error names; any other failure is a summarizer failure, spec 8.5). After each decision point
the model continues from the runtime's logged outcome, so every decision is judged from the same
history and each difference is reported at its own first seq, not as a cascade. This is the same
fold `surfacecheck audit` and `tests/test_corpus_decisions.py` use, made into a prediction.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Iterator

from surfacecheck.model.config import RuntimePolicy, resolve_target_policy
from surfacecheck.model.errors import ModelError
from surfacecheck.model.event import Event
from surfacecheck.model.jsonl import LogFormatError, decode_record, read_log
from surfacecheck.model.manual import compact_command
from surfacecheck.model.policy import (PRESSURE, Environment, OverflowState, compact_if_needed, on_request_error, reset_overflow,
                          routed_target)
from surfacecheck.model.session import Session, commit
from surfacecheck.model.summarizer import ScriptedSummarizer, SummaryScript

from .actions import actions, comparable
from .script import Script, coerce

OVERFLOW_CODE = "CONTEXT_WINDOW_EXCEEDED"
COMPACTION_TYPES = frozenset({"compaction/start", "compaction/summary", "compaction/end", "compaction/prune"})
NOT_SMALLER = re.compile(r"summary is not smaller than the shadowed content \((\d+) estimated framed tokens >= (\d+)\)")
FRAME_TOKENS = 98 + 4  # checkpoint frame (spec 8.2 step 9) + the summary block's overhead (spec 4.1)


# -- reading a run ------------------------------------------------------------------------------------
def run_events(run: Any) -> list[Event]:
    """The run's session log as model Events: from `run.log_path` (packed rows expanded, spec 1.7), else
    from `run.events` (raw records or Events)."""
    path = getattr(run, "log_path", None)
    if path is not None and Path(path).exists():
        try:
            return list(read_log(path).events)
        except LogFormatError as exc:
            if "version" not in str(exc):
                raise
            # another release's header version (drift, e.g. 0.2.1rc2 writes 4): decode its records anyway, so the
            # model's decisions can still be compared and every refused event is reported, not a traceback
            lines = Path(path).read_text(encoding="utf-8").splitlines()
            return as_events(json.loads(line) for line in lines if line.strip())
    return as_events(getattr(run, "events", run))


def as_events(records: Iterable[Any]) -> list[Event]:
    out: list[Event] = []
    for record in records:
        if isinstance(record, Event):
            out.append(record)
        elif isinstance(record, dict) and record.get("type") == "session" and "seq" not in record:
            continue  # the header line
        else:
            out.extend(decode_record(record))
    return out


def is_overflow_chunk(event: Event) -> bool:
    """`assistant/chunk` finish error CONTEXT_WINDOW_EXCEEDED (spec 10.1)."""
    if event.type != "assistant/chunk" or not isinstance(event.data, dict):
        return False
    chunk = event.data.get("chunk") or {}
    reason = chunk.get("reason") or {}
    return chunk.get("type") == "finish" and reason.get("kind") == "error" and \
        (reason.get("failure") or {}).get("code") == OVERFLOW_CODE


def is_compaction_event(events: list[Event], i: int) -> bool:
    """A compaction lifecycle or metering event, or the replacement its metering event arms (spec 5.1, 6, 8)."""
    event = events[i]
    return event.type in COMPACTION_TYPES or (
        event.replace is not None and i > 0 and events[i - 1].type in ("compaction/prune", "compaction/summary"))


def block_end(events: list[Event], i: int) -> int:
    """One past the run of compaction events starting at `i`."""
    while i < len(events) and is_compaction_event(events, i):
        i += 1
    return i


# -- decision points ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Point:
    """Where dsh decides: `pre-step` (before step/start), `overflow` (after the failed attempt), `manual`
    (/compact), or `stray` (compaction events at no decision point). `events` is the runtime's block."""

    kind: str
    key: tuple
    seq: int  # the runtime seq where the block begins (or would begin)
    events: tuple[Event, ...]
    retried: bool | None = None  # overflow: the runtime retried the same step
    command: dict | None = None  # manual: command/run data

    def describe(self) -> str:
        if self.kind == "pre-step":
            return f"pre-step of turn {self.key[1]} step {self.key[2]}"
        if self.kind == "overflow":
            return f"overflow recovery in turn {self.key[1]} step {self.key[2]} (attempt {self.key[3]})"
        if self.kind == "manual":
            return f"/compact {self.key[1]}"
        return f"compaction at seq {self.seq} outside any decision point"


def decision_points(events: list[Event]) -> Iterator[tuple[int, Point]]:
    """Walk a log; yield (index of the first event after the block, Point) at every decision point.

    The caller feeds the events between points itself; a point's own events are its block."""
    i, attempts = 0, {}
    while i < len(events):
        event = events[i]
        data = event.data if isinstance(event.data, dict) else {}
        if event.type == "step/start" or is_compaction_event(events, i) and _followed_by_step(events, i):
            j = block_end(events, i)
            step = events[j] if j < len(events) else event
            sdata = step.data if isinstance(step.data, dict) else {}
            yield j, Point("pre-step", ("pre-step", sdata.get("turn"), sdata.get("step")), i, tuple(events[i:j]))
            i = j
            if i < len(events) and events[i].type == "step/start":
                yield i + 1, Point("feed", (), i, (events[i],))
                i += 1
            continue
        if is_overflow_chunk(event):
            key = (data.get("turn"), data.get("step"))
            attempts[key] = attempts.get(key, 0) + 1
            yield i + 1, Point("feed", (), i, (event,))
            j = block_end(events, i + 1)
            yield j, Point("overflow", ("overflow", *key, attempts[key]), i + 1, tuple(events[i + 1:j]),
                           retried=_retried(events, j, key))
            i = j
            continue
        if event.type == "command/run" and data.get("name") == "compact":
            done = next((k for k in range(i + 1, len(events)) if events[k].type == "command/done"
                         and (events[k].data or {}).get("commandId") == data.get("commandId")), len(events) - 1)
            yield done + 1, Point("manual", ("manual", data.get("commandId")), i, tuple(events[i:done + 1]),
                                  command=data)
            i = done + 1
            continue
        if is_compaction_event(events, i):
            j = block_end(events, i)
            yield j, Point("stray", ("stray", event.seq), i, tuple(events[i:j]))
            i = j
            continue
        yield i + 1, Point("feed", (), i, (event,))
        i += 1


def _followed_by_step(events: list[Event], i: int) -> bool:
    j = block_end(events, i)
    return j < len(events) and events[j].type == "step/start"


def _retried(events: list[Event], j: int, key: tuple) -> bool:
    """After an overflow block: another request attempt of the same step before it ends (spec 10.1)."""
    for event in events[j:]:
        if event.type in ("step/end", "turn/end", "step/start"):
            return False
        if event.type == "assistant/chunk" and isinstance(event.data, dict) and \
                (event.data.get("turn"), event.data.get("step")) == key:
            return True
    return False


# -- the prediction -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Decision:
    """What the model did at one decision point: its appended events, and for overflow / manual the outcome."""

    point: Point
    events: tuple[Event, ...]
    generation: int
    retry: bool | None = None
    result: tuple[str, str] | None = None  # manual: (command/done kind, text)
    error: str | None = None  # the policy's error (a pressure error only warns, spec 9.3)
    labels: tuple[str, ...] = ()

    def to_json(self) -> dict:
        out = {"point": self.point.describe(), "seq": self.point.seq, "actions": actions(self.events),
               "generation": self.generation}
        for key in ("retry", "result", "error"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


@dataclass(frozen=True)
class Prediction:
    """The model's decisions at every decision point of the run, and its own event stream up to the first
    point where it parts from the runtime (`events`; `complete` when it never parts)."""

    script: str
    decisions: tuple[Decision, ...]
    events: tuple[Event, ...]
    complete: bool
    approach: str = "log-fed decisions"
    problems: tuple[str, ...] = field(default=())  # the log could not be fed (a model rule refused it)

    def to_json(self) -> dict:
        """The model's decisions where it acted (or a policy said why not), for reports and bundles."""
        return {"script": self.script, "approach": self.approach, "complete": self.complete,
                "problems": list(self.problems),
                "decisions": [d.to_json() for d in self.decisions if d.events or d.error or d.retry is not None]}


def summaries_from_log(events: list[Event]) -> tuple[ScriptedSummarizer, list[SummaryScript]]:
    """The summarizer's answers in bracket order, as the runtime received them (inputs, spec 8.5)."""
    scripts: list[SummaryScript] = []
    route = None
    for i, event in enumerate(events):
        if event.type != "compaction/start":
            continue
        cid = (event.data or {}).get("compactionId")
        summary = next((e for e in events[i + 1:] if e.type == "compaction/summary"
                        and (e.data or {}).get("compactionId") == cid), None)
        end = next((e for e in events[i + 1:] if e.type == "compaction/end"
                    and (e.data or {}).get("compactionId") == cid), None)
        if summary is not None:
            blocks = summary.data.get("summary") or []
            text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict))
            usage = summary.data.get("usage")
            scripts.append(SummaryScript(text=text, usage=None if not isinstance(usage, dict) else (
                usage.get("inputTokens", 0), usage.get("outputTokens", 0))))
            route = route or (summary.data.get("provider"), summary.data.get("model"))
            continue
        match = NOT_SMALLER.search(str((end.data or {}).get("error", ""))) if end is not None else None
        if match:  # framed = FRAME_TOKENS + ceil(len / 4): a text of exactly that framed price
            scripts.append(SummaryScript(text="x" * (4 * (int(match.group(1)) - FRAME_TOKENS))))
        else:
            scripts.append(SummaryScript(outcome="failure"))
    return ScriptedSummarizer(tuple(scripts), SummaryScript(outcome="failure"), reroute=route), scripts


def summaries_from_requests(requests: list[dict] | None) -> list[SummaryScript] | None:
    """The summarizer's answers as the scripted server sent them (its record; spec 8.5): the model then judges
    on its own whether the runtime had to refuse them (empty text, a truncated `length` finish, not smaller)."""
    if not requests:
        return None
    scripts = []
    for request in requests:
        if not isinstance(request, dict) or not request.get("compact"):
            continue
        reply = request.get("reply") if isinstance(request.get("reply"), dict) else {}
        usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else None
        usage = None if usage is None else (usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0))
        if request.get("status") != 200 or not isinstance(reply.get("text"), str):
            scripts.append(SummaryScript(outcome="failure"))
        elif reply.get("finish_reason") == "length":
            scripts.append(SummaryScript(outcome="truncated"))
        else:
            scripts.append(SummaryScript(text=reply["text"], usage=usage))
    return scripts


def _feed(session: Session, state: OverflowState, event: Event) -> tuple[Session, OverflowState]:
    """Commit one logged event to the model session (spec 1.3-1.4 checks) and fold the overflow bookkeeping."""
    session = commit(session, event)
    data = event.data if isinstance(event.data, dict) else {}
    state = reset_overflow(state, event.type, data.get("status"))
    if event.type == "turn/end":  # the agent goes idle after a turn: agent/status idle resets (spec 10.2)
        state = reset_overflow(state, "agent/status", "idle")
    return session, state


def _same(model_events: tuple[Event, ...], logged: tuple[Event, ...]) -> bool:
    return [comparable(e) for e in model_events] == [comparable(e) for e in logged]


def predict(script: Script | dict | str | Path, run: Any) -> Prediction:
    """Feed the run's conversation to the model and let it decide at each point (module docstring)."""
    script = coerce(script)
    return predict_events(run_events(run), script.policy(), script.name, getattr(run, "requests", None))


def predict_events(events: list[Event], policy: RuntimePolicy, name: str = "log",
                   requests: list[dict] | None = None) -> Prediction:
    """The prediction for a logged run under `policy` (the corpus logs use their `policies/*.json`).

    Summaries come from the server's record when it has one answer per logged bracket (each bracket makes
    one summary request: the adapter's retries are off), else from the log itself."""
    summarizer, from_log = summaries_from_log(events)
    from_server = summaries_from_requests(requests)
    source = "log"
    if from_server is not None and len(from_server) == len(from_log):
        summarizer, source = replace(summarizer, scripts=tuple(from_server)), "server record"
    env = Environment(policy, summarizer)
    session, state = Session(), OverflowState()
    decisions: list[Decision] = []
    stream: list[Event] = []
    parted = False
    problems: list[str] = []
    for _, point in decision_points(events):
        try:
            if point.kind == "feed":
                for event in point.events:
                    session, state = _feed(session, state, event)
                if not parted:
                    stream.extend(point.events)
                continue
            decision, state = _decide(point, session, state, env, policy)
        except ModelError as exc:
            problems.append(f"seq {point.seq}: the model refused the logged event: {exc.message}")
            break
        decisions.append(decision)
        if not parted:
            stream.extend(decision.events)
            parted = not (_same(decision.events, point.events) and decision.retry == point.retried
                          and (point.kind != "manual" or decision.result == _logged_result(point)))
        try:
            for event in point.events:  # continue from the runtime's outcome (module docstring)
                session, state = _feed(session, state, event)
        except ModelError as exc:
            problems.append(f"seq {event.seq}: the model refused the logged event: {exc.message}")
            break
    return Prediction(name, tuple(decisions), tuple(stream), not parted and not problems,
                      approach=f"log-fed decisions; summaries from the {source}", problems=tuple(problems))


def _decide(point: Point, session: Session, state: OverflowState, env: Environment, policy) -> tuple[Decision, OverflowState]:
    base = len(session.log)
    if point.kind in ("pre-step", "overflow") and not policy.compaction.auto:
        # `auto: false` installs neither automatic listener (spec 9.3; dsh test "auto:false installs neither")
        return Decision(point, (), session.generation, retry=False if point.kind == "overflow" else None,
                        labels=("auto: false: no automatic compaction listener",)), state
    if point.kind == "pre-step":
        out = compact_if_needed(session, PRESSURE, env)
        return Decision(point, out.session.log[base:], out.session.generation,
                        error=None if out.error is None else out.error.message, labels=out.labels), state
    if point.kind == "overflow":
        out, new_state, retry = on_request_error(session, state, OVERFLOW_CODE, env)
        return Decision(point, out.session.log[base:], out.session.generation, retry=retry,
                        error=None if out.error is None else out.error.message, labels=out.labels), new_state
    if point.kind == "manual":
        command = point.command or {}
        # the summarizer's cap is the routed target's maxTokens for every caller, /compact included (spec 8.5;
        # compaction-basic `summarize` resolves the target policy)
        target = routed_target(session)
        cap = resolve_target_policy(policy.compaction, *target).max_tokens if target else policy.compaction.max_tokens
        after, result, labels = compact_command(session, command.get("commandId"), command.get("args", ""),
                                                summarizer=env.summarizer, max_tokens=cap)
        return Decision(point, after.log[base:], after.generation, result=(result.kind, result.text),
                        labels=labels), state
    # stray: the model's policy appends nothing outside its decision points
    return Decision(point, (), session.generation, labels=("no decision point: the model appends nothing",)), state


def _logged_result(point: Point) -> tuple[str, str] | None:
    done = next((e for e in reversed(point.events) if e.type == "command/done"), None)
    return None if done is None else (done.data.get("kind"), done.data.get("text"))
