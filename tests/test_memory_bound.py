"""Issue 18 point 6: `explore --max-memory` and `verify --max-memory` stop before the machine runs out, and say
so: exit 3 "incomplete at N states" / "incomplete after N examples", never a pass; a violation found in the states
explored so far still stands (exit 1). (The audit's bounded memory at 10^6 events: tests/test_audit_memory.py.)"""
from __future__ import annotations

import argparse
import json

import pytest

from surfacecheck.core import memory
from surfacecheck.cli import main
from surfacecheck.explore import run as explore_run
from surfacecheck.explore.variants import variant
from surfacecheck.explore.world import Bounds


@pytest.mark.parametrize("text, size", [("512M", 512 * 2**20), ("2G", 2 * 2**30), ("1.5GiB", int(1.5 * 2**30)),
                                        ("64mb", 64 * 2**20), ("20000000", 20_000_000)])
def test_sizes_read_as_a_person_writes_them(text, size):
    assert memory.parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "-1G", "", "1X", "3M"])
def test_a_bad_size_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        memory.parse_size(text)


def test_a_bad_size_is_exit_2_naming_the_option(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["explore", "--max-memory", "lots"])
    assert stop.value.code == 2 and "--max-memory" in capsys.readouterr().err


def test_the_resident_set_is_read():
    assert 16 * 2**20 < memory.resident_bytes() < 64 * 2**30


def _trips_after(n: int):
    """A MemoryLimit stand-in whose n-th look finds the bound passed (deterministic, whatever the machine)."""

    class Trips(memory.MemoryLimit):
        looks = 0

        def check(self):
            Trips.looks += 1
            if Trips.looks >= n and self.reached is None:
                self.reached = memory.MemoryLimitReached(self.limit, self.limit + 1)
            if self.reached is not None:
                raise self.reached

    return Trips


def test_explore_stopped_by_memory_is_incomplete_not_ok(monkeypatch):
    monkeypatch.setattr(explore_run, "MemoryLimit", _trips_after(3))
    report = explore_run.run_explore(Bounds(5, 2, 1), max_memory=2**30)
    full = explore_run.run_explore(Bounds(5, 2, 1))
    assert report["verdict"] == "incomplete" and report["exit_code"] == 3 and not report["complete"]
    assert 0 < report["states"] < full["states"] and report["stopped"].startswith(f"incomplete at {report['states']} states")
    assert report["progress"] == [] and report["graph"] is None  # a partial graph has false dead ends
    assert full["verdict"] == "ok" and full["stopped"] is None


def test_a_violation_found_before_the_bound_still_stands(monkeypatch):
    """The negative control `unbalanced-cut` breaks cut legality within the first levels: with the bound hit
    later, the safety violation is reported (exit 1), not hidden behind "incomplete"."""
    full = explore_run.run_explore(Bounds(5, 2, 1), variant=variant("unbalanced-cut"))
    assert full["exit_code"] == 1
    monkeypatch.setattr(explore_run, "MemoryLimit", _trips_after(4))
    report = explore_run.run_explore(Bounds(5, 2, 1), variant=variant("unbalanced-cut"), max_memory=2**30)
    assert not report["complete"] and report["exit_code"] == 1 and report["violations"]


def test_explore_with_a_bound_below_the_interpreter_stops_at_once(capsys):
    code = main(["explore", "--max-memory", "16M", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 3 and doc["verdict"] == "incomplete" and "memory limit 16 MiB" in doc["stopped"]


def test_explore_with_room_is_the_unbounded_run(capsys):
    assert main(["explore", "--max-memory", "32G", "--json"]) == 0
    bounded = json.loads(capsys.readouterr().out)
    assert main(["explore", "--json"]) == 0
    free = json.loads(capsys.readouterr().out)
    assert (bounded["states"], bounded["edges"], bounded["complete"]) == (free["states"], free["edges"], True)


def test_verify_stopped_by_memory_is_incomplete(tmp_path, capsys):
    code = main(["verify", "--level", "log", "--profile", "dev", "--seed", "1", "--no-save", "--regressions",
                 str(tmp_path), "--trace-dir", str(tmp_path / "traces"), "--max-memory", "16M", "--json"])
    doc = json.loads(capsys.readouterr().out)
    level = doc["levels"][0]
    assert code == 3 and doc["verdict"] == "inconclusive" and level["status"] == "inconclusive"
    assert level["incomplete"].startswith("incomplete after 1 of ") and "memory limit 16 MiB" in level["incomplete"]
    assert len(doc["levels"]) == 1 and not doc["traces"]
