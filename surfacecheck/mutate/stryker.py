"""StrykerJS over a working copy of installed npm packages (``mutate --runtime dsh``; the Node conversation
runtimes' ``gemini`` and ``ai`` reuse it, ``stryker_frameworks.py``).

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

from surfacecheck.runtime.dsh import ADAPTER, cache_root, node_binary, npm_ci_cached

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


def working_copy(work: Path, packages: list[str], source: Path, *, link_rest: bool = False) -> Path:
    """Lay out ``work`` from the installed ``node_modules`` ``source``: each of ``packages`` (``@scope/name`` or
    ``name``) copied to ``work/pkgs/PACKAGE`` and symlinked back from ``work/node_modules/PACKAGE``, so Node
    resolves it to the copy Stryker mutates. The rest of the tree is copied (``link_rest=False``: dsh's packages
    import each other, and each must find the mutated copies) or symlinked entry by entry into ``source``
    (``link_rest=True``: a tree of hundreds of megabytes whose packages never import the mutated one); a mutated
    package's own nested ``node_modules`` is always a symlink. Returns ``work/node_modules``; ``source`` is only
    read."""
    modules, pkgs = work / "node_modules", work / "pkgs"
    moved = set(packages)
    if link_rest:
        modules.mkdir(parents=True)
        for entry in sorted(source.iterdir()):
            scoped = [f"{entry.name}/{e.name}" for e in entry.iterdir()] if entry.name.startswith("@") else []
            if entry.name.startswith("@") and any(p in moved for p in scoped):
                (modules / entry.name).mkdir()
                for inner in sorted(entry.iterdir()):
                    if f"{entry.name}/{inner.name}" not in moved:
                        (modules / entry.name / inner.name).symlink_to(inner)
            elif entry.name not in moved:
                (modules / entry.name).symlink_to(entry)
    else:
        shutil.copytree(source, modules, symlinks=True)
    for package in sorted(moved):
        target = pkgs / package
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(source / package, target, symlinks=True, ignore=shutil.ignore_patterns("node_modules"))
        if (source / package / "node_modules").is_dir():
            (target / "node_modules").symlink_to((source / package / "node_modules").resolve())
        link = modules / package
        if link.is_symlink() or link.exists():
            shutil.rmtree(link) if link.is_dir() and not link.is_symlink() else link.unlink()
        link.symlink_to(Path(os.path.relpath(target, link.parent)))
    return modules


def config(work: Path, mutate: list[str], out: Path, *, concurrency: int, incremental: bool,
           timeout_ms: int, timeout_factor: float) -> dict:
    """The Stryker configuration of one run (written to ``WORK/stryker.config.json``)."""
    return {
        "testRunner": "surfacecheck",
        "plugins": [str(PLUGIN)],
        "mutate": mutate,
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


def run_stryker(work: Path, mutate: list[str], out: Path, gate_args: list[str], *, concurrency: int,
                incremental: bool, timeout_ms: int, timeout_factor: float, say, deadline: float | None = None, dry_run_only: bool = False,
                env: dict[str, str] | None = None, select: list[str] | None = None) -> dict:
    """Run Stryker over ``mutate`` (Stryker's ``FILE:START-END`` patterns, relative to ``work``); its JSON report (mutation-testing-report-schema) and how the run went. Raises RuntimeError
    with Stryker's last lines when it fails (e.g. the dry run of the unmutated gate failed). ``env``: more variables
    for Stryker and the gate processes; ``select``: the only mutants the runner runs (``mutant_key`` of each; the
    others are answered at once as not selected, and dropped from the figures by the caller)."""
    cli = stryker_cli(say)
    out.mkdir(parents=True, exist_ok=True)
    settings = config(work, mutate, out, concurrency=concurrency, incremental=incremental, timeout_ms=timeout_ms,
                      timeout_factor=timeout_factor)
    (work / "stryker.config.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
    log = out / "stryker.log"
    env = {**os.environ, **(env or {})}
    env["SURFACECHECK_MUTATE_GATE"] = json.dumps({"select": select,
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
