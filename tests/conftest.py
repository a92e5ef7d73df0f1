"""Shared pytest setup: Hypothesis profiles and the ``corpus`` fixture.

Hypothesis profiles: ``ci`` (deterministic: derandomize=True, modest max_examples) is loaded when
the environment variable CI is set, ``dev`` otherwise; ``--hypothesis-profile NAME`` overrides.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from surfacecheck.core.corpus import ENV_VAR, CorpusError, corpus_root

settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=50,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=100, deadline=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_report_header(config: pytest.Config) -> list[str]:
    current = settings.default
    getter = getattr(settings, "get_current_profile_name", None)
    profile = getter() if getter else getattr(settings, "_current_profile", "?")
    seed = config.getoption("hypothesis_seed", default=None)
    if current.derandomize:
        seed_info = "derandomized (fixed per test)"
    elif seed is not None:
        seed_info = f"{seed} (--hypothesis-seed)"
    else:
        seed_info = "random per run (reproduce with --hypothesis-seed=N or the printed @reproduce_failure blob)"
    try:
        root = corpus_root()
        corpus = str(root) if root else f"not found (set {ENV_VAR}=/path/to/shared/corpus)"
    except CorpusError as exc:
        corpus = f"error: {exc}"
    return [
        f"surfacecheck: hypothesis profile {profile!r} "
        f"(max_examples={current.max_examples}, derandomize={current.derandomize}); seed: {seed_info}",
        f"surfacecheck: corpus: {corpus}; CI={'set' if os.environ.get('CI') else 'unset'}",
    ]


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The shared corpus root. Missing corpus: fails under CI, skips on a developer's machine."""
    try:
        root = corpus_root()
    except CorpusError as exc:
        pytest.fail(f"corpus misconfigured: {exc}", pytrace=False)
    if root is None:
        if os.environ.get("CI"):
            pytest.fail(
                f"corpus missing: expected it at ../shared/corpus beside the checkout; "
                f"set {ENV_VAR}=/path/to/shared/corpus",
                pytrace=False,
            )
        pytest.skip(f"corpus not found: set {ENV_VAR}=/path/to/shared/corpus to run this test")
    return root
