"""The working copy mutmut mutates the embedded runtime in, the environment its gate runs in, and what its exit
codes mean: shared by the one-run path (:mod:`.embedded`) and the sharded one (:mod:`.sharded`)."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "surfacecheck/runtime/embedded"
COPIED = ("surfacecheck", "benchmarks", "docs")
INCONCLUSIVE_EXIT = 40  # gate_test.py
STATUS_BY_EXIT = {1: "Killed", 0: "Survived", 33: "NoCoverage", 5: "NoCoverage", 36: "Timeout", 24: "Timeout",
                  -24: "Timeout", 152: "Timeout", 255: "Timeout", 34: "Ignored", 37: "CompileError", None: "Pending"}
"""mutmut's exit codes (its ``stats.status_by_exit_code``) in the report schema's words; anything else — our
inconclusive 40, pytest's internal error 3, a signal — is a crash of the gate (RuntimeError), never a kill."""


def working_copy(work: Path, files: list[str], settings: dict, concurrency_timeout: float) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "out", "out-*", "*.egg-info")
    for name in COPIED:
        shutil.copytree(ROOT / name, work / name, ignore=ignore)
    (work / "gate_tests").mkdir()
    shutil.copy2(Path(__file__).with_name("gate_test.py"), work / "gate_tests" / "test_gate.py")
    config = {
        "source_paths": [PACKAGE],
        "only_mutate": [f"{PACKAGE}/{name}" for name in files],
        "also_copy": list(COPIED) + ["gate_tests"],
        "pytest_add_cli_args_test_selection": ["gate_tests/"],
        "pytest_add_cli_args": ["-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:benchmark", "-q"],
        "timeout_multiplier": concurrency_timeout,
        "use_git_change_detection": False,
    }
    lines = ["[tool.mutmut]"] + [f"{key} = {json.dumps(value)}" for key, value in config.items()]
    (work / "pyproject.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def gate_env(settings: str) -> dict:
    """The environment mutmut and its gate tests run in: the gate's settings, and the copy's packages only
    (no PYTHONPATH to this tree)."""
    env = dict(os.environ, SURFACECHECK_MUTATE_GATE=settings)
    env.pop("PYTHONPATH", None)
    return env


def void_reason(log: Path, otherwise: str) -> str:
    """Why a run has no score, from mutmut's log: its clean test run failed, or ``otherwise`` and the log's tail."""
    tail = log.read_text(encoding="utf-8", errors="replace")[-1500:] if log.is_file() else ""
    if "Failed to run clean test" in tail:
        return "the unmutated gate did not pass (mutmut's clean test run failed); no score"
    return f"{otherwise}:\n{tail[-600:]}"
