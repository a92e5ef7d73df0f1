"""The README a user reads states what the tool does: its counts match the tool, its commands and runtimes exist,
its links resolve, it fits on a few screens, and its test command is the one CI runs.

Counts are read from clearly marked sentences (``**N scenario logs**``), so rewording the prose around them keeps
the test, and a count that drifts from the tool fails it."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from surfacecheck.audit.rules import RULES
from surfacecheck.cli import build_parser
from surfacecheck.core.catalogue import CATALOGUE
from surfacecheck.core.verdict import INTERRUPT_EXIT, Verdict
from surfacecheck.coverage.situations import WITNESSES
from surfacecheck.explore.stage import STAGE_BOUNDS
from surfacecheck.explore.world import Bounds
from surfacecheck.runtime import registry
from surfacecheck.runtime.sample import sample_requests
from surfacecheck.stages import ALL_STAGES

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = sorted((ROOT / "docs").glob("*.md"))
PACKAGE = ROOT / "surfacecheck"
MAX_LINES = 250


def stated(pattern: str, text: str = README) -> re.Match:
    """The one sentence ``pattern`` marks; the README must state it exactly once."""
    found = list(re.finditer(pattern, text))
    assert len(found) == 1, f"expected one match of {pattern!r}, found {len(found)}"
    return found[0]


def code_spans(text: str) -> list[str]:
    """Every inline code span and every line of a fenced block."""
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)
    outside = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M)
    return [line for block in fenced for line in block.splitlines()] + re.findall(r"`([^`\n]+)`", outside)


def subcommands() -> set[str]:
    parser = build_parser()
    [action] = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return set(action.choices)


def test_the_readme_fits_on_a_few_screens():
    assert len(README.splitlines()) <= MAX_LINES


def test_the_readme_test_command_is_the_one_ci_runs():
    readme = [line.strip() for line in code_spans(README) if line.strip().startswith("python -m pytest")]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip().startswith("python -m pytest")]
    assert ci, ".ci/run runs no pytest command"
    assert readme == [ci[-1]] == ["python -m pytest -q -n 2"]


def test_every_command_the_readme_names_exists():
    named = {m.group(1) for span in code_spans(README)
             for m in re.finditer(r"(?:^|[\s(])surfacecheck ([a-z][\w-]*)", span)}
    known = subcommands()
    assert named, "the README names no command"
    assert named <= known, f"not commands: {sorted(named - known)}"
    assert int(stated(r"\*\*(\d+) commands\*\*").group(1)) == len(known)
    table = set(re.findall(r"^\| `surfacecheck ([a-z][\w-]*)", README, flags=re.M))
    assert table == known, "the Commands table lists every command once"


def test_every_runtime_the_readme_passes_is_a_registry_spelling():
    values = [shlex.split(m.group(1))[0] for span in code_spans(README)
              for m in re.finditer(r"--runtime (\"[^\"]+\"|\S+)", span)]
    assert any(v.startswith("cmd:") for v in values) and any(v.startswith("dsh:") for v in values)
    for value in values:
        assert registry.entry(value) is not None, value
    for name in registry.names():
        assert f"`{name}`" in README, f"the README does not name the runtime {name}"


def test_the_stage_count_and_names():
    match = stated(r"\*\*(\d+) stages\*\*: ([^.]+)\(")
    assert int(match.group(1)) == len(ALL_STAGES)
    assert re.findall(r"`(\w+)`", match.group(2)) == list(ALL_STAGES)


def test_the_counts_match_the_tool():
    assert int(stated(r"\*\*(\d+) scenario logs\*\*").group(1)) == len(list((PACKAGE / "scenarios/logs").glob("*.jsonl")))
    seeds = len(list((PACKAGE / "scenarios/e2e").glob("*.json")))
    assert int(stated(r"\*\*(\d+) seed scripts\*\*").group(1)) == seeds
    assert int(stated(r"The (\d+) seed scripts in", (ROOT / "docs/e2e.md").read_text()).group(1)) == seeds
    assert int(stated(r"\*\*(\d+) audit rules\*\*").group(1)) == len(RULES)
    assert int(stated(r"\*\*(\d+) properties\*\*").group(1)) == len(CATALOGUE)
    assert int(stated(r"\*\*(\d+) sometimes-witnesses\*\*").group(1)) == len(WITNESSES)


def test_the_explore_bounds_match_the_tool():
    command, stage = stated(r"default bounds (\d+/\d+/\d+) events/tool pairs/compactions; the `explore` stage of "
                            r"`check` runs (\d+/\d+/\d+)").groups()
    as_text = lambda b: f"{b.events}/{b.tool_pairs}/{b.compactions}"  # noqa: E731
    assert (command, stage) == (as_text(Bounds()), as_text(STAGE_BOUNDS))
    check_doc = (ROOT / "docs/check.md").read_text()
    assert stated(r"exploration at (\d+/\d+/\d+)", check_doc).group(1) == as_text(STAGE_BOUNDS)


def test_the_protocol_sample_size_in_docs_matches_the_tool():
    requests = sample_requests()
    match = stated(r"(\d+) requests through (\d+) ops", (ROOT / "docs/check.md").read_text())
    assert (int(match.group(1)), int(match.group(2))) == (len(requests), len({op for op, _ in requests}))


def test_the_exit_code_table_matches_the_verdicts():
    rows = dict(re.findall(r"^\| (\d+(?: / \d+)?) \| ([^|]+) \|", README, flags=re.M))
    codes = {v.exit_code for v in Verdict}
    assert {int(code) for code in rows if "/" not in code} == codes
    assert rows["1"].startswith("a violation") and rows["3"].startswith("inconclusive")
    assert f"{INTERRUPT_EXIT['SIGINT']} / {INTERRUPT_EXIT['SIGTERM']}" in rows


def test_the_check_excerpt_matches_the_tool():
    """The excerpt is a real run; what in it the tool fixes (known corpus logs, stage lines) must still hold, and
    with the corpus present so must its log count."""
    from surfacecheck.core import corpus

    excerpt = stated(r"(?s)```\nsurfacecheck \d[^\n]*\n(.*?)```", README).group(1)
    known = [name for name in json.loads((PACKAGE / "known_corpus.json").read_text()) if not name.startswith("_")]
    assert int(re.search(r"(\d+) known corpus logs", excerpt).group(1)) == len(known)
    assert re.search(r"(\d+) states, \d+ edges; controls caught (\d+)/\2", excerpt)
    for line in re.findall(r"^  (\w+) ", excerpt, flags=re.M):
        assert line in ALL_STAGES
    root = corpus.corpus_root()
    if root is None:
        pytest.skip("no corpus: the excerpt's log count is a figure of a run with the corpus")
    logs = len(list((PACKAGE / "scenarios/logs").glob("*.jsonl"))) + len(corpus.session_logs(root)) \
        + len(corpus.generated_logs(root))
    assert int(re.search(r"ALL HELD: (\d+) logs", excerpt).group(1)) == logs


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert path.exists(), f"{page.relative_to(ROOT)}: broken link {target}"


def test_the_link_check_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[gone](missing.md) [web](https://example.org) [here](#top)\n")
    broken = [t for t in LINK.findall(page.read_text()) if not re.match(r"[a-z]+:", t) and not t.startswith("#")
              and not (page.parent / t).exists()]
    assert broken == ["missing.md"]


def test_the_readme_says_where_the_spec_and_corpus_come_from():
    for needle in ("../shared/spec/dsh-compaction-spec.md", "../shared/corpus", "SURFACECHECK_CORPUS", "--corpus DIR",
                   "docs/architecture.md"):
        assert needle in README, needle
