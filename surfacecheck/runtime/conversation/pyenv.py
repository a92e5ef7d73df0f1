"""A conversation runtime's own Python environment: a virtual environment in the cache, installed on first use from
the runtime's hash-locked requirements (``<runtime>.lock`` beside this file), never into the suite's own
environment and never twice.

The environment's folder is named by the lock's digest (``SURFACECHECK_CACHE``, default ``~/.cache/surfacecheck``),
so a changed lock installs a new one. The install goes to a temporary folder beside the entry and is renamed into
place, so an interrupted install never leaves a half-built environment. ``python -m
surfacecheck.runtime.conversation.pyenv RUNTIME...`` installs ahead of time (CI's setup step).

A runtime may need a newer Python than the suite's own (OpenHands needs 3.12): :mod:`.interpreters` finds one,
and a runtime whose environment is not built yet and for which none is found is a usage problem (exit 2) with
the fix in its message (:func:`runtime_problem`).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ...core.protocol import RuntimeUnavailable
from ..dsh import cache_root
from .interpreters import NoInterpreter, find_python

HERE = Path(__file__).resolve().parent
INSTALL_SECONDS = 900


@dataclass(frozen=True)
class PythonRuntime:
    """One runtime served by a Python adapter: its name, the pinned package it drives, the adapter script.

    ``minimum`` is the oldest Python the package supports (its lock is compiled under that Python);
    ``environment`` is what the adapter's process needs set besides the shared variables."""

    name: str
    package: str
    version: str
    minimum: tuple[int, int] = (3, 11)
    environment: tuple[tuple[str, str], ...] = ()

    @property
    def lock(self) -> Path:
        return HERE / f"{self.name}.lock"

    @property
    def adapter(self) -> Path:
        return HERE / f"{self.name}_peer.py"

    def digest(self) -> str:
        return hashlib.sha256(self.lock.read_bytes()).hexdigest()[:16]

    def entry(self) -> Path:
        return cache_root() / f"{self.name}-{self.package}-{self.version}-{self.digest()}"

    def interpreter(self) -> Path:
        return self.entry() / "bin" / "python"


RUNTIMES: dict[str, PythonRuntime] = {
    "langchain": PythonRuntime("langchain", "langchain", "1.5.0"),
    "strands": PythonRuntime("strands", "strands-agents", "1.62.0"),
    "adk": PythonRuntime("adk", "google-adk", "2.13.0"),
    "deepagents": PythonRuntime("deepagents", "deepagents", "0.7.32"),
    "openhands": PythonRuntime("openhands", "openhands-sdk", "1.58.2", minimum=(3, 12),
                               environment=(("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
                                            ("OPENHANDS_SUPPRESS_BANNER", "1"))),
}


def base_python(runtime: PythonRuntime | None = None) -> str:
    """The interpreter ``runtime``'s environment is built from: ``SURFACECHECK_PYTHON`` or the one running the
    suite when the runtime supports the suite's Python, else the one :func:`.interpreters.find_python` finds (``RuntimeUnavailable``
    with the fix when there is none)."""
    if runtime is None or runtime.minimum <= sys.version_info[:2]:
        return os.environ.get("SURFACECHECK_PYTHON") or sys.executable
    try:
        return find_python(runtime.minimum, os.environ)
    except NoInterpreter as exc:
        raise RuntimeUnavailable("unsupported", f"runtime {runtime.name!r}: {exc}") from None


def runtime_problem(name: str) -> str | None:
    """Why the Python runtime ``name`` cannot run here (a usage problem, exit 2), or None: its environment is not
    built and no interpreter it supports is found."""
    runtime = RUNTIMES[name]
    if runtime.interpreter().exists() or runtime.minimum <= sys.version_info[:2]:
        return None
    try:
        find_python(runtime.minimum, os.environ)
    except NoInterpreter as exc:
        return f"runtime {name!r} ({runtime.package} {runtime.version}): {exc}"
    return None


def ensure_env(runtime: PythonRuntime, progress=None) -> Path:
    """The environment's python, installing it first when the cache lacks it (``RuntimeUnavailable`` on failure)."""
    entry = runtime.entry()
    python = runtime.interpreter()
    if python.exists():
        return python
    say = progress or (lambda msg: print(msg, file=sys.stderr, flush=True))
    entry.parent.mkdir(parents=True, exist_ok=True)
    say(f"surfacecheck: installing {runtime.package} {runtime.version} (lock {runtime.digest()}) into {entry} "
        f"(first use; about a minute) ...")
    base = base_python(runtime)
    work = Path(tempfile.mkdtemp(prefix=f".{entry.name}-install-", dir=entry.parent))
    try:
        _run([base, "-m", "venv", str(work)], f"creating the environment for {runtime.name}")
        _run([str(work / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
              "--require-hashes", "--no-deps", "-r", str(runtime.lock)], f"pip install of {runtime.name}'s lock")
        if entry.exists():  # another process finished first
            shutil.rmtree(work, ignore_errors=True)
        else:
            _relocate(work, entry, base)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    say(f"surfacecheck: {runtime.package} {runtime.version} installed")
    return python


def _relocate(work: Path, entry: Path, base: str) -> None:
    """Rename the built environment into place; scripts name their interpreter by path, so the venv is recreated
    over itself at the final path (``venv --upgrade`` rewrites ``pyvenv.cfg`` and the interpreter links)."""
    work.rename(entry)
    _run([base, "-m", "venv", "--upgrade", "--without-pip", str(entry)], "relocating the environment")


def _run(argv: list[str], what: str) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=INSTALL_SECONDS)
    except subprocess.TimeoutExpired:
        raise RuntimeUnavailable("timeout", f"{what} did not finish within {INSTALL_SECONDS} s") from None
    except OSError as exc:
        raise RuntimeUnavailable("unsupported", f"{what} could not start: {exc}") from None
    if done.returncode != 0:
        raise RuntimeUnavailable("unsupported", f"{what} failed (exit {done.returncode}):\n"
                                 + (done.stderr or done.stdout)[-2000:])


def adapter_command(runtime: PythonRuntime) -> tuple[list[str], dict[str, str]]:
    """The adapter's argv (the environment's python running the script) and its environment."""
    python = ensure_env(runtime)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", "LANGSMITH_TRACING": "false",
                "LANGCHAIN_TRACING_V2": "false", "OTEL_SDK_DISABLED": "true"})
    env.update(dict(runtime.environment))
    return [str(python), str(runtime.adapter)], env


def open_python_runtime(spec: str, timeout: float):
    """A :class:`~surfacecheck.runtime.client.ProcessRuntime` speaking to ``spec``'s adapter in its environment."""
    from ..client import ProcessRuntime

    argv, env = adapter_command(RUNTIMES[spec])
    return ProcessRuntime(" ".join(argv), timeout=timeout, argv=argv, env=env, name=spec,
                          handshake_timeout=max(timeout, 60.0))


def main(argv: list[str] | None = None) -> int:
    """Install the named runtimes' environments (all of them without arguments); print each python's path."""
    names = list(argv if argv is not None else sys.argv[1:]) or list(RUNTIMES)
    unknown = [n for n in names if n not in RUNTIMES]
    if unknown:
        print(f"surfacecheck: unknown Python runtime {unknown[0]!r}; known: {', '.join(RUNTIMES)}", file=sys.stderr)
        return 2
    try:
        for name in names:
            print(ensure_env(RUNTIMES[name]))
    except RuntimeUnavailable as exc:
        print(f"surfacecheck: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
