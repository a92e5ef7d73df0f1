"""StrykerJS over a working copy of dsh's installed packages (``mutate --runtime dsh``).

The working copy is a fresh folder: the packages holding the chosen files are copied to ``pkgs/@deepseek-ai`` (Stryker
never mutates under a ``node_modules``), the rest of the installed tree is copied to ``node_modules`` where those
packages are symlinks into ``pkgs``, so Node resolves dsh's own imports of each other to the mutated copies. Stryker
instruments the copy in place (``inPlace``: it is ours) with mutation switching; the gate runs against
``dsh:WORK/node_modules``. The cache the ``dsh`` runtime normally uses is only read.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from surfacecheck.runtime.dsh import ADAPTER, cache_root, ensure_installed, node_binary, npm_ci_cached

from .dsh_files import SourceFile

ANSI = re.compile(r"\x1b\[[0-9;]*m")
STRYKER = ADAPTER / "mutate"
PLUGIN = STRYKER / "surfacecheck-runner.mjs"
ROOT = Path(__file__).resolve().parents[2]


def stryker_cli(progress=None) -> Path:
    """Stryker's CLI, installed from ``runtimes/dsh/mutate/package-lock.json`` into the cache on first use."""
    import hashlib

    digest = hashlib.sha256((STRYKER / "package-lock.json").read_bytes()).hexdigest()[:16]
    modules = npm_ci_cached(STRYKER, cache_root() / f"stryker-{digest}", "StrykerJS 9.6.1", progress)
    return modules / "@stryker-mutator" / "core" / "bin" / "stryker.js"


def working_copy(work: Path, files: list[SourceFile], source: Path | None = None) -> Path:
    """Lay out ``work`` (see the module docstring) from ``source`` (default: the pinned, cached install);
    returns the ``node_modules`` folder the gate's ``dsh:`` runtime is pointed at."""
    source = source or ensure_installed()
    modules, pkgs = work / "node_modules", work / "pkgs" / "@deepseek-ai"
    shutil.copytree(source, modules, symlinks=True)
    pkgs.mkdir(parents=True)
    for package in sorted({f.package for f in files}):
        shutil.move(str(modules / "@deepseek-ai" / package), str(pkgs / package))
        (modules / "@deepseek-ai" / package).symlink_to(Path("..") / ".." / "pkgs" / "@deepseek-ai" / package)
    return modules


def config(work: Path, files: list[SourceFile], out: Path, *, concurrency: int, incremental: bool,
           timeout_ms: int, timeout_factor: float) -> dict:
    """The Stryker configuration of one run (written to ``WORK/stryker.config.json``)."""
    return {
        "testRunner": "surfacecheck",
        "plugins": [str(PLUGIN)],
        "mutate": [f"pkgs/@deepseek-ai/{f.package}/lib/index.js:{f.start}-{f.end}" for f in files],
        "inPlace": True,
        "coverageAnalysis": "perTest",
        "concurrency": concurrency,
        "timeoutMS": timeout_ms,
        "timeoutFactor": timeout_factor,
        "reporters": ["json", "html", "progress-append-only"],
        "jsonReporter": {"fileName": str(out / "mutation.json")},
        "htmlReporter": {"fileName": str(out / "mutation.html")},
        "incremental": incremental,
        "incrementalFile": str(out / "incremental.json"),
        "tempDirName": ".stryker-tmp",
        "cleanTempDir": "always",
        "disableTypeChecks": False,
        "allowEmpty": False,
        "logLevel": "info",
        "fileLogLevel": "off",
    }


def run_stryker(work: Path, files: list[SourceFile], out: Path, gate_args: list[str], *, concurrency: int,
                incremental: bool, timeout_ms: int, timeout_factor: float, say, deadline: float | None = None, dry_run_only: bool = False) -> dict:
    """Run Stryker; its JSON report (mutation-testing-report-schema) and how the run went. Raises RuntimeError
    with Stryker's last lines when it fails (e.g. the dry run of the unmutated gate failed)."""
    cli = stryker_cli(say)
    out.mkdir(parents=True, exist_ok=True)
    settings = config(work, files, out, concurrency=concurrency, incremental=incremental, timeout_ms=timeout_ms,
                      timeout_factor=timeout_factor)
    (work / "stryker.config.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
    log = out / "stryker.log"
    env = dict(os.environ)
    env["SURFACECHECK_MUTATE_GATE"] = json.dumps({
        "python": sys.executable, "args": gate_args, "cwd": str(ROOT), "log": str(out / "gate.log"),
        "times": str(out / "times.jsonl"), "baseline": str(out / "baseline.json"),
        "coverage": str(out / "coverage.json")})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    started = time.perf_counter()
    tail: list[str] = []
    with log.open("w", encoding="utf-8") as sink:
        proc = subprocess.Popen([node_binary() or "node", str(cli), "run", "stryker.config.json"] + (["--dryRunOnly"] if dry_run_only else []), cwd=work, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                start_new_session=True)
        try:
            for line in proc.stdout:
                sink.write(line)
                tail = (tail + [line.rstrip()])[-40:]
                plain = ANSI.sub("", line).strip()
                if "Mutation testing" in plain or "Initial test run" in plain or "Found " in plain:
                    say(f"stryker: {plain}")
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError
            proc.wait()
        except BaseException:
            _kill_group(proc)
            raise
    seconds = time.perf_counter() - started
    report = out / "mutation.json"
    if dry_run_only and proc.returncode == 0:
        return {"report": None, "seconds": round(seconds, 1), "log": str(log), "config": settings}
    if proc.returncode != 0 or not report.is_file():
        raise RuntimeError(f"Stryker exited {proc.returncode} (log {log}):\n" + "\n".join(tail[-15:]))
    return {"report": json.loads(report.read_text(encoding="utf-8")), "seconds": round(seconds, 1),
            "html": str(out / "mutation.html"), "log": str(log), "config": settings}


def _kill_group(proc: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def main() -> int:
    """``python -m surfacecheck.mutate.stryker``: install the pinned StrykerJS into the cache (CI's setup step)."""
    from surfacecheck.runtime.dsh import run_main

    return run_main(lambda: stryker_cli())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
