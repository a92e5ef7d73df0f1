"""Every command's --help in one voice: at most 80 columns, the same --runtime line, EXAMPLES that parse, and an
ENVIRONMENT section rendered from the one table of variables the code reads."""
from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from surfacecheck.cli import build_parser
from surfacecheck.core import environment
from surfacecheck.options import DEFAULT_RUNTIME, reflow

ROOT = Path(__file__).resolve().parents[1]


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, prefix + (name,))


COMMANDS = [" ".join(words) for words, _ in _commands(build_parser())]


def _parser(command: str) -> argparse.ArgumentParser:
    return dict((" ".join(w), p) for w, p in _commands(build_parser()))[command]


def _help(command: str, monkeypatch, capsys) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        build_parser().parse_args(command.split() + ["--help"])
    return capsys.readouterr().out


def _section(text: str, title: str) -> list[str]:
    body = text.split(f"\n{title}:\n", 1)[1]
    return body.split("\n\n", 1)[0].splitlines()


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_fits_80_columns_and_has_examples_and_environment(command, monkeypatch, capsys):
    text = _help(command, monkeypatch, capsys)
    assert [line for line in text.splitlines() if len(line) > 80] == []
    examples = _section(text, "examples")
    assert 1 <= len(examples) <= 4 and all(line.startswith("  surfacecheck ") for line in examples)
    assert _section(text, "environment")[0].startswith("  SURFACECHECK_")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_example_is_a_command_line_the_parser_takes(command):
    epilog = _parser(command).epilog or ""
    for line in epilog.split("examples:\n", 1)[1].split("\n\n", 1)[0].splitlines():
        build_parser().parse_args(shlex.split(line)[1:])  # a renamed option exits 2 here


def test_the_runtime_line_is_one_sentence_everywhere():
    lines = {command: next((a.help for a in _parser(command)._actions if "--runtime" in a.option_strings), None)
             for command in COMMANDS}
    lines = {command: line for command, line in lines.items() if line is not None}
    common = lines["verify"]
    assert common.endswith(f"(default: {DEFAULT_RUNTIME})")
    for command, line in lines.items():
        assert re.fullmatch(r"the runtime under test: [^()]+ \(default: [^()]+\)", line), (command, line)
        if command not in ("replay", "mutate", "contract", "matrix"):
            assert line == common, command
    assert "since a trace replays where it failed" in lines["replay"]  # a different default says why
    assert "(default: none: required, a runtime that serves the conversation level)" in lines["contract"]
    assert "embedded, dsh, langchain, strands, deepagents, adk, openhands, gemini, ai, the runtimes with a mutation tool " \
        "(default: embedded)" in lines["mutate"]
    assert "(default: every runtime the contract can be asked of" in lines["matrix"]


def test_check_help_opens_with_what_check_does_as_a_whole(monkeypatch, capsys):
    text = _help("check", monkeypatch, capsys)
    opening = text.split("\n\n", 2)[1]
    assert opening.startswith("Run every capability stage against the chosen runtime")
    assert "one\nverdict and one report" in opening or "one verdict and one report" in opening.replace("\n", " ")


def _variables_read(folders: tuple[str, ...]) -> set[str]:
    found = set()
    for folder in folders:
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".mjs", ".js") and "node_modules" not in path.parts:
                found |= set(re.findall(r"SURFACECHECK_[A-Z0-9_]+", path.read_text(encoding="utf-8")))
    return found


def test_the_environment_table_lists_every_variable_the_code_reads():
    listed = {name for name in environment.names() if name.startswith("SURFACECHECK_")}
    assert _variables_read(("surfacecheck", "runtimes")) == listed


def test_the_environment_page_is_the_table(monkeypatch, capsys):
    assert (ROOT / "docs" / "environment.md").read_text(encoding="utf-8") == environment.markdown()
    top = _help("", monkeypatch, capsys)
    assert all(name in top for name in environment.names())  # the top-level help: every variable
    audit = _help("audit", monkeypatch, capsys)
    assert "SURFACECHECK_DEBUG" in audit and "SURFACECHECK_NODE" not in audit  # a command: those that apply


def test_reflow_keeps_a_layout_that_fits_and_refills_what_does_not():
    kept = "heading:\n  name   short text\n"
    assert reflow(kept, 40) == ["heading:", "  name   short text"]
    item = "  name   " + "word " * 12
    assert reflow(item, 30) == ["  name   word word word word", "         word word word word",
                                "         word word word word"]
    assert all(len(line) <= 30 for line in reflow("prose " * 20 + "\nmore prose", 30))


@pytest.mark.parametrize("values, memory", [(["none"], []), (["1e3"], [1000])])
def test_bench_memory_events_none_is_what_its_help_says(values, memory):
    from surfacecheck.bench.cli import _usage_problem

    args = build_parser().parse_args(["bench", "--memory-events", *values])
    assert _usage_problem(args) is None and args.memory_events == memory


def test_bench_memory_events_refuses_none_beside_lengths():
    from surfacecheck.bench.cli import _usage_problem

    args = build_parser().parse_args(["bench", "--memory-events", "none", "1e3"])
    assert "not both" in _usage_problem(args)
