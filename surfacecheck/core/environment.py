"""Every environment variable the suite reads, in one table: ``--help``'s ENVIRONMENT sections and
``docs/environment.md`` are both rendered from :data:`VARIABLES`, so the two cannot drift from each other, and
``tests/test_help.py`` fails when the code reads a ``SURFACECHECK_*`` variable this table does not list.

``python -m surfacecheck.core.environment`` prints the Markdown page (``docs/environment.md``).
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass

ALL = ("*",)
DSH_COMMANDS = ("check", "verify", "replay", "findings", "bench", "mutate")  # those that take --runtime dsh
CORPUS_COMMANDS = ("check", "findings", "mutate")


@dataclass(frozen=True)
class Variable:
    """One variable: what it does, its value when unset, and the commands it matters to (``ALL``: every one).
    ``internal``: surfacecheck sets it for its own child processes; a user never needs to."""
    name: str
    default: str
    meaning: str
    commands: tuple[str, ...] = ALL
    internal: bool = False

    def applies_to(self, command: str | None) -> bool:
        return command is None or self.commands == ALL or command in self.commands


VARIABLES: tuple[Variable, ...] = (
    Variable("SURFACECHECK_CORPUS", "<checkout>/../shared/corpus, else none",
             "the corpus folder (dsh-sessions/, dsh-generated/); --corpus wins; when set it must be a folder",
             CORPUS_COMMANDS),
    Variable("SURFACECHECK_DEBUG", "unset", "1: an internal error shows its Python traceback instead of one line"),
    Variable("SURFACECHECK_DSH_MODULES", "the dsh runtime's cache",
             "the node_modules folder holding dsh's packages (dsh:DIR wins)", DSH_COMMANDS),
    Variable("SURFACECHECK_NODE", "node on PATH", "the Node.js that runs the dsh adapter", DSH_COMMANDS),
    Variable("SURFACECHECK_PYTHON", "the Python running surfacecheck",
             "the Python the framework runtimes' own environments are built from (langchain, strands, deepagents, "
             "adk; openhands when it is 3.12 or newer)", DSH_COMMANDS + ("contract", "matrix")),
    Variable("SURFACECHECK_PYTHON312", "python3.12/3.13 on PATH, else ~/.pyenv/versions/3.12*",
             "a Python 3.12 or newer for openhands' own environment", DSH_COMMANDS + ("contract", "matrix")),
    Variable("SURFACECHECK_CONVERSATION_NODE_MODULES", "the cached npm ci of runtimes/conversation-node",
             "the node_modules folder the gemini and ai runtimes load their packages from",
             DSH_COMMANDS + ("contract", "matrix")),
    Variable("SURFACECHECK_CACHE", "$XDG_CACHE_HOME/surfacecheck, else ~/.cache/surfacecheck",
             "where --runtime dsh installs dsh's packages (npm ci) on first use, and every framework runtime its own "
             "environment", DSH_COMMANDS + ("contract", "matrix")),
    Variable("SURFACECHECK_BENCH_PASSES", "5", "timing passes per size of bench's dsh series", ("bench", "check")),
    Variable("SURFACECHECK_BENCH_WARMUP", "1000,3000",
             "surface sizes bench folds dsh through before timing (V8 warm-up)", ("bench", "check")),
    Variable("SURFACECHECK_DSH_V2_PYTHON", "unset: e2e dsh exits 2 for a 0.2.x release",
             "the interpreter whose venv has a 0.2.x dsh SDK (e2e dsh --runtime-version)", ("e2e dsh",)),
    Variable("SURFACECHECK_E2E_BUNDLES", "reports/out/e2e", "where replaying an e2e bundle writes new bundles",
             ("replay",)),
    Variable("CI", "unset", "set: verify's profile defaults to ci (bounded, fixed seed) and check warns when it "
             "finds no corpus; contract's seed defaults to a fixed one", ("check", "verify", "contract")),
    Variable("SURFACECHECK_MUTATE", "unset", "1: the dsh adapter's mutation hooks (set by mutate)", ("mutate",),
             internal=True),
    Variable("SURFACECHECK_MUTATE_GATE", "unset", "the gate's settings, JSON (set by mutate)", ("mutate",),
             internal=True),
    Variable("SURFACECHECK_STRYKER_COVERAGE_DIR", "unset", "where the gate writes per-unit coverage (set by mutate)",
             ("mutate",), internal=True),
    Variable("SURFACECHECK_STRYKER_TEST", "unset", "the gate unit running now (set by mutate)", ("mutate",),
             internal=True),
)


def names() -> list[str]:
    return [v.name for v in VARIABLES]


def help_section(command: str | None = None, width: int = 78) -> str:
    """The ENVIRONMENT section of ``command``'s help (``None``: the top-level help, every variable)."""
    lines = ["environment:"]
    for v in VARIABLES:
        if not v.applies_to(command) or (v.internal and command is not None):
            continue
        text = f"{v.meaning} (default: {v.default})"
        lines.append(f"  {v.name}" + (" (internal)" if v.internal else ""))
        lines += textwrap.wrap(text, width, initial_indent=" " * 6, subsequent_indent=" " * 6, break_on_hyphens=False)
    if command is None:
        lines.append("  (internal: surfacecheck sets it for its own child processes)")
    else:
        lines.append("  (every variable: surfacecheck --help)")
    return "\n".join(lines)


def markdown() -> str:
    """``docs/environment.md``: the same table as a page."""
    rows = [f"| `{v.name}` | {v.meaning}{' (internal)' if v.internal else ''} | {v.default} | "
            f"{'every command' if v.commands == ALL else ', '.join(v.commands)} |" for v in VARIABLES]
    return ("# Environment variables\n\n"
            "Rendered from `surfacecheck/core/environment.py` (`python -m surfacecheck.core.environment`); every\n"
            "command's `--help` shows the rows that apply to it. Internal variables are set by surfacecheck for its\n"
            "own child processes.\n\n"
            "| variable | what it does | default | commands |\n|---|---|---|---|\n" + "\n".join(rows) + "\n")


if __name__ == "__main__":  # pragma: no cover
    print(markdown(), end="")
