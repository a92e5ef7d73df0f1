"""How the findings report names a file: relative to where the reader stands, so replay commands can be typed."""
from __future__ import annotations

from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]


def display_path(path: str | Path) -> str:
    """``path`` relative to the working directory (or the checkout) when under it, else absolute."""
    path = Path(path).resolve()
    for root in (Path.cwd().resolve(), CHECKOUT):
        try:
            return str(path.relative_to(root))
        except ValueError:
            continue
    return str(path)
