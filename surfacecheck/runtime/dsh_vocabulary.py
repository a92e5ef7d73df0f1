"""What dsh itself accepts, as data: the input space the generators are derived from and judged against.

``dsh_vocabulary.json`` (next to this module) is read from dsh's own packages by ``runtimes/dsh/adapter/vocabulary.mjs``:
the event types its read path understands (dsh-session's ``KNOWN_SESSION_EVENT_TYPES``), the content-block kinds
its token meter prices apart (``estimateContent``'s cases, spec 4.1), the config schemas of compaction-basic and
the tool-result pruner field by field (spec 9.1, 6), every refusal message of their config resolvers with its
line, the ``/compact`` command's grammar (spec 11), and the AgentOptions fields compaction-basic reads with their declared
types (spec 8.5). The file is committed so the generators do not need Node;
``python -m surfacecheck.runtime.dsh_vocabulary`` compares it with the installed dsh (``--write`` rewrites it),
and a test fails when they drift.
"""
from __future__ import annotations

import argparse
import functools
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..core.protocol import RuntimeUnavailable

FILE = Path(__file__).with_name("dsh_vocabulary.json")
SCRIPT = Path(__file__).resolve().parents[2] / "runtimes" / "dsh" / "adapter" / "vocabulary.mjs"


@dataclass(frozen=True)
class Check:
    """One refusal of a config resolver: where it is and its message as a pattern over the messages it writes."""

    package: str
    file: str
    line: int
    message: str

    @property
    def id(self) -> str:
        return f"{self.package}/{self.file}:{self.line}"

    @functools.cached_property
    def pattern(self) -> re.Pattern:
        parts = re.split(r"\$\{[^}]*\}", self.message)
        return re.compile(".*?".join(re.escape(p) for p in parts), re.DOTALL)


@dataclass(frozen=True)
class Vocabulary:
    events: tuple[str, ...]
    blocks: tuple[str, ...]
    config: dict  # schema name -> {field path: {type, min?, step?, required?, default?}}
    checks: tuple[Check, ...]
    compact_usage: str
    compact_trims: bool
    agent: dict  # AgentOptions field -> {type, optional}

    @classmethod
    def from_json(cls, doc: dict) -> "Vocabulary":
        return cls(tuple(doc["events"]), tuple(doc["blocks"]), doc["config"],
                   tuple(Check(c["package"], c["file"], c["line"], c["message"]) for c in doc["checks"]),
                   doc["compact"]["usage"], doc["compact"]["trims"], doc.get("agent", {}))


@functools.cache
def vocabulary() -> Vocabulary:
    """The committed vocabulary."""
    return Vocabulary.from_json(json.loads(FILE.read_text(encoding="utf-8")))


def read_installed(spec: str = "dsh", timeout: float = 120.0) -> dict:
    """The vocabulary of the dsh that ``spec`` names (installing the pinned packages if needed)."""
    from .dsh import adapter_command

    argv, env = adapter_command(spec)
    try:
        done = subprocess.run([argv[0], str(SCRIPT)], env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeUnavailable("timeout", f"{SCRIPT.name} did not finish within {timeout:.0f} s") from None
    if done.returncode != 0:
        raise RuntimeUnavailable("crashed", f"{SCRIPT.name} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def render(doc: dict) -> str:
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m surfacecheck.runtime.dsh_vocabulary",
        description="Compare surfacecheck/runtime/dsh_vocabulary.json with what the installed dsh accepts (exit 1 when they "
                    "differ); --write rewrites the file from dsh.")
    parser.add_argument("--runtime", default="dsh", help="dsh or dsh:DIR (a node_modules folder); default: dsh")
    parser.add_argument("--write", action="store_true", help="rewrite the committed file from the installed dsh")
    args = parser.parse_args(argv)
    try:
        fresh = render(read_installed(args.runtime))
    except RuntimeUnavailable as exc:
        print(f"surfacecheck: {exc}", file=sys.stderr)
        return 3
    if args.write:
        FILE.write_text(fresh, encoding="utf-8")
        print(f"wrote {FILE.name}")
        return 0
    same = FILE.is_file() and FILE.read_text(encoding="utf-8") == fresh
    print(f"{FILE.name}: {'matches' if same else 'differs from'} the installed dsh")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
