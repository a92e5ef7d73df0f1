"""The import contract in pyproject.toml holds: the layers (model -> core -> scenarios -> runtime -> properties ->
engines -> stages -> reports -> check -> CLI) import only downward, and no package imports in a circle. And the
contract can fail: the same tree with one upward import (the model importing an engine) is refused."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = shutil.which("lint-imports", path=os.path.dirname(sys.executable)) or shutil.which("lint-imports")

pytestmark = pytest.mark.skipif(LINT is None, reason="import-linter is not installed (pip install -e '.[test]')")


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    return subprocess.run([LINT, "--config", str(tree / "pyproject.toml"), "--no-cache"], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=300)


def _copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "surfacecheck", tree / "surfacecheck",
                    ignore=shutil.ignore_patterns("__pycache__", "*.jsonl", "*.json", "*.j2", "*.mjs"))
    shutil.copy2(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def _append(tree: Path, module: str, line: str) -> None:
    path = tree / "surfacecheck" / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}  # noqa\n", encoding="utf-8")


def test_the_layers_hold_on_this_tree():
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 kept, 0 broken" in done.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
    tree = _copy(tmp_path)
    assert _lint(tree).returncode == 0  # the copy alone holds: the failure below is the one added import
    _append(tree, "model/walk.py", "from surfacecheck.verify import run as _upward")
    done = _lint(tree)
    assert done.returncode == 1
    assert "surfacecheck.model is not allowed to import surfacecheck.verify" in done.stdout
    assert "surfacecheck.model.walk -> surfacecheck.verify.run" in done.stdout


def test_a_cycle_between_engines_breaks_the_contract(tmp_path):
    tree = _copy(tmp_path)
    _append(tree, "audit/rules.py", "from surfacecheck.e2e import script as _cycle")
    done = _lint(tree)
    assert done.returncode == 1
    assert "No cycles are allowed in surfacecheck" in done.stdout
