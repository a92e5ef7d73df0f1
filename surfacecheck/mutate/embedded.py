"""mutmut over a copy of the embedded Python runtime (``mutate --runtime embedded``).

The working copy holds the suite's packages; mutmut mutates only the chosen modules of
``surfacecheck/runtime/embedded`` (functions become trampolines switched by ``MUTANT_UNDER_TEST``), records which
gate unit reaches which function and runs each mutant against those units only (``gate_test.py``: one pytest test
per unit), forking from one warmed-up process. Its per-mutant exit codes are read back and put in
mutation-testing-report-schema form, so both runtimes are scored by :mod:`.score` alike.
"""
from __future__ import annotations

import ast
import fnmatch
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from .run import EQUIVALENT, MutationRun, sections_of, working_folder
from .mutmut_copy import (PACKAGE, ROOT, STATUS_BY_EXIT, gate_env, void_reason,
                          working_copy)
from .score import Place, read_equivalent, score

DEFAULT_FILES: dict[str, str] = {
    "session.py": "1.3", "surface.py": "1.4, 2", "pairing.py": "3", "meter.py": "4.2-4.4", "projection.py": "5.1",
    "usage.py": "5.2", "breakdown.py": "5.2", "occupancy.py": "5.2", "tracker.py": "8.1, 4.4",
    "compaction.py": "6, 7, 8.1", "transaction.py": "8",
    "policy.py": "9, 10, 11", "context.py": "12, 13", "seed.py": "1.5", "events.py": "1.2, 4.1",
    "assembler.py": "4.3",
}
"""The embedded runtime's modules and the spec sections they implement (its package docstring's table); the
protocol glue (``levels``, ``runtime``), the seeded bugs, the bench and the check stage are not the runtime."""
PROGRESS = re.compile(r"(\d+)/(\d+)\s+🎉 (\d+)")


def select_files(patterns: list[str] | None) -> list[str]:
    names = sorted(DEFAULT_FILES)
    if not patterns:
        return names
    every = sorted(p.name for p in (ROOT / PACKAGE).glob("*.py") if p.name != "__init__.py")
    chosen = [n for n in every if any(fnmatch.fnmatch(n, p) or fnmatch.fnmatch(f"{PACKAGE}/{n}", p) for p in patterns)]
    unmatched = [p for p in patterns if not any(fnmatch.fnmatch(n, p) or fnmatch.fnmatch(f"{PACKAGE}/{n}", p)
                                                for n in every)]
    if unmatched:
        raise ValueError(f"--files {unmatched[0]!r} matches no module of {PACKAGE} ({', '.join(every)})")
    return chosen


READ_RESULTS = r'''
import json, sys
from pathlib import Path
from mutmut.mutation.diff_apply import get_diff_for_mutant
out = {}
for meta in sorted(Path("mutants").rglob("*.py.meta")):
    data = json.loads(meta.read_text())
    source = meta.with_suffix("").relative_to("mutants")  # the original's path: mutmut reads mutants/<path>
    rows = []
    for name, code in data["exit_code_by_key"].items():
        diff = None
        if code in (0, 33, 5):
            try:
                diff = get_diff_for_mutant(name, path=source)
            except Exception as exc:
                diff = f"(diff unavailable: {type(exc).__name__}: {exc})"
        rows.append({"name": name, "exit": code, "seconds": data.get("durations_by_key", {}).get(name), "diff": diff})
    out[str(source)] = rows
json.dump(out, sys.stdout)
'''


def _function_lines(source: str) -> dict[str, int]:
    """``{mutmut's mangled function name: line of its def}`` (``x_f`` for a function, ``xǁCǁm`` for a method)."""
    found = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found[f"xǁ{node.name}ǁ{item.name}"] = item.lineno
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.setdefault(f"x_{node.name}", node.lineno)
    return found


def _diff_line(diff: str | None, def_line: int) -> tuple[int, str]:
    """The file line of the first changed line of a function-level diff, and the diff's -/+ lines."""
    if not diff or not diff.startswith("---"):
        return def_line, diff or ""
    body = [line for line in diff.split("\n")[2:]]
    offset, changed, old = 0, [], None
    for line in body:
        if line.startswith("@@"):
            match = re.match(r"@@ -(\d+)", line)
            offset = int(match.group(1)) - 1 if match else 0
            continue
        if line.startswith("-") and old is None:
            old = offset
        if line.startswith(("-", "+")):
            changed.append(line)
        if not line.startswith("+"):
            offset += 1
    return def_line + (old or 0), "\n".join(changed[:6])


def as_report(results: dict, work: Path) -> tuple[dict, dict[str, float]]:
    """mutmut's results as a mutation-testing-report-schema document, and seconds per mutant."""
    files, times = {}, {}
    for path, rows in results.items():
        source = (work / path).read_text(encoding="utf-8")
        lines = _function_lines(source)
        mutants = []
        for row in rows:
            function = row["name"].rsplit(".", 1)[-1].rsplit("__mutmut_", 1)[0]
            line, diff = _diff_line(row["diff"], lines.get(function, 1))
            status = STATUS_BY_EXIT.get(row["exit"], "RuntimeError")
            mutants.append({"id": row["name"], "mutatorName": "mutmut", "status": status, "exitCode": row["exit"],
                            "location": {"start": {"line": line, "column": 1}, "end": {"line": line, "column": 1}},
                            "diff": diff})
            if row["seconds"] is not None:
                times[row["name"]] = row["seconds"]
        files[path] = {"language": "python", "source": source, "mutants": mutants}
    return {"schemaVersion": "2", "thresholds": {"high": 80, "low": 60}, "files": files}, times


def run_embedded(files_glob: list[str] | None, gate: tuple[str, ...], report_dir: Path, *, verify_profile: str,
                 concurrency: int, timeout: float, timeout_factor: float, corpus: Path | None, keep_work: bool, say,
                 min_score: float | None, pool=None) -> MutationRun:
    """mutmut over a copy of the embedded runtime: in one ``mutmut run`` (``concurrency`` forked children), or
    with ``pool`` (a ``cluster.Pool``) one mutant per Dask task (:mod:`.sharded`); scored alike."""
    files = select_files(files_glob)
    if importlib.util.find_spec("mutmut") is None or importlib.util.find_spec("pytest") is None:
        raise ValueError("--runtime embedded needs mutmut and pytest, the 'mutate' extra: "
                         "pip install 'surfacecheck[mutate]'")
    run = MutationRun("embedded", f"mutmut {_mutmut_version()}", gate, files, report_dir, min_score=min_score)
    log = report_dir / "mutmut.log"
    log.unlink(missing_ok=True)
    settings = json.dumps({"runtime": "embedded", "gate": list(gate), "timeout": timeout,
                           "verify_profile": verify_profile, "corpus": str(corpus) if corpus else None})
    with working_folder("surfacecheck-mutate-embedded-", run, keep_work, say) as work:
        multiplier = max(timeout_factor, 1.0) * 5
        working_copy(work, files, {}, multiplier)
        if pool is None:
            say(f"mutate: mutmut over {len(files)} embedded modules in {work}")
            results, run.void = _results_in_one_run(work, settings, concurrency, log, say)
            run.extra["mutmut"] = {"max_children": concurrency, "coverage": "per test (mutmut's function tracing)"}
        else:
            from surfacecheck.core.cluster import WorkerLost

            from .sharded import Job, results_on

            say(f"mutate: mutmut over {len(files)} embedded modules in {work}, one mutant per Dask task")
            try:
                results, run.void = results_on(pool, Job(str(work), tuple(files), settings, multiplier), log, say)
            except WorkerLost as exc:
                results, run.void = {}, f"the Dask run was lost: {exc}"
            run.extra["mutmut"] = {"max_children": 1, "coverage": "per test (mutmut's function tracing)",
                                   "dask": "one mutant per task, one forking gate per worker"}
        if run.void:
            run.extra.pop("mutmut")
            return run
        report, times = as_report(results, work)
        (report_dir / "mutation.json").write_text(json.dumps(report), encoding="utf-8")

        def locate(name: str, line: int) -> Place | None:
            module = Path(name).name
            return Place(f"embedded/{module}", sections_of(DEFAULT_FILES.get(module, "")))
        run.figures = score(report, locate, times=times, equivalent=read_equivalent(EQUIVALENT["embedded"]))
        run.extra["reports"] = {"mutation_json": str(report_dir / "mutation.json"), "mutmut_log": str(log)}
    return run


def _results_in_one_run(work: Path, settings: str, concurrency: int, log: Path, say) -> tuple[dict, str | None]:
    """``mutmut run`` over every mutant, then its per-mutant results read back; ``({}, why)`` when void."""
    env = gate_env(settings)
    returncode = _run_mutmut(work, env, concurrency, log, say)
    done = subprocess.run([sys.executable, "-c", READ_RESULTS], cwd=work, env=env, capture_output=True, text=True)
    results = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else {}
    if returncode != 0 or not results:
        return {}, void_reason(log, f"mutmut did not finish (exit {returncode}; log {log})")
    return results, None


def _run_mutmut(work: Path, env: dict, concurrency: int, log: Path, say) -> int:
    """``mutmut run`` in ``work``; its output to ``log``, its progress (tested/total, killed) to ``say``."""
    last = 0.0
    with log.open("w", encoding="utf-8") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "mutmut", "run", "--max-children", str(concurrency)], cwd=work,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            while True:
                chunk = proc.stdout.read(4096)
                if not chunk:
                    break
                sink.write(chunk)
                found = PROGRESS.findall(chunk)
                if found and time.monotonic() - last > 10:
                    tested, total, killed = found[-1]
                    say(f"mutmut: {tested}/{total} mutants tested, {killed} killed")
                    last = time.monotonic()
            return proc.wait()
        except BaseException:
            import signal

            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            raise


def _mutmut_version() -> str:
    try:
        from importlib.metadata import version

        return version("mutmut")
    except Exception:  # noqa: BLE001
        return "(not installed)"
