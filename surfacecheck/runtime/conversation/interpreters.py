"""Find a Python interpreter at least as new as a runtime needs (OpenHands needs 3.12; the suite runs on 3.11).

The candidates, in order: ``SURFACECHECK_PYTHON312`` and ``SURFACECHECK_PYTHON`` (paths), then ``python3.12`` and
``python3.13`` on ``PATH``, then ``~/.pyenv/versions/3.12*/bin/python`` and ``3.13*``. Each candidate is asked its
version by running it (a pyenv shim on ``PATH`` may exist and still fail), so a name is never trusted. When none
fits, :class:`NoInterpreter` says what was tried, why each was refused, and how to fix it.
"""
from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

ENV_VARS = ("SURFACECHECK_PYTHON312", "SURFACECHECK_PYTHON")
NAMES = ("python3.12", "python3.13")
PROBE_SECONDS = 20


class NoInterpreter(LookupError):
    """No interpreter new enough was found; the message lists the candidates and the fix."""


@functools.lru_cache(maxsize=64)
def probe(executable: str) -> tuple[int, int] | str:
    """``executable``'s ``(major, minor)``, or why it could not be asked."""
    try:
        done = subprocess.run([executable, "-c", "import sys; print(*sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=PROBE_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run ({type(exc).__name__})"
    parts = done.stdout.split()
    if done.returncode != 0 or len(parts) != 2 or not all(p.isdigit() for p in parts):
        return f"exits {done.returncode} when asked its version"
    return int(parts[0]), int(parts[1])


def candidates(environ: Mapping[str, str], home: Path | None = None) -> list[tuple[str, str]]:
    """``(where it came from, executable)`` in the order they are tried."""
    found: list[tuple[str, str]] = [(var, environ[var]) for var in ENV_VARS if environ.get(var)]
    for name in NAMES:
        path = shutil.which(name, path=environ.get("PATH", ""))
        if path:
            found.append((f"{name} on PATH", path))
    root = (home if home is not None else Path(environ.get("HOME") or Path.home())) / ".pyenv" / "versions"
    for series in ("3.12", "3.13"):
        for folder in sorted(root.glob(f"{series}*"), reverse=True):
            found.append(("pyenv", str(folder / "bin" / "python")))
    return found


def find_python(minimum: tuple[int, int], environ: Mapping[str, str], home: Path | None = None) -> str:
    """The first candidate whose version is at least ``minimum``; :class:`NoInterpreter` when none is."""
    refused = []
    for origin, executable in candidates(environ, home):
        version = probe(executable)
        if isinstance(version, tuple) and version >= minimum:
            return executable
        why = f"Python {version[0]}.{version[1]}" if isinstance(version, tuple) else version
        refused.append(f"{origin}={executable} ({why})")
    wanted = ".".join(map(str, minimum))
    tried = "; ".join(refused) if refused else "no SURFACECHECK_PYTHON312, no python3.12/python3.13 on PATH, no " \
                                                 "~/.pyenv/versions/3.12*"
    raise NoInterpreter(f"needs Python >= {wanted} and none was found (tried: {tried}). Install Python {wanted} "
                        f"(e.g. `pyenv install {wanted}` or your system's python{wanted} package) and set "
                        f"SURFACECHECK_PYTHON312=/path/to/python{wanted}")
