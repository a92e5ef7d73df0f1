"""Tests for model/estimate.py: dsh's fixed token heuristic and header equality (spec 4.1, 4.3)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from surfacecheck.model.estimate import (
    BLOCK_OVERHEAD,
    CHARS_PER_TOKEN,
    ROLE_OVERHEAD,
    call_config_equals,
    canonical_header,
    estimate_content,
    estimate_header,
    estimate_message,
    estimate_system_tokens,
    estimate_tools_tokens,
    header_equals,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from surfacecheck.model.jsvalue import js_length, js_stringify

from builders import read_events  # noqa: E402
RECOVERY_LOG = "examples__headless-agent__tests__snapshots__compaction-recovery__session.jsonl"


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def user(*blocks: dict) -> dict:
    return {"id": "m", "role": "user", "source": {"kind": "user"}, "content": list(blocks)}


# -- spec 4.1 pinned values ------------------------------------------------------------------


def test_constants():
    assert (CHARS_PER_TOKEN, BLOCK_OVERHEAD, ROLE_OVERHEAD) == (4, 4, 4)


def test_pinned_text_message():
    assert estimate_message(user(text("abcd"))) == 9


def test_pinned_blocks():
    assert estimate_content([text("abcd")]) == 5
    assert estimate_content([{"type": "reasoning", "text": "abcdefgh"}]) == 6
    assert estimate_content([{"type": "tool-call", "id": "c1", "name": "bash", "arguments": '{"a":1}'}]) == 7
    assert estimate_content([{"type": "tool-result", "toolCallId": "c1", "content": [text("abcd")]}]) == 9


def test_pinned_system():
    assert estimate_system_tokens({"config": {}, "system": "abcdefgh"}) == 6
    assert estimate_header({"config": {}, "system": "abcdefgh"}) == 6


def test_empty_content_message_costs_role_overhead():
    assert estimate_message(user()) == 4
    assert estimate_content([]) == 0


def test_ceil_boundaries():
    assert [estimate_content([text("x" * n)]) for n in (0, 1, 4, 5, 8, 9)] == [4, 5, 5, 6, 6, 7]


def test_astral_character_counts_two_units():
    assert estimate_content([text("😀")]) == 5  # 2 units -> ceil(2/4)=1
    assert estimate_content([text("😀😀😀")]) == 6  # 6 units -> 2, although only 3 code points
    assert estimate_content([text("abc😀")]) == 6  # 5 units -> 2
    assert estimate_system_tokens({"config": {}, "system": "😀😀😀"}) == 6


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())))
def test_js_length_is_utf16_code_units(text_value):
    # the definition: one unit per code point, two for an astral one; a lone surrogate (JSON can carry one) is one
    assert js_length(text_value) == sum(2 if ord(ch) > 0xFFFF else 1 for ch in text_value)


def test_js_length_of_a_lone_surrogate_and_an_astral_pair():
    assert js_length("\ud800") == 1 and js_length("a\U0001F600b") == 4 and js_length("é") == 1


def test_unknown_block_priced_by_json_text():
    image = {"type": "image", "attachment": {"id": "a1", "mediaType": "image/png", "bytes": 1234}}
    expected = 4 + -(-len(js_stringify(image)) // 4)
    assert estimate_content([image]) == expected
    assert estimate_content([{"type": "x", "v": "😀"}]) == 4 + 6  # '{"type":"x","v":"😀"}': 21 units, 20 code points


def test_nested_tool_result_with_rich_block():
    inner = [text("abcd"), {"type": "image", "attachment": {}}]
    image_price = 4 + -(-len('{"type":"image","attachment":{}}') // 4)
    assert estimate_content([{"type": "tool-result", "toolCallId": "c", "content": inner}]) == 5 + image_price + 4


def test_tool_call_arguments_must_be_a_string():
    with pytest.raises(TypeError):
        estimate_content([{"type": "tool-call", "id": "c", "name": "bash", "arguments": {"a": 1}}])


def test_header_parts():
    tools = [{"name": "bash", "description": "d", "parameters": {}}]
    header = {"config": {"provider": "p", "model": "m"}, "system": "abcd", "tools": tools}
    assert estimate_system_tokens(header) == 5
    assert estimate_tools_tokens(header) == -(-len(js_stringify(tools)) // 4) + 4
    assert estimate_header(header) == 5 + estimate_tools_tokens(header)
    assert estimate_header(None) == 0
    assert estimate_tools_tokens({"config": {}, "tools": []}) == 0
    assert estimate_system_tokens({"config": {}, "system": ""}) == 4  # not canonical: present but empty


# -- canonical header ------------------------------------------------------------------------


def test_canonical_header_drops_empty_fields_and_extras():
    raw = {"config": {"provider": "p", "model": "m"}, "system": "", "tools": [], "extra": 1}
    assert canonical_header(raw) == {"config": {"provider": "p", "model": "m"}}
    assert estimate_header(canonical_header(raw)) == 0


def test_canonical_header_adapter_defaults_kept_only_when_a_marker_is_true():
    cfg = {"provider": "p", "model": "m"}
    kept = canonical_header({"config": cfg, "adapterDefaults": {"maxTokens": True, "reasoningEffort": False}})
    assert kept["adapterDefaults"] == {"maxTokens": True, "reasoningEffort": False}
    assert "adapterDefaults" not in canonical_header({"config": cfg, "adapterDefaults": {}})
    assert "adapterDefaults" not in canonical_header({"config": cfg, "adapterDefaults": {"maxTokens": 1}})


def test_canonical_header_key_order():
    raw = {"tools": [{"n": 1}], "system": "s", "adapterDefaults": {"reasoningEffort": True}, "config": {}}
    assert list(canonical_header(raw)) == ["config", "adapterDefaults", "system", "tools"]


# -- header equality (spec 4.3) --------------------------------------------------------------


BASE = {"config": {"provider": "p", "model": "m"}, "system": "s", "tools": [{"name": "a", "x": 1}]}


def with_(**changes) -> dict:
    return {**BASE, **changes}


def test_optional_header_equals():
    assert header_equals(None, None)
    assert not header_equals(None, BASE)
    assert not header_equals(BASE, None)
    assert header_equals(BASE, json.loads(json.dumps(BASE)))


def test_header_equals_system_and_tools():
    assert not header_equals(BASE, with_(system="t"))
    assert not header_equals(BASE, {k: v for k, v in BASE.items() if k != "system"})
    assert not header_equals(BASE, with_(tools=[{"x": 1, "name": "a"}]))  # JSON text, key order matters
    assert not header_equals(with_(tools=[{"a": 1}, {"b": 2}]), with_(tools=[{"b": 2}, {"a": 1}]))
    assert header_equals(with_(tools=[]), {k: v for k, v in BASE.items() if k != "tools"})  # tools ?? []


def test_header_equals_adapter_markers():
    on = with_(adapterDefaults={"maxTokens": True})
    assert header_equals(on, with_(adapterDefaults={"maxTokens": True}))
    assert not header_equals(on, BASE)
    assert not header_equals(on, with_(adapterDefaults={"maxTokens": True, "reasoningEffort": False}))


def test_call_config_equals_fields():
    a = {"provider": "p", "model": "m", "temperature": 1, "stop": ["x"]}
    assert call_config_equals(a, {**a, "temperature": 1.0})
    assert call_config_equals(a, {**a, "other": 5})  # only the six known fields count
    for key, value in [("provider", "q"), ("model", "n"), ("reasoningEffort", "high"),
                       ("temperature", 0.5), ("maxTokens", 10)]:
        assert not call_config_equals(a, {**a, key: value}), key
    assert not call_config_equals(a, {**a, "stop": ["y"]})
    assert not call_config_equals(a, {**a, "stop": ["x", "y"]})
    assert not call_config_equals(a, {k: v for k, v in a.items() if k != "stop"})
    assert call_config_equals({"provider": "p", "model": "m"}, {"provider": "p", "model": "m"})
    assert not call_config_equals({"provider": "p", "model": "m", "maxTokens": None}, {"provider": "p", "model": "m"})
    assert not call_config_equals({"provider": "p", "model": "m", "maxTokens": True},
                                  {"provider": "p", "model": "m", "maxTokens": 1})
    assert not header_equals(BASE, with_(config={"provider": "p", "model": "other"}))


# -- real data -------------------------------------------------------------------------------


def derived_message(event: dict) -> dict | None:
    """`deriveEventMessage` (spec 2.3): the message a surface event puts on the surface, or None."""
    if event["type"] == "user/message":
        return event["data"]
    if event["type"] == "tool/result":
        return event["data"]["message"]
    if event["type"] == "assistant/message":
        message = event["data"]["message"]
        return message if message["content"] else None  # content [] derives nothing
    return None


def node_price(event: dict) -> int:
    """The token meter's node price (spec 4.2): 0 for a null message, else estimateMessage."""
    message = derived_message(event)
    return 0 if message is None else estimate_message(message)


def generated_logs(corpus: Path):
    root = corpus / "dsh-generated"
    for entry in json.loads((root / "expected.json").read_text(encoding="utf-8")):
        yield entry, read_events(root / entry["file"])


def test_generated_corpus_final_node_prices(corpus):
    """Every final surface node (47 of 58 are appends) prices exactly as the real meter logged it."""
    appends = nodes = 0
    for entry, events in generated_logs(corpus):
        for seq, tokens in entry["details"]["final_measure"]["node_tokens"]:
            event = events[seq]
            assert node_price(event) == tokens, (entry["file"], seq)
            nodes += 1
            appends += event.get("surfaceOp") == "append"
    assert (appends, nodes) == (47, 58)


def test_generated_corpus_replacement_and_shadow_prices(corpus):
    """Each replacement prices as logged; each logged shadow price = Σ prices of the shadowed nodes."""
    checked = 0
    for entry, events in generated_logs(corpus):
        for rep in entry["replacements"]:
            assert node_price(events[rep["seq"]]) == rep["replacement_tokens"], (entry["file"], rep["seq"])
            shadow = sum(node_price(events[seq]) for seq in rep["shadowed_seqs"])
            assert shadow == rep["logged_shadow_tokens"], (entry["file"], rep["seq"])
            checked += 1
    assert checked == 33


def test_generated_corpus_final_header_estimate(corpus):
    """final total = estimateHeader(latest canonical header) + surface tokens (estimated baseline)."""
    for entry, events in generated_logs(corpus):
        measure = entry["details"]["final_measure"]
        if measure["baseline"] != "estimated":
            continue
        headers = [e["data"]["header"] for _, e in sorted(events.items()) if e["type"] == "request/header"]
        header = canonical_header(headers[-1])
        assert estimate_header(header) + measure["surface_tokens"] == measure["total_tokens"], entry["file"]


def test_worked_example_compaction_recovery(corpus):
    """Spec 10.4: prompt at seq 4 prices 266; header at seq 6 = system 650 + tools 3742 = 4392."""
    events = read_events(corpus / "dsh-sessions" / RECOVERY_LOG)
    assert estimate_message(events[4]["data"]) == 266
    header = canonical_header(events[6]["data"]["header"])
    assert estimate_system_tokens(header) == 650
    assert estimate_tools_tokens(header) == 3742
    assert estimate_header(header) == 4392
    assert len(header["tools"]) == 15
    assert header_equals(header, canonical_header(json.loads(json.dumps(events[6]["data"]["header"]))))
