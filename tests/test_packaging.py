"""``pip install`` adds exactly one top-level name, ``surfacecheck``, and the wheel carries the data the tool reads
at run time (scenario logs and scripts, the findings registry and its traces, the regressions, the report
template, the e2e plugin)."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_has_one_top_level_package_and_its_data(tmp_path):
    source = tmp_path / "source"  # built from a copy: the build writes beside its sources
    shutil.copytree(ROOT / "surfacecheck", source / "surfacecheck", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    [wheel] = tmp_path.glob("surfacecheck-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith((".dist-info", ".data"))}
    assert top == {"surfacecheck"}
    for data in ("surfacecheck/scenarios/logs/prune.jsonl", "surfacecheck/scenarios/e2e/prune-only.json",
                 "surfacecheck/properties/findings.json", "surfacecheck/reports/templates/report.html.j2",
                 "surfacecheck/e2e/plugin/compact_on_marker.mjs", "surfacecheck/known_corpus.json"):
        assert data in names, data
    assert any(n.startswith("surfacecheck/properties/regressions/") and n.endswith(".jsonl") for n in names)
    assert any(n.startswith("surfacecheck/properties/findings/") and n.endswith(".jsonl") for n in names)
