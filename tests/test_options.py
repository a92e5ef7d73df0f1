"""The shared options and the runtime registry: every command spells, explains and defaults them alike."""
from __future__ import annotations

import argparse

import pytest

from surfacecheck.cli import build_parser
from surfacecheck.options import DEFAULT_RUNTIME, JSON_HELP, TIMEOUT_HELP
from surfacecheck.runtime import registry

COMMANDS = ("check", "verify", "replay", "explore", "prove", "bench", "findings", "mutate", "audit")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _options(command: str) -> dict[str, argparse.Action]:
    commands = _subparsers(build_parser())
    parser = commands[command] if command != "e2e" else _subparsers(commands["e2e"])["dsh"]
    return {s: a for a in parser._actions for s in a.option_strings}


@pytest.mark.parametrize("command", COMMANDS + ("e2e",))
def test_every_shared_option_has_the_one_help_text(command):
    options = _options(command)
    assert options["--json"].help == JSON_HELP
    if "--runtime" in options:
        runtime = options["--runtime"]
        assert runtime.help.startswith("the runtime under test: ")
        assert runtime.default in (DEFAULT_RUNTIME, None), f"{command} defaults to {runtime.default}"
        shown = registry.mutable() if command == "mutate" else registry.names()
        assert all(name in runtime.help for name in shown)
    if "--timeout" in options and command != "e2e":  # e2e's bounds a whole script run, not one request
        assert options["--timeout"].help.startswith(TIMEOUT_HELP.split(" (default")[0])
    if "--report-dir" in options:
        assert options["--report-dir"].help.startswith("the folder the reports go to")


def test_runtime_help_names_every_registered_spelling():
    names = ["embedded", "model", "dsh", "dsh:DIR", "langchain", "strands", "deepagents", "adk", "openhands", "gemini",
             "ai", "reference", "cmd:COMMAND"]
    assert registry.names() == names
    assert ", ".join(names[3:]) + ", or a registered variant BASE:VARIANT (default: embedded)" \
        in _options("verify")["--runtime"].help


@pytest.mark.parametrize("spec, entry", [("embedded", "embedded"), ("dsh:/x", "dsh:DIR"), ("cmd:./rt", "cmd:COMMAND"),
                                         ("embedded:slow-tracker", None), ("bogus", None)])
def test_a_spelling_finds_its_entry(spec, entry):
    found = registry.entry(spec)
    assert (found.name if found else None) == entry


def test_unknown_spellings_are_refused_and_variants_open():
    assert "unknown runtime 'bogus'" in registry.problem("bogus")
    assert "needs a command" in registry.problem("cmd: ")
    variant = registry.variants()[0]
    runtime = registry.open_spec(variant, 10.0)
    try:
        assert runtime.hello()["levels"]
    finally:
        runtime.close()
    with pytest.raises(ValueError, match="unknown runtime variant"):
        registry.open_spec("model:no-such-variant", 10.0)


def test_tools_come_from_the_registry():
    assert registry.mutable() == ("embedded", "dsh")
    from surfacecheck.coverage.code import PYTHON_RUNTIMES

    assert set(PYTHON_RUNTIMES) == {"embedded", "model"} and all(p.is_dir() for p in PYTHON_RUNTIMES.values())
