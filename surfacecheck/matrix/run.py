"""Fill the matrix: the compaction contract on each runtime, one row each (:mod:`.cells` says what a cell means).

For one runtime the row comes from three sources, in this order:

1. its registered findings (``contract/findings.json``): each witness is replayed on the runtime (it must still
   break its promise: exit 1, else the cell is ``stale``) and on the reference conversation runtime, which keeps
   every promise (the control: exit 0);
2. a seeded search (:func:`surfacecheck.contract.search.search`) for every other promise, bounded by examples and
   never by time, so the same seed gives the same table; each NEW witness is written to the trace folder and
   replayed on the reference runtime too;
3. the premises the search met (:mod:`surfacecheck.contract.premises`) and what the runtime declares it has no
   part for (``registry.not_applicable``): a promise nobody could judge is never called held.

A runtime that cannot be installed or opened, or that hangs or dies, gets a row of ``inconclusive`` cells with the
reason.

A row is computed apart from where its NEW witnesses are kept: :func:`row` gives the row and each witness's text by
file name, and the caller writes them into the trace folder (:func:`keep`). So a row computed on a Dask worker
(:func:`row_task`, ``--workers``/``--scheduler``: :mod:`.campaign`) ships its witnesses back, and this process writes
every file, on a remote cluster too.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Callable

from surfacecheck.contract import promises, registry as findings_registry
from surfacecheck.contract.premises import PREMISES
from surfacecheck.contract.replay import read_contract_trace, replay
from surfacecheck.contract.search import search, write_traces
from surfacecheck.core.protocol import RuntimeUnavailable
from surfacecheck.core.trace import TraceError
from surfacecheck.runtime import registry

from .cells import BROKEN, HELD, INCONCLUSIVE, NOT_APPLICABLE, NOT_EXERCISED, STALE, Cell, Matrix, Row

CONTROL = "reference"
"""The runtime that keeps every promise: every witness must replay held (exit 0) on it."""
CONTROL_SETTINGS = ({}, {"trigger_tokens": 1000, "keep_tokens": 300}, {"trigger_tokens": 500, "keep_tokens": 150},
                    {"trigger_tokens": 250, "keep_tokens": 60}, {"trigger_tokens": 100, "keep_tokens": 20},
                    {"trigger_tokens": 40, "keep_tokens": 8})
"""The reference's settings tried in turn for a witness of another runtime (whose own settings it does not take),
until the replay meets what the promise judges: its defaults first, then triggers low enough to compact the
witness's small conversation."""
ROOT = Path(__file__).resolve().parents[2]
Say = Callable[[str], None]


def shown(path: Path | str) -> str:
    """A witness path as the reader finds it: relative to the checkout when inside it."""
    path = Path(path).resolve()
    try:
        return os.path.relpath(path, ROOT) if path.is_relative_to(ROOT) else str(path)
    except ValueError:
        return str(path)


def _replay_exit(path: Path, spec: str, timeout: float) -> tuple[int, str | None]:
    """``surfacecheck replay``'s exit status for the witness at ``path`` on ``spec``, and a reason when it is 3."""
    try:
        outcome = replay(read_contract_trace(path), spec, timeout=timeout)
    except (TraceError, OSError, ValueError) as exc:
        return 2, str(exc)
    return outcome.exit_code, outcome.unavailable


def _control(path: Path, timeout: float) -> tuple[int, bool]:
    """The witness's exit status on the control, and whether the control's session met the promise's premise
    (a witness replayed where nothing compacts says nothing)."""
    try:
        trace = read_contract_trace(path)
    except (TraceError, OSError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    outcome = None
    for settings in CONTROL_SETTINGS:
        try:
            outcome = replay(trace, CONTROL, timeout=timeout, settings=settings)
        except ValueError:
            return 2, False
        if outcome.judged or outcome.exit_code != 0:
            break
    return outcome.exit_code, outcome.judged


def _registered(spec: str, findings: list, timeout: float, say: Say) -> tuple[dict[str, Cell], str | None]:
    """Cells for the runtime's registered ``findings`` (broken or stale), and why the runtime is inconclusive."""
    cells: dict[str, Cell] = {}
    for f in findings:
        say(f"matrix: {spec}: replaying {f.id} ({f.promise})")
        code, why = _replay_exit(f.trace_path, spec, timeout)
        if code == 3:
            return cells, why or "the runtime hung or died replaying a witness"
        control, judged = _control(f.trace_path, timeout)
        base = dict(promise=f.promise, finding=f.id, klass=f.klass, witness=shown(f.trace_path), issue=f.issue,
                    replay=code, control=control, control_judged=judged)
        if code == 1:
            cells[f.promise] = Cell(state=BROKEN, **base)
        else:
            cells[f.promise] = Cell(state=STALE, why=f"the registered witness no longer breaks it (replay exit {code})",
                                    **base)
    return cells, None


def inconclusive_row(spec: str, why: str) -> Row:
    """A row of ``inconclusive`` cells, every one with ``why``."""
    return Row(spec, tuple(Cell(p.id, INCONCLUSIVE, why=why) for p in promises.PROMISES), inconclusive=why)


def row(spec: str, *, seed: int, examples: int | None, trace_dir: Path, timeout: float,
        say: Say) -> tuple[Row, dict[str, str]]:
    """The matrix row of ``spec`` (see the module docstring), and the text of each NEW witness by its file name in
    ``trace_dir``, which the row's cells name; nothing is written there (the caller :func:`keep` s them)."""
    with tempfile.TemporaryDirectory(prefix="surfacecheck-matrix-") as scratch:
        return _row(spec, seed=seed, examples=examples, trace_dir=Path(trace_dir), scratch=Path(scratch),
                    timeout=timeout, say=say)


def _row(spec: str, *, seed: int, examples: int | None, trace_dir: Path, scratch: Path, timeout: float,
         say: Say) -> tuple[Row, dict[str, str]]:
    ids = [p.id for p in promises.PROMISES]
    findings = findings_registry.for_runtime(findings_registry.load(None, tuple(ids)), registry.base(spec))
    why = registry.problem(spec)
    if why is None:
        try:
            cells, why = _registered(spec, findings, timeout, say)
        except RuntimeUnavailable as exc:
            cells, why = {}, f"{exc.kind}: {exc}"
    if why is not None:
        return inconclusive_row(spec, why), {}
    known = [p for p, c in cells.items() if c.state == BROKEN]
    result = search(spec, seed=seed, examples=examples, deadline_seconds=None, known=known, progress=say,
                    timeout=timeout, command=f"surfacecheck matrix --runtime {spec} --seed {seed}")
    written = write_traces(result, scratch)  # the control replays the witness as written
    declared = registry.not_applicable(spec)
    for promise, found in result.found.items():
        control, judged = _control(written[promise], timeout)
        finding = findings_registry.match(findings, registry.base(spec), promise)
        cells[promise] = Cell(promise, BROKEN, finding=finding.id if finding else "NEW",
                              klass=finding.klass if finding else None,
                              witness=os.path.relpath(trace_dir / written[promise].name, trace_dir.parent),
                              issue=finding.issue if finding else None, replay=1, control=control, control_judged=judged,
                              exercised=result.exercised.get(promise, 0), messages=found.messages)
    out = []
    for promise in ids:
        n = result.exercised.get(promise, 0)
        if promise in cells:
            cell = cells[promise]
            out.append(cell if cell.state != BROKEN or cell.finding == "NEW" else replace(cell, exercised=n))
        elif result.inconclusive:
            out.append(Cell(promise, INCONCLUSIVE, why=result.inconclusive))
        elif promise in declared:
            out.append(Cell(promise, NOT_APPLICABLE, why=declared[promise]))
        elif n == 0:
            out.append(Cell(promise, NOT_EXERCISED, why=f"no session of the search had {PREMISES[promise].says}"))
        else:
            out.append(Cell(promise, HELD, exercised=n))
    version = result.version or {}
    named = f"{version.get('name')} {version.get('version') or ''}".strip() if version else None
    run = {"seconds": round(result.seconds, 1), "examples": result.examples, "rounds": result.rounds,
           "command": f"surfacecheck contract --runtime {spec} --seed {seed}"}
    texts = {path.name: path.read_text(encoding="utf-8") for path in written.values()}
    return Row(spec, tuple(out), version=named, provider=result.provider, inconclusive=result.inconclusive,
               run=run), texts


def keep(texts: dict[str, str], trace_dir: Path) -> None:
    """Write a row's NEW witnesses (file name -> text) into ``trace_dir``."""
    for name, text in texts.items():
        Path(trace_dir).mkdir(parents=True, exist_ok=True)
        (Path(trace_dir) / name).write_text(text, encoding="utf-8")


def summary(done: Row) -> str:
    """A finished row in a few words: ``held``, ``broken``, ``not judged``, and why it is inconclusive."""
    return (f"{done.runtime}: {done.count(HELD)} held, {done.count(BROKEN)} broken, "
            f"{done.count(NOT_APPLICABLE) + done.count(NOT_EXERCISED)} not judged"
            + (f", inconclusive: {done.inconclusive}" if done.inconclusive else ""))


def _silent(_line: str) -> None:
    """A worker's ``say``: its progress is this process's one bar (a row's summary), not its lines."""


def row_task(item: tuple) -> tuple[Row, dict[str, str]]:
    """On a Dask worker: :func:`row` of ``(spec, seed, examples, trace_dir, timeout)``, silently."""
    spec, seed, examples, trace_dir, timeout = item
    return row(spec, seed=seed, examples=examples, trace_dir=Path(trace_dir), timeout=timeout, say=_silent)


def matrix_of(rows: list[Row], *, seed: int, examples: int | None) -> Matrix:
    return Matrix(seed, tuple((p.id, p.meaning) for p in promises.PROMISES), tuple(rows), examples)


def run_matrix(runtimes: list[str], *, seed: int, examples: int | None, trace_dir: Path, timeout: float,
               say: Say) -> Matrix:
    """Every runtime's row, in the order given, in this process; the NEW witnesses written into ``trace_dir``."""
    rows = []
    for number, spec in enumerate(runtimes, 1):
        say(f"matrix: runtime {number}/{len(runtimes)}: {spec} (seed {seed})")
        done, texts = row(spec, seed=seed, examples=examples, trace_dir=trace_dir, timeout=timeout, say=say)
        keep(texts, trace_dir)
        rows.append(done)
        say(f"matrix: {summary(done)}")
    return matrix_of(rows, seed=seed, examples=examples)
