"""Conversation scripts for `surfacecheck e2e dsh`: format `surfacecheck-e2e-script/1`.

A script is data: the runtime configuration a run uses (context window, compaction-basic policy,
tool-result pruner; spec 6, 9.1), how the scripted model server reports usage (fixed numbers keep
the meter's estimated baseline, realistic ones exercise the usage anchor; spec 4.2), per turn what
the model does (tool calls with a chosen output size, an overflow error, a plain reply) and whether
`/compact` runs after it (spec 11), and what the summarizer answers (spec 8.5). `config.runtimeContext`
(default false) composes one runtime-context contributor, so every step's start enters a runtime-context
snapshot after the prompt (spec 12, D9; §15 G2, G2b).

Checks are the JSON Schema (:data:`SCHEMA`, written to ``docs/schemas/e2e-script.schema.json`` by
``python -m surfacecheck.e2e.script``) plus dsh's own load-time validation through the model
(`RuntimePolicy.from_json`: spec 9.1 and 6 messages) and the one rule the runtime checks later, at
the first pressure check: retainTokens < floor(contextWindow * thresholdRatio) (spec 9.1
`resolveCompactSpec`). Errors read ``PATH: reason``.
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import jsonschema

from surfacecheck.core.json_where import line_of
from surfacecheck.model.config import RuntimePolicy, resolve_compact_spec, resolve_target_policy
from surfacecheck.model.errors import ModelError

FORMAT = "surfacecheck-e2e-script/1"
PATHS = ("pressure-prune", "pressure-summary", "overflow-retry", "manual-compact", "summary-failed",
         "second-generation")
SUMMARY_OUTCOMES = ("text", "failure", "too-big", "empty", "truncated")
MAX_OUTPUT_CHARS = 1_000_000
DEFAULT_SUMMARY_RATIO = 0.1
ROUTE = ("deepseek-official", "surfacecheck-scripted")  # the routed target a run uses (config.py, server.py)

_INT = {"type": "integer"}
_TOOL = {"type": "object", "required": ["output_chars"], "additionalProperties": False,
         "properties": {"output_chars": {**_INT, "minimum": 0, "maximum": 1_000_000}}}  # MAX_OUTPUT_CHARS
_USAGE = {"description": "[prompt_tokens, completion_tokens] reported for this reply (overrides `usage`)",
          "type": "array", "items": {**_INT, "minimum": 0}, "minItems": 2, "maxItems": 2}
SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://surfacecheck.invalid/schemas/e2e-script.schema.json",
    "title": "surfacecheck e2e conversation script",
    "description": "One scripted conversation for the real dsh runtime: configuration, turns, summaries.",
    "type": "object",
    "required": ["format", "name", "config", "turns"],
    "additionalProperties": False,
    "properties": {
        "format": {"const": FORMAT},
        "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]*$", "maxLength": 80},
        "description": {"type": "string"},
        "config": {
            "type": "object",
            "required": ["contextWindow", "thresholdRatio", "retainTokens"],
            "additionalProperties": False,
            "properties": {
                "contextWindow": {**_INT, "minimum": 1},
                "thresholdRatio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                "retainTokens": {**_INT, "minimum": 0},
                "maxTokens": {**_INT, "minimum": 1},
                "compactionRetries": {**_INT, "minimum": 0},
                "maxOverflowRetries": {**_INT, "minimum": 0},
                "auto": {"type": "boolean"},
                "runtimeContext": {
                    "description": "compose @deepseek-ai/dsh-user-approval (policy never): its approval:policy "
                                   "section is a runtime-context contributor, so each step's start enters a "
                                   "runtime-context snapshot after the prompt (spec 12, D9); default false: none",
                    "type": "boolean"},
                "requestMaxTokens": {**_INT, "minimum": 1},
                "pruner": {"oneOf": [{"type": "null"}, {
                    "type": "object", "additionalProperties": False,
                    "required": ["thresholdChars", "headChars", "tailChars"],
                    "properties": {"thresholdChars": {**_INT, "minimum": 1}, "headChars": {**_INT, "minimum": 0},
                                   "tailChars": {**_INT, "minimum": 0}}}]},
            },
        },
        "usage": {"enum": ["fixed", "realistic"]},
        "turns": {
            "type": "array", "minItems": 1, "maxItems": 50,
            "items": {
                "type": "object", "required": ["prompt", "replies"], "additionalProperties": False,
                "properties": {
                    "prompt": {"type": "string", "minLength": 1},
                    "replies": {"type": "array", "minItems": 1, "maxItems": 60, "items": {"oneOf": [
                        {"type": "object", "required": ["tool"], "additionalProperties": False,
                         "properties": {"tool": _TOOL, "usage": _USAGE}},
                        {"type": "object", "required": ["tools"], "additionalProperties": False,
                         "properties": {"tools": {"type": "array", "items": _TOOL, "minItems": 1, "maxItems": 8},
                                        "usage": _USAGE}},
                        {"type": "object", "required": ["overflow"], "additionalProperties": False,
                         "properties": {"overflow": {"const": True}}},
                        {"type": "object", "required": ["text"], "additionalProperties": False,
                         "properties": {"text": {"type": "string", "minLength": 1}, "usage": _USAGE}},
                    ]}},
                    "compact": {"type": "boolean"},
                },
            },
        },
        "summaries": {"type": "array", "items": {
            "type": "object", "required": ["outcome"], "additionalProperties": False,
            "properties": {"outcome": {"enum": list(SUMMARY_OUTCOMES)},
                           "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 10},
                           "text": {"type": "string", "minLength": 1}, "usage": _USAGE}}},
        "expect": {
            "description": "paths the script is written to exercise (true) or to avoid (false); see paths.py",
            "type": "object", "additionalProperties": False,
            "properties": {name: {"type": "boolean"} for name in PATHS}},
    },
}


class ScriptError(ValueError):
    """A script that is not a valid `surfacecheck-e2e-script/1` document; the message reads `PATH: reason`."""


@dataclass(frozen=True)
class Pruner:
    """The tool-result pruner row (spec 6): code-point budgets."""

    threshold_chars: int
    head_chars: int
    tail_chars: int

    def to_json(self) -> dict:
        return {"thresholdChars": self.threshold_chars, "headChars": self.head_chars, "tailChars": self.tail_chars}


@dataclass(frozen=True)
class Config:
    """What the run's runtime config sets: the routed model's window, compaction-basic (spec 9.1), the pruner."""

    context_window: int
    threshold_ratio: float
    retain_tokens: int
    max_tokens: int = 1024
    compaction_retries: int = 1
    max_overflow_retries: int = 1
    request_max_tokens: int = 1024
    pruner: Pruner | None = None
    auto: bool | None = None  # compaction-basic `auto` (spec 9.3); None: the runtime's default (true)
    runtime_context: bool = False  # compose a runtime-context contributor (config.py: dsh-user-approval)

    def compaction_json(self) -> dict:
        """compaction-basic's keys, in dsh's names (the `policies/*.json` shape without window and pruner)."""
        out = {"thresholdRatio": self.threshold_ratio, "retainTokens": self.retain_tokens,
               "maxTokens": self.max_tokens, "compactionRetries": self.compaction_retries,
               "maxOverflowRetries": self.max_overflow_retries}
        if self.auto is not None:
            out["auto"] = self.auto
        return out

    def policy_json(self) -> dict:
        """The corpus `policies/NN-*.json` shape: what `surfacecheck audit --policy` and the model read."""
        out = {**self.compaction_json(), "contextWindow": self.context_window}
        if self.pruner is not None:
            out["toolResultPruner"] = self.pruner.to_json()
        return out

    def policy(self) -> RuntimePolicy:
        """The model's RuntimePolicy (spec 9.1 validation with dsh's messages)."""
        return RuntimePolicy.from_json(self.policy_json())

    @property
    def threshold_tokens(self) -> int:
        """floor(contextWindow * thresholdRatio): the 0.1.1rc1 pressure threshold (spec 9.1)."""
        return math.floor(self.context_window * self.threshold_ratio)

    def to_json(self) -> dict:
        out = {"contextWindow": self.context_window, "thresholdRatio": self.threshold_ratio,
               "retainTokens": self.retain_tokens, "maxTokens": self.max_tokens,
               "compactionRetries": self.compaction_retries, "maxOverflowRetries": self.max_overflow_retries,
               "requestMaxTokens": self.request_max_tokens}
        out["pruner"] = None if self.pruner is None else self.pruner.to_json()
        if self.auto is not None:
            out["auto"] = self.auto
        if self.runtime_context:  # written only when set: scripts without it dump without the key
            out["runtimeContext"] = True
        return out


@dataclass(frozen=True)
class Reply:
    """One model answer: `bash` tool calls (parallel when several) each printing `outputs[i]` characters,
    an overflow (HTTP 400 "maximum context length", spec 10.1), or a plain text reply that ends the turn.
    `usage` overrides the script's usage mode for this reply ([prompt_tokens, completion_tokens])."""

    kind: str  # "tool" | "overflow" | "text"
    outputs: tuple[int, ...] = ()
    text: str = ""
    usage: tuple[int, int] | None = None

    @property
    def output_chars(self) -> int:
        return sum(self.outputs)

    def to_json(self) -> dict:
        if self.kind == "overflow":
            return {"overflow": True}
        if self.kind == "tool":
            out: dict[str, Any] = ({"tool": {"output_chars": self.outputs[0]}} if len(self.outputs) == 1
                                   else {"tools": [{"output_chars": n} for n in self.outputs]})
        else:
            out = {"text": self.text}
        if self.usage is not None:
            out["usage"] = list(self.usage)
        return out


@dataclass(frozen=True)
class Turn:
    """A user prompt, the replies its requests get in order, and whether `/compact` runs after it."""

    prompt: str
    replies: tuple[Reply, ...]
    compact: bool = False

    def to_json(self) -> dict:
        return {"prompt": self.prompt, "replies": [r.to_json() for r in self.replies], "compact": self.compact}


@dataclass(frozen=True)
class SummaryScript:
    """What one summarizer call (a request with `x-deepseek-harness-compact: 1`) gets: text of `ratio` x
    the summarised request's message characters (or `text` verbatim), an HTTP 500 (`failure`), or a
    summary larger than the span (`too-big`, refused by the shrink rule, spec 8.2 step 10)."""

    outcome: str = "text"
    ratio: float = DEFAULT_SUMMARY_RATIO
    text: str | None = None
    usage: tuple[int, int] | None = None

    def to_json(self) -> dict:
        out: dict[str, Any] = {"outcome": self.outcome}
        if self.outcome in ("text", "truncated") and self.text is None:
            out["ratio"] = self.ratio
        if self.text is not None:
            out["text"] = self.text
        if self.usage is not None:
            out["usage"] = list(self.usage)
        return out


DEFAULT_SUMMARY = SummaryScript()


@dataclass(frozen=True)
class Script:
    """One conversation: name, config, usage mode, turns, summaries, and the paths it is written for."""

    name: str
    config: Config
    turns: tuple[Turn, ...]
    summaries: tuple[SummaryScript, ...] = ()
    usage: str = "fixed"
    description: str = ""
    expect: tuple[tuple[str, bool], ...] = field(default=())

    def summary(self, index: int) -> SummaryScript:
        """The script for the index-th summarizer call (0-based); the default once `summaries` runs out."""
        return self.summaries[index] if 0 <= index < len(self.summaries) else DEFAULT_SUMMARY

    def policy(self) -> RuntimePolicy:
        return self.config.policy()

    @property
    def expected_paths(self) -> dict[str, bool]:
        return dict(self.expect)

    def to_json(self) -> dict:
        out: dict[str, Any] = {"format": FORMAT, "name": self.name}
        if self.description:
            out["description"] = self.description
        out.update({"config": self.config.to_json(), "usage": self.usage,
                    "turns": [t.to_json() for t in self.turns], "summaries": [s.to_json() for s in self.summaries]})
        if self.expect:
            out["expect"] = dict(self.expect)
        return out

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1) + "\n"


# -- loading -----------------------------------------------------------------------------------------
def _where(error: jsonschema.ValidationError) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return path.lstrip(".") or "(document)"


def _at(source: str, text: str | None, path: list) -> str:
    """``source:LINE`` of the value at ``path`` when the script's text is known (a file), else ``source``."""
    return source if text is None else f"{source}:{line_of(text, path)}"


def _schema_errors(obj: Any, source: str, text: str | None) -> None:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    errors = sorted(validator.iter_errors(obj), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    if errors:
        best = jsonschema.exceptions.best_match(errors)
        raise ScriptError(f"{_at(source, text, list(best.absolute_path))}: {_where(best)}: {best.message}")


def _semantic_errors(script: Script, source: str, text: str | None) -> None:
    """What dsh checks at load (spec 9.1, 6) and at the first pressure check (retain < threshold)."""
    try:
        policy = script.config.policy()
        target = resolve_target_policy(policy.compaction, *ROUTE)
        resolve_compact_spec(target, script.config.context_window)
    except ModelError as exc:
        raise ScriptError(f"{_at(source, text, ['config'])}: config: {exc.message}") from None
    for t, turn in enumerate(script.turns):
        kinds = [r.kind for r in turn.replies]
        for r, kind in enumerate(kinds[:-1]):
            if kind == "text":
                raise ScriptError(f"{_at(source, text, ['turns', t, 'replies', r])}: turns[{t}].replies[{r}]: a text "
                                  f"reply ends the turn, so the {len(kinds) - r - 1} replies after it would never be "
                                  "requested")
        if kinds[-1] == "tool":
            raise ScriptError(f"{_at(source, text, ['turns', t, 'replies', len(kinds) - 1])}: "
                              f"turns[{t}].replies[{len(kinds) - 1}]: the last reply is a tool call, so "
                              "the request after its result would find no reply; end the turn with a text reply "
                              "(or an overflow that ends it)")


def from_json(obj: Any, source: str = "<script>", text: str | None = None) -> Script:
    """Validate (schema, then dsh's config rules) and build a :class:`Script`; raises ScriptError
    (``SOURCE:LINE: where: reason`` when ``text``, the document ``obj`` was read from, is given)."""
    _schema_errors(obj, source, text)
    c = obj["config"]
    pruner = c.get("pruner")
    config = Config(
        context_window=c["contextWindow"], threshold_ratio=c["thresholdRatio"], retain_tokens=c["retainTokens"],
        max_tokens=c.get("maxTokens", 1024), compaction_retries=c.get("compactionRetries", 1),
        max_overflow_retries=c.get("maxOverflowRetries", 1), request_max_tokens=c.get("requestMaxTokens", 1024),
        pruner=None if pruner is None else Pruner(pruner["thresholdChars"], pruner["headChars"], pruner["tailChars"]),
        auto=c.get("auto"), runtime_context=c.get("runtimeContext", False))
    turns = []
    for turn in obj["turns"]:
        replies = []
        for reply in turn["replies"]:
            usage = tuple(reply["usage"]) if "usage" in reply else None
            if "tool" in reply or "tools" in reply:
                tools = reply["tools"] if "tools" in reply else [reply["tool"]]
                replies.append(Reply("tool", outputs=tuple(t["output_chars"] for t in tools), usage=usage))
            elif "overflow" in reply:
                replies.append(Reply("overflow"))
            else:
                replies.append(Reply("text", text=reply["text"], usage=usage))
        turns.append(Turn(turn["prompt"], tuple(replies), turn.get("compact", False)))
    summaries = tuple(SummaryScript(s["outcome"], s.get("ratio", DEFAULT_SUMMARY_RATIO), s.get("text"),
                                    tuple(s["usage"]) if "usage" in s else None) for s in obj.get("summaries", []))
    script = Script(obj["name"], config, tuple(turns), summaries, obj.get("usage", "fixed"),
                    obj.get("description", ""), tuple(obj.get("expect", {}).items()))
    _semantic_errors(script, source, text)
    return script


def loads(text: str, source: str = "<script>") -> Script:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScriptError(f"{source}:{exc.lineno}: not JSON: {exc.msg}") from None
    except RecursionError:
        raise ScriptError(f"{source}:1: not JSON this suite can read: nested too deeply") from None
    return from_json(obj, source, text)


def load_script(path: str | Path) -> Script:
    """Read one script file; every failure is a ScriptError `PATH: reason` (never a traceback)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScriptError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScriptError(f"{path}: cannot read: {exc}") from None
    return loads(text, str(path))


def coerce(script: Script | Mapping | str | Path) -> Script:
    """A Script from a Script, its JSON object, or a path."""
    if isinstance(script, Script):
        return script
    if isinstance(script, Mapping):
        return from_json(dict(script))
    return load_script(script)


def seed_dir() -> Path:
    """`scenarios/e2e/`: the shipped seed scripts."""
    from surfacecheck import scenarios

    return Path(scenarios.__file__).resolve().parent / "e2e"


def seed_scripts() -> list[Script]:
    """Every seed script, sorted by file name."""
    return [load_script(p) for p in sorted(seed_dir().glob("*.json"))]


def schema_text() -> str:
    return json.dumps(SCHEMA, indent=2) + "\n"


if __name__ == "__main__":  # python -m surfacecheck.e2e.script [OUT]: write the schema file
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/schemas/e2e-script.schema.json")
    out.write_text(schema_text(), encoding="utf-8")
    print(f"wrote {out}")
