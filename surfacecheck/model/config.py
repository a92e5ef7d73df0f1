"""`BasicCompactionConfig` resolution (seed §1-2; spec 9.1, compaction-basic `config.ts`).

Load-time validation with dsh's messages, per-route override resolution, and the compact spec
(threshold and retention in tokens) for a context window.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from .errors import CompactionConfigError, TargetPressureConfigError
from .prune_content import PrunerConfig, pruner_schema, resolve_pruner_config

POLICY_KEYS = ("thresholdRatio", "retainRatio", "retainTokens", "summarizationProvider", "summarizationModel",
               "maxTokens", "compactionRetries", "maxOverflowRetries")
TOP_KEYS = frozenset(POLICY_KEYS + ("modelPolicies", "auto"))
MODEL_POLICY_KEYS = frozenset(POLICY_KEYS + ("provider", "model"))
DEFAULT_THRESHOLD_RATIO = 0.8
DEFAULT_RETAIN_RATIO = 0.16


def _js(value: Any) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    return _is_number(value) and math.isfinite(value) and float(value).is_integer()


def _fail(message: str):
    raise CompactionConfigError(message)


def _validate_policy(config: Mapping[str, Any], name: str) -> None:
    """`validatePolicy`: ratios in (0,1], integers, mutually exclusive retention, summarization pair."""
    for key in ("thresholdRatio", "retainRatio"):
        value = config.get(key)
        if key in config and not (_is_number(value) and math.isfinite(value) and 0 < value <= 1):
            _fail(f"{name}.{key} ({_js(value)}) must be a number in (0, 1]")
    if "retainTokens" in config and not (_is_integer(config["retainTokens"]) and config["retainTokens"] >= 0):
        _fail(f"{name}.retainTokens ({_js(config['retainTokens'])}) must be a non-negative integer")
    if "retainRatio" in config and "retainTokens" in config:
        _fail(f"{name}: retainRatio and retainTokens are mutually exclusive")
    if "maxTokens" in config and not (_is_integer(config["maxTokens"]) and config["maxTokens"] > 0):
        _fail(f"{name}.maxTokens ({_js(config['maxTokens'])}) must be a positive integer")
    for key in ("compactionRetries", "maxOverflowRetries"):
        value = config.get(key)
        if key in config and not (_is_integer(value) and value >= 0):
            _fail(f"{name}.{key} ({_js(value)}) must be a non-negative integer")
    provider, model = config.get("summarizationProvider"), config.get("summarizationModel")
    if "summarizationProvider" in config and not isinstance(provider, str):
        _fail(f"{name}.summarizationProvider must be a string")
    if "summarizationModel" in config and not isinstance(model, str):
        _fail(f"{name}.summarizationModel must be a string")
    if "summarizationProvider" not in config and "summarizationModel" not in config:
        return
    if "summarizationProvider" not in config or "summarizationModel" not in config or (provider == "") != (model == ""):
        _fail(f"{name}: summarizationProvider and summarizationModel must be set together as an empty or non-empty pair")


def _retention(config: Mapping[str, Any], fallback: tuple[str, Any]) -> tuple[str, Any]:
    if config.get("retainTokens") is not None:
        return ("retainTokens", config["retainTokens"])
    if config.get("retainRatio") is not None:
        return ("retainRatio", config["retainRatio"])
    return fallback


def _validate_ratio_retention(threshold: float, retention: tuple[str, Any], name: str) -> None:
    if retention[0] == "retainRatio" and retention[1] >= threshold:
        _fail(f"{name}: retainRatio ({_js(retention[1])}) must be less than the resolved thresholdRatio ({_js(threshold)})")


@dataclass(frozen=True)
class CompactionConfig:
    """`ResolvedConfig` (spec 9.1 defaults: threshold 0.8, retain ratio 0.16, retries 1/1, cap 8192, auto)."""

    threshold_ratio: float = DEFAULT_THRESHOLD_RATIO
    retention: tuple[str, Any] = ("retainRatio", DEFAULT_RETAIN_RATIO)
    summarization_provider: str = ""
    summarization_model: str = ""
    max_tokens: int = 8192
    compaction_retries: int = 1
    max_overflow_retries: int = 1
    model_policies: tuple = ()
    auto: bool = True

    @property
    def summarization(self) -> tuple[str, str]:
        """The configured summarization pair (spec 8.5: used when its provider is non-empty)."""
        return self.summarization_provider, self.summarization_model


def resolve_config(config: Mapping[str, Any] | None = None) -> CompactionConfig:
    """`resolveConfig` (spec 9.1): raises CompactionConfigError with dsh's message."""
    config = dict(config or {})
    for key in config:
        if key not in TOP_KEYS:
            _fail(f'BasicCompactionConfig: unknown key "{key}"')
    _validate_policy(config, "BasicCompactionConfig")
    if "auto" in config and not isinstance(config["auto"], bool):
        _fail("BasicCompactionConfig: auto must be a boolean")
    threshold = config.get("thresholdRatio", DEFAULT_THRESHOLD_RATIO)
    retention = _retention(config, ("retainRatio", DEFAULT_RETAIN_RATIO))
    _validate_ratio_retention(threshold, retention, "BasicCompactionConfig")
    policies = config.get("modelPolicies")
    if "modelPolicies" in config and not isinstance(policies, list):
        _fail("BasicCompactionConfig: modelPolicies must be an array")
    seen: set[tuple[str, str]] = set()
    for index, policy in enumerate(policies or []):
        name = f"BasicCompactionConfig: modelPolicies[{index}]"
        if not isinstance(policy, dict):
            _fail(f"{name} must be an object")
        for key in policy:
            if key not in MODEL_POLICY_KEYS:
                _fail(f'{name}: unknown key "{key}"')
        for key in ("provider", "model"):
            if not isinstance(policy.get(key), str) or policy[key] == "":
                _fail(f"{name}.{key} must be a non-empty string")
        _validate_policy(policy, name)
        pair = (policy["provider"], policy["model"])
        if pair in seen:
            _fail(f"BasicCompactionConfig: duplicate model policy for {pair[0]}/{pair[1]}")
        seen.add(pair)
    for index, policy in enumerate(policies or []):  # dsh checks ratio retention after resolving all policies
        name = f"BasicCompactionConfig: modelPolicies[{index}]"
        _validate_ratio_retention(policy.get("thresholdRatio", threshold), _retention(policy, retention), name)
    return CompactionConfig(
        threshold, retention, config.get("summarizationProvider", ""), config.get("summarizationModel", ""),
        config.get("maxTokens", 8192), config.get("compactionRetries", 1), config.get("maxOverflowRetries", 1),
        tuple(dict(p) for p in policies or []), config.get("auto", True))


@dataclass(frozen=True)
class TargetPolicy:
    """`resolveTargetPolicy` (spec 9.1): exact (provider, model) override fields win."""

    provider: str
    model: str
    threshold_ratio: float
    retention: tuple[str, Any]
    max_tokens: int
    compaction_retries: int
    max_overflow_retries: int
    summarization: tuple[str, str] = ("", "")

    @property
    def key(self) -> str:
        return f"{self.provider}/{self.model}"


def resolve_target_policy(config: CompactionConfig, provider: str, model: str) -> TargetPolicy:
    override = next((p for p in config.model_policies if p["provider"] == provider and p["model"] == model), {})
    return TargetPolicy(
        provider, model, override.get("thresholdRatio", config.threshold_ratio),
        _retention(override, config.retention), override.get("maxTokens", config.max_tokens),
        override.get("compactionRetries", config.compaction_retries),
        override.get("maxOverflowRetries", config.max_overflow_retries),
        (override.get("summarizationProvider", config.summarization_provider),
         override.get("summarizationModel", config.summarization_model)))


@dataclass(frozen=True)
class CompactSpec:
    """`resolveCompactSpec` result: the threshold and retain budget in tokens."""

    context_window: int
    threshold_tokens: int
    retain_tokens: int
    compaction_retries: int
    max_tokens: int


def resolve_compact_spec(policy: TargetPolicy, context_window: Any) -> CompactSpec:
    """`resolveCompactSpec` (spec 9.1): floor(window × ratio); retention must be below the threshold."""
    if not (_is_integer(context_window) and context_window > 0):
        raise TargetPressureConfigError(policy.key, f"BasicCompactionConfig: contextWindow ({_js(context_window)}) "
                                                    "must be a positive integer")
    threshold = math.floor(context_window * policy.threshold_ratio)
    kind, value = policy.retention
    retain = value if kind == "retainTokens" else math.floor(context_window * value)
    if retain >= threshold:
        raise TargetPressureConfigError(policy.key, f"BasicCompactionConfig: {policy.key} retainTokens ({retain}) "
                                                    f"must be less than threshold tokens {threshold}")
    return CompactSpec(int(context_window), threshold, int(retain), policy.compaction_retries, policy.max_tokens)


@dataclass(frozen=True)
class RuntimePolicy:
    """What a runtime ran under: the compaction config, the pruner (optional), and each route's window.

    Reads the `policies/NN-*.json` shape of the generated corpus (dsh key names plus `contextWindow`
    and `toolResultPruner`)."""

    compaction: CompactionConfig = CompactionConfig()
    pruner: PrunerConfig | None = None
    context_window: int | None = None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | None) -> "RuntimePolicy":
        obj = dict(obj or {})
        pruner = obj.pop("toolResultPruner", None)
        window = obj.pop("contextWindow", None)
        # a configured pruner is a plugged service: cordis checks its `Config` schema before `resolveConfig` (spec 6)
        return cls(resolve_config(obj), None if pruner is None else resolve_pruner_config(pruner_schema(pruner)),
                   window)
