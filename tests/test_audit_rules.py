"""Each audit rule fires on a corrupted copy of a real log, at the right seq (issue 3 "must show").

Every test copies a corpus log (or, where the corpus cannot show the rule, a scenario log) into
`tmp_path`, changes one thing, audits the copy and asserts the rule id and seq. The originals are
never touched. `RECOVERY` is the recorded overflow recovery walked through in spec 10.4.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from surfacecheck.audit.rules import RULES
from surfacecheck.audit.run import audit_log, load_policy

RECOVERY = "dsh-sessions/examples__headless-agent__tests__snapshots__compaction-recovery__session.jsonl"
INSTRUCTIONS = "dsh-sessions/examples__acp-agent__tests__snapshots__agent-instructions__session.jsonl"
PRUNE = "dsh-generated/01-prune.jsonl"
PRESSURE = "dsh-generated/02-pressure-summary.jsonl"
SECOND = "dsh-generated/03-second-generation.jsonl"
CONTEXT = "dsh-generated/09-runtime-context.jsonl"
COVERED: set[str] = set()
MESSAGES: list[tuple[str, str]] = []


def lines_of(path: Path) -> tuple[str, list[dict | str]]:
    raw = path.read_text(encoding="utf-8").splitlines()
    return raw[0], [json.loads(line) for line in raw[1:]]


def corrupt(corpus: Path, name: str, tmp_path: Path, change, *, torn: bool = False) -> Path:
    """Copy `name` to tmp_path with `change(records)` applied (records: parsed lines after the header)."""
    header, records = lines_of(corpus / name)
    change(records)
    out = tmp_path / Path(name).name
    text = "\n".join([header] + [json.dumps(r, separators=(",", ":")) for r in records])
    out.write_text(text if torn else text + "\n", encoding="utf-8")
    return out


def at(records: list[dict], seq: int) -> dict:
    return next(r for r in records if r.get("seq") == seq)


def policy_of(corpus: Path, name: str):
    return load_policy(corpus / "dsh-generated" / "policies" / (Path(name).stem + ".json"))


def found(path: Path, policy=None) -> list[tuple[str, int]]:
    """The audit's (rule, seq) findings; each finding's message must say what was expected and observed."""
    findings = audit_log(path, policy).findings
    MESSAGES.extend((f.rule, f.message) for f in findings)
    assert [f.message for f in findings if "expected" not in f.message or "observed" not in f.message] == []
    return [(f.rule, f.seq) for f in findings]


def _rules_named_by_tests() -> set[str]:
    """The rule ids some test of this module names (as a string in its body): read from the source, so the answer
    does not depend on which tests ran in this process (pytest-xdist spreads a module over workers)."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    named: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and node.name != "test_every_rule_has_a_corruption_test":
            named.update(n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and n.value in RULES)
    return named


def check(path: Path, rule: str, seq: int, policy=None, first: bool = True) -> None:
    findings = found(path, policy)
    COVERED.add(rule)
    assert (rule, seq) in findings, findings
    if first:  # the named rule is the first thing wrong with the log
        assert findings[0][1] == seq and rule in [r for r, s in findings if s == seq], findings


def test_originals_are_clean(corpus):
    assert found(corpus / RECOVERY) == []
    assert found(corpus / PRUNE, policy_of(corpus, PRUNE)) == []
    assert found(corpus / PRESSURE, policy_of(corpus, PRESSURE)) == []


# -- envelope and surface (spec 1.4, 1.7) ---------------------------------------------------------
def test_seq_contiguity_deleted_event(corpus, tmp_path):
    path = corrupt(corpus, RECOVERY, tmp_path, lambda r: r.remove(at(r, 16)))
    check(path, "seq-contiguity", 17)


def test_seq_contiguity_duplicated_event(corpus, tmp_path):
    path = corrupt(corpus, RECOVERY, tmp_path, lambda r: r.insert(6, dict(at(r, 5))))
    check(path, "seq-contiguity", 5)


def test_seq_gap_without_later_turn_end_is_an_uncommitted_tail(corpus, tmp_path):
    def change(records):
        records.remove(at(records, 28))
        records.remove(at(records, 30))
    check(corrupt(corpus, RECOVERY, tmp_path, change), "seq-gap-uncommitted", 29)


def test_torn_tail(corpus, tmp_path):
    path = corrupt(corpus, RECOVERY, tmp_path, lambda r: None, torn=True)
    check(path, "torn-tail", 30)
    assert audit_log(path).events == 30


def test_surface_op_missing(corpus, tmp_path):
    path = corrupt(corpus, RECOVERY, tmp_path, lambda r: at(r, 4).pop("surfaceOp"))
    check(path, "surface-op-missing", 4)


def test_surface_op_forbidden(corpus, tmp_path):
    path = corrupt(corpus, RECOVERY, tmp_path, lambda r: at(r, 17).update(surfaceOp="append"))
    check(path, "surface-op-forbidden", 17)


def test_source_event_seqs_forbidden(corpus, tmp_path):
    path = corrupt(corpus, RECOVERY, tmp_path, lambda r: at(r, 14).update(sourceEventSeqs=[13]))
    check(path, "surface-op-forbidden", 14)


@pytest.mark.parametrize("op", ["prepend", None, {"op": "replace", "start": 4}, {"op": "replace", "start": 4, "end": -1}])
def test_surface_op_invalid(corpus, tmp_path, op):
    path = corrupt(corpus, RECOVERY, tmp_path, lambda r: at(r, 21).update(surfaceOp=op))
    check(path, "surface-op-invalid", 21)


def test_replace_range_missing(corpus, tmp_path):
    path = corrupt(corpus, RECOVERY, tmp_path, lambda r: at(r, 21)["surfaceOp"].update(start=99, end=99))
    check(path, "replace-range-missing", 21)


def test_replace_range_reversed(corpus, tmp_path):
    path = corrupt(corpus, RECOVERY, tmp_path, lambda r: at(r, 21)["surfaceOp"].update(start=13, end=4))
    check(path, "replace-range-reversed", 21, first=False)


def test_provenance_invalid_not_earlier(corpus, tmp_path):
    path = corrupt(corpus, RECOVERY, tmp_path, lambda r: at(r, 15).update(sourceEventSeqs=[14, 15]))
    check(path, "provenance-invalid", 15)


def test_provenance_invalid_duplicate(corpus, tmp_path):
    path = corrupt(corpus, RECOVERY, tmp_path, lambda r: at(r, 21).update(sourceEventSeqs=[19, 20, 4, 4]))
    check(path, "provenance-invalid", 21)


def test_provenance_missing_shadowed(corpus, tmp_path):
    path = corrupt(corpus, RECOVERY, tmp_path, lambda r: at(r, 21).update(sourceEventSeqs=[19, 20]))
    check(path, "provenance-missing-shadowed", 21)


def test_tool_result_rewrite_changes_more_than_content(corpus, tmp_path):
    path = corrupt(corpus, PRUNE, tmp_path, lambda r: at(r, 24)["data"].update(turn=7))
    check(path, "tool-result-rewrite", 24, policy_of(corpus, PRUNE))


def test_tool_result_rewrite_spans_two_nodes(corpus, tmp_path):
    def change(records):
        at(records, 24)["surfaceOp"].update(start=19)
        at(records, 24)["sourceEventSeqs"] = [19, 21]
        at(records, 23)["data"]["shadowedRange"]["start"] = 19
    path = corrupt(corpus, PRUNE, tmp_path, change)
    check(path, "tool-result-rewrite", 24, policy_of(corpus, PRUNE), first=False)


def test_message_shape(corpus, tmp_path):
    def change(records):
        data = at(records, 28)["data"]
        data.update(content=data.pop("message")["content"])
    check(corrupt(corpus, RECOVERY, tmp_path, change), "message-shape", 28)


# -- pairing (spec 3) ------------------------------------------------------------------------------
def test_orphan_tool_result(corpus, tmp_path):
    path = corrupt(corpus, RECOVERY, tmp_path,
                   lambda r: at(r, 13)["data"]["message"].update(content=[{"type": "text", "text": "no call"}]))
    check(path, "orphan-tool-result", 15)


def test_tool_result_unknown_call(corpus, tmp_path):
    path = corrupt(corpus, RECOVERY, tmp_path, lambda r: at(r, 15)["data"]["message"]["source"].update(callId="other"))
    check(path, "tool-result-unknown-call", 15)


def test_cut_unbalanced(corpus, tmp_path):
    def change(records):  # the checkpoint swallows the tool call 13 but not its result 15
        at(records, 21)["surfaceOp"].update(end=13)
        at(records, 21)["sourceEventSeqs"] = [19, 20, 4, 13]
        at(records, 20)["data"]["shadowedRange"]["end"] = 13
    check(corrupt(corpus, RECOVERY, tmp_path, change), "cut-unbalanced", 21, first=False)


# -- meter and shadow prices (spec 4.2, 5.1) ---------------------------------------------------------
def test_meter_fold(corpus, tmp_path):
    path = corrupt(corpus, RECOVERY, tmp_path, lambda r: at(r, 16)["data"].update(step=5))
    check(path, "meter-fold", 16)


def test_shadow_price_mismatch(corpus, tmp_path):
    path = corrupt(corpus, PRUNE, tmp_path, lambda r: at(r, 23)["data"].update(shadowedRange={"start": 19, "end": 19},
                                                                               shadowedSeqs=[19], shadowedTokenCount=29))
    check(path, "shadow-price-mismatch", 24, policy_of(corpus, PRUNE))


def test_shadow_price_wrong(corpus, tmp_path):
    path = corrupt(corpus, RECOVERY, tmp_path, lambda r: at(r, 20)["data"].update(shadowedTokenCount=300))
    check(path, "shadow-price-wrong", 20)


def test_shadow_price_wrong_on_prune(corpus, tmp_path):
    path = corrupt(corpus, PRUNE, tmp_path, lambda r: at(r, 23)["data"].update(shadowedTokenCount=811))
    check(path, "shadow-price-wrong", 23, policy_of(corpus, PRUNE))


def test_shadowed_seqs_wrong(corpus, tmp_path):
    path = corrupt(corpus, RECOVERY, tmp_path, lambda r: at(r, 20)["data"].update(shadowedSeqs=[4, 13]))
    check(path, "shadowed-seqs-wrong", 20)


def test_projection_drift(corpus, tmp_path):
    path = corrupt(corpus, PRUNE, tmp_path, lambda r: at(r, 23).update(type="agent/note"))
    check(path, "projection-drift", 24, policy_of(corpus, PRUNE))


# -- brackets and the lock (spec 8, 1.5, 1.8) --------------------------------------------------------
def test_bracket_order_summary_without_start(corpus, tmp_path):
    path = corrupt(corpus, RECOVERY, tmp_path, lambda r: at(r, 20)["data"].update(compactionId="another"))
    check(path, "bracket-order", 20)


def test_bracket_order_checkpoint_not_after_summary(corpus, tmp_path):
    def change(records):  # the event after the summary is an append, not the checkpoint replace
        at(records, 21)["surfaceOp"] = "append"
        at(records, 21).pop("sourceEventSeqs")
    check(corrupt(corpus, RECOVERY, tmp_path, change), "bracket-order", 21)


def test_bracket_order_success_end_without_summary(corpus, tmp_path):
    def change(records):
        at(records, 20).update(type="agent/note")
        at(records, 21).update(surfaceOp="append")
        at(records, 21).pop("sourceEventSeqs")
    check(corrupt(corpus, RECOVERY, tmp_path, change), "bracket-order", 22, first=False)


def test_summary_not_smaller(corpus, tmp_path):
    def change(records):
        at(records, 21)["data"]["content"][1]["text"] = "x" * 1200
    check(corrupt(corpus, RECOVERY, tmp_path, change), "summary-not-smaller", 21)


def test_checkpoint_source(corpus, tmp_path):
    path = corrupt(corpus, RECOVERY, tmp_path, lambda r: at(r, 21)["data"]["source"].update(compactionId="other"))
    check(path, "checkpoint-source", 21)


def test_checkpoint_unbracketed_in_the_recorded_fixture(corpus):
    assert ("checkpoint-unbracketed", 17) in found(corpus / INSTRUCTIONS)
    COVERED.add("checkpoint-unbracketed")


def test_checkpoint_unbracketed(corpus, tmp_path):
    def change(records):
        for seq in (19, 20, 22):
            at(records, seq).update(type="agent/note")
    check(corrupt(corpus, RECOVERY, tmp_path, change), "checkpoint-unbracketed", 21, first=False)


def test_lock_overlap(corpus, tmp_path):
    path = corrupt(corpus, SECOND, tmp_path, lambda r: at(r, 60).update(type="agent/note"))
    check(path, "lock-overlap", 111, policy_of(corpus, SECOND), first=False)


def test_lock_overlap_pressure_prune_past_a_live_lock(corpus, tmp_path):
    long = "dsh-generated/10-long-session.jsonl"
    path = corrupt(corpus, long, tmp_path, lambda r: at(r, 307).update(type="agent/note"))
    check(path, "lock-overlap", 455, policy_of(corpus, long), first=False)


def test_lock_orphaned(corpus, tmp_path):
    path = corrupt(corpus, RECOVERY, tmp_path, lambda r: at(r, 22).update(type="agent/note"))
    check(path, "lock-orphaned", 19)


# -- policy (spec 7, 9, 10, 12) -----------------------------------------------------------------------
def test_selection_mismatch_under_another_policy(corpus, tmp_path):
    policy_file = tmp_path / "policy.json"
    policy_file.write_text(json.dumps(dict(json.loads((corpus / "dsh-generated/policies/02-pressure-summary.json")
                                                      .read_text()), retainTokens=400)))
    check(corpus / PRESSURE, "selection-mismatch", 58, load_policy(policy_file))


def test_selection_mismatch_overflow_range(corpus, tmp_path):
    def change(records):  # retain 0 selects 4-4; claim 4-13 shadowing the tool call too
        summary = at(records, 20)["data"]
        summary.update(shadowedRange={"start": 4, "end": 13}, shadowedSeqs=[4, 13], shadowedTokenCount=295)
    check(corrupt(corpus, RECOVERY, tmp_path, change), "selection-mismatch", 20, first=False)


def _with_policy(corpus, tmp_path, name, **changes):
    policy_file = tmp_path / "policy.json"
    base = json.loads((corpus / "dsh-generated/policies" / (Path(name).stem + ".json")).read_text())
    policy_file.write_text(json.dumps(dict(base, **changes)))
    return load_policy(policy_file)


def test_pressure_below_threshold_compaction(corpus, tmp_path):
    """02 measured 1072 tokens at its pressure compaction; a 0.6 threshold (1200) would not qualify."""
    check(corpus / PRESSURE, "pressure-below-threshold", 57, _with_policy(corpus, tmp_path, PRESSURE, thresholdRatio=0.6))


def test_pressure_below_threshold_prune(corpus, tmp_path):
    """01 measured 973 tokens before pruning; a 0.99 threshold (990) would not qualify (no opportunistic pruning)."""
    check(corpus / PRUNE, "pressure-below-threshold", 23, _with_policy(corpus, tmp_path, PRUNE, thresholdRatio=0.99))


def g4_log(tmp_path) -> tuple[Path, dict]:
    """A scenario the corpus lacks (spec §15 G4): an envelope too big to relieve, so every pre-step
    makes two pressure attempts. Written by the model's scripted agent."""
    from surfacecheck.model.agent import DEFAULT_HEADER, Agent, Reply, Turn, run_turn
    from surfacecheck.model.config import RuntimePolicy
    from surfacecheck.model.jsonl import dumps_log
    from surfacecheck.model.policy import Environment
    from surfacecheck.scenarios.generate import read_step, words

    policy = {"thresholdRatio": 0.8, "retainTokens": 100, "compactionRetries": 1, "maxOverflowRetries": 1,
              "maxTokens": 512, "contextWindow": 1000}
    agent = Agent(env=Environment(policy=RuntimePolicy.from_json(policy)), header={**DEFAULT_HEADER, "system": "S" * 2400})
    steps = tuple(read_step(f"src/m{i}.ts", 6, f"Reading {i}.") for i in range(3))
    agent = run_turn(agent, Turn("Review the modules. " + words(40), steps + (Reply("Done."),)))
    path = tmp_path / "g4-envelope.jsonl"
    path.write_text(dumps_log({"type": "session", "version": 0, "id": "g4", "createdAt": 0}, agent.session.log))
    return path, policy


def test_pressure_attempts_exceeded(tmp_path):
    from surfacecheck.model.config import RuntimePolicy

    path, policy = g4_log(tmp_path)
    assert found(path, RuntimePolicy.from_json(policy)) == []
    check(path, "pressure-attempts-exceeded", 38, RuntimePolicy.from_json(dict(policy, compactionRetries=0)))


def test_retry_without_progress(corpus, tmp_path):
    def change(records):
        at(records, 21)["surfaceOp"] = "append"
        at(records, 21).pop("sourceEventSeqs")
    check(corrupt(corpus, RECOVERY, tmp_path, change), "retry-without-progress", 23, first=False)


def test_overflow_retries_exceeded(corpus, tmp_path):
    policy_file = tmp_path / "policy.json"
    policy_file.write_text(json.dumps({"maxOverflowRetries": 0}))
    check(corpus / RECOVERY, "overflow-retries-exceeded", 23, load_policy(policy_file))


def test_runtime_context_gap(corpus):
    assert ("runtime-context-gap", 63) in found(corpus / CONTEXT, policy_of(corpus, CONTEXT))
    COVERED.add("runtime-context-gap")


def test_runtime_context_gap_when_a_checkpoint_cites_the_snapshot(corpus, tmp_path):
    def change(records):  # the overflow checkpoint also cites an (invented) snapshot retained at seq 4
        message = at(records, 4)["data"]
        message.update(source={"kind": "plugin", "plugin": "@deepseek-ai/dsh-system-prompt"})
    check(corrupt(corpus, RECOVERY, tmp_path, change), "runtime-context-gap", 23)


def test_every_rule_has_a_corruption_test():
    """Every rule id in the table is checked by a test above (each such test asserts its rule fires); and whatever
    ran in this process named only rules of the table."""
    assert _rules_named_by_tests() == set(RULES), sorted(set(RULES) - _rules_named_by_tests())
    assert COVERED <= set(RULES)


def test_every_message_says_expected_and_observed(corpus, tmp_path):
    """Each finding explains itself (``found`` checks every audit's messages); here on a log that breaks a rule."""
    def change(records):
        at(records, 20)["data"].update(shadowedTokenCount=300)
    MESSAGES.clear()
    found(corrupt(corpus, RECOVERY, tmp_path, change))
    assert MESSAGES
