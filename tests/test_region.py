"""Range selection and the compaction entry checks (model/region.py; spec 7, 8.1 steps 2-5, 1.5).

Sessions are built by hand with `model.session.append`; prices come from the model's own meter
(`measure`), and the expected ranges are derived from the spec's rules, not from the model.
Scenarios are ported from dsh's `compaction-basic.spec.ts` ("rounds a retention cut head-ward",
"declines when rounding a cut would consume the only tool pair", "rejects a priced surface that is
not the current positional surface", "rejects reversed and tool-unbalanced positional boundaries")
and `manual-compaction.spec.ts` (stale orphan vs `session/end-seed`).
"""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from surfacecheck.model.errors import CompactionError, ManualCompactionError
from surfacecheck.model.meter import measure
from surfacecheck.model.pairing import fold_cuts
from surfacecheck.model.region import (
    Range,
    assert_no_active_compaction,
    inspect_entry_state,
    lock_is_live,
    retention_index,
    select_compactable_range,
    validate_surface_region,
)
from surfacecheck.model.session import END_SEED, Session, append, seeded
from surfacecheck.model.summarizer import ScriptedSummarizer, SummaryScript
from surfacecheck.model.transaction import TransactionOptions, compact_surface_region

PROVIDER, MODEL = "prov", "mod"
LOCK_MESSAGE = "compaction already in progress; the session compaction lock is already active"


# -- a tiny hand-built log ----------------------------------------------------------------------
from builders import Log  # noqa: E402  (shared hand-built log)


def text_turns(lengths: list[int], open_turn: bool = True) -> tuple[Session, list[int]]:
    """One closed turn per user message of the given text lengths (price = ceil(len/4) + 8)."""
    log = Log()
    seqs = []
    for turn, length in enumerate(lengths, start=1):
        log.turn_start(turn)
        log.step_start(turn, 1)
        seqs.append(log.user("x" * length))
        if turn == 1:
            log.header()
        log.step_end(turn, 1)
        log.turn_end(turn)
    if open_turn:
        log.turn_start(len(lengths) + 1)
    return log.session, seqs


def select(session: Session, retain: int):
    return select_compactable_range(session, measure(session), retain)


def prices(session: Session) -> list[int]:
    return [price for _, price in measure(session).nodes]


# -- spec 7 step 3: the retention walk ------------------------------------------------------------
def test_retention_walk_keeps_the_last_node_even_at_retain_zero():
    """D12: with retainTokens 0 the walk still stops on the newest node (keep = n-1)."""
    assert retention_index((50, 40, 30), 0) == 2
    session, seqs = text_turns([400, 200, 40, 80])
    assert select(session, 0) == Range(seqs[0], seqs[2])


def test_retention_walk_threshold_is_inclusive():
    session, seqs = text_turns([400, 200, 40, 80])
    assert prices(session) == [108, 58, 18, 28]
    assert select(session, 28) == Range(seqs[0], seqs[2])  # 28 >= 28 stops on the last node
    assert select(session, 29) == Range(seqs[0], seqs[1])  # needs the last two (46)
    assert select(session, 46) == Range(seqs[0], seqs[1])
    assert select(session, 47) == Range(seqs[0], seqs[0])  # needs the last three (104)
    assert select(session, 104) == Range(seqs[0], seqs[0])


def test_whole_surface_needed_returns_none():
    session, _ = text_turns([400, 200, 40, 80])
    assert select(session, 105) is None  # only the whole surface (212) reaches the budget
    assert select(session, 212) is None
    assert select(session, 10_000) is None


@given(st.lists(st.integers(min_value=0, max_value=300), min_size=1, max_size=6),
       st.integers(min_value=0, max_value=600))
@settings(max_examples=40, deadline=None)
def test_text_only_surface_range_matches_the_spec_walk(lengths, retain):
    """Every cut of a text-only surface is balanced, so the range ends right before the largest
    index i >= 1 whose suffix sum reaches the budget (capped at n-1); None when there is none."""
    session, seqs = text_turns(lengths)
    p = prices(session)
    n = len(p)
    reaching = [i for i in range(1, n) if sum(p[i:]) >= retain]
    expected = Range(seqs[0], seqs[max(reaching) - 1]) if reaching else None
    if retain == 0 and n > 1:
        assert expected == Range(seqs[0], seqs[n - 2])
    assert select(session, retain) == expected


# -- spec 7 step 4: head-ward move to the nearest balanced cut -------------------------------------
def tool_surface() -> tuple[Session, dict]:
    """[U, A1(call c1), R1, A2(calls p1,p2), P1, P2]: cuts before R1, P1, P2 are unbalanced."""
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    u = log.user("prompt " * 60)
    log.header()
    a1 = log.assistant(1, 1, "reading", calls=["c1"])
    r1 = log.result(1, 1, "c1", "first result " * 20)
    log.step_end(1, 1)
    log.step_start(1, 2)
    a2 = log.assistant(1, 2, "two more", calls=["p1", "p2"])
    p1 = log.result(1, 2, "p1", "parallel one " * 20)
    p2 = log.result(1, 2, "p2", "parallel two " * 20)
    log.step_end(1, 2)
    return log.session, {"u": u, "a1": a1, "r1": r1, "a2": a2, "p1": p1, "p2": p2}


def test_cut_moves_head_ward_to_the_nearest_balanced_cut():
    session, s = tool_surface()
    cuts = fold_cuts(session)
    assert cuts.balanced == (True, True, False, True, False, False, True)
    # retain 0 stops on P2; the cuts before P2 and P1 split the 2-call group -> cut before A2
    assert select(session, 0) == Range(s["u"], s["r1"])
    # a budget reached at P1 also rounds to the cut before A2
    last = prices(session)[-1]
    assert select(session, last + 1) == Range(s["u"], s["r1"])
    # a budget reached only at R1 rounds to the cut before A1
    p = prices(session)
    assert select(session, sum(p[3:])) == Range(s["u"], s["r1"])  # stops exactly on A2 (balanced)
    assert select(session, sum(p[3:]) + 1) == Range(s["u"], s["u"])  # stops on R1 -> cut before A1
    assert select(session, sum(p[2:])) == Range(s["u"], s["u"])


def test_neutral_node_between_call_and_result_is_not_a_cut():
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    u = log.user("prompt " * 40)
    log.header()
    log.assistant(1, 1, "calling", calls=["c1"])
    log.user("injected steering message")
    log.result(1, 1, "c1", "result")
    log.step_end(1, 1)
    assert fold_cuts(log.session).balanced == (True, True, False, False, True)
    assert select(log.session, 0) == Range(u, u)


def test_range_is_head_anchored_at_a_previous_checkpoint():
    """The checkpoint at position 0 (seq higher than the nodes after it) starts the next range."""
    session, seqs = text_turns([400, 400, 400, 40])
    out = compact_surface_region(session, seqs[0], seqs[1], TransactionOptions(),
                                 ScriptedSummarizer(default=SummaryScript(text="short summary")))
    assert out.error is None, out.error
    session = out.session
    checkpoint = session.nodes[0]
    assert checkpoint > seqs[2]
    assert select(session, 0) == Range(checkpoint, seqs[2])
    validate_surface_region(session, checkpoint, seqs[2])  # start seq > end seq numerically is fine


# -- spec 7: None cases ----------------------------------------------------------------------------
def test_empty_surface_returns_none():
    assert select(Session(), 0) is None
    log = Log()
    log.turn_start(1)
    log.header()
    assert select(log.session, 0) is None


def test_single_node_surface_returns_none():
    session, _ = text_turns([400])
    assert select(session, 0) is None


def test_whole_surface_one_tool_unit_returns_none():
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    log.header()
    log.assistant(1, 1, calls=["only"])
    log.result(1, 1, "only", "result")
    log.step_end(1, 1)
    assert select(log.session, 0) is None
    assert select(log.session, 1) is None


def test_whole_surface_one_parallel_tool_unit_returns_none():
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    log.header()
    log.assistant(1, 1, "go", calls=["x", "y"])
    log.result(1, 1, "x", "x" * 400)
    log.result(1, 1, "y", "y" * 400)
    log.step_end(1, 1)
    assert select(log.session, 0) is None


def test_open_step_tail_rounds_before_the_unanswered_call():
    session, s = tool_surface()
    log = Log(session)
    log.step_start(1, 3)
    a3 = log.assistant(1, 3, "one more", calls=["late"])  # result not yet appended
    assert select(log.session, 0) == Range(s["u"], s["p2"])
    with pytest.raises(CompactionError) as info:
        validate_surface_region(log.session, s["u"], a3)
    assert str(info.value) == (f"compactRegion: end seq {a3} is not a balanced boundary "
                               "(would split a step, or the step is still open)")


# -- spec 7 step 2: meter/surface mismatch ---------------------------------------------------------
def test_meter_surface_mismatch_is_an_error():
    session, _ = text_turns([400, 200, 40])
    priced = measure(session)
    for nodes in (priced.nodes[1:], priced.nodes[::-1], priced.nodes + ((999, 5),)):
        with pytest.raises(CompactionError) as info:
            select_compactable_range(session, replace(priced, nodes=nodes), 1)
        assert str(info.value) == "compaction: token-meter surface does not match the current session surface"


def test_empty_priced_nodes_return_none_before_the_mismatch_check():
    session, _ = text_turns([400, 200, 40])
    assert select_compactable_range(session, replace(measure(session), nodes=()), 0) is None


@st.composite
def unit_lists(draw):
    units = draw(st.lists(st.one_of(
        st.tuples(st.just("text"), st.integers(0, 200)),
        st.tuples(st.just("tools"), st.lists(st.integers(0, 200), min_size=1, max_size=3)),
    ), min_size=1, max_size=5))
    return units


@given(unit_lists(), st.integers(min_value=0, max_value=400))
@settings(max_examples=40, deadline=None)
def test_selected_range_is_head_anchored_balanced_and_nearest(units, retain):
    """P4 + spec 7 step 4: head-anchored, balanced after end, and no balanced cut is skipped."""
    log = Log()
    log.turn_start(1)
    log.header()
    for step, (kind, payload) in enumerate(units, start=1):
        log.step_start(1, step)
        if kind == "text":
            log.user("t" * payload)
        else:
            ids = [f"c{step}-{i}" for i in range(len(payload))]
            log.assistant(1, step, "calls", calls=ids)
            for cid, size in zip(ids, payload):
                log.result(1, step, cid, "r" * size)
        log.step_end(1, step)
    session = log.session
    nodes = session.nodes
    p = prices(session)
    balanced = fold_cuts(session).balanced
    stop = retention_index(tuple(p), retain)
    got = select(session, retain)
    balanced_before_stop = [k for k in range(1, stop + 1) if balanced[k]]
    if stop == 0 or not balanced_before_stop:
        assert got is None
    else:
        keep = max(balanced_before_stop)
        assert got == Range(nodes[0], nodes[keep - 1])


# -- spec 8.1 step 2: validate_surface_region -----------------------------------------------------
def test_validate_surface_region_accepts_a_balanced_span():
    session, s = tool_surface()
    selection = validate_surface_region(session, s["u"], s["r1"])
    assert (selection.start, selection.end, selection.start_index, selection.end_index) == (s["u"], s["r1"], 0, 2)
    assert selection.shadowed == (s["u"], s["a1"], s["r1"])
    # a span need not be head-anchored
    assert validate_surface_region(session, s["a2"], s["p2"]).shadowed == (s["a2"], s["p1"], s["p2"])


@pytest.mark.parametrize("case", ["start-missing", "end-missing", "both-missing", "reversed",
                                  "unbalanced-start", "unbalanced-end", "unbalanced-both"])
def test_validate_surface_region_error_texts(case):
    session, s = tool_surface()
    start, end, message = {
        "start-missing": (9001, s["r1"], "compactRegion: start seq 9001 not found in surface"),
        "end-missing": (s["u"], 9002, "compactRegion: end seq 9002 not found in surface"),
        "both-missing": (9001, 9002, "compactRegion: start seq 9001 not found in surface"),
        "reversed": (s["a2"], s["a1"], f"compactRegion: start seq {s['a2']} (position 3) is after end seq "
                                       f"{s['a1']} (position 1) on the surface"),
        "unbalanced-start": (s["r1"], s["p2"], f"compactRegion: start seq {s['r1']} is not a balanced boundary "
                                               "(would split a step's tool-call/result pair)"),
        "unbalanced-end": (s["u"], s["a1"], f"compactRegion: end seq {s['a1']} is not a balanced boundary "
                                            "(would split a step, or the step is still open)"),
        "unbalanced-both": (s["r1"], s["p1"], f"compactRegion: start seq {s['r1']} is not a balanced boundary "
                                              "(would split a step's tool-call/result pair)"),
    }[case]
    with pytest.raises(CompactionError) as info:
        validate_surface_region(session, start, end)
    assert str(info.value) == message


def test_validate_surface_region_rejects_a_shadowed_seq():
    session, seqs = text_turns([400, 400, 400, 40])
    out = compact_surface_region(session, seqs[0], seqs[1], TransactionOptions(),
                                 ScriptedSummarizer(default=SummaryScript(text="short summary")))
    with pytest.raises(CompactionError, match=f"^compactRegion: start seq {seqs[0]} not found in surface$"):
        validate_surface_region(out.session, seqs[0], seqs[2])
    with pytest.raises(CompactionError, match=f"^compactRegion: end seq {seqs[1]} not found in surface$"):
        validate_surface_region(out.session, out.session.nodes[0], seqs[1])


# -- spec 8.1 steps 3-5: entry state and the durable lock ------------------------------------------
def closed_session() -> tuple[Session, list[int]]:
    return text_turns([400, 400, 40], open_turn=False)


def test_inspect_entry_state_reports_each_fact_independently():
    session, _ = closed_session()
    state = inspect_entry_state(session)
    assert (state.open_turn, state.unmatched_start_seq, state.latest_end_seed_seq) == (None, None, None)
    log = Log(session)
    start = log.add("compaction/start", {"compactionId": "c-1", "turn": None})
    log.turn_start(4)
    state = inspect_entry_state(log.session)
    assert (state.open_turn, state.unmatched_start_seq, state.latest_end_seed_seq) == (4, start, None)
    reloaded = seeded(log.session.log)
    state = inspect_entry_state(reloaded)
    assert reloaded.log[-1].type == END_SEED
    assert (state.open_turn, state.unmatched_start_seq, state.latest_end_seed_seq) == (4, start, reloaded.log[-1].seq)
    log = Log(reloaded)
    log.add("compaction/end", {"compactionId": "c-1", "turn": None})
    log.turn_end(4)
    state = inspect_entry_state(log.session)
    assert (state.open_turn, state.unmatched_start_seq) == (None, None)
    assert state.latest_end_seed_seq == reloaded.log[-1].seq


def test_summaries_do_not_count_as_lock_markers():
    session, seqs = closed_session()
    log = Log(session)
    start = log.add("compaction/start", {"compactionId": "c-1", "turn": None})
    log.add("compaction/summary", {"compactionId": "c-1", "summary": []})
    assert inspect_entry_state(log.session).unmatched_start_seq == start
    assert lock_is_live(inspect_entry_state(log.session))


def test_live_lock_blocks_with_the_exact_busy_message():
    session, seqs = closed_session()
    log = Log(session)
    log.add("compaction/start", {"compactionId": "live", "turn": None})
    locked = log.session
    with pytest.raises(ManualCompactionError) as info:
        assert_no_active_compaction(locked, "automatic pressure compaction")
    assert info.value.code == "busy"
    assert str(info.value) == f"automatic pressure compaction: {LOCK_MESSAGE}"
    # the transaction's own entry check (manual and automatic alike), nothing written
    manual = compact_surface_region(locked, seqs[0], seqs[1], TransactionOptions.manual())
    assert isinstance(manual.error, ManualCompactionError) and manual.error.code == "busy"
    assert str(manual.error) == f"compaction: {LOCK_MESSAGE}"
    assert manual.session is locked
    log.turn_start(4)
    automatic = compact_surface_region(log.session, seqs[0], seqs[1], TransactionOptions())
    assert isinstance(automatic.error, ManualCompactionError) and automatic.error.code == "busy"
    assert str(automatic.error) == f"compaction: {LOCK_MESSAGE}"
    assert automatic.session is log.session


def test_lock_check_precedes_the_owner_check():
    session, seqs = closed_session()
    log = Log(session)
    log.add("compaction/start", {"compactionId": "live", "turn": None})
    log.turn_start(4)  # manual would also be refused for the open turn; the lock wins
    out = compact_surface_region(log.session, seqs[0], seqs[1], TransactionOptions.manual())
    assert str(out.error) == f"compaction: {LOCK_MESSAGE}"


def test_region_validation_precedes_the_lock_check():
    session, seqs = closed_session()
    log = Log(session)
    log.add("compaction/start", {"compactionId": "live", "turn": None})
    out = compact_surface_region(log.session, 9001, seqs[1], TransactionOptions.manual())
    assert str(out.error) == "compactRegion: start seq 9001 not found in surface"


def test_stale_lock_before_end_seed_does_not_block():
    session, seqs = closed_session()
    log = Log(session)
    orphan = log.add("compaction/start", {"compactionId": "stale", "turn": None})
    reloaded = seeded(log.session.log)
    state = inspect_entry_state(reloaded)
    assert state.unmatched_start_seq == orphan and state.latest_end_seed_seq > orphan
    assert not lock_is_live(state)
    assert_no_active_compaction(reloaded, "automatic pressure compaction")
    out = compact_surface_region(reloaded, seqs[0], seqs[1], TransactionOptions.manual(),
                                 ScriptedSummarizer(default=SummaryScript(text="short")))
    assert out.error is None
    assert [e.type for e in out.session.log[len(reloaded.log):]] == [
        "compaction/start", "compaction/summary", "user/message", "compaction/end"]


def test_stale_orphan_is_scanned_independently_of_later_repaired_turn_state():
    session, seqs = closed_session()
    log = Log(session)
    log.add("compaction/start", {"compactionId": "reloaded", "turn": None})
    log.turn_start(4)
    log.turn_end(4, kind="interrupted")
    reloaded = seeded(log.session.log)
    out = compact_surface_region(reloaded, seqs[0], seqs[1], TransactionOptions.manual(),
                                 ScriptedSummarizer(default=SummaryScript(text="short")))
    assert out.error is None


def test_lock_taken_after_the_latest_end_seed_is_live():
    session, seqs = closed_session()
    reloaded = seeded(session.log)
    log = Log(reloaded)
    log.add("compaction/start", {"compactionId": "new", "turn": None})
    with pytest.raises(ManualCompactionError, match="lock is already active"):
        assert_no_active_compaction(log.session, "compaction")
