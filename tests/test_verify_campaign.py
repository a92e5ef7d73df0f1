"""``verify --workers N`` over every level (a ``--profile deep`` campaign, here at smoke size): one progress bar for
all the levels' shards, the run's seed and the rule its shard seeds derive by, and each level's shard seeds."""
from __future__ import annotations

import io

import pytest

pytest.importorskip("distributed")

from surfacecheck.core.protocol import LEVELS  # noqa: E402
from surfacecheck.verify.run import verify  # noqa: E402
from surfacecheck.verify.sharded import SHARDS, shard_seed  # noqa: E402


class Terminal(io.StringIO):
    """A stderr that says it is a terminal, so the progress bar draws (tqdm's ``disable=None``)."""

    def isatty(self) -> bool:
        return True


def test_one_bar_for_every_level_and_the_seeds_printed(tmp_path):
    err = Terminal()
    report = verify("embedded", profile="smoke", seed=5, trace_dir=tmp_path, regressions=None, err=err, workers=1)
    assert report.status == "ok" and [lv.level for lv in report.levels] == list(LEVELS)
    assert report.to_json()["distributed"] == {"workers": 1, "scheduler": None, "tasks": SHARDS * len(LEVELS),
                                               "retries": []}
    text = err.getvalue()
    assert "verify: runtime embedded, profile smoke, seed 5\n" in text
    assert "run seed 5; shard i of level L runs with seed int(sha256('5:L:i')[:8], 16) mod 2**31" in text
    for level in LEVELS:
        seeds = " ".join(str(shard_seed(5, level, i)) for i in range(SHARDS))
        assert f"verify: level {level}: {SHARDS} shards of " in text and f"examples, seeds {seeds}\n" in text
    total = SHARDS * len(LEVELS)
    bars = {line.split("|")[0].split(":")[0].strip() for line in text.replace("\r", "\n").splitlines() if "%|" in line}
    assert bars == {"verify"}  # one bar, not one per level
    assert f"{total}/{total}" in text and "policy shard" in text
