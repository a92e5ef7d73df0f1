"""Tests for model/prune_content.py: the tool-result pruner's pure parts (spec 6)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from surfacecheck.model.errors import PrunerConfigError
from surfacecheck.model.prune_content import (
    PRUNE_MARKER,
    PruneGuardError,
    PrunerConfig,
    measure_content,
    prune_content,
    pruner_schema,
    resolve_pruner_config,
)

MARKER_LEN = 39
from builders import read_events  # noqa: E402


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def joined(blocks: list[dict]) -> str:
    return "".join(b["text"] for b in blocks if b["type"] == "text")


IMAGE = {"type": "image", "attachment": {"id": "a1"}}
SMALL = PrunerConfig(threshold_chars=60, head_chars=10, tail_chars=5)


# -- marker, measuring, defaults ------------------------------------------------------------


def test_marker_and_defaults():
    assert PRUNE_MARKER == "\n\n[... tool result middle pruned ...]\n\n"
    assert len(PRUNE_MARKER) == MARKER_LEN
    assert PrunerConfig() == PrunerConfig(8192, 4096, 1024)
    assert resolve_pruner_config(None) == PrunerConfig()
    assert resolve_pruner_config({}) == PrunerConfig()


def test_measure_content_counts_code_points_of_text_only():
    assert measure_content([]) == 0
    assert measure_content([text("abc"), IMAGE, text("😀😀")]) == 5
    nested = {"type": "tool-result", "toolCallId": "c", "content": [text("x" * 100)]}
    assert measure_content([nested, {"type": "reasoning", "text": "abcd"}]) == 0


# -- pruneContent ----------------------------------------------------------------------------


def test_at_or_below_threshold_is_unchanged():
    assert prune_content([text("x" * 60)], SMALL) is None
    assert prune_content([text("x" * 59), IMAGE], SMALL) is None
    assert prune_content([], SMALL) is None
    assert prune_content([text("a" * 8192)]) is None


def test_single_big_block_default_config():
    body = "".join(chr(ord("a") + i % 26) for i in range(8193))
    (block,) = prune_content([text(body)])
    assert block["text"] == body[:4096] + PRUNE_MARKER + body[-1024:]
    assert len(block["text"]) == 4096 + MARKER_LEN + 1024


def test_text_block_keeps_its_other_keys_and_key_order():
    block = {"type": "text", "text": "y" * 61, "cache": True}
    (out,) = prune_content([block], SMALL)
    assert list(out) == ["type", "text", "cache"]
    assert out["cache"] is True
    assert block["text"] == "y" * 61  # input not mutated


def test_removed_interval_spans_blocks():
    # 3 blocks of 30 code points: total 90, removed [10, 85)
    blocks = [text("a" * 30), text("b" * 30), text("c" * 30)]
    out = prune_content(blocks, SMALL)
    assert out == [text("a" * 10 + PRUNE_MARKER), text("c" * 5)]  # middle block emptied -> dropped
    assert joined(out).count(PRUNE_MARKER) == 1


def test_marker_goes_into_first_intersecting_block_even_if_head_ends_at_its_start():
    # head ends exactly at the block boundary: first block untouched, marker starts block 2
    blocks = [text("a" * 10), text("b" * 55)]  # total 65, removed [10, 60)
    out = prune_content(blocks, SMALL)
    assert out == [text("a" * 10), text(PRUNE_MARKER + "b" * 5)]


def test_marker_alone_keeps_block():
    blocks = [text("a" * 10), text("b" * 60), text("c" * 5)]
    out = prune_content(blocks, SMALL)
    assert out == [text("a" * 10), text(PRUNE_MARKER), text("c" * 5)]


def test_empty_text_blocks_dropped_non_text_kept_in_place():
    blocks = [text(""), IMAGE, text("a" * 40), text(""), IMAGE, text("b" * 40), text("")]
    out = prune_content(blocks, SMALL)
    assert out == [IMAGE, text("a" * 10 + PRUNE_MARKER), IMAGE, text("b" * 5)]
    assert out[0] is IMAGE and out[2] is IMAGE


def test_zero_head_and_tail():
    config = resolve_pruner_config({"thresholdChars": 39, "headChars": 0, "tailChars": 0})
    assert prune_content([text("z" * 40)], config) == [text(PRUNE_MARKER)]


def test_astral_characters_never_split():
    body = "😀" * 61
    (out,) = prune_content([text(body)], SMALL)
    assert out["text"] == "😀" * 10 + PRUNE_MARKER + "😀" * 5
    assert not any(0xD800 <= ord(ch) <= 0xDFFF for ch in out["text"])
    assert measure_content([out]) == 54


def test_guards_raise_dsh_messages():
    # Unvalidated configs (resolve_pruner_config would refuse them) reach the guards.
    with pytest.raises(PruneGuardError, match="^tool-result prune: failed to locate the removed text span$"):
        prune_content([text("x" * 20)], PrunerConfig(threshold_chars=10, head_chars=30, tail_chars=30))
    with pytest.raises(PruneGuardError, match="^tool-result prune: replacement must be smaller and within threshold$"):
        prune_content([text("x" * 20)], PrunerConfig(threshold_chars=10, head_chars=5, tail_chars=5))


def test_a_list_text_is_cut_by_its_elements_and_joined():
    """A text block whose `text` is a list (live appends check no message shape, §15 G18): `Array.from` gives its
    elements, so the pruner measures and cuts it by them and joins what it keeps into a string."""
    config = PrunerConfig(threshold_chars=50, head_chars=3, tail_chars=2)
    listed = [{"type": "text", "text": ["ab"] * 60}]
    assert measure_content(listed) == 60
    out = prune_content(listed, config)
    assert out == [{"type": "text", "text": "ababab" + PRUNE_MARKER + "abab"}]
    # kept strings longer than one character can outgrow the threshold: dsh's guard throws
    with pytest.raises(PruneGuardError, match="^tool-result prune: replacement must be smaller and within threshold$"):
        prune_content([{"type": "text", "text": ["abcdef"] * 60}], config)
    with pytest.raises(PruneGuardError, match="within threshold"):  # not smaller than what it replaces
        prune_content([{"type": "text", "text": ["abcdefghij"] * 51}], config)


@pytest.mark.parametrize(("raw", "message"), [
    ({"thresholdChars": 0}, "$.thresholdChars expected number >= 1 but got 0"),
    ({"thresholdChars": 0.5}, "$.thresholdChars expected number >= 1 but got 0.5"),
    ({"headChars": 2.5, "tailChars": -3}, "$.headChars expected number multiple of 1 but got 2.5"),
    ({"tailChars": "5"}, "$.tailChars expected number but got 5"),
    ({"thresholdChars": [1]}, "$.thresholdChars expected number but got 1"),
    ({"thresholdChars": {"a": 1}}, "$.thresholdChars expected number but got [object Object]"),
    ("x", "expected object but got x"),
    ([1, 2], "expected object but got 1,2"),
])
def test_the_config_schema_words_refusals_as_schemastery(raw, message):
    """`ToolResultPruner.Config` (what cordis checks a plugged pruner's config with, before `resolveConfig`): its
    first failure in declaration order, word for word (checked against schemastery 0.1.0-rc.8's own output)."""
    with pytest.raises(PrunerConfigError) as info:
        pruner_schema(raw)
    assert str(info.value) == message


def test_the_config_schema_fills_defaults_and_keeps_undeclared_keys():
    assert pruner_schema({"thresholdChars": None, "foo": 1}) == {
        "thresholdChars": 8192, "headChars": 4096, "tailChars": 1024, "foo": 1}


# -- resolveConfig validation ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"thresholdchars": 1}, 'ToolResultPruneConfig: unknown key "thresholdchars" '
                                "(allowed: thresholdChars, headChars, tailChars)"),
        ({"headChars": 1, "maxChars": 2}, 'ToolResultPruneConfig: unknown key "maxChars" '
                                          "(allowed: thresholdChars, headChars, tailChars)"),
        ({"thresholdChars": 0}, "ToolResultPruneConfig: thresholdChars (0) must be a positive integer"),
        ({"thresholdChars": -3}, "ToolResultPruneConfig: thresholdChars (-3) must be a positive integer"),
        ({"thresholdChars": 100.5}, "ToolResultPruneConfig: thresholdChars (100.5) must be a positive integer"),
        ({"thresholdChars": "9000"}, "ToolResultPruneConfig: thresholdChars (9000) must be a positive integer"),
        ({"thresholdChars": True}, "ToolResultPruneConfig: thresholdChars (true) must be a positive integer"),
        ({"thresholdChars": float("inf")},
         "ToolResultPruneConfig: thresholdChars (Infinity) must be a positive integer"),
        ({"headChars": -1}, "ToolResultPruneConfig: headChars (-1) must be a non-negative integer"),
        ({"headChars": 1.5}, "ToolResultPruneConfig: headChars (1.5) must be a non-negative integer"),
        ({"tailChars": -1}, "ToolResultPruneConfig: tailChars (-1) must be a non-negative integer"),
        ({"tailChars": [2]}, "ToolResultPruneConfig: tailChars (2) must be a non-negative integer"),
        ({"thresholdChars": 5000},
         "ToolResultPruneConfig: headChars + marker + tailChars (5159) must be at most thresholdChars (5000)"),
        ({"thresholdChars": 78, "headChars": 20, "tailChars": 20},
         "ToolResultPruneConfig: headChars + marker + tailChars (79) must be at most thresholdChars (78)"),
    ],
)
def test_config_errors(raw, message):
    with pytest.raises(PrunerConfigError) as info:
        resolve_pruner_config(raw)
    assert str(info.value) == message
    assert info.value.rule == "pruner-config"


def test_config_check_order():
    # unknown keys are reported before values; threshold before head before tail before the budget
    with pytest.raises(PrunerConfigError, match="unknown key"):
        resolve_pruner_config({"thresholdChars": 0, "bogus": 1})
    with pytest.raises(PrunerConfigError, match="thresholdChars"):
        resolve_pruner_config({"thresholdChars": 0, "headChars": -1})
    with pytest.raises(PrunerConfigError, match="headChars \\(-1\\)"):
        resolve_pruner_config({"headChars": -1, "tailChars": -1})


def test_config_accepts_boundaries_nulls_and_integral_floats():
    assert resolve_pruner_config({"thresholdChars": 79, "headChars": 20, "tailChars": 20}) == PrunerConfig(79, 20, 20)
    assert resolve_pruner_config({"thresholdChars": None, "headChars": None}) == PrunerConfig()
    resolved = resolve_pruner_config({"thresholdChars": 100.0, "headChars": 0.0, "tailChars": -0.0})
    assert resolved == PrunerConfig(100, 0, 0)
    assert all(type(v) is int for v in (resolved.threshold_chars, resolved.head_chars, resolved.tail_chars))


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        PrunerConfig().head_chars = 1  # type: ignore[misc]


def inner_content(event: dict) -> list[dict]:
    return event["data"]["message"]["content"][0]["content"]


def test_generated_corpus_prunes_reproduced(corpus):
    """Every logged prune replacement's content = prune_content(original, the log's policy config)."""
    root = corpus / "dsh-generated"
    checked = 0
    for entry in json.loads((root / "expected.json").read_text(encoding="utf-8")):
        policy = json.loads((root / "policies" / entry["file"].replace(".jsonl", ".json")).read_text("utf-8"))
        config = resolve_pruner_config(policy.get("toolResultPruner"))
        events = read_events(root / entry["file"])
        for rep in (r for r in entry["replacements"] if r["kind"] == "prune"):
            (original_seq,) = rep["shadowed_seqs"]
            original, replacement = events[original_seq], events[rep["seq"]]
            assert prune_content(inner_content(original), config) == inner_content(replacement), rep["seq"]
            assert prune_content(inner_content(replacement), config) is None  # idempotent
            checked += 1
    assert checked == 14


# -- property test ---------------------------------------------------------------------------

CHARS = st.sampled_from(["a", "b", "é", "😀", "\n", "中", "𝄞"])


@st.composite
def configs(draw) -> PrunerConfig:
    head = draw(st.integers(0, 40))
    tail = draw(st.integers(0, 40))
    threshold = draw(st.integers(head + MARKER_LEN + tail, head + MARKER_LEN + tail + 40))
    return resolve_pruner_config({"thresholdChars": threshold, "headChars": head, "tailChars": tail})


BLOCKS = st.lists(
    st.one_of(
        st.builds(text, st.text(CHARS, max_size=80)),
        st.just(IMAGE),
        st.builds(lambda t: {"type": "reasoning", "text": t}, st.text(CHARS, max_size=5)),
    ),
    max_size=8,
)


@settings(max_examples=400, deadline=None)
@given(BLOCKS, configs())
def test_prune_properties(blocks, config):
    total = measure_content(blocks)
    out = prune_content(blocks, config)
    if total <= config.threshold_chars:
        assert out is None
        return
    assert out is not None
    after = measure_content(out)
    assert after <= config.threshold_chars and after < total
    before_text, after_text = joined(blocks), joined(out)
    assert after_text.startswith(before_text[: config.head_chars])
    assert after_text.endswith(before_text[total - config.tail_chars:])
    assert after_text == before_text[: config.head_chars] + PRUNE_MARKER + before_text[total - config.tail_chars:]
    assert [b for b in out if b["type"] != "text"] == [b for b in blocks if b["type"] != "text"]
    assert all(b["text"] for b in out if b["type"] == "text")
