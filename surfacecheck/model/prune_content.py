"""The pure parts of dsh's tool-result pruner: config, measuring, head/tail pruning (spec 6).

Mirrors ``packages/compaction/compaction-tool-result-pruner/src/config.ts`` (``PRUNE_MARKER``,
``DEFAULTS``, ``resolveConfig``) and ``src/index.ts`` (``measureContent``, ``pruneContent``).
Sizes are Unicode code points (``Array.from``); Python ``str`` indexes by code point already.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .errors import ModelError, PrunerConfigError
from .jsvalue import array_from, code_points, js_join, js_string

PRUNE_MARKER = "\n\n[... tool result middle pruned ...]\n\n"

_CONFIG_KEYS = {"thresholdChars": "threshold_chars", "headChars": "head_chars", "tailChars": "tail_chars"}


class PruneGuardError(ModelError):
    """`pruneContent`'s post-condition guards failed (spec 6 step 4; dsh throws a plain Error)."""

    rule = "tool-result-prune"


@dataclass(frozen=True)
class PrunerConfig:
    """`ResolvedConfig` (types.ts): code-point budgets; defaults are config.ts `DEFAULTS`.

    Not validated on construction: use `resolve_pruner_config` for dsh's checks.
    """

    threshold_chars: int = 8192
    head_chars: int = 4096
    tail_chars: int = 1024


def _is_integer(value: Any) -> bool:
    """`Number.isInteger(value)`: a finite integral number (bool and numeric strings are not)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


def _check_keys(obj: Mapping[str, Any]) -> None:
    for key in obj:
        if key not in _CONFIG_KEYS:
            raise PrunerConfigError(
                f'ToolResultPruneConfig: unknown key "{key}" (allowed: thresholdChars, headChars, tailChars)'
            )


def _integer(name: str, value: Any, minimum: int) -> int:
    """config.ts `assertPositiveInteger` (minimum 1) / `assertNonNegativeInteger` (minimum 0)."""
    if not _is_integer(value) or value < minimum:
        kind = "a positive integer" if minimum == 1 else "a non-negative integer"
        raise PrunerConfigError(f"ToolResultPruneConfig: {name} ({js_string(value)}) must be {kind}")
    return int(value)


_SCHEMA = (("thresholdChars", 1), ("headChars", 0), ("tailChars", 0))
"""`ToolResultPruner.Config` (schemastery): each key a number, at least its minimum, a multiple of 1."""


def pruner_schema(obj: Any) -> dict[str, Any]:
    """`ToolResultPruner.Config` (spec 6): the schema cordis checks a plugged pruner's config with before the
    constructor's `resolveConfig`. An object whose present, non-null values are numbers, each at least its minimum and
    a multiple of 1, in declaration order; the first failure is schemastery's message. The valid config comes back
    with the defaults filled in (null takes the default) and the keys the schema does not declare kept, for
    `resolveConfig` to refuse."""
    if not isinstance(obj, dict):
        raise PrunerConfigError(f"expected object but got {js_string(obj)}")
    out = dict(obj)
    defaults = PrunerConfig()
    for key, minimum in _SCHEMA:
        value = obj.get(key)
        if value is None:
            out[key] = getattr(defaults, _CONFIG_KEYS[key])
            continue
        problem = None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problem = "number"
        elif value < minimum:
            problem = f"number >= {minimum}"
        elif not _is_integer(value):
            problem = "number multiple of 1"
        if problem is not None:
            raise PrunerConfigError(f"$.{key} expected {problem} but got {js_string(value)}")
    return out


def resolve_pruner_config(obj: Mapping[str, Any] | None = None) -> PrunerConfig:
    """`resolveConfig` (spec 6, config.ts): unknown keys, defaults for missing/null, integer checks, budget.

    Raises `PrunerConfigError` with dsh's message text.
    """
    obj = {} if obj is None else obj
    _check_keys(obj)
    defaults = PrunerConfig()

    def pick(key: str) -> Any:
        value = obj.get(key)  # `config.key ?? DEFAULTS.key`: undefined and null both default
        return getattr(defaults, _CONFIG_KEYS[key]) if value is None else value

    threshold = _integer("thresholdChars", pick("thresholdChars"), 1)
    head = _integer("headChars", pick("headChars"), 0)
    tail = _integer("tailChars", pick("tailChars"), 0)
    emitted = head + code_points(PRUNE_MARKER) + tail
    if emitted > threshold:
        raise PrunerConfigError(
            f"ToolResultPruneConfig: headChars + marker + tailChars ({emitted}) "
            f"must be at most thresholdChars ({threshold})"
        )
    return PrunerConfig(threshold_chars=threshold, head_chars=head, tail_chars=tail)


def measure_content(blocks: Sequence[Mapping[str, Any]]) -> int:
    """`measureContent` (spec 6, index.ts): Σ code points of `text` blocks; other blocks cost 0."""
    return sum(code_points(block["text"]) for block in blocks if block.get("type") == "text")


def _clamp(value: int, upper: int) -> int:
    """`Math.min(upper, Math.max(0, value))`."""
    return min(upper, max(0, value))


def prune_content(
    blocks: Sequence[Mapping[str, Any]], config: PrunerConfig = PrunerConfig()
) -> list[Mapping[str, Any]] | None:
    """`pruneContent` (spec 6 steps 1-4, index.ts): None when within budget, else head + marker + tail.

    `blocks` is the inner content of the tool-result block. Non-text blocks stay in place (same
    objects); the marker goes into the first text block intersecting the removed interval; a
    text block left empty is dropped. Raises `PruneGuardError` if a guard fails.
    """
    total = measure_content(blocks)
    if total <= config.threshold_chars:
        return None
    removed_start, removed_end = config.head_chars, total - config.tail_chars
    pruned: list[Mapping[str, Any]] = []
    consumed = 0
    marker_inserted = False
    for block in blocks:
        if block.get("type") != "text":
            pruned.append(block)
            continue
        points = array_from(block["text"])  # code points (an array text: its elements, §15 G18)
        start, end = consumed, consumed + len(points)
        head_end = _clamp(removed_start - start, len(points))
        tail_start = _clamp(removed_end - start, len(points))
        intersects = start < removed_end and end > removed_start
        marker = PRUNE_MARKER if intersects and not marker_inserted else ""
        marker_inserted = marker_inserted or bool(marker)
        text = js_join(points[:head_end], "") + marker + js_join(points[tail_start:], "")
        if text:
            pruned.append({**block, "text": text})
        consumed = end
    _check_guards(marker_inserted, measure_content(pruned), total, config)
    return pruned


def _check_guards(marker_inserted: bool, after: int, total: int, config: PrunerConfig) -> None:
    """The two post-conditions of `pruneContent` (spec 6 step 4), with dsh's messages."""
    if not marker_inserted:
        raise PruneGuardError("tool-result prune: failed to locate the removed text span")
    if after > config.threshold_chars or after >= total:
        raise PruneGuardError("tool-result prune: replacement must be smaller and within threshold")
