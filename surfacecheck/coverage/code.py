"""Code coverage of the runtime under test during a ``check``: which of its lines ran.

* ``embedded`` / ``model``: coverage.py traces the Python runtime in this process (it runs in-process in every
  stage), restricted to the runtime's own package (``surfacecheck/runtime/embedded`` or ``model``).
* ``dsh``: every node process the ``dsh`` runtime starts inherits ``NODE_V8_COVERAGE`` and writes V8's block
  coverage when it exits; :mod:`.v8` turns it into line coverage per dsh source file, restricted to the
  compaction-relevant files (:data:`DSH_FILES`), and :mod:`.branches` into branch coverage: each file's blocks
  whose container ran, and the arms never taken, each with the reason when one is known. The ``dsh`` stage runs dsh's library under any runtime, so a
  check of ``embedded`` reports dsh's coverage too, as that stage's.
* ``cmd:`` runtimes are other processes in any language: not measured, and said so.

Both end as the same rows (file, lines, covered, missed line ranges) and a Cobertura XML for CI tools.
"""
from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from surfacecheck.runtime import registry

from .v8 import FileCoverage, read_dsh_coverage

ROOT = Path(__file__).resolve().parents[2]
PYTHON_RUNTIMES = registry.with_coverage("coverage.py")  # name -> the package coverage.py measures
DSH_FILES: dict[str, tuple[str, ...]] = {
    "dsh-session": (),  # the log, the surface fold, replace, repair, packed rows (spec 1, 2)
    "dsh-session-projection": (),
    "dsh-token-meter": (),  # estimate, surface-projection, usage-projection, surface-fold (spec 4, 5)
    "dsh-compaction": (),  # tool pairing, checkpoint (spec 3, 8)
    "dsh-compaction-basic": (),  # region, summarizer, config (spec 7-10)
    "dsh-compaction-tool-result-pruner": (),  # spec 6
    "dsh-command-compact": (),  # spec 11
    "dsh-agent-loop": ("runtime-context.js",),  # spec 12 (the loop's other files are not compaction)
}
"""The compaction-relevant dsh files (an empty tuple: every source file of the package's bundle)."""
DRIVES_THE_RUNTIME = ("logs", "runtime", "verify", "bench")
"""The stages during which coverage.py traces a Python runtime: they drive it (the logs stage only for ``model``,
which judges the logs; ``findings`` replays its witnesses on the runtime too, but its search runs the model and
would pay the tracer three times over for a few replays)."""


@dataclass
class CodeCoverage:
    """Line coverage of one runtime: ``files`` rows, the tool that measured, or why nothing was measured."""

    runtime: str
    tool: str | None
    files: list[dict] = field(default_factory=list)
    note: str = ""

    @property
    def totals(self) -> dict:
        lines = sum(f["lines"] for f in self.files)
        covered = sum(f["covered"] for f in self.files)
        return {"files": len(self.files), "lines": lines, "covered": covered,
                "percent": round(100 * covered / lines, 1) if lines else None}

    def to_json(self) -> dict:
        return {"runtime": self.runtime, "tool": self.tool, "totals": self.totals, "files": self.files,
                "note": self.note or None}


def _row(name: str, lines: int, covered: int, missed: list[tuple[int, int]], path: str) -> dict:
    return {"file": name, "path": path, "lines": lines, "covered": covered,
            "percent": round(100 * covered / lines, 1) if lines else None,
            "missed": [[a, b] for a, b in missed]}


def _ranges(numbers: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    return runs


class Collector:
    """``with Collector(runtime, folder):`` runs the stages under measurement; then :meth:`results`."""

    def __init__(self, runtime: str, folder: Path):
        self.runtime, self.folder = runtime, Path(folder)
        base = registry.base(runtime)  # embedded:<seeded bug> is the embedded runtime with one bug switched on
        self.python_runtime = base if base in PYTHON_RUNTIMES else None
        self.v8_dir = self.folder / "v8"
        self._cov = None
        self._saved_env: str | None = None
        self._results: list[CodeCoverage] | None = None
        self._counted: dict[tuple[str, str], list[int]] = {}  # (runtime, file) -> its counted lines, for Cobertura

    def __enter__(self) -> "Collector":
        shutil.rmtree(self.v8_dir, ignore_errors=True)
        self.v8_dir.mkdir(parents=True, exist_ok=True)
        self._saved_env = os.environ.get("NODE_V8_COVERAGE")
        os.environ["NODE_V8_COVERAGE"] = str(self.v8_dir)
        source = PYTHON_RUNTIMES.get(self.python_runtime)
        if source is not None:
            import coverage

            self._cov = coverage.Coverage(data_file=None, include=[str(source / "*.py")], config_file=False)
            self._cov.set_option("run:disable_warnings", ["no-data-collected", "module-not-measured"])
        return self

    @contextmanager
    def stage(self, name: str):
        """Trace the Python runtime only while a stage that drives it runs (:data:`DRIVES_THE_RUNTIME`): the
        tracer costs every other stage (the model's own search, the solver, dsh's library) time for nothing."""
        tracing = self._cov is not None and name in DRIVES_THE_RUNTIME
        if tracing:
            self._cov.start()
        try:
            yield
        finally:
            if tracing:
                self._cov.stop()

    def __exit__(self, *exc) -> None:
        if self._saved_env is None:
            os.environ.pop("NODE_V8_COVERAGE", None)
        else:
            os.environ["NODE_V8_COVERAGE"] = self._saved_env

    def python(self) -> CodeCoverage:
        result = CodeCoverage(self.runtime, "coverage.py", note=f"measured during the stages {', '.join(DRIVES_THE_RUNTIME)}")
        data = self._cov.get_data()
        for path in sorted(PYTHON_RUNTIMES[self.python_runtime].glob("*.py")):
            _name, statements, _excluded, missing, _text = self._cov.analysis2(str(path))
            if not statements:
                continue
            result.files.append(_row(path.name, len(statements), len(statements) - len(missing), _ranges(missing),
                                     str(path.relative_to(ROOT))))
            self._counted[(self.runtime, path.name)] = sorted(statements)
        if not data.measured_files():
            result.note = "the runtime's code never ran in this process (none of its stages ran)"
        return result

    def dsh(self) -> CodeCoverage:
        files: list[FileCoverage] = read_dsh_coverage(self.v8_dir, DSH_FILES)
        result = CodeCoverage("dsh", "v8")
        for f in files:
            row = _row(f.key, f.lines, f.covered, f.missed(), f.bundle)
            row.update({"branches": f.branches, "branches_reached": f.branches_reached,
                        "unreached": sorted(f.unreached, key=lambda u: u["line"])})
            result.files.append(row)
            self._counted[("dsh", f.key)] = sorted(f.hits)
        if not files:
            result.note = "no dsh process wrote coverage (none ran, or each was killed before it could)"
        return result

    def results(self) -> list[CodeCoverage]:
        """The runtime under test first; dsh's library as well when a dsh process ran (the ``dsh`` stage)."""
        if self._results is None:
            self._results = self._measure()
        return self._results

    def _measure(self) -> list[CodeCoverage]:
        out = []
        if self._cov is not None:
            out.append(self.python())
        dsh = self.dsh()
        if self.runtime.startswith("dsh") or dsh.files:
            out.append(dsh)
        if not out:
            out.append(CodeCoverage(self.runtime, None, note="an external cmd: runtime: its code coverage is its "
                                                             "own to measure (coverage.py, NODE_V8_COVERAGE, ...)"))
        return out

    def write_cobertura(self, path: Path) -> Path:
        """One Cobertura XML over every measured runtime (what CI coverage tools read)."""
        reports = [r for r in self.results() if r.tool]
        lines = sum(r.totals["lines"] for r in reports)
        covered = sum(r.totals["covered"] for r in reports)
        root = ET.Element("coverage", {"line-rate": f"{covered / lines:.4f}" if lines else "0", "branch-rate": "0",
                                       "lines-valid": str(lines), "lines-covered": str(covered), "version": "1",
                                       "timestamp": "0"})
        ET.SubElement(ET.SubElement(root, "sources"), "source").text = str(ROOT)
        packages = ET.SubElement(root, "packages")
        for report in reports:
            package = ET.SubElement(packages, "package", {"name": report.runtime, "line-rate": _rate(report.totals)})
            classes = ET.SubElement(package, "classes")
            for row in report.files:
                cls = ET.SubElement(classes, "class", {"name": row["file"], "filename": row["path"],
                                                       "line-rate": _rate(row)})
                ET.SubElement(cls, "methods")
                missed = {n for a, b in row["missed"] for n in range(a, b + 1)}
                xml_lines = ET.SubElement(cls, "lines")
                for number in self._counted[(report.runtime, row["file"])]:
                    ET.SubElement(xml_lines, "line", {"number": str(number), "hits": "0" if number in missed else "1"})
        path.parent.mkdir(parents=True, exist_ok=True)
        ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
        return path


def _rate(row: dict) -> str:
    return f"{row['covered'] / row['lines']:.4f}" if row.get("lines") else "0"
