"""The generated scenario logs: reproducible, clean under replay, and each holds its case (issue 2 point 9)."""
from __future__ import annotations

import pytest

from surfacecheck.model.jsonl import read_log
from surfacecheck.model.replay import replay
from surfacecheck.scenarios.generate import LOG_DIR, SCENARIOS, render

NAMES = [scenario.name for scenario in SCENARIOS]


def events(name):
    return read_log(LOG_DIR / f"{name}.jsonl").events


def of_type(log, type_):
    return [e for e in log if e.type == type_]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=NAMES)
def test_regeneration_reproduces_committed_bytes(scenario):
    assert render(scenario) == (LOG_DIR / f"{scenario.name}.jsonl").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", NAMES)
def test_replays_cleanly_and_projection_equals_recount(name):
    result = replay(events(name), check_shapes=True)
    assert result.error is None
    assert result.fully_metered
    assert result.projection_total == result.recount_total
    for replacement in result.replacements:
        assert replacement.logged_shadow_tokens == replacement.recomputed_shadow_tokens


def test_prune_is_a_prune_pair_without_summary():
    log = events("prune")
    prunes = of_type(log, "compaction/prune")
    assert len(prunes) == 1 and not of_type(log, "compaction/start")
    after = log[prunes[0].seq + 1]
    assert after.type == "tool/result" and after.replace is not None
    assert after.replace.start == prunes[0].data["shadowedRange"]["start"]


def test_pressure_summary_is_a_numbered_bracket_with_adjacent_checkpoint():
    log = events("pressure-summary")
    starts = of_type(log, "compaction/start")
    assert starts and all(isinstance(s.data["turn"], int) for s in starts)
    for summary in of_type(log, "compaction/summary"):
        checkpoint = log[summary.seq + 1]
        assert checkpoint.type == "user/message" and checkpoint.replace is not None
        assert checkpoint.data["source"]["plugin"] == "compact"
        assert set(summary.data["shadowedSeqs"]) <= set(checkpoint.sources)


def test_second_generation_checkpoint_merges_the_first():
    log = events("second-generation")
    checkpoints = [e.seq for e in of_type(log, "user/message") if e.replace is not None]
    assert len(checkpoints) >= 2
    later = [e for e in of_type(log, "compaction/summary") if e.data["shadowedRange"]["start"] in checkpoints]
    assert later, "no checkpoint range starts at an earlier checkpoint"


def test_failed_bracket_closes_with_error_then_a_bracket_succeeds():
    ends = of_type(events("failed-bracket"), "compaction/end")
    assert "summary is not smaller" in ends[0].data["error"]
    assert any("error" not in e.data for e in ends[1:])


def test_manual_compact_is_standalone_and_reports_the_summary_seq():
    log = events("manual-compact")
    start = of_type(log, "compaction/start")[0]
    assert start.data["turn"] is None and start.data["sourceCommandId"] == "cmd-1"
    done = of_type(log, "command/done")[0]
    summary = of_type(log, "compaction/summary")[0]
    assert done.data["kind"] == "success" and done.data["sourceEventSeq"] == summary.seq
    assert done.data["text"] == (f"Compacted {len(summary.data['shadowedSeqs'])} history items "
                                 f"(~{summary.data['shadowedTokenCount']} tokens).")


def test_overflow_recovery_compacts_inside_the_open_step_and_retries_it():
    log = events("overflow-recovery")
    failure = next(e for e in of_type(log, "assistant/chunk")
                   if e.data["chunk"].get("reason", {}).get("kind") == "error")
    start = next(e for e in of_type(log, "compaction/start") if e.seq > failure.seq)
    between = log[failure.seq: start.seq]
    assert not [e for e in between if e.type in ("step/end", "step/start")]
    retried = next(e for e in of_type(log, "assistant/message") if e.seq > start.seq)
    assert retried.data["step"] == failure.data["step"]
    assert not [e for e in log[start.seq: retried.seq] if e.type == "step/start"]


def test_runtime_context_window_is_one_request_then_reemitted():
    log = events("runtime-context")
    snapshots = [e for e in of_type(log, "user/message")
                 if e.data["source"].get("plugin") == "@deepseek-ai/dsh-system-prompt"]
    first = snapshots[0]
    shadowing = next(e for e in of_type(log, "user/message") if e.replace is not None and first.seq in e.sources)
    step_after = next(e for e in of_type(log, "step/start") if e.seq > shadowing.seq)
    next_step = next(e for e in of_type(log, "step/start") if e.seq > step_after.seq)
    in_window = [e for e in snapshots if step_after.seq < e.seq < next_step.seq]
    assert not in_window, "the step right after the shadowing must carry no snapshot (seed §14 window)"
    assert any(e.seq > next_step.seq for e in snapshots), "the snapshot must be re-emitted"


def test_crash_reload_appends_end_seed():
    assert of_type(events("crash-reload"), "session/end-seed")
