"""Configuration, the pressure policy and overflow recovery (model/config.py, model/policy.py; spec 9, 10).

Config cases are ported from dsh's `compaction-basic.spec.ts` ("validates common values and
pressure-policy invariants", "merges exact provider/model policy overrides ..."); policy scenarios
from its "pressure measurement and retention", "optional model-free tool-result pruning" and
"automatic listener" groups. Expected values come from the spec's rules.
"""
from __future__ import annotations

import math

import pytest

from surfacecheck.model.config import (
    CompactionConfig,
    RuntimePolicy,
    resolve_compact_spec,
    resolve_config,
    resolve_target_policy,
)
from surfacecheck.model.errors import (
    AbortError,
    CompactionConfigError,
    CompactionError,
    ManualCompactionError,
    SummarizerError,
    TargetPressureConfigError,
)
from surfacecheck.model.meter import measure
from surfacecheck.model.policy import (
    OVERFLOW,
    PRESSURE,
    Environment,
    OverflowState,
    compact_if_needed,
    on_request_error,
    reset_overflow,
    routed_target,
)
from surfacecheck.model.prune_content import PRUNE_MARKER, resolve_pruner_config
from surfacecheck.model.session import Session, append
from surfacecheck.model.summarizer import ScriptedSummarizer, SummaryScript
from surfacecheck.model.transaction import Faults

P, M = "prov", "mod"
NAME = "BasicCompactionConfig"
LOCK = "compaction already in progress; the session compaction lock is already active"
OVERFLOW_CODE = "CONTEXT_WINDOW_EXCEEDED"


# -- a tiny hand-built log ----------------------------------------------------------------------
from builders import Log  # noqa: E402  (shared hand-built log)


def conversation(turns=4, text="fixture " * 40, header=True, open_turn=True) -> Session:
    """dsh's `conversation(turns)`: closed user+assistant turns, then an open turn."""
    log = Log()
    for turn in range(1, turns + 1):
        log.turn_start(turn)
        log.user(f"{text} user {turn}")
        log.step_start(turn, 1)
        if turn == 1 and header:
            log.header()
        log.assistant(turn, 1, f"{text} assistant {turn}")
        log.step_end(turn, 1)
        log.turn_end(turn)
    if open_turn:
        log.turn_start(turns + 1)
    return log.session


def oversized_tool_result(chars=3000, with_prompt=False) -> Session:
    """dsh's `oversizedToolResult`: one closed routed tool step, then an open turn."""
    log = Log()
    log.turn_start(1)
    if with_prompt:
        log.user("older history " * 200)
    log.step_start(1, 1)
    log.header()
    log.assistant(1, 1, calls=["oversized"])
    log.result(1, 1, "oversized", "X" * chars)
    log.step_end(1, 1)
    log.turn_end(1)
    log.turn_start(2)
    return log.session


def tool_conversation() -> Session:
    """dsh's `toolConversation()`: three closed turns of prompt + text/tool-call + result."""
    log = Log()
    for turn in range(1, 4):
        log.turn_start(turn)
        log.user(f"request {turn} " * 300)
        log.step_start(turn, 1)
        if turn == 1:
            log.header()
        log.assistant(turn, 1, f"calling {turn} " * 300, calls=[f"call-{turn}"])
        log.result(turn, 1, f"call-{turn}", f"result {turn} " * 300)
        log.step_end(turn, 1)
        log.turn_end(turn)
    log.turn_start(4)
    return log.session


def env(config=None, window=1000, pruner=None, scripts=(), default=None, faults=Faults(), capacity=None):
    policy = RuntimePolicy(resolve_config(config or {}),
                           None if pruner is None else resolve_pruner_config(pruner), window)
    summarizer = ScriptedSummarizer(tuple(scripts), default or SummaryScript(text="small checkpoint"))
    return Environment(policy, summarizer, faults, capacity)


def total(session: Session) -> int:
    return measure(session).total_tokens


def added(before: Session, after: Session) -> list[str]:
    return [e.type for e in after.log[len(before.log):]]


PRUNE = {"thresholdChars": 100, "headChars": 20, "tailChars": 10}


# -- spec 9.1: configuration --------------------------------------------------------------------
def test_defaults():
    assert resolve_config({}) == CompactionConfig(0.8, ("retainRatio", 0.16), "", "", 8192, 1, 1, (), True)
    assert resolve_config(None) == resolve_config({})


def test_threshold_and_retention_resolve_independently():
    assert resolve_config({"thresholdRatio": 0.5}).retention == ("retainRatio", 0.16)
    only = resolve_config({"retainTokens": 70})
    assert only.threshold_ratio == 0.8 and only.retention == ("retainTokens", 70)


M_ = "test-model"
BAD_CONFIGS = [
    ({"maxTokens": 0}, f"{NAME}.maxTokens (0) must be a positive integer"),
    ({"maxTokens": 1.5}, f"{NAME}.maxTokens (1.5) must be a positive integer"),
    ({"compactionRetries": -1}, f"{NAME}.compactionRetries (-1) must be a non-negative integer"),
    ({"maxOverflowRetries": -1}, f"{NAME}.maxOverflowRetries (-1) must be a non-negative integer"),
    ({"maxOverflowRetries": 0.5}, f"{NAME}.maxOverflowRetries (0.5) must be a non-negative integer"),
    ({"auto": "yes"}, f"{NAME}: auto must be a boolean"),
    ({"summarizationProvider": 1}, f"{NAME}.summarizationProvider must be a string"),
    ({"summarizationModel": 1}, f"{NAME}.summarizationModel must be a string"),
    ({"summarizationProvider": M_}, f"{NAME}: summarizationProvider and summarizationModel must be set together "
                                    "as an empty or non-empty pair"),
    ({"summarizationModel": M_}, f"{NAME}: summarizationProvider and summarizationModel must be set together "
                                 "as an empty or non-empty pair"),
    ({"summarizationProvider": ""}, f"{NAME}: summarizationProvider and summarizationModel must be set together "
                                    "as an empty or non-empty pair"),
    ({"summarizationProvider": "a", "summarizationModel": ""},
     f"{NAME}: summarizationProvider and summarizationModel must be set together as an empty or non-empty pair"),
    ({"thresholdRatio": 0}, f"{NAME}.thresholdRatio (0) must be a number in (0, 1]"),
    ({"thresholdRatio": 1.1}, f"{NAME}.thresholdRatio (1.1) must be a number in (0, 1]"),
    ({"thresholdRatio": True}, f"{NAME}.thresholdRatio (true) must be a number in (0, 1]"),
    ({"retainRatio": -0.5}, f"{NAME}.retainRatio (-0.5) must be a number in (0, 1]"),
    ({"retainRatio": 0.9}, f"{NAME}: retainRatio (0.9) must be less than the resolved thresholdRatio (0.8)"),
    ({"retainRatio": 0.8}, f"{NAME}: retainRatio (0.8) must be less than the resolved thresholdRatio (0.8)"),
    ({"thresholdRatio": 0.1}, f"{NAME}: retainRatio (0.16) must be less than the resolved thresholdRatio (0.1)"),
    ({"retainTokens": -1}, f"{NAME}.retainTokens (-1) must be a non-negative integer"),
    ({"retainTokens": 2.5}, f"{NAME}.retainTokens (2.5) must be a non-negative integer"),
    ({"retainRatio": 0.2, "retainTokens": 100}, f"{NAME}: retainRatio and retainTokens are mutually exclusive"),
    ({"modelPolicies": {}}, f"{NAME}: modelPolicies must be an array"),
    ({"modelPolicies": [1]}, f"{NAME}: modelPolicies[0] must be an object"),
    ({"modelPolicies": [None]}, f"{NAME}: modelPolicies[0] must be an object"),
    ({"modelPolicies": [[]]}, f"{NAME}: modelPolicies[0] must be an object"),
    ({"modelPolicies": [{"provider": 1, "model": M_}]}, f"{NAME}: modelPolicies[0].provider must be a non-empty string"),
    ({"modelPolicies": [{"provider": "", "model": M_}]}, f"{NAME}: modelPolicies[0].provider must be a non-empty string"),
    ({"modelPolicies": [{"provider": M_, "model": 1}]}, f"{NAME}: modelPolicies[0].model must be a non-empty string"),
    ({"modelPolicies": [{"provider": M_, "model": ""}]}, f"{NAME}: modelPolicies[0].model must be a non-empty string"),
    ({"modelPolicies": [{"provider": M_, "model": M_, "foo": 1}]}, f'{NAME}: modelPolicies[0]: unknown key "foo"'),
    ({"modelPolicies": [{"provider": M_, "model": M_, "auto": True}]}, f'{NAME}: modelPolicies[0]: unknown key "auto"'),
    ({"modelPolicies": [{"provider": M_, "model": M_, "summarizationProvider": 1}]},
     f"{NAME}: modelPolicies[0].summarizationProvider must be a string"),
    ({"summarizationProvider": "dp", "summarizationModel": "dm",
      "modelPolicies": [{"provider": M_, "model": M_, "summarizationModel": ""}]},
     f"{NAME}: modelPolicies[0]: summarizationProvider and summarizationModel must be set together "
     "as an empty or non-empty pair"),
    ({"modelPolicies": [{"provider": M_, "model": M_, "retainRatio": 0.2, "retainTokens": 100}]},
     f"{NAME}: modelPolicies[0]: retainRatio and retainTokens are mutually exclusive"),
    ({"modelPolicies": [{"provider": M_, "model": M_, "thresholdRatio": 0.1}]},
     f"{NAME}: modelPolicies[0]: retainRatio (0.16) must be less than the resolved thresholdRatio (0.1)"),
    ({"modelPolicies": [{"provider": M_, "model": M_, "retainRatio": 0.9}]},
     f"{NAME}: modelPolicies[0]: retainRatio (0.9) must be less than the resolved thresholdRatio (0.8)"),
    ({"thresholdRatio": 0.5, "modelPolicies": [{"provider": M_, "model": M_, "retainRatio": 0.6}]},
     f"{NAME}: modelPolicies[0]: retainRatio (0.6) must be less than the resolved thresholdRatio (0.5)"),
    ({"modelPolicies": [{"provider": M_, "model": M_, "thresholdRatio": 2}]},
     f"{NAME}: modelPolicies[0].thresholdRatio (2) must be a number in (0, 1]"),
    ({"modelPolicies": [{"provider": M_, "model": M_}, {"provider": M_, "model": M_}]},
     f"{NAME}: duplicate model policy for {M_}/{M_}"),
    ({"modelPolicies": [{"provider": "a", "model": "b"}, {"provider": "c", "model": "d", "maxTokens": 0}]},
     f"{NAME}: modelPolicies[1].maxTokens (0) must be a positive integer"),
    ({"models": {M_: {"retainTokens": 10}}}, f'{NAME}: unknown key "models"'),
    ({"thresholdRato": 0.5}, f'{NAME}: unknown key "thresholdRato"'),
]


@pytest.mark.parametrize("config, message", BAD_CONFIGS, ids=[m for _, m in BAD_CONFIGS])
def test_config_validation_messages(config, message):
    with pytest.raises(CompactionConfigError) as info:
        resolve_config(config)
    assert str(info.value) == message


def test_valid_configs_load():
    resolve_config({"retainTokens": 0})
    resolve_config({"thresholdRatio": 1, "retainRatio": 0.99})
    # absolute retention is not checked against a ratio at load time (only per window, by the spec)
    resolve_config({"thresholdRatio": 0.1, "retainTokens": 10_000})
    resolve_config({"summarizationProvider": "", "summarizationModel": ""})
    resolve_config({"auto": False, "maxTokens": 1, "compactionRetries": 0, "maxOverflowRetries": 0})
    resolve_config({"modelPolicies": [{"provider": "a", "model": "b"}, {"provider": "a", "model": "c"}]})


@pytest.mark.parametrize("config, message", [
    ({"thresholdRatio": None}, f"{NAME}.thresholdRatio (null) must be a number in (0, 1]"),
    ({"retainTokens": None}, f"{NAME}.retainTokens (null) must be a non-negative integer"),
    ({"auto": None}, f"{NAME}: auto must be a boolean"),
    ({"modelPolicies": None}, f"{NAME}: modelPolicies must be an array"),
], ids=["thresholdRatio", "retainTokens", "auto", "modelPolicies"])
def test_null_values_are_rejected(config, message):
    with pytest.raises(CompactionConfigError) as info:
        resolve_config(config)
    assert str(info.value) == message


def test_duplicate_policies_are_reported_before_ratio_retention():
    config = {"modelPolicies": [{"provider": "a", "model": "b", "thresholdRatio": 0.1},
                                {"provider": "a", "model": "b"}]}
    with pytest.raises(CompactionConfigError) as info:
        resolve_config(config)
    assert str(info.value) == f"{NAME}: duplicate model policy for a/b"


def test_exact_provider_model_overrides_scale_per_window():
    config = resolve_config({"thresholdRatio": 0.8, "retainRatio": 0.1, "modelPolicies": [
        {"provider": "small-provider", "model": "shared-id", "thresholdRatio": 0.5, "retainTokens": 120}]})
    small = resolve_compact_spec(resolve_target_policy(config, "small-provider", "shared-id"), 1000)
    assert (small.threshold_tokens, small.retain_tokens) == (500, 120)
    other = resolve_compact_spec(resolve_target_policy(config, "large-provider", "shared-id"), 2000)
    assert (other.threshold_tokens, other.retain_tokens) == (1600, 200)
    same_provider = resolve_compact_spec(resolve_target_policy(config, "small-provider", "other-id"), 2000)
    assert (same_provider.threshold_tokens, same_provider.retain_tokens) == (1600, 200)


def test_override_fields_win_and_retention_forms_inherit():
    config = resolve_config({"retainTokens": 200, "modelPolicies": [{
        "provider": "rp", "model": "rm", "thresholdRatio": 0.6, "retainRatio": 0.2,
        "summarizationProvider": "sp", "summarizationModel": "sm", "maxTokens": 512,
        "compactionRetries": 2, "maxOverflowRetries": 3}, {"provider": "tp", "model": "tm", "thresholdRatio": 0.5}]})
    policy = resolve_target_policy(config, "rp", "rm")
    assert (policy.threshold_ratio, policy.retention, policy.max_tokens) == (0.6, ("retainRatio", 0.2), 512)
    assert (policy.compaction_retries, policy.max_overflow_retries, policy.key) == (2, 3, "rp/rm")
    spec = resolve_compact_spec(policy, 2000)
    assert (spec.threshold_tokens, spec.retain_tokens, spec.max_tokens, spec.compaction_retries) == (1200, 400, 512, 2)
    inherited = resolve_target_policy(config, "tp", "tm")  # inherits the top-level absolute form
    assert inherited.retention == ("retainTokens", 200) and inherited.threshold_ratio == 0.5
    assert resolve_compact_spec(inherited, 2000).retain_tokens == 200
    base = resolve_target_policy(config, "x", "y")
    assert (base.threshold_ratio, base.retention, base.max_tokens, base.max_overflow_retries) == (
        0.8, ("retainTokens", 200), 8192, 1)
    # override retainTokens beats an inherited ratio
    ratio_top = resolve_config({"retainRatio": 0.1, "modelPolicies": [{"provider": "a", "model": "b", "retainTokens": 7}]})
    assert resolve_target_policy(ratio_top, "a", "b").retention == ("retainTokens", 7)


def test_compact_spec_floors_threshold_and_ratio_retention():
    policy = resolve_target_policy(resolve_config({"thresholdRatio": 0.5}), P, M)
    spec = resolve_compact_spec(policy, 1001)
    assert (spec.context_window, spec.threshold_tokens, spec.retain_tokens) == (1001, 500, 160)
    spec = resolve_compact_spec(resolve_target_policy(resolve_config({}), P, M), 999)
    assert (spec.threshold_tokens, spec.retain_tokens) == (math.floor(999 * 0.8), math.floor(999 * 0.16))


@pytest.mark.parametrize("window", [1.5, 0, -5, "1000", None])
def test_compact_spec_rejects_a_non_positive_integer_window(window):
    policy = resolve_target_policy(resolve_config({"thresholdRatio": 0.5, "retainTokens": 100}), P, M)
    with pytest.raises(TargetPressureConfigError) as info:
        resolve_compact_spec(policy, window)
    shown = {1.5: "1.5", 0: "0", -5: "-5", "1000": "1000", None: "null"}[window]
    assert str(info.value) == f"{NAME}: contextWindow ({shown}) must be a positive integer"
    assert info.value.target_key == f"{P}/{M}"


@pytest.mark.parametrize("retain", [500, 600])
def test_compact_spec_requires_retention_below_threshold(retain):
    policy = resolve_target_policy(resolve_config({"thresholdRatio": 0.5, "retainTokens": retain}), P, M)
    with pytest.raises(TargetPressureConfigError) as info:
        resolve_compact_spec(policy, 1000)
    assert str(info.value) == f"{NAME}: {P}/{M} retainTokens ({retain}) must be less than threshold tokens 500"
    assert info.value.target_key == f"{P}/{M}"
    assert resolve_compact_spec(policy, 1000 + 2 * (retain - 499)).retain_tokens == retain


def test_runtime_policy_from_json():
    policy = RuntimePolicy.from_json({"thresholdRatio": 0.5, "retainTokens": 200, "contextWindow": 2000,
                                      "toolResultPruner": {"thresholdChars": 1200, "headChars": 300, "tailChars": 200}})
    assert policy.context_window == 2000 and policy.compaction.retention == ("retainTokens", 200)
    assert (policy.pruner.threshold_chars, policy.pruner.head_chars, policy.pruner.tail_chars) == (1200, 300, 200)
    assert RuntimePolicy.from_json({}).pruner is None


# -- spec 9.2: pressure ---------------------------------------------------------------------------
PRESSURE_CONFIG = {"thresholdRatio": 0.5, "retainTokens": 180}


def test_pressure_without_a_routed_target_writes_nothing():
    session = conversation(4, header=False)
    assert routed_target(session) is None
    out = compact_if_needed(session, PRESSURE, env(PRESSURE_CONFIG))
    assert out.session is session and out.value is None and out.error is None


def test_pressure_below_threshold_writes_nothing_and_equality_qualifies():
    session = conversation(2)
    t = total(session)
    below = compact_if_needed(session, PRESSURE, env({"thresholdRatio": 1, "retainTokens": 10}, window=t + 1))
    assert below.session is session and below.value is None and below.error is None
    at = compact_if_needed(session, PRESSURE, env({"thresholdRatio": 1, "retainTokens": 10}, window=t))
    assert at.error is None and at.value is not None
    assert added(session, at.session) == ["compaction/start", "compaction/summary", "user/message", "compaction/end"]


def test_pressure_compacts_a_priced_head_above_threshold():
    assert compact_if_needed(conversation(2), PRESSURE, env(PRESSURE_CONFIG)).value is None
    session = conversation(4)
    assert total(session) >= 500
    out = compact_if_needed(session, PRESSURE, env(PRESSURE_CONFIG))
    assert out.error is None
    result = out.value
    # the retention walk (180) keeps the newest nodes whose suffix first reaches 180 tokens
    prices = [p for _, p in measure(session).nodes]
    keep = max(i for i in range(len(prices)) if sum(prices[i:]) >= 180)
    assert result.shadowed_seqs == session.nodes[:keep]
    assert len(out.session.nodes) == len(session.nodes) - keep + 1
    assert total(out.session) < 500


def test_pressure_uses_the_latest_logged_route():
    session = conversation(4)
    log = Log(session)
    log.header(provider="large", model="shared-id", reason="resume")
    e = env({"thresholdRatio": 0.5, "retainRatio": 0.1}, capacity={("large", "shared-id"): 10_000,
                                                                    ("small", "shared-id"): 1_000})
    assert compact_if_needed(log.session, PRESSURE, e).session is log.session
    log.header(provider="small", model="shared-id", reason="change")
    assert compact_if_needed(log.session, PRESSURE, e).value is not None


def test_pressure_without_capacity_is_a_target_config_error():
    session = conversation(4)
    out = compact_if_needed(session, PRESSURE, env(PRESSURE_CONFIG, window=None))
    assert isinstance(out.error, TargetPressureConfigError) and out.error.target_key == f"{P}/{M}"
    assert str(out.error) == (f"compaction-basic: no context capacity for {P}/{M}; "
                              "configure contextWindow on that adapter model")
    assert out.session is session
    # overflow needs no capacity
    outcome, state, retry = on_request_error(session, OverflowState(), OVERFLOW_CODE, env(PRESSURE_CONFIG, window=None))
    assert retry and outcome.error is None


def test_pressure_with_retention_not_below_threshold_is_a_target_config_error():
    session = conversation(4)
    out = compact_if_needed(session, PRESSURE, env({"thresholdRatio": 0.5, "retainTokens": 500}, window=1000))
    assert isinstance(out.error, TargetPressureConfigError)
    assert str(out.error) == f"{NAME}: {P}/{M} retainTokens (500) must be less than threshold tokens 500"
    assert out.session is session


def test_pressure_with_a_live_lock_is_busy_even_below_threshold():
    session = conversation(1)
    log = Log(session)
    log.add("compaction/start", {"compactionId": "orphan", "turn": 2})
    out = compact_if_needed(log.session, PRESSURE, env(PRESSURE_CONFIG, window=1_000_000))
    assert isinstance(out.error, ManualCompactionError) and out.error.code == "busy"
    assert str(out.error) == f"automatic pressure compaction: {LOCK}"
    assert out.session is log.session


def test_pressure_checks_the_lock_before_capacity_and_capacity_before_the_threshold():
    """Spec 9.2 steps 5-8: lock, then capacity, then the compact spec, and only then the threshold."""
    session = conversation(1)
    log = Log(session)
    log.add("compaction/start", {"compactionId": "orphan", "turn": 2})
    out = compact_if_needed(log.session, PRESSURE, env(PRESSURE_CONFIG, window=None))
    assert isinstance(out.error, ManualCompactionError) and out.error.code == "busy"
    small = conversation(1)
    assert total(small) < 500
    out = compact_if_needed(small, PRESSURE, env(PRESSURE_CONFIG, window=None))
    assert isinstance(out.error, TargetPressureConfigError)
    out = compact_if_needed(small, PRESSURE, env({"thresholdRatio": 0.5, "retainTokens": 5000}, window=1000))
    assert isinstance(out.error, TargetPressureConfigError) and out.session is small


def test_pressure_with_no_compactable_range_returns_none_silently():
    log = Log()
    log.turn_start(1)
    log.header(system="x" * 100_000)
    out = compact_if_needed(log.session, PRESSURE, env(PRESSURE_CONFIG))
    assert out.session is log.session and out.error is None and out.value is None
    retained = conversation(1)
    log = Log(retained)
    log.header(system="x" * 100_000, reason="resume")
    out = compact_if_needed(log.session, PRESSURE, env(PRESSURE_CONFIG))
    assert out.session is log.session and out.error is None and out.value is None


def test_pressure_counts_the_request_envelope():
    session = conversation(2, text="x" * 600)
    e = env({"thresholdRatio": 0.9, "retainTokens": 50})
    assert compact_if_needed(session, PRESSURE, e).value is None
    log = Log(session)
    log.header(system="s" * 2000, reason="resume")
    assert compact_if_needed(log.session, PRESSURE, e).value is not None


def test_pressure_does_not_prune_below_threshold():
    session = oversized_tool_result()
    out = compact_if_needed(session, PRESSURE, env({"thresholdRatio": 0.8, "retainTokens": 100}, window=10_000,
                                                    pruner=PRUNE))
    assert out.session is session and out.session.generation == 0


def test_pressure_prune_only_sufficed_writes_no_summary():
    session = oversized_tool_result()
    assert total(session) >= 500
    out = compact_if_needed(session, PRESSURE, env({"thresholdRatio": 0.5, "retainTokens": 50}, pruner=PRUNE))
    assert out.error is None and out.value is None
    assert added(session, out.session) == ["compaction/prune", "tool/result"]
    assert out.session.generation == 1 and total(out.session) < 500


def test_pressure_prunes_then_summarizes_the_pruned_surface():
    session = tool_conversation()
    e = env({"thresholdRatio": 0.5, "retainTokens": 50}, window=2000, pruner=PRUNE)
    out = compact_if_needed(session, PRESSURE, e)
    assert out.error is None and out.value is not None
    kinds = added(session, out.session)
    assert kinds[:6] == ["compaction/prune", "tool/result"] * 3
    assert kinds[6:] == ["compaction/start", "compaction/summary", "user/message", "compaction/end"]
    pruned = [e.seq for e in out.session.log[len(session.log):] if e.type == "tool/result"]
    # the checkpoint shadows pruned replacements (a replacement of a replacement)
    assert set(pruned[:2]) <= set(out.value.shadowed_seqs)
    start = len(session.log) + 6
    shadowed_messages = [out.session.log[seq].data for seq in out.value.shadowed_seqs]
    text = repr(shadowed_messages)
    assert PRUNE_MARKER.strip() in text and ("result 1 " * 300) not in text
    assert out.session.log[start].type == "compaction/start"


def test_pressure_without_a_pruner_never_prunes():
    session = oversized_tool_result(3000, with_prompt=True)
    out = compact_if_needed(session, PRESSURE, env({"thresholdRatio": 0.5, "retainTokens": 50}, window=2000))
    assert out.value is not None
    assert "compaction/prune" not in added(session, out.session)


def retry_session(tail_chars=2000) -> Session:
    """[U1 (big), A1, U2 (tail_chars)], open turn 2: the retained tail alone stays above threshold."""
    log = Log()
    log.turn_start(1)
    log.user("history " * 150)
    log.step_start(1, 1)
    log.header()
    log.assistant(1, 1, "answer " * 60)
    log.step_end(1, 1)
    log.turn_end(1)
    log.turn_start(2)
    log.step_start(2, 1)
    log.user("p" * tail_chars)
    log.step_end(2, 1)
    return log.session


SHRINKING = (SummaryScript(text="a" * 400), SummaryScript(text="b" * 200), SummaryScript(text="c" * 100))


def test_compaction_retry_resummarizes_the_previous_checkpoint_alone():
    """Spec 9.4: attempt 2's range is exactly {checkpoint, checkpoint}; then the retry budget is spent."""
    session = retry_session()
    e = env({"thresholdRatio": 0.4, "retainTokens": 100, "compactionRetries": 1}, scripts=SHRINKING)
    out = compact_if_needed(session, PRESSURE, e)
    events = out.session.log[len(session.log):]
    summaries = [ev for ev in events if ev.type == "compaction/summary"]
    checkpoints = [ev for ev in events if ev.type == "user/message"]
    assert len(summaries) == 2
    first = checkpoints[0].seq
    assert summaries[1].data["shadowedRange"] == {"start": first, "end": first}
    assert summaries[1].data["shadowedSeqs"] == [first]
    assert summaries[1].data["shadowedTokenCount"] == 98 + 100 + 4
    assert out.session.nodes == (checkpoints[1].seq, session.nodes[-1])
    t = total(out.session)
    assert isinstance(out.error, CompactionError)
    assert str(out.error) == (f"compaction still above threshold after 2 compaction attempts "
                              f"({t} estimated tokens >= threshold 400)")
    assert out.value.start_seq == events[[ev.type for ev in events].index("compaction/start", 1)].seq


@pytest.mark.parametrize("retries", [0, 1, 2])
def test_at_most_compaction_retries_plus_one_summaries(retries):
    session = retry_session()
    e = env({"thresholdRatio": 0.4, "retainTokens": 100, "compactionRetries": retries}, scripts=SHRINKING)
    out = compact_if_needed(session, PRESSURE, e)
    assert sum(ev.type == "compaction/summary" for ev in out.session.log) == retries + 1
    assert str(out.error).startswith(f"compaction still above threshold after {retries + 1} compaction attempts (")
    assert out.session.generation == retries + 1


def test_retry_stops_once_below_threshold():
    session = retry_session(tail_chars=1000)  # U2 = 258 tokens; after attempt 1: 202 + 258 = 460
    e = env({"thresholdRatio": 0.5, "retainTokens": 100, "compactionRetries": 3}, window=1000, scripts=SHRINKING)
    assert total(session) >= 500
    out = compact_if_needed(session, PRESSURE, e)
    assert out.error is None
    assert sum(ev.type == "compaction/summary" for ev in out.session.log) == 1


def test_a_failing_retry_propagates_and_the_first_attempt_stays_durable():
    session = retry_session()
    scripts = (SummaryScript(text="a" * 400), SummaryScript(text="b" * 800))  # attempt 2 does not shrink
    out = compact_if_needed(session, PRESSURE, env({"thresholdRatio": 0.4, "retainTokens": 100}, scripts=scripts))
    assert str(out.error) == "summary is not smaller than the shadowed content (302 estimated framed tokens >= 202)"
    assert out.value is not None and out.session.generation == 1
    kinds = added(session, out.session)
    assert kinds == ["compaction/start", "compaction/summary", "user/message", "compaction/end",
                     "compaction/start", "compaction/end"]


def test_pressure_summary_uses_the_policy_max_tokens():
    session = conversation(4)
    out = compact_if_needed(session, PRESSURE, env({**PRESSURE_CONFIG, "maxTokens": 321}))
    summary = next(ev for ev in out.session.log if ev.type == "compaction/summary")
    assert summary.data["maxTokens"] == 321


# -- spec 10: overflow recovery --------------------------------------------------------------------
def overflow_session(prompt="new prompt " * 20) -> Session:
    """Turn 1 closed; turn 2 step 1 entered `prompt` and its request overflowed."""
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    log.user("first question " * 40)
    log.header()
    log.assistant(1, 1, "first answer " * 30)
    log.step_end(1, 1)
    log.turn_end(1)
    log.turn_start(2)
    log.step_start(2, 1)
    log.user(prompt)
    log.overflow_chunk(2, 1)
    return log.session


def tool_unit_overflow(with_prompt=False, chars=3000) -> Session:
    log = Log()
    log.turn_start(1)
    log.step_start(1, 1)
    if with_prompt:
        log.user("older history " * 200)
    log.header()
    log.assistant(1, 1, calls=["big"])
    log.result(1, 1, "big", "X" * chars)
    log.step_end(1, 1)
    log.step_start(1, 2)
    log.overflow_chunk(1, 2)
    return log.session


def test_overflow_compacts_with_retain_zero_and_authorizes_a_retry():
    session = overflow_session()
    nodes = session.nodes
    e = env({"thresholdRatio": 0.99, "retainTokens": 20, "compactionRetries": 3}, window=1_000_000)
    outcome, state, retry = on_request_error(session, OverflowState(), OVERFLOW_CODE, e)
    assert retry and state.retries == 1 and outcome.error is None
    events = outcome.session.log[len(session.log):]
    assert [ev.type for ev in events] == ["compaction/start", "compaction/summary", "user/message", "compaction/end"]
    assert events[0].data["turn"] == 2
    # retain 0: everything but the newest node (the just-entered prompt: §15 G2b keeps only the last node)
    assert events[1].data["shadowedRange"] == {"start": nodes[0], "end": nodes[-2]}
    assert outcome.session.nodes == (events[2].seq, nodes[-1])
    assert outcome.session.generation == session.generation + 1


def test_overflow_makes_exactly_one_summary_attempt():
    """No threshold, no compactionRetries loop: one summary even when the surface stays huge."""
    session = overflow_session(prompt="p" * 20_000)
    e = env({"compactionRetries": 5}, window=100, scripts=SHRINKING)
    outcome = compact_if_needed(session, OVERFLOW, e)
    assert outcome.error is None
    assert sum(ev.type == "compaction/summary" for ev in outcome.session.log) == 1


def test_overflow_uses_the_policy_max_tokens_and_ignores_capacity():
    session = overflow_session()
    outcome = compact_if_needed(session, OVERFLOW, env({"maxTokens": 32}, window=None))
    summary = next(ev for ev in outcome.session.log if ev.type == "compaction/summary")
    assert summary.data["maxTokens"] == 32


def test_overflow_retries_exhausted():
    session = overflow_session()
    outcome, state, retry = on_request_error(session, OverflowState(1, True), OVERFLOW_CODE, env())
    assert not retry and state.retries == 1 and outcome.session is session


def test_max_overflow_retries_zero_disables_recovery():
    session = overflow_session()
    outcome, state, retry = on_request_error(session, OverflowState(), OVERFLOW_CODE, env({"maxOverflowRetries": 0}))
    assert not retry and outcome.session is session


def test_routed_model_override_applies_to_the_overflow_retry_cap():
    session = overflow_session()
    e = env({"maxOverflowRetries": 1, "modelPolicies": [{"provider": P, "model": M, "maxOverflowRetries": 2}]})
    outcome, state, retry = on_request_error(session, OverflowState(1, True), OVERFLOW_CODE, e)
    assert retry and state.retries == 2
    _, _, retry = on_request_error(outcome.session, state, OVERFLOW_CODE, e)
    assert not retry


def test_overflow_ignores_other_failures_cancellation_and_unrouted_sessions():
    session = overflow_session()
    for code, aborted in (("RATE_LIMITED", False), (OVERFLOW_CODE, True)):
        outcome, state, retry = on_request_error(session, OverflowState(), code, env(), signal_aborted=aborted)
        assert not retry and outcome.session is session and state.retries == 0
    unrouted = conversation(2, header=False)
    outcome, state, retry = on_request_error(unrouted, OverflowState(), OVERFLOW_CODE, env())
    assert not retry and outcome.session is unrouted


def test_overflow_without_generation_advance_does_not_retry():
    session = tool_unit_overflow()  # whole surface = one tool unit, no pruner
    outcome, state, retry = on_request_error(session, OverflowState(), OVERFLOW_CODE, env())
    assert not retry and state.retries == 0
    assert outcome.session is session and outcome.error is None


def test_overflow_summary_failure_without_progress_preserves_the_request_error():
    session = overflow_session()
    outcome, state, retry = on_request_error(session, OverflowState(), OVERFLOW_CODE,
                                             env(default=SummaryScript(outcome="failure")))
    assert not retry and state.retries == 0
    assert isinstance(outcome.error, SummarizerError)
    assert [ev.type for ev in outcome.session.log[len(session.log):]] == ["compaction/start", "compaction/end"]


def test_prune_only_progress_authorizes_an_overflow_retry():
    """§15 G16: the indivisible tool unit cannot be summarized, but the prune advanced the generation."""
    session = tool_unit_overflow()
    outcome, state, retry = on_request_error(session, OverflowState(), OVERFLOW_CODE, env(pruner=PRUNE))
    assert retry and state.retries == 1 and outcome.error is None
    assert [ev.type for ev in outcome.session.log[len(session.log):]] == ["compaction/prune", "tool/result"]


def test_summary_failure_after_prune_progress_still_retries():
    session = tool_unit_overflow(with_prompt=True)
    outcome, state, retry = on_request_error(session, OverflowState(), OVERFLOW_CODE,
                                             env(pruner=PRUNE, default=SummaryScript(outcome="failure")))
    assert retry and state.retries == 1
    assert str(outcome.error) == "summarizer request failed (scripted)"
    assert [ev.type for ev in outcome.session.log[len(session.log):]] == [
        "compaction/prune", "tool/result", "compaction/start", "compaction/end"]


def test_cancellation_wins_after_prune_progress():
    session = tool_unit_overflow(with_prompt=True)
    outcome, state, retry = on_request_error(session, OverflowState(), OVERFLOW_CODE,
                                             env(pruner=PRUNE, default=SummaryScript(outcome="cancel")))
    assert not retry and state.retries == 0
    assert isinstance(outcome.error, AbortError)
    assert outcome.session.generation == session.generation + 1


def test_cancellation_during_an_awaited_overflow_compaction_commits_but_does_not_retry():
    """§15 G12 + 10.2: the automatic transaction commits a late summary, but an aborted signal stops the retry."""
    session = overflow_session()
    outcome, state, retry = on_request_error(session, OverflowState(), OVERFLOW_CODE,
                                             env(default=SummaryScript(outcome="late-cancel", text="s")))
    assert not retry and outcome.error is None
    assert outcome.session.generation == session.generation + 1


def test_overflow_pruning_bypasses_the_lock():
    """§15 G8: overflow prunes before the transaction checks the durable lock; the prune is progress."""
    session = tool_unit_overflow(with_prompt=True)
    log = Log(session)
    log.add("compaction/start", {"compactionId": "orphan", "turn": 1})
    outcome, state, retry = on_request_error(log.session, OverflowState(), OVERFLOW_CODE, env(pruner=PRUNE))
    assert isinstance(outcome.error, ManualCompactionError) and outcome.error.code == "busy"
    assert str(outcome.error) == f"compaction: {LOCK}"
    assert [ev.type for ev in outcome.session.log[len(log.session.log):]] == ["compaction/prune", "tool/result"]
    assert retry and state.retries == 1
    # without a pruner, the lock refuses without progress: no retry
    outcome, state, retry = on_request_error(log.session, OverflowState(), OVERFLOW_CODE, env())
    assert not retry and outcome.session is log.session and outcome.error.code == "busy"


def test_reset_overflow():
    """D3: cleared on agent/status idle, and on any assistant/message once an overflow was seen."""
    spent = OverflowState(1, True)
    assert reset_overflow(spent, "assistant/message").retries == 0
    assert reset_overflow(spent, "agent/status", "idle").retries == 0
    assert reset_overflow(spent, "agent/status", "running") == spent
    assert reset_overflow(spent, "tool/result") == spent
    unseen = OverflowState(1, False)  # no overflow seen for this session: assistant messages do not reset
    assert reset_overflow(unseen, "assistant/message") == unseen
    assert reset_overflow(unseen, "agent/status", "idle").retries == 0
    # a recovered overflow then a successful response re-arms the budget
    session = overflow_session()
    outcome, state, retry = on_request_error(session, OverflowState(), OVERFLOW_CODE, env())
    assert retry and state.seen_overflow
    blocked, _, retry = on_request_error(outcome.session, state, OVERFLOW_CODE, env())
    assert not retry and blocked.session is outcome.session  # budget spent: no attempt at all
    state = reset_overflow(state, "assistant/message")
    assert state.retries == 0
    again, _, _ = on_request_error(outcome.session, state, OVERFLOW_CODE, env())
    assert "compaction/start" in [ev.type for ev in again.session.log[len(outcome.session.log):]]
