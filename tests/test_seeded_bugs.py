"""Evidence of power (issue 4 point 6): verify finds every seeded bug, and each trace replays —
exit 1 against the bug, exit 0 against the correct embedded runtime."""
from __future__ import annotations

import pytest

from seeded_bugs import BUGS
from surfacecheck.core.trace import read_trace
from surfacecheck.verify.replay import replay_trace
from surfacecheck.verify.run import verify

SEED = 20261130


def test_there_are_at_least_twelve_one_idea_bugs_each_tied_to_a_section():
    assert len(BUGS) >= 12
    assert all(bug.section and bug.idea for bug in BUGS.values())
    assert len({bug.runtime for bug in BUGS.values()}) == len(BUGS)


@pytest.mark.parametrize("name", sorted(BUGS))
def test_verify_finds_the_bug_and_its_trace_replays(name, tmp_path):
    bug = BUGS[name]
    spec = f"embedded:{name}"
    # Unshrunk here to keep the suite fast; the shrunk lengths are measured by the CLI (docs/verify.md).
    report = verify(spec, level=bug.level, profile="ci", seed=SEED, trace_dir=tmp_path, regressions=None,
                    shrink=False)
    assert report.exit_code == 1, f"{name} not found: {report.text()}"
    (path,) = report.traces
    trace = read_trace(path)
    assert trace.runtime == spec and trace.violation is not None
    on_bug = replay_trace(trace)
    assert on_bug.exit_code == 1 and on_bug.same, on_bug.describe()
    on_fixed = replay_trace(trace, "embedded")
    assert on_fixed.exit_code == 0, on_fixed.describe()


@pytest.mark.parametrize("name, longest", [("generation-bumped-on-append", 4), ("off-by-one-cut", 6)])
def test_shrinking_leaves_a_short_trace(name, longest, tmp_path):
    report = verify(f"embedded:{name}", level=BUGS[name].level, profile="smoke", seed=SEED, trace_dir=tmp_path,
                    regressions=None)
    assert report.exit_code == 1
    assert len(read_trace(report.traces[0]).steps) <= longest


def test_every_committed_regression_fails_on_its_bug_and_passes_on_the_embedded_runtime():
    from surfacecheck.verify.run import REGRESSIONS

    paths = sorted(REGRESSIONS.glob("*.jsonl"))
    assert paths, "the regression folder is empty"
    for path in paths:
        trace = read_trace(path)
        assert replay_trace(trace).exit_code == 1, f"{path.name} no longer fails on {trace.runtime}"
        assert replay_trace(trace, "embedded").exit_code == 0, f"{path.name} fails on embedded"


def test_compaction_level_bugs_each_replace_one_method_through_the_runtime_hooks():
    """Point 2 of the follow-up: compaction-level bugs plug in via ``compaction_class`` / ``transaction_class``
    and override exactly one method of the embedded Compactor or Transaction (one idea each)."""
    from surfacecheck.runtime.embedded import EmbeddedRuntime

    compaction = [bug for bug in BUGS.values() if bug.level == "compaction"]
    assert len(compaction) >= 3
    for bug in compaction:
        changed = [attr for attr in ("compaction_class", "transaction_class")
                   if getattr(bug.runtime, attr) is not getattr(EmbeddedRuntime, attr)]
        assert len(changed) == 1, bug.name
        cls = getattr(bug.runtime, changed[0])
        own = [name for name in vars(cls) if not name.startswith("__")]
        assert len(own) == 1, (bug.name, own)
        assert bug.section.startswith("spec ")
