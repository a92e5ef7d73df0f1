"""The options every command shares, defined once: ``--runtime``, ``--json``, ``--timeout``, ``--report-dir``;
and the shape of every command's help: :func:`command_parser` (description, EXAMPLES, ENVIRONMENT) and
:class:`HelpFormatter` (the authors' layout kept, every line wrapped to at most 80 columns).

Each command calls :func:`add_common` with the options it takes; the spelling, help text and type of each are
the same everywhere, and ``--runtime`` lists the spellings of :mod:`surfacecheck.runtime.registry`.
"""
from __future__ import annotations

import argparse
import re
import shutil
import textwrap
from typing import Sequence

from surfacecheck.core import environment
from surfacecheck.core.argtypes import positive_seconds, writable_dir
from surfacecheck.runtime import registry

DEFAULT_RUNTIME = "embedded"
OMIT = object()
JSON_HELP = "print exactly one JSON document (the report) on stdout"
TIMEOUT_HELP = ("seconds the runtime may take to answer one request before it is declared hung and the run "
                "inconclusive (default: %(default)s)")


def runtime_type(allowed: tuple[str, ...] | None = None):
    """``--runtime``'s argparse type: a spelling the registry knows (one of ``allowed``, when given)."""
    def check(value: str) -> str:
        if allowed is not None and value not in allowed:
            raise argparse.ArgumentTypeError(f"runtime {value!r} is not one of {', '.join(allowed)}")
        problem = registry.problem(value)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value
    return check


def runtime_help(default: str, *, only: tuple[str, ...] | None = None, only_why: str = "", default_why: str = "") -> str:
    """The one ``--runtime`` line: "the runtime under test: LIST (default: D)". A command that narrows the list
    says why after it (``only_why``); one whose default differs from :data:`DEFAULT_RUNTIME` says why in the
    parenthesis (``default_why``)."""
    shown = registry.runtime_help(only=only) + (f", {only_why}" if only_why else "")
    return f"the runtime under test: {shown} (default: {default}" + (f", {default_why}" if default_why else "") + ")"


def add_common(parser: argparse.ArgumentParser, *, runtime: object = OMIT, runtimes: tuple[str, ...] | None = None,
               runtimes_why: str = "", runtime_why: str = "", json: bool = True, timeout: object = OMIT,
               timeout_note: str = "", report_dir: object = OMIT, reports: str = "") -> None:
    """Add the shared options ``parser`` takes: ``runtime``/``timeout``/``report_dir`` are their defaults (left
    out when not given; ``runtime=None`` with ``runtime_why`` naming what decides instead); ``runtimes`` narrows
    the runtimes to those names (``runtimes_why`` says why); ``timeout_note`` ends ``--timeout``'s help (what it
    bounds here); ``reports`` names the files the report folder gets."""
    if runtime is not OMIT:
        if runtime != DEFAULT_RUNTIME and not runtime_why:
            raise ValueError("a --runtime default other than the common one says why (runtime_why)")
        shown = runtime if isinstance(runtime, str) else runtime_why
        parser.add_argument("--runtime", type=runtime_type(runtimes), default=runtime, metavar="RUNTIME",
                            help=runtime_help(shown, only=runtimes, only_why=runtimes_why,
                                              default_why=runtime_why if isinstance(runtime, str) else ""))
    if json:
        parser.add_argument("--json", action="store_true", help=JSON_HELP)
    if timeout is not OMIT:
        parser.add_argument("--timeout", type=positive_seconds, default=timeout, metavar="S",
                            help=TIMEOUT_HELP + (f"; {timeout_note}" if timeout_note else ""))
    if report_dir is not OMIT:
        parser.add_argument("--report-dir", type=writable_dir, default=report_dir, metavar="DIR",
                            help="the folder the reports go to" + (f" ({reports})" if reports else "")
                                 + (" (default: %(default)s; created if needed)" if report_dir is not None else ""))


HELP_COLUMNS = 80


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's formatter at the terminal's width, at most :data:`HELP_COLUMNS`. A description's or epilog's
    own layout is kept (paragraphs, lists, tables, examples); only a block with a line too long is refilled: a
    plain paragraph as prose, an indented item under its hanging indent."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        columns = width if width is not None else shutil.get_terminal_size().columns
        super().__init__(prog, indent_increment, max_help_position, min(columns, HELP_COLUMNS))

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "".join(indent + line + "\n" if line else "\n" for line in reflow(text, width - len(indent)))


def _hang(line: str) -> int:
    """Where an indented item's continuation starts: after its term column ("  name   text"), its bullet
    ("- ", "(a) ", "1  "), or at its own indent."""
    found = re.match(r"\s*\S.*?\s{2,}(?=\S)", line) or re.match(r"\s*(?:[-*]|\(\w\)|\d+\.?)\s+(?=\S)", line)
    return found.end() if found else len(line) - len(line.lstrip())


def reflow(text: str, width: int) -> list[str]:
    """``text``'s lines at most ``width`` long. A block is a line with the lines that continue it: unindented
    lines continue an unindented one, more deeply indented lines an indented one; a block that fits is kept."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        first = lines[i]
        lead = len(first) - len(first.lstrip())
        block, i = [first], i + 1
        while first.strip() and i < len(lines) and lines[i].strip():
            depth = len(lines[i]) - len(lines[i].lstrip())
            if not (depth == lead == 0 or depth > lead > 0):
                break
            block.append(lines[i])
            i += 1
        if all(len(line) <= width for line in block):
            out += [line.rstrip() for line in block]
            continue
        hang = lead if lead == 0 else (len(block[1]) - len(block[1].lstrip()) if len(block) > 1 else _hang(first))
        words = first.rstrip() + "".join(" " + line.strip() for line in block[1:])
        out += textwrap.wrap(words[lead:], width, initial_indent=" " * lead, subsequent_indent=" " * hang,
                             break_on_hyphens=False, break_long_words=False)
    return out


def command_parser(commands, name: str, *, help: str, description: str, epilog: str = "",
                   examples: Sequence[str] = (), environment_of: str | None = None, **kwargs) -> argparse.ArgumentParser:
    """A sub-command parser in the suite's one help shape: what the command does, its options, then the
    ``epilog`` (exit codes), EXAMPLES (real command lines) and ENVIRONMENT (the variables that apply to it,
    from :mod:`surfacecheck.core.environment`; ``environment_of`` names the command there, default ``name``)."""
    return commands.add_parser(name, help=help, description=description,
                               epilog=help_epilog(epilog, examples, environment_of or name),
                               formatter_class=HelpFormatter, **kwargs)


def help_epilog(epilog: str, examples: Sequence[str], command: str | None) -> str:
    """``epilog``, then the EXAMPLES and ENVIRONMENT sections."""
    parts = [epilog.rstrip("\n")] if epilog.strip() else []
    if examples:
        parts.append("examples:\n" + "\n".join(f"  {line}" for line in examples))
    parts.append(environment.help_section(command))
    return "\n\n".join(parts)
