"""Generated scenario logs. The JSONL files live in ``scenarios/logs/`` and ship as package data."""
from __future__ import annotations

from pathlib import Path

LOGS_DIR = Path(__file__).resolve().parent / "logs"
"""Where the generated scenario logs (``*.jsonl``) live."""


def scenario_logs() -> list[Path]:
    """Every generated scenario log, sorted by file name (empty if none were generated yet)."""
    if not LOGS_DIR.is_dir():
        return []
    return sorted(LOGS_DIR.glob("*.jsonl"))
