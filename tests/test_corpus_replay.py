"""Every corpus log through the model: surface fold, seed validation, meter, projections (spec 1.5, 2-5).

* dsh-sessions/ (159 logs recorded by dsh's own test suites): each replays, reloads as a seed and folds
  identically incrementally and in full — except the logs below that dsh itself cannot load (retired
  shapes, trimmed or synthetic fixtures), which must fail with exactly dsh's error.
* dsh-generated/ (10 logs written by the real dsh runtime): every value in expected.json — final surface,
  generation, each replacement's range / shadowed seqs / logged and recomputed prices / meter totals
  before and after / cut balance, the final measurement — must be reproduced by the model.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

from surfacecheck.model.errors import SeedError, SurfaceError
from surfacecheck.model.event import Event
from surfacecheck.model.jsonl import LogFile, read_log
from surfacecheck.model.meter import measure_state, node_price, replay_meter
from surfacecheck.model.pairing import fold_cuts
from surfacecheck.model.projection import ContextBreakdown, fold_breakdown
from surfacecheck.model.replay import replay
from surfacecheck.model.session import END_SEED, replay_events, seeded
from surfacecheck.model.surface import fold_surface

try:
    from surfacecheck.core.corpus import corpus_root as _corpus_root
except ImportError:  # pragma: no cover - the package ships with the project
    _corpus_root = None

SESSIONS, GENERATED = "dsh-sessions", "dsh-generated"
MISSING = "<corpus missing: set SURFACECHECK_CORPUS>"


def _names(sub: str) -> list[str]:
    """File names for parametrization (collection time); the `corpus` fixture skips/fails when missing."""
    try:
        root = _corpus_root() if _corpus_root else None
    except Exception:
        root = None
    if root is None or not (Path(root) / sub).is_dir():
        return [MISSING]
    return sorted(p.name for p in (Path(root) / sub).glob("*.jsonl"))


@lru_cache(maxsize=None)
def _read(path: str) -> LogFile:
    return read_log(path)


def _log(corpus: Path, sub: str, name: str) -> LogFile:
    if name == MISSING:
        pytest.fail("corpus fixture returned a root, but the corpus was missing at collection time")
    return _read(str(corpus / sub / name))


# -- recorded logs dsh cannot load ----------------------------------------------------------------
# Exact Session.create (seed) error for each: dsh's constructor throws the same text (spec 1.5).
_RETIRED_ASSISTANT = "seed user/message at index 1 lacks an identified message"
_NO_PROVIDER = "seed request/header at index 0 lacks provider/model"
_SEQ_ONE = "seed event at index 0 has seq 1 (expected 0); seed must be contiguous from 0"
SEED_REFUSED = {
    "apps__web__tests__snapshots__code-mode-round__session.jsonl": _RETIRED_ASSISTANT,
    "apps__web__tests__snapshots__cordis-tool-round__session.jsonl": _RETIRED_ASSISTANT,
    "apps__web__tests__snapshots__feedback-command__session.jsonl": _RETIRED_ASSISTANT,
    "apps__web__tests__snapshots__fresh-round-trip__session.jsonl": _RETIRED_ASSISTANT,
    "apps__web__tests__snapshots__lifecycle-chrome__session.jsonl": _RETIRED_ASSISTANT,
    "apps__web__tests__snapshots__live-interactions__session.jsonl": _RETIRED_ASSISTANT,
    "apps__web__tests__snapshots__minimal-preset__session.jsonl": "seed user/message at index 0 lacks an identified message",
    "apps__web__tests__snapshots__navigation-panes__seed.jsonl": _RETIRED_ASSISTANT,
    "apps__web__tests__snapshots__pwsh-terminal__seed.jsonl": _RETIRED_ASSISTANT,
    "apps__web__tests__snapshots__question-composer__session.jsonl": _RETIRED_ASSISTANT,
    "apps__web__tests__snapshots__seeded-history__seed.jsonl": _RETIRED_ASSISTANT,
    "apps__web__tests__snapshots__steering__session.jsonl": _RETIRED_ASSISTANT,
    "apps__web__tests__snapshots__web-search-round__session.jsonl": "seed user/message at index 0 lacks an identified message",
    "examples__headless-agent__tests__subagent-inheritance-snapshots__parent-override__child.replay.jsonl": _RETIRED_ASSISTANT,
    "packages__test-support__acp-snapshot__tests__fixtures__record-suite__rec-child__session.1.jsonl": _NO_PROVIDER,
    "packages__test-support__acp-snapshot__tests__fixtures__record-suite__rec-child__session.jsonl": _NO_PROVIDER,
    "packages__test-support__acp-snapshot__tests__fixtures__record-suite__rec-pin__session.1.jsonl": _NO_PROVIDER,
    "packages__test-support__acp-snapshot__tests__fixtures__record-suite__rec-pin__session.jsonl": _NO_PROVIDER,
    "packages__test-support__acp-snapshot__tests__fixtures__suite__authored-error__session.jsonl": _SEQ_ONE,
    "packages__test-support__acp-snapshot__tests__fixtures__suite__blocked-log__session.jsonl": _SEQ_ONE,
    "packages__test-support__acp-snapshot__tests__fixtures__suite__pin-turn__session.jsonl": _NO_PROVIDER,
    "packages__test-support__acp-snapshot__tests__fixtures__suite__plain-turn__session.1.jsonl": _NO_PROVIDER,
    "packages__test-support__acp-snapshot__tests__fixtures__suite__plain-turn__session.jsonl": _NO_PROVIDER,
    "packages__test-support__acp-snapshot__tests__fixtures__suite__shared-pin__session.jsonl": _NO_PROVIDER,
}
# Live-append replay (no shape checks) still fails on these: (seq, rule, exact SurfaceError text or None).
# The "message-shape" ones carry the retired assistant/message {turn, step, content, provenance} with no
# data.message, which dsh's deriveEventMessage / TokenMeter cannot read either (spec 2.3).
REPLAY_REFUSED = {
    "apps__web__tests__snapshots__code-mode-round__session.jsonl": (205, "message-shape", None),
    "apps__web__tests__snapshots__cordis-tool-round__session.jsonl": (6, "surface", "session event seq 87 is not contiguous; expected 6"),
    "apps__web__tests__snapshots__feedback-command__session.jsonl": (31, "message-shape", None),
    "apps__web__tests__snapshots__fresh-round-trip__session.jsonl": (55, "message-shape", None),
    "apps__web__tests__snapshots__lifecycle-chrome__session.jsonl": (31, "message-shape", None),
    "apps__web__tests__snapshots__live-interactions__session.jsonl": (89, "message-shape", None),
    "apps__web__tests__snapshots__navigation-panes__seed.jsonl": (133, "message-shape", None),
    "apps__web__tests__snapshots__pwsh-terminal__seed.jsonl": (13, "message-shape", None),
    "apps__web__tests__snapshots__question-composer__session.jsonl": (131, "message-shape", None),
    "apps__web__tests__snapshots__seeded-history__seed.jsonl": (64, "message-shape", None),
    "apps__web__tests__snapshots__steering__session.jsonl": (88, "message-shape", None),
    "packages__test-support__acp-snapshot__tests__fixtures__suite__authored-error__session.jsonl": (0, "surface", "session event seq 1 is not contiguous; expected 0"),
    "packages__test-support__acp-snapshot__tests__fixtures__suite__blocked-log__session.jsonl": (0, "surface", "session event seq 1 is not contiguous; expected 0"),
}
# The only recorded logs with surface replacements (spec 16).
REPLACING = {
    "examples__headless-agent__tests__snapshots__compaction-recovery__session.jsonl": ((21,), True),
    "examples__acp-agent__tests__snapshots__agent-instructions__session.jsonl": ((17,), False),
}


def test_corpus_inventory(corpus):
    assert len(list((corpus / SESSIONS).glob("*.jsonl"))) == 159
    assert len(list((corpus / GENERATED).glob("*.jsonl"))) == 10
    names = set(_names(SESSIONS))
    assert set(SEED_REFUSED) <= names and set(REPLAY_REFUSED) <= set(SEED_REFUSED) and set(REPLACING) <= names
    expected = json.loads((corpus / GENERATED / "expected.json").read_text())
    assert sorted(e["file"] for e in expected) == _names(GENERATED)


@pytest.mark.parametrize("name", _names(SESSIONS))
def test_recorded_log(corpus, name):
    log = _log(corpus, SESSIONS, name)
    events = list(log.events)  # 13 recorded logs are a header line only (no events)

    # -- full fold vs incremental (SurfaceManager-style commit one event at a time) --------------
    try:
        fold = fold_surface(events)
    except SurfaceError as exc:
        seq, rule, message = REPLAY_REFUSED[name]
        assert (rule, exc.message) == ("surface", message)
        with pytest.raises(SurfaceError, match=f"^{message}$"):
            replay_events(events)
        fold = None
    else:
        assert replay_events(events).surface == fold.surface
        assert fold.surface.generation == len(fold.replacements) == sum(1 for e in events if e.replace is not None)

    # -- every model fold in one pass --------------------------------------------------------------
    result = replay(events)
    if name in REPLAY_REFUSED:
        seq, rule, message = REPLAY_REFUSED[name]
        assert not result.ok and (result.error.seq, result.error.rule) == (seq, rule)
        assert result.events == seq
        if message is not None:
            assert result.error.message == message
        else:  # the retired assistant shape: no data.message
            bad = events[seq]
            assert bad.type == "assistant/message" and "message" not in bad.data and "content" in bad.data
    else:
        assert result.ok, f"{name}: {result.error.rule}: {result.error.message}"
        assert result.events == len(events)
        assert result.surface_nodes == fold.surface.nodes and result.generation == fold.surface.generation
        m = result.measurement
        assert m.seqs == result.surface_nodes                          # P1
        assert sum(t for _, t in m.nodes) == m.surface_tokens == result.recount_total   # P2
        assert all(t == node_price(events[s]) for s, t in m.nodes)
        if result.fully_metered:                                       # P3
            assert result.projection_total == result.recount_total
        assert tuple(r.seq for r in result.replacements) == REPLACING.get(name, ((), True))[0]
        assert result.fully_metered == REPLACING.get(name, ((), True))[1]

    # -- reload: Session.create(id, events) with full seed validation ------------------------------
    if name in SEED_REFUSED:
        with pytest.raises(SeedError) as info:
            seeded(events)
        assert info.value.message == SEED_REFUSED[name]
        return
    session = seeded(events)
    assert session.log[: len(events)] == tuple(events)
    assert session.first_live_seq == len(events)
    if events and events[-1].type == END_SEED:
        assert len(session.log) == len(events)
    else:
        assert len(session.log) == len(events) + 1 and session.log[-1].type == END_SEED
    assert session.surface == fold.surface
    assert seeded(session.log).log == session.log                      # reopening does not grow the log


def test_known_corpus_registry_agrees(corpus):
    """surfacecheck's known-corpus registry lists exactly the recorded logs replay refuses, with their rule."""
    registry_file = Path(__file__).resolve().parents[1] / "surfacecheck" / "known_corpus.json"
    if not registry_file.exists():
        pytest.skip("no surfacecheck/known_corpus.json")
    registry = {k: v for k, v in json.loads(registry_file.read_text()).items() if not k.startswith("_")}
    assert {k: v["rule"] for k, v in registry.items()} == {k: rule for k, (_, rule, _) in REPLAY_REFUSED.items()}


# ==================================================================================================
# dsh-generated/ against expected.json
# ==================================================================================================
@lru_cache(maxsize=None)
def _expected(root: str) -> dict:
    return {e["file"]: e for e in json.loads((Path(root) / GENERATED / "expected.json").read_text())}


KIND = {"prune": "prune", "checkpoint": "summary"}


def _total(events) -> int:
    return measure_state(replay_meter(events)).total_tokens


@pytest.mark.parametrize("name", _names(GENERATED))
def test_generated_log(corpus, name):
    log = _log(corpus, GENERATED, name)
    expected = _expected(str(corpus))[name]
    details = expected["details"]
    events = list(log.events)
    assert (len(events), log.packed_rows, max(log.lines)) == \
        (details["event_count"], details["packed_chunk_rows"], details["jsonl_lines"])

    result = replay(events)
    assert result.ok, f"{result.error.rule}: {result.error.message}"
    assert list(result.surface_nodes) == expected["surface_nodes"]
    assert result.generation == expected["generation"]
    fold = fold_surface(events)
    assert fold.surface.nodes == result.surface_nodes and fold.surface.generation == result.generation
    assert seeded(events).surface == fold.surface == replay_events(events).surface

    assert len(result.replacements) == len(expected["replacements"])
    for ours, theirs in zip(result.replacements, expected["replacements"]):
        d = theirs["details"]
        where = f"{name} replace seq {theirs['seq']}"
        assert (ours.seq, ours.kind, ours.start, ours.end, list(ours.shadowed_seqs)) == \
            (theirs["seq"], KIND[theirs["kind"]], theirs["start"], theirs["end"], theirs["shadowed_seqs"]), where
        assert ours.logged_shadow_tokens == theirs["logged_shadow_tokens"], where
        assert ours.replacement_tokens == theirs["replacement_tokens"] == node_price(events[ours.seq]), where
        assert ours.recomputed_shadow_tokens == d["meter_shadow_tokens"] == ours.logged_shadow_tokens, where
        assert ours.claim_action == "consume" and d["metering_event_seq"] == ours.seq - 1, where
        assert _total(events[: ours.seq]) == d["meter_total_before"], where
        assert _total(events[: ours.seq + 1]) == d["meter_total_after"], where
        replaced = events[ours.seq]
        if theirs["kind"] == "checkpoint":
            assert replaced.type == "user/message" and list(replaced.source_event_seqs) == d["source_event_seqs"], where
            cuts = fold_cuts(replay_events(events[: ours.seq]))
            assert cuts.balanced_before(ours.start) == d["cut_balanced_before_start"], where
            assert cuts.balanced_after(ours.end) == d["cut_balanced_after_end"], where
        else:
            assert replaced.type == "tool/result" and len(ours.shadowed_seqs) == 1, where

    final = details["final_measure"]
    m = result.measurement
    assert (m.total_tokens, m.surface_tokens, m.baseline.kind) == \
        (final["total_tokens"], final["surface_tokens"], final["baseline"])
    assert [list(node) for node in m.nodes] == final["node_tokens"]
    assert m == measure_state(replay_meter(events))

    # every replace in these logs is metered: the O(1) projection equals the recount
    assert result.fully_metered
    assert result.projection_total == result.recount_total == m.surface_tokens
    assert result.observability.breakdown.message_tokens == m.surface_tokens


@pytest.mark.parametrize("name", _names(GENERATED))
def test_generated_brackets(corpus, name):
    """Appendix B P4/P5 on the compaction brackets expected.json lists (including failed ones)."""
    events = list(_log(corpus, GENERATED, name).events)
    brackets = _expected(str(corpus))[name]["details"]["compaction_brackets"]
    assert sum(1 for e in events if e.type == "compaction/start") == len(brackets)
    by_seq = {r.seq: r for r in replay(events).replacements}
    for b in brackets:
        start, end = events[b["start_seq"]], events[b["end_seq"]]
        assert (start.type, end.type) == ("compaction/start", "compaction/end")
        assert start.data["compactionId"] == end.data["compactionId"] == b["compaction_id"]
        assert start.data["turn"] == b["turn"] and start.data.get("sourceCommandId") == b["source_command_id"]
        assert end.data.get("error") == b["error"]
        if b["error"] is not None:
            assert b["checkpoint_seq"] is None
            assert not any(b["start_seq"] < s < b["end_seq"] for s in by_seq)
            continue
        summary, checkpoint = events[b["summary_seq"]], events[b["checkpoint_seq"]]
        assert b["start_seq"] < b["summary_seq"] and b["checkpoint_seq"] == b["summary_seq"] + 1 < b["end_seq"]
        assert summary.type == "compaction/summary" and summary.data["shadowedRange"] == b["shadowed_range"]
        assert summary.data["shadowedTokenCount"] == b["logged_shadow_tokens"]
        r = by_seq[b["checkpoint_seq"]]
        assert list(r.shadowed_seqs) == summary.data["shadowedSeqs"]
        assert (r.start, r.end) == (b["shadowed_range"]["start"], b["shadowed_range"]["end"])
        assert checkpoint.data["source"]["plugin"] == "compact"
        assert checkpoint.data["source"]["compactionId"] == b["compaction_id"]
        assert list(checkpoint.source_event_seqs) == [b["start_seq"], b["summary_seq"], *summary.data["shadowedSeqs"]]
        # P4: the compacted range starts at surface position 0 of the pre-replace surface, both cuts balanced
        before = replay_events(events[: b["checkpoint_seq"]])
        assert before.nodes[0] == r.start
        cuts = fold_cuts(before)
        assert cuts.balanced_before(r.start) and cuts.balanced_after(r.end)


def test_generated_projection_tracks_the_meter_on_every_prefix(corpus):
    """P3 on the 1,943-event session: messageTokens == measure().surfaceTokens after every event."""
    name = "10-long-session.jsonl"
    if name not in _names(GENERATED):
        pytest.skip(f"{name} not in the corpus")
    events = list(_log(corpus, GENERATED, name).events)
    from surfacecheck.model.meter import MeterState, fold_meter
    lookup = {e.seq: e for e in events}.get
    state, breakdown = MeterState(), ContextBreakdown()
    for event in events:
        state = fold_meter(state, event, lookup)
        breakdown = fold_breakdown(breakdown, event)
        assert breakdown.message_tokens == state.surface_tokens, event.seq
