"""Re-derive every compaction decision the real dsh runtime logged, from the log prefix, with the model.

For the ten logs the real runtime wrote (`dsh-generated/*.jsonl`, each with the policy it ran under in
`policies/NN-*.json`), at every surface replacement:

* prune replacement at seq s (its `compaction/prune` at s-1): run `model.pruner.prune_session` on
  the session replayed up to the first `compaction/prune` of that pruning pass; the model must
  land the same pairs (same shadowed seqs, shadowedTokenCount and replacement message);
* checkpoint: `select_compactable_range(prefix at compaction/start, measure(prefix), retain)` must
  equal the logged shadowedRange, with retain = the policy's retention for a pressure bracket
  (numbered turn, no request error in the step), 0 for an overflow bracket (the open step has an
  `assistant/chunk` finish error CONTEXT_WINDOW_EXCEEDED) and for a manual one (turn null).

Beyond those range checks, whole invocations are replayed: every pre-step point (each
`step/start`) re-runs the pressure policy on the prefix before it, every overflow re-runs the
request-error listener, every `/compact` re-runs the command; the model must append exactly the
events dsh appended (ids and times aside), with the logged summary text as the summarizer's answer.
The spec 10.4 example (a recorded dsh log) and the 06-manual-compact command are checked too.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import pytest

from surfacecheck.model.config import RuntimePolicy, resolve_compact_spec, resolve_target_policy
from surfacecheck.model.jsonl import read_log
from surfacecheck.model.manual import compact_command, compact_now
from surfacecheck.model.meter import measure
from surfacecheck.model.policy import PRESSURE, Environment, OverflowState, compact_if_needed, on_request_error, reset_overflow
from surfacecheck.model.pruner import prune_session
from surfacecheck.model.region import Range, select_compactable_range, validate_surface_region
from surfacecheck.model.session import replay_events
from surfacecheck.model.summarizer import ScriptedSummarizer, SummaryScript

LOGS = ["01-prune", "02-pressure-summary", "03-second-generation", "04-prune-then-summary", "05-failed-bracket",
        "06-manual-compact", "07-overflow-recovery", "08-parallel-tool-calls", "09-runtime-context",
        "10-long-session"]
SPEC_10_4 = "examples__headless-agent__tests__snapshots__compaction-recovery__session.jsonl"
OVERFLOW_CODE = "CONTEXT_WINDOW_EXCEEDED"
COMPACTION_TYPES = {"compaction/start", "compaction/summary", "compaction/end", "compaction/prune"}
NOT_SMALLER = re.compile(r"^summary is not smaller than the shadowed content \((\d+) estimated framed tokens >= (\d+)\)$")


# -- loading ------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _load(root: str, name: str):
    base = Path(root) / "dsh-generated"
    events = read_log(base / f"{name}.jsonl").events
    policy = RuntimePolicy.from_json(json.loads((base / "policies" / f"{name}.json").read_text(encoding="utf-8")))
    expected = {e["file"]: e for e in json.loads((base / "expected.json").read_text(encoding="utf-8"))}
    return events, policy, expected[f"{name}.jsonl"]


@pytest.fixture(params=LOGS)
def generated(request, corpus: Path):
    return (request.param, *_load(str(corpus), request.param))


# -- reading the log --------------------------------------------------------------------------------
def is_replacement(event) -> bool:
    return event.replace is not None


def is_overflow_chunk(event) -> bool:
    if event.type != "assistant/chunk":
        return False
    chunk = event.data.get("chunk") or {}
    reason = chunk.get("reason") or {}
    return (chunk.get("type") == "finish" and reason.get("kind") == "error"
            and (reason.get("failure") or {}).get("code") == OVERFLOW_CODE)


def is_compaction_event(events, seq) -> bool:
    """A compaction lifecycle/metering event, or the replacement its metering event arms."""
    event = events[seq]
    return event.type in COMPACTION_TYPES or (
        is_replacement(event) and seq > 0 and events[seq - 1].type in ("compaction/prune", "compaction/summary"))


def invocation_start(events, seq) -> int:
    """The first event of the run of compaction events (prune pairs, brackets) ending before `seq`."""
    i = seq
    while i > 0 and is_compaction_event(events, i - 1):
        i -= 1
    return i


def invocation_end(events, seq) -> int:
    """One past the run of compaction events starting at `seq`."""
    i = seq
    while i < len(events) and is_compaction_event(events, i):
        i += 1
    return i


def trigger_of(events, start_seq) -> str:
    """manual (turn null) | overflow (request error in the open step) | pressure."""
    if events[start_seq].data.get("turn") is None:
        return "manual"
    j = start_seq - 1
    while j >= 0:
        event = events[j]
        if event.type in ("step/start", "step/end", "turn/start", "turn/end", "assistant/message"):
            break
        if is_overflow_chunk(event):
            return "overflow"
        j -= 1
    return "pressure"


def brackets(events):
    """Every compaction/start with its summary (or None for a failed bracket) and its close."""
    out = []
    for event in events:
        if event.type != "compaction/start":
            continue
        cid = event.data["compactionId"]
        summary = next((e for e in events[event.seq + 1:] if e.type == "compaction/summary"
                        and e.data["compactionId"] == cid), None)
        end = next(e for e in events[event.seq + 1:] if e.type == "compaction/end" and e.data["compactionId"] == cid)
        out.append((event, summary, end))
    return out


def prune_passes(events):
    """(first prune seq, [(prune event, replacement event), ...]) per back-to-back pruning pass."""
    passes = []
    seq = 0
    while seq < len(events):
        if events[seq].type == "compaction/prune":
            pairs = []
            while seq + 1 < len(events) and events[seq].type == "compaction/prune":
                pairs.append((events[seq], events[seq + 1]))
                seq += 2
            passes.append((pairs[0][0].seq, pairs))
        else:
            seq += 1
    return passes


def retain_for(trigger, policy: RuntimePolicy, prefix) -> int:
    if trigger != "pressure":
        return 0
    header = next(e for e in reversed(prefix.log) if e.type == "request/header").data["header"]["config"]
    target = resolve_target_policy(policy.compaction, header["provider"], header["model"])
    return resolve_compact_spec(target, policy.context_window).retain_tokens


def summarizer_for(events) -> ScriptedSummarizer:
    """The summarizer's answers, in bracket order, as the log recorded them.

    A failed "not smaller" bracket recorded no summary; its answer is re-created with the length the
    logged framed price implies (framed = 98 + ceil(len/4) + 4)."""
    scripts = []
    route = ("mock", "mock-summarizer")
    for _, summary, end in brackets(events):
        if summary is not None:
            (block,) = summary.data["summary"]
            usage = summary.data.get("usage")
            scripts.append(SummaryScript(text=block["text"], usage=None if usage is None else (
                usage["inputTokens"], usage["outputTokens"])))
            route = (summary.data["provider"], summary.data["model"])
        else:
            match = NOT_SMALLER.match(end.data["error"])
            assert match, f"unexpected failed bracket: {end.data['error']}"
            scripts.append(SummaryScript(text="x" * (4 * (int(match.group(1)) - 102))))
    return ScriptedSummarizer(tuple(scripts), SummaryScript(outcome="failure"), reroute=route)


def comparable(event):
    """What a decision is about: type, seq, surface metadata, and data without ids/times."""
    data = event.data
    if event.type in ("compaction/start", "compaction/end"):
        data = {k: v for k, v in data.items() if k != "compactionId"}
    elif event.type == "compaction/summary":
        data = {k: data.get(k) for k in ("sourceCommandId", "summary", "shadowedRange", "shadowedSeqs",
                                         "shadowedTokenCount", "provider", "model", "maxTokens", "usage")}
    elif event.type == "user/message" and is_replacement(event):
        data = {"content": data["content"], "role": data["role"],
                "source": {k: v for k, v in data["source"].items() if k != "compactionId"}}
    return (event.type, event.seq, event.surface_op, event.source_event_seqs, data)


def assert_same_events(model_events, logged_events, where):
    assert [comparable(e) for e in model_events] == [comparable(e) for e in logged_events], where


# -- every replacement is judged -------------------------------------------------------------------
def test_every_replacement_is_a_prune_or_a_checkpoint(generated):
    name, events, _, expected = generated
    kinds = []
    for event in events:
        if is_replacement(event):
            metering = events[event.seq - 1].type
            assert metering in ("compaction/prune", "compaction/summary"), (name, event.seq)
            kinds.append((event.seq, "prune" if metering == "compaction/prune" else "checkpoint"))
    assert kinds == [(r["seq"], r["kind"]) for r in expected["replacements"]]


# -- prune decisions -------------------------------------------------------------------------------
def test_prune_passes_match_the_model_pruner(generated):
    name, events, policy, expected = generated
    passes = prune_passes(events)
    assert sum(len(pairs) for _, pairs in passes) == sum(r["kind"] == "prune" for r in expected["replacements"])
    if passes:
        assert policy.pruner is not None, f"{name}: prunes logged but no pruner configured"
    for first, pairs in passes:
        prefix = replay_events(events[:first])
        out = prune_session(prefix, policy.pruner)
        assert out.error is None, (name, first, out.error)
        landed = out.session.log[first:]
        assert len(landed) == 2 * len(pairs), f"{name}: pass at {first} landed {len(landed) // 2} pairs, dsh {len(pairs)}"
        for (prune, replacement), (m_prune, m_replacement) in zip(pairs, zip(landed[::2], landed[1::2])):
            shadowed = prune.data["shadowedSeqs"]
            assert m_prune.data["shadowedSeqs"] == shadowed, (name, prune.seq)
            assert m_prune.data["shadowedTokenCount"] == prune.data["shadowedTokenCount"], (name, prune.seq)
            assert m_prune.data == prune.data, (name, prune.seq)
            assert m_replacement.data["message"]["content"] == replacement.data["message"]["content"], (name, replacement.seq)
            assert comparable(m_replacement) == comparable(replacement), (name, replacement.seq)


# -- checkpoint decisions ---------------------------------------------------------------------------
def test_checkpoint_ranges_match_the_model_selection(generated):
    name, events, policy, expected = generated
    checked = 0
    for start, summary, end in brackets(events):
        trigger = trigger_of(events, start.seq)
        prefix = replay_events(events[:start.seq])
        measurement = measure(prefix)
        retain = retain_for(trigger, policy, prefix)
        selected = select_compactable_range(prefix, measurement, retain)
        assert selected is not None, (name, start.seq, trigger)
        prices = dict(measurement.nodes)
        shadowed = validate_surface_region(prefix, selected.start, selected.end).shadowed
        if summary is None:
            # a failed bracket logs no range; its error names the shadow price of the range it summarized
            match = NOT_SMALLER.match(end.data["error"])
            assert match and int(match.group(2)) == sum(prices[s] for s in shadowed), (name, start.seq)
            continue
        logged = summary.data["shadowedRange"]
        assert selected == Range(logged["start"], logged["end"]), (name, start.seq, trigger, retain)
        assert list(shadowed) == summary.data["shadowedSeqs"], (name, start.seq)
        assert sum(prices[s] for s in shadowed) == summary.data["shadowedTokenCount"], (name, start.seq)
        checked += 1
    assert checked == sum(r["kind"] == "checkpoint" for r in expected["replacements"])


def test_bracket_triggers_are_consistent_with_the_log(generated):
    """Pressure brackets open before the next step/start; overflow ones sit inside the failed step."""
    name, events, policy, _ = generated
    for start, _, end in brackets(events):
        trigger = trigger_of(events, start.seq)
        after = events[invocation_end(events, start.seq)]
        if trigger == "pressure":
            assert isinstance(start.data["turn"], int) and after.type == "step/start", (name, start.seq)
        elif trigger == "overflow":
            assert after.type == "assistant/chunk", (name, start.seq)  # the same step's retried request
        else:
            assert after.type == "command/done", (name, start.seq)


# -- whole invocations --------------------------------------------------------------------------------
def test_every_pre_step_pressure_decision_reproduces(generated):
    """At each step/start the model's pressure policy, run on the prefix before the pre-step, appends
    exactly what dsh appended there: nothing, prune pairs, a bracket, or prune pairs then a bracket."""
    name, events, policy, _ = generated
    env = Environment(policy, summarizer_for(events))
    points = acted = 0
    for event in events:
        if event.type != "step/start":
            continue
        first = invocation_start(events, event.seq)
        prefix = replay_events(events[:first])
        out = compact_if_needed(prefix, PRESSURE, env)
        logged = events[first:event.seq]
        assert_same_events(out.session.log[first:], logged, (name, event.seq))
        failed = [e for e in logged if e.type == "compaction/end" and "error" in e.data]
        if failed:
            assert out.error is not None and str(out.error) == failed[-1].data["error"], (name, event.seq)
        else:
            assert out.error is None, (name, event.seq, out.error)
        points += 1
        acted += bool(logged)
    assert points > 0


def test_every_overflow_recovery_reproduces(generated):
    name, events, policy, expected = generated
    env = Environment(policy, summarizer_for(events))
    state = OverflowState()
    recoveries = 0
    for event in events:
        if event.type == "assistant/message":
            state = reset_overflow(state, "assistant/message")
        if not is_overflow_chunk(event):
            continue
        prefix = replay_events(events[:event.seq + 1])
        outcome, state, retry = on_request_error(prefix, state, OVERFLOW_CODE, env)
        end = invocation_end(events, event.seq + 1)
        assert_same_events(outcome.session.log[event.seq + 1:], events[event.seq + 1:end], (name, event.seq))
        # dsh retried the same step: the next event is a chunk of that step, not step/end or turn/end
        retried = events[end].type == "assistant/chunk" and events[end].data["step"] == event.data["step"]
        assert retry == retried, (name, event.seq)
        recoveries += 1
    assert recoveries == len(expected["details"]["request_errors"])


def test_every_manual_compact_command_reproduces(generated):
    name, events, policy, expected = generated
    summarizer = summarizer_for(events)
    commands = 0
    for event in events:
        if event.type != "command/run" or event.data["name"] != "compact":
            continue
        done = next(e for e in events[event.seq:] if e.type == "command/done"
                    and e.data["commandId"] == event.data["commandId"])
        prefix = replay_events(events[:event.seq])
        after, result, _ = compact_command(prefix, event.data["commandId"], event.data["args"],
                                           summarizer=summarizer, max_tokens=policy.compaction.max_tokens)
        assert_same_events(after.log[event.seq:], events[event.seq:done.seq + 1], (name, event.seq))
        assert (result.kind, result.text, result.source_event_seq) == (
            done.data["kind"], done.data["text"], done.data.get("sourceEventSeq"))
        commands += 1
    assert commands == sum(c["type"] == "command/run" for c in expected["details"]["commands"])


# -- the 06 manual command, by the numbers -------------------------------------------------------------
def test_06_manual_compact_now_and_command(corpus):
    events, policy, _ = _load(str(corpus), "06-manual-compact")
    run = next(e for e in events if e.type == "command/run")
    assert run.seq == 68
    prefix = replay_events(events[:run.seq])
    summarizer = summarizer_for(events)
    assert select_compactable_range(prefix, measure(prefix), 0) == Range(4, 56)
    out = compact_now(prefix, source_command_id=run.data["commandId"], summarizer=summarizer,
                      max_tokens=policy.compaction.max_tokens)
    assert out.error is None
    result = out.value
    assert (result.start, result.end) == (4, 56)
    assert result.shadowed_seqs == (4, 19, 21, 36, 38, 49, 56)
    assert result.shadowed_token_count == 728
    after, command, _ = compact_command(prefix, run.data["commandId"], "", summarizer=summarizer,
                                        max_tokens=policy.compaction.max_tokens)
    assert command.kind == "success"
    assert command.text == "Compacted 7 history items (~728 tokens)."
    assert command.source_event_seq == 70
    assert after.log[73].data == events[73].data == {
        "commandId": "cmd-1d4df7ec-1", "kind": "success", "text": "Compacted 7 history items (~728 tokens).",
        "sourceEventSeq": 70}
    assert after.nodes[0] == 71 and after.generation == 1


# -- the spec 10.4 recorded example ----------------------------------------------------------------------
def test_spec_10_4_overflow_example(corpus):
    path = Path(corpus) / "dsh-sessions" / SPEC_10_4
    events = read_log(path).events
    start = next(e for e in events if e.type == "compaction/start")
    assert start.seq == 19 and trigger_of(events, start.seq) == "overflow"
    prefix = replay_events(events[:start.seq])
    measurement = measure(prefix)
    assert measurement.nodes == ((4, 266), (13, 29), (15, 14))
    assert select_compactable_range(prefix, measurement, 0) == Range(4, 4)
    # the whole recovery: compaction-basic thresholdRatio 0.99, retainTokens 20, maxTokens 32, no pruner
    policy = RuntimePolicy.from_json({"thresholdRatio": 0.99, "retainTokens": 20, "maxTokens": 32,
                                      "contextWindow": 128000})
    env = Environment(policy, summarizer_for(events))
    outcome, state, retry = on_request_error(replay_events(events[:19]), OverflowState(), OVERFLOW_CODE, env)
    assert retry and state.retries == 1
    assert_same_events(outcome.session.log[19:], events[19:23], "spec 10.4")
    assert dict(measure(outcome.session).nodes)[21] == 116
    assert outcome.session.nodes == (21, 13, 15)
