"""The matrix (``surfacecheck matrix``'s JSON document) as Markdown and as an HTML page, from Jinja templates.

Both read only the JSON document, so a committed ``reports/matrix.md`` and the report folder's ``matrix.html`` say
the same thing. A broken cell links its witness; a cell not judged gets a note saying why.
"""
from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

STATES = ("held", "broken", "not-applicable", "not-exercised", "stale", "inconclusive")


def cell_of(row: dict, promise: str) -> dict:
    return next(c for c in row["cells"] if c["promise"] == promise)


def cell_md(cell: dict, link_base: str = "") -> str:
    """One cell in Markdown: ``held (12)``, ``**broken** LC3 defect [witness](...)``, ``n/a``, ... A registered
    witness (a path inside the checkout) is linked through ``link_base``, the way from the page to the checkout; a
    NEW one (``traces/...``) lies beside the page."""
    state = cell["state"]
    if state == "held":
        return f"held ({cell.get('exercised', 0)})"
    if state == "broken":
        new = cell.get("finding") == "NEW"
        name = "NEW" if new else str(cell.get("finding")).split("-")[0]
        witness = cell.get("witness")
        if witness and not witness.startswith("/"):
            name = f"[{name}]({'' if new else link_base}{witness})"
        return f"**broken** {name}" + ("" if new else f" {cell.get('class') or ''}").rstrip()
    return {"not-applicable": "n/a", "not-exercised": "not exercised"}.get(state, state)


def broken_cells(table: dict) -> list[dict]:
    """Every broken or stale cell with its runtime, for the list under the table."""
    return [{"runtime": r["runtime"], **c} for r in table["rows"] for c in r["cells"] if c["state"] in ("broken", "stale")]


def _notes(table: dict) -> list[dict]:
    return [{"runtime": r["runtime"], "promise": c["promise"], "state": c["state"], "why": c["why"]}
            for r in table["rows"] for c in r["cells"] if c["state"] not in ("held", "broken") and c.get("why")]


def _counts(table: dict) -> dict:
    return {r["runtime"]: {s: sum(c["state"] == s for c in r["cells"]) for s in STATES} for r in table["rows"]}


def _env(autoescape: bool) -> Environment:
    env = Environment(loader=PackageLoader("surfacecheck.reports", "templates"),
                      autoescape=select_autoescape(["html"]) if autoescape else False,
                      trim_blocks=False, lstrip_blocks=False, keep_trailing_newline=True)
    env.globals.update(cell_of=cell_of, broken_cells=broken_cells)
    return env


def markdown(data: dict, command: str, link_base: str = "") -> str:
    """``reports/matrix.md``: the table, the runtimes, why each unjudged cell is so, the promises' meanings;
    ``link_base`` leads from the page's folder to the checkout (``../`` for ``reports/``)."""
    table = data["table"]
    return _env(False).get_template("matrix.md.j2").render(
        data=data, table=table, command=command, notes=_notes(table), counts=_counts(table),
        cell_md=lambda cell: cell_md(cell, link_base))


def html(data: dict, command: str) -> str:
    """The matrix as a standalone page (``matrix.html`` in the report folder)."""
    table = data["table"]
    return _env(True).get_template("matrix.html.j2").render(data=data, table=table, command=command,
                                                            notes=_notes(table), counts=_counts(table))


def write(data: dict, folder: Path, command: str, link_base: str = "") -> dict[str, Path]:
    """``matrix.md`` and ``matrix.html`` in ``folder``; name -> path."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {"markdown": folder / "matrix.md", "html": folder / "matrix.html"}
    out["markdown"].write_text(markdown(data, command, link_base), encoding="utf-8")
    out["html"].write_text(html(data, command), encoding="utf-8")
    return out
