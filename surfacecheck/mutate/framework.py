"""mutmut over a framework's own compaction code, the compaction contract as the gate (``mutate --runtime
langchain``, ``strands``; docs/mutate.md).

* **Modules** (:data:`MODULES`): the files of the framework's installed package that hold its compaction, by
  path inside ``site-packages``. A Python conversation runtime of ``pyenv.RUNTIMES`` adds one line.
* **Working copy.** The files are read from the runtime's cached environment (never written) and mutmut 3
  (the pinned version) turns each into its mutated form: every function a trampoline that runs the original or the
  mutant named by ``MUTANT_UNDER_TEST``, read at every call. The mutated files and a copy of mutmut's package
  go to a temporary folder.
* **One adapter process for every mutant.** The runtime's own adapter runs under ``mutant_peer.py``, which
  imports the mutated files in place of the installed modules; its ``mutant`` op switches the active mutant
  between sessions, so the framework's import (~2 s for LangChain) is paid once, and again only after a mutant
  hung or killed the process.
* **The gate** (:mod:`.framework_gate`): the registered findings' witnesses and a fixed-seed, fixed-size contract
  search, each a fixed script whose verdict on the unmutated code is recorded once (twice, to drop a session
  that does not repeat itself), with the mutated functions it reaches (``mutant stats``). A mutant runs only the
  scenarios that reach its function; one that no scenario reaches is *not reached*. Killed = a verdict differs.
* **Scoring** as every ``mutate`` run (:mod:`.score`): killed / (killed + survived + not reached + timed out +
  crashed); a call past ``--timeout`` is *timed out*, a process that dies or breaks the protocol *crashed*.
"""
from __future__ import annotations

import fnmatch
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .run import MutationRun, working_folder
from .score import Place, score

MODULES: dict[str, tuple[str, ...]] = {
    "langchain": ("langchain/agents/middleware/summarization.py",),
    "strands": ("strands/agent/conversation_manager/summarizing_conversation_manager.py",
                "strands/agent/conversation_manager/compression/context_compression.py",
                "strands/agent/conversation_manager/sliding_window_conversation_manager.py"),
}
"""The compaction modules of each framework runtime, as paths inside its environment's ``site-packages``."""
STATUS_EXIT = {"Killed": 1, "Survived": 0, "NoCoverage": 33, "Timeout": 36, "RuntimeError": 40}


def runtimes() -> tuple[str, ...]:
    return tuple(MODULES)


@dataclass(frozen=True)
class Mutant:
    """One mutant: its file (a path inside ``site-packages``), the module's dotted name, mutmut's name."""

    path: str
    module: str
    name: str  # mutmut's ``xǁClassǁmethod__mutmut_3``

    @property
    def active(self) -> str:
        """What ``MUTANT_UNDER_TEST`` holds to switch it on."""
        return f"{self.module}.{self.name}"

    @property
    def function(self) -> str:
        """The qualified name of the function it mutates, as the trampolines record a hit."""
        return f"{self.module}.{self.name.rsplit('__mutmut_', 1)[0]}"


def select_paths(runtime: str, patterns: list[str] | None) -> list[str]:
    paths = list(MODULES[runtime])
    if not patterns:
        return paths
    chosen = [p for p in paths if any(fnmatch.fnmatch(p, g) or fnmatch.fnmatch(Path(p).name, g) for g in patterns)]
    if not chosen:
        raise ValueError(f"--files {' '.join(patterns)} matches none of {runtime}'s modules ({', '.join(paths)})")
    return chosen


GENERATE = r'''
import json, sys
from pathlib import Path
from mutmut.mutation.data import MutantLineSpans
from mutmut.mutation.file_mutation import mutate_file_contents
out = {}
for path in json.loads(sys.argv[1]):
    mutated = mutate_file_contents(path, (Path("src") / path).read_text(encoding="utf-8"))
    target = Path("mutants") / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(mutated.code, encoding="utf-8")
    MutantLineSpans(path=path, span_by_function_name=mutated.line_span_by_function_name).save()
    out[path] = list(mutated.mutant_names)
json.dump(out, sys.stdout)
'''
"""mutmut's own mutation of each file, run in the working copy (mutmut reads its configuration, ``source_paths``,
from the working directory's ``pyproject.toml``): the mutated file at ``mutants/PATH`` and mutmut's index of
where each generated function lies in it (what its diffs read, without parsing the whole mutated file)."""
DIFFS = r'''
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
out = {}
for path, name in json.load(sys.stdin):
    try:
        out[name] = get_diff_for_mutant(name, path=path)
    except Exception as exc:
        out[name] = f"(diff unavailable: {type(exc).__name__}: {exc})"
json.dump(out, sys.stdout)
'''


def working_copy(work: Path, site: Path, paths: list[str]) -> tuple[list[Mutant], dict[str, str]]:
    """Copy each file from ``site`` to ``work/src`` and mutate it with mutmut into ``work/mutants``; copy mutmut's
    package to ``work/overlay``. Returns the mutants in mutmut's order and ``{module: mutated file}``."""
    import mutmut

    for path in paths:
        (work / "src" / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(site / path, work / "src" / path)
    (work / "pyproject.toml").write_text('[tool.mutmut]\nsource_paths = ["src"]\n', encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", GENERATE, json.dumps(paths)], cwd=work, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"mutmut could not mutate {', '.join(paths)}: {done.stderr[-1500:]}")
    names = json.loads(done.stdout)
    mutants, files = [], {}
    for path in paths:
        module = path[:-3].replace("/", ".")
        files[module] = str(work / "mutants" / path)
        mutants += [Mutant(path, module, name) for name in names[path]]
    package = Path(mutmut.__file__).resolve().parent
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(package, work / "overlay" / "mutmut", ignore=ignore)
    for info in package.parent.glob(f"mutmut-{_version()}.dist-info"):
        shutil.copytree(info, work / "overlay" / info.name, ignore=ignore)
    return mutants, files


def diffs(work: Path, mutants: list[Mutant]) -> dict[str, str]:
    """``{mutmut name: unified diff of its function}``, by mutmut's own ``get_diff_for_mutant`` in the working copy."""
    if not mutants:
        return {}
    done = subprocess.run([sys.executable, "-c", DIFFS], cwd=work, capture_output=True, text=True, check=False,
                          input=json.dumps([[m.path, m.name] for m in mutants]))
    if done.returncode != 0:
        return {m.name: f"(diff unavailable: {done.stderr.strip()[-300:]})" for m in mutants}
    return json.loads(done.stdout)


def pick(mutants: list[Mutant], functions: list[str] | None, max_mutants: int | None) -> list[Mutant]:
    """The mutants whose name or function matches a ``--functions`` glob, then at most ``max_mutants`` of them,
    evenly spread over mutmut's order (a sample of the whole, the same at every run)."""
    if functions:
        mutants = [m for m in mutants if any(fnmatch.fnmatch(m.name, g) or fnmatch.fnmatch(m.function, g)
                                             or fnmatch.fnmatch(m.name.rsplit("__mutmut_", 1)[0], g)
                                             for g in functions)]
    if max_mutants is not None and len(mutants) > max_mutants:
        step = len(mutants) / max_mutants
        mutants = [mutants[int(i * step)] for i in range(max_mutants)]
    return mutants


def run_framework(runtime: str, report_dir: Path, *, files_glob: list[str] | None = None,
                  functions: list[str] | None = None, max_mutants: int | None = None,
                  examples: int | None = None, timeout: float = 10.0, keep_work: bool = False, say,
                  min_score: float | None = None, progress: bool = True) -> MutationRun:
    """mutmut over ``runtime``'s compaction modules with the contract as the gate (the module docstring)."""
    from surfacecheck.contract.driver import default_provider
    from surfacecheck.contract.registry import site_packages
    from surfacecheck.runtime.conversation.pyenv import RUNTIMES, ensure_env

    from . import framework_gate as gate
    from .framework_loop import baseline, each_mutant

    paths = select_paths(runtime, files_glob)
    ensure_env(RUNTIMES[runtime], say)
    site = site_packages(RUNTIMES[runtime].entry())
    run = MutationRun(runtime, f"mutmut {_version()}", ("findings", "contract"), paths, report_dir,
                      min_score=min_score)
    with working_folder(f"surfacecheck-mutate-{runtime}-", run, keep_work, say) as work:
        every, files = working_copy(work, site, paths)
        chosen = pick(every, functions, max_mutants)
        say(f"mutate: mutmut made {len(every)} mutants of {len(paths)} {runtime} modules in {work}; "
            f"{len(chosen)} to run")
        base = baseline(runtime, work, files, timeout, default_provider(runtime),
                        examples or gate.EXAMPLES, say)
        run.baseline = base.summary()
        if base.void:
            run.void = base.void
            return run
        results = each_mutant(runtime, work, files, timeout, chosen, base.scenarios, say, progress)
        shown = [m for m in chosen if results[m.name].status in ("Survived", "NoCoverage")]
        texts = diffs(work, shown)
        report, times = as_report(work, chosen, results, texts)
        (report_dir / "mutation.json").write_text(json.dumps(report), encoding="utf-8")
        run.figures = score(report, lambda name, line: Place(name, ()), times=times)
        run.extra.update({
            "generated": len(every), "selected": len(chosen),
            "gate_settings": {"seed": gate.SEED, "examples": examples or gate.EXAMPLES, "steps": gate.STEPS,
                              "timeout_per_call_s": timeout},
            "kills": [{"id": m.name, "by": results[m.name].by, **results[m.name].detail}
                      for m in chosen if results[m.name].status == "Killed"][:200],
            "reports": {"mutation_json": str(report_dir / "mutation.json")}})
    return run


def as_report(work: Path, mutants: list[Mutant], results: dict, texts: dict[str, str]) -> tuple[dict, dict]:
    """The results in mutation-testing-report-schema form (as ``--runtime embedded``), and seconds per mutant."""
    from .embedded import _diff_line, _function_lines

    files, times = {}, {}
    for path in dict.fromkeys(m.path for m in mutants):
        source = (work / "src" / path).read_text(encoding="utf-8")
        lines = _function_lines(source)
        rows = []
        for m in (m for m in mutants if m.path == path):
            result = results[m.name]
            line, diff = _diff_line(texts.get(m.name), lines.get(m.name.rsplit("__mutmut_", 1)[0], 1))
            row = {"id": m.name, "mutatorName": "mutmut", "status": result.status,
                   "exitCode": STATUS_EXIT[result.status], "diff": diff,
                   "location": {"start": {"line": line, "column": 1}, "end": {"line": line, "column": 1}}}
            if result.by:
                row["killedBy" if result.status == "Killed" else "statusReason"] = (
                    [result.by] if result.status == "Killed" else f"{result.by}: {result.why}")
            rows.append(row)
            if result.status != "NoCoverage":
                times[m.name] = result.seconds
        files[path] = {"language": "python", "source": source, "mutants": rows}
    return {"schemaVersion": "2", "thresholds": {"high": 80, "low": 60}, "files": files}, times


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("mutmut")
    except Exception:  # noqa: BLE001
        return "(not installed)"


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


