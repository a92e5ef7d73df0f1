"""``mutate --runtime embedded --workers N`` / ``--scheduler ADDRESS``: one mutant is one work item on Dask.

Rule: the verdicts must not depend on the worker count. So this process does everything mutmut does
before its first mutant, once (``mutmut_serve.py prepare``: generate the mutants, record which gate
test reaches which function, run the clean tests and the forced failure), and lists the mutants; each
work item is ``(Job, mutant key)`` and :func:`run_mutant` answers mutmut's own exit code for it. The
mutmut state a mutant's run reads (mutants, coverage, test durations) is the prepared copy's, read
only, so a mutant's result depends on the item alone. Results come back in mutmut's order and are
scored exactly as the one-process run's (``embedded.as_report``), diffs taken here.

A worker keeps one warmed-up ``mutmut_serve.py serve`` process per thread (imports the gate once and
forks each mutant, as mutmut does: a fresh process per mutant would cost ~10x the 0.15 s a mutant
takes). A worker whose machine lacks the copy (``--scheduler`` elsewhere) re-creates it at the same
path with the same recipe. A serve process that dies is started again once for the same mutant; a
second death is a crash of the gate (never a kill).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SERVE = Path(__file__).with_name("mutmut_serve.py")
CRASHED = -1
"""The exit code of a mutant whose serve process died twice: scored as a crash (RuntimeError), not a kill."""
_SERVERS: dict[tuple[str, int], subprocess.Popen] = {}
_PREPARING = threading.Lock()


@dataclass(frozen=True)
class Job:
    """What a worker needs for any mutant of one run: the prepared copy, and how to make it again."""

    work: str
    files: tuple[str, ...]
    gate: str  # SURFACECHECK_MUTATE_GATE (JSON: runtime, stages, timeout, verify profile, corpus)
    timeout_multiplier: float


def job_env(job: Job) -> dict:
    from .mutmut_copy import gate_env

    return gate_env(job.gate)


def prepare(job: Job, log: Path) -> list[list[str]] | None:
    """Lay out the copy (``embedded.working_copy``) if it is not there, run mutmut's preparation in it;
    the mutants ``[[file, key], ...]``, or None when the unmutated gate failed (see ``log``)."""
    from .mutmut_copy import working_copy

    work = Path(job.work)
    if not (work / "pyproject.toml").is_file():
        work.mkdir(parents=True, exist_ok=True)
        working_copy(work, list(job.files), {}, job.timeout_multiplier)
    shutil.copy2(SERVE, work / SERVE.name)
    listing = work / "mutants.json"
    with log.open("a", encoding="utf-8") as sink:
        done = subprocess.run([sys.executable, SERVE.name, "prepare", str(listing)], cwd=work, env=job_env(job),
                              stdout=sink, stderr=subprocess.STDOUT)
    return json.loads(listing.read_text(encoding="utf-8")) if done.returncode == 0 and listing.is_file() else None


def _server(job: Job) -> subprocess.Popen:
    """This thread's warmed-up serve process for ``job`` (started, and the copy re-created, when needed)."""
    key = (job.work, threading.get_ident())
    proc = _SERVERS.get(key)
    if proc is not None and proc.poll() is None:
        return proc
    work = Path(job.work)
    with _PREPARING:
        if not (work / "mutants" / "mutmut-stats.json").is_file():  # another machine: the same copy, made here
            if prepare(job, work.parent / f"{work.name}-prepare.log") is None:
                raise RuntimeError(f"mutmut's preparation failed on this worker (log {work.name}-prepare.log)")
    log = (work / f"serve-{os.getpid()}-{key[1]}.log").open("a", encoding="utf-8")
    proc = subprocess.Popen([sys.executable, SERVE.name, "serve"], cwd=work, env=job_env(job), text=True, bufsize=1,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
    log.close()
    if not proc.stdout.readline():
        raise RuntimeError(f"mutmut serve did not start in {work} (see its serve-*.log)")
    _SERVERS[key] = proc
    return proc


def run_mutant(item: tuple[Job, str]) -> dict:
    """One work item: mutmut's verdict on one mutant ``{"name", "exit", "seconds"}``."""
    job, key = item
    for _attempt in range(2):
        proc = _server(job)
        try:
            proc.stdin.write(key + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        except OSError:
            line = ""
        if line:
            return json.loads(line)
        stop_servers(job.work)
    return {"name": key, "exit": CRASHED, "seconds": None}


def stop_servers(work: str) -> int:
    """End this process's serve processes for ``work`` (closing stdin ends one); how many there were."""
    mine = [k for k in _SERVERS if k[0] == work]
    for k in mine:
        proc = _SERVERS.pop(k)
        try:
            proc.stdin.close()
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
    return len(mine)


def diffs_of(work: Path, env: dict, wanted: list[list[str]]) -> dict[str, str]:
    """mutmut's diff of each ``[file, key]`` (survivors and unreached: the ones the report shows)."""
    if not wanted:
        return {}
    done = subprocess.run([sys.executable, SERVE.name, "diffs"], cwd=work, env=env, input=json.dumps(wanted),
                          capture_output=True, text=True)
    return json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else {}


def results_on(pool, job: Job, log: Path, say) -> tuple[dict, str | None]:
    """Every mutant of ``job`` on ``pool``: mutmut's results ``{file: [row]}`` (as ``embedded.READ_RESULTS``
    gives them) and None, or ``{}`` and why the run is void (exit 3). WorkerLost propagates (the caller: void)."""
    from .mutmut_copy import STATUS_BY_EXIT, void_reason

    listed = prepare(job, log)
    if listed is None:
        return {}, void_reason(log, f"mutmut's preparation did not finish (log {log})")
    say(f"mutmut: {len(listed)} mutants, one per Dask task")
    counts, last = {"done": 0, "killed": 0}, [time.monotonic()]

    def done(_index: int, row: dict) -> None:
        counts["done"] += 1
        counts["killed"] += STATUS_BY_EXIT.get(row["exit"]) == "Killed"
        if time.monotonic() - last[0] > 10 or counts["done"] == len(listed):
            say(f"mutmut: {counts['done']}/{len(listed)} mutants tested, {counts['killed']} killed")
            last[0] = time.monotonic()
    try:
        rows = pool.map(run_mutant, [(job, key) for _file, key in listed], label="mutant", done=done)
    except RuntimeError as exc:  # a worker could not prepare the copy or start its gate: no score, no traceback
        return {}, f"a Dask worker could not run the mutants: {exc}"
    finally:
        pool.run_on_every_worker(stop_servers, job.work)
    shown = [pair for pair, row in zip(listed, rows) if row["exit"] in (0, 33, 5)]
    diffs = diffs_of(Path(job.work), job_env(job), shown)
    results: dict[str, list[dict]] = {}
    for (source, key), row in sorted(zip(listed, rows), key=lambda pair: str(Path(pair[0][0] + ".meta"))):
        results.setdefault(source, []).append({**row, "diff": diffs.get(key) if row["exit"] in (0, 33, 5) else None})
    return results, None
