"""dsh's fixed token heuristic and request-header canonical form / equality (spec 4.1, 4.3).

Mirrors ``packages/llm/token-meter/src/estimate.ts`` (pricing),
``packages/core/session/src/request-header.ts`` (``canonicalHeader``, ``headerEquals``),
``packages/llm/llm/src/call-config.ts`` (``callConfigEquals``) and
``packages/llm/token-meter/src/index.ts`` (``optionalHeaderEquals``).

Values are decoded JSON (dicts/lists/str/numbers). A JavaScript ``undefined`` field is an absent
dict key; ``None`` is JSON ``null`` and is *not* treated as absent (dsh would throw a TypeError on
``null.length``; so does this model). All lengths are JS lengths (UTF-16 code units).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from .seams import active

CHARS_PER_TOKEN = 4
BLOCK_OVERHEAD = 4
ROLE_OVERHEAD = 4

_UNDEFINED = object()  # JavaScript `undefined` (an absent key / optional chain on undefined)


def _tokens_for_length(length: int) -> int:
    """`Math.ceil(length / CHARS_PER_TOKEN)` in exact integer arithmetic (spec 4.1)."""
    return -(-length // CHARS_PER_TOKEN)


def _text_tokens(text: Any) -> int:
    """Price a string by its JS `.length` (estimate.ts), an array by its number of elements (a text block whose
    `text` is a list, which live appends let through, §15 G18); anything else is a type error."""
    if not isinstance(text, (str, list)):
        raise TypeError(f"expected a string to price, got {type(text).__name__}")
    return _tokens_for_length(active().js_length(text))


def estimate_block(block: Mapping[str, Any]) -> int:
    """Price one content block, overhead included (spec 4.1, estimate.ts `estimateContent` switch)."""
    kind = block.get("type")
    if kind in ("text", "reasoning"):
        return _text_tokens(block["text"]) + BLOCK_OVERHEAD
    if kind == "tool-call":
        return _text_tokens(block["name"]) + _text_tokens(block["arguments"]) + BLOCK_OVERHEAD
    if kind == "tool-result":
        return estimate_content(block["content"]) + BLOCK_OVERHEAD
    seams = active()
    return BLOCK_OVERHEAD + _tokens_for_length(seams.js_length(seams.js_stringify(block)))


def estimate_content(blocks: Sequence[Mapping[str, Any]]) -> int:
    """`estimateContent(blocks)`: Σ block prices, recursing into tool results (spec 4.1)."""
    return sum(estimate_block(block) for block in blocks)


def estimate_message(message: Mapping[str, Any]) -> int:
    """`estimateMessage(m)` = content + ROLE_OVERHEAD; empty content costs 4 (spec 4.1)."""
    return estimate_content(message["content"]) + ROLE_OVERHEAD


def _get(obj: Mapping[str, Any] | None, key: str) -> Any:
    """`obj?.key`: `_UNDEFINED` when obj is undefined or the key is absent."""
    if obj is None or obj is _UNDEFINED:
        return _UNDEFINED
    return obj.get(key, _UNDEFINED)


def estimate_system_tokens(header: Mapping[str, Any] | None) -> int:
    """`estimateSystemTokens(h)`: 0 when absent, else ceil(len/4) + ROLE_OVERHEAD (spec 4.1)."""
    system = _get(header, "system")
    if system is _UNDEFINED:
        return 0
    return _text_tokens(system) + ROLE_OVERHEAD


def estimate_tools_tokens(header: Mapping[str, Any] | None) -> int:
    """`estimateToolsTokens(h)`: 0 when absent or [], else ceil(len(JSON)/4) + BLOCK_OVERHEAD (spec 4.1)."""
    tools = _get(header, "tools")
    if tools is _UNDEFINED or len(tools) == 0:
        return 0
    seams = active()
    return _tokens_for_length(seams.js_length(seams.js_stringify(tools))) + BLOCK_OVERHEAD


def estimate_header(header: Mapping[str, Any] | None) -> int:
    """`estimateHeader(h)` = system + tools tokens; 0 for no header (spec 4.1)."""
    return estimate_system_tokens(header) + estimate_tools_tokens(header)


def canonical_header(header: Mapping[str, Any]) -> dict[str, Any]:
    """`canonicalHeader` (spec 4.1, request-header.ts): only config, adapterDefaults, system, tools.

    adapterDefaults is kept (whole, as given) only if ``reasoningEffort`` or ``maxTokens`` is exactly
    ``true``; an empty system / empty tool list becomes absent. Other keys are dropped. Key order
    follows dsh's object literal (config, adapterDefaults, system, tools).
    """
    out: dict[str, Any] = {"config": header["config"]} if "config" in header else {}
    defaults = _get(header, "adapterDefaults")
    if _get(defaults, "reasoningEffort") is True or _get(defaults, "maxTokens") is True:
        out["adapterDefaults"] = defaults
    system = _get(header, "system")
    if system is not _UNDEFINED and len(system) > 0:
        out["system"] = system
    tools = _get(header, "tools")
    if tools is not _UNDEFINED and len(tools) > 0:
        out["tools"] = tools
    return out


def _strict_equal(a: Any, b: Any) -> bool:
    """JavaScript `===` on decoded JSON values: objects/arrays by identity, bool is not a number."""
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return a is b
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b  # NaN != NaN, as in JS
    return type(a) is type(b) and a == b


_CONFIG_SCALARS = ("provider", "model", "reasoningEffort", "temperature", "maxTokens")


def call_config_equals(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """`callConfigEquals` (call-config.ts): five scalars by `===`, then `stop` element-wise.

    Only provider, model, reasoningEffort, temperature, maxTokens and stop are compared; any other
    config key is ignored. A missing ``stop`` equals only a missing ``stop``.
    """
    if not all(_strict_equal(_get(a, k), _get(b, k)) for k in _CONFIG_SCALARS):
        return False
    a_stop, b_stop = _get(a, "stop"), _get(b, "stop")
    if a_stop is _UNDEFINED or b_stop is _UNDEFINED:
        return a_stop is b_stop
    return len(a_stop) == len(b_stop) and all(_strict_equal(x, y) for x, y in zip(a_stop, b_stop))


def _tools_or_empty(header: Mapping[str, Any]) -> Sequence[Any]:
    """`header.tools ?? []` (null counts as missing for `??`)."""
    tools = _get(header, "tools")
    return [] if tools is _UNDEFINED or tools is None else tools


def _tools_equal(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Tool schemas in order, each compared by `JSON.stringify` (request-header.ts `sameSchema`)."""
    at, bt, stringify = _tools_or_empty(a), _tools_or_empty(b), active().js_stringify
    return len(at) == len(bt) and all(stringify(x) == stringify(y) for x, y in zip(at, bt))


def _marker(header: Mapping[str, Any], key: str) -> Any:
    return _get(_get(header, "adapterDefaults"), key)


def header_equals(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """`optionalHeaderEquals` over `headerEquals` (spec 4.3; token-meter index.ts, request-header.ts).

    Two ``None`` headers are equal; ``None`` equals nothing else. Inputs are compared as given
    (dsh compares canonical headers and does not canonicalize here): config by `callConfigEquals`,
    both adapter-default markers and system by `===`, tools (absent ≡ []) in order by JSON text.
    """
    if a is None or b is None:
        return a is None and b is None
    return (
        call_config_equals(_get(a, "config"), _get(b, "config"))
        and _strict_equal(_marker(a, "reasoningEffort"), _marker(b, "reasoningEffort"))
        and _strict_equal(_marker(a, "maxTokens"), _marker(b, "maxTokens"))
        and _strict_equal(_get(a, "system"), _get(b, "system"))
        and _tools_equal(a, b)
    )
