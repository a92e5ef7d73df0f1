"""``report.png``: the page rendered by a real headless Chromium (Debian's ``chromium``), offline.

``check --screenshot`` and the browser test both use :func:`render`, so what the test looks at is what a
person gets. No network: the page is a local file with nothing to fetch, and background networking is off.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--no-first-run", "--hide-scrollbars")
PNG_FILE = "report.png"


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(page: Path, *flags: str, timeout: float) -> subprocess.CompletedProcess:
    browser = chromium()
    if browser is None:
        raise RuntimeError("chromium is not installed (apt-get install chromium)")
    done = subprocess.run([browser, *FLAGS, *flags, Path(page).resolve().as_uri()], capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"chromium {' '.join(flags)} exited {done.returncode}: {done.stderr[-500:]}")
    return done


def dump_dom(page: Path, timeout: float = 120) -> str:
    """The DOM after the page loaded, as Chromium serialises it; RuntimeError when Chromium fails."""
    return _run(page, "--dump-dom", timeout=timeout).stdout


def render(page: Path, png: Path, *, width: int = 1366, height: int = 2400, timeout: float = 120) -> Path:
    """A screenshot of the top ``height`` pixels of ``page`` at a laptop's width; RuntimeError on failure."""
    _run(page, f"--screenshot={png}", f"--window-size={width},{height}", timeout=timeout)
    if not Path(png).is_file():
        raise RuntimeError(f"chromium wrote no screenshot at {png}")
    return Path(png)
