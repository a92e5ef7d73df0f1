"""Leaving without the heap's teardown: exit handlers still run, the streams are flushed, the code is kept."""
from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import atexit, sys
from surfacecheck.core.exit import leave, without_teardown
atexit.register(lambda: print("handler ran", flush=True))
print("report", end="")
{ask}
leave(3)
"""


def _run(ask: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT.format(ask=ask)], capture_output=True, text=True, timeout=60)


def test_leaving_without_teardown_runs_the_handlers_and_keeps_the_code():
    done = _run("without_teardown()")
    assert done.returncode == 3
    assert done.stdout == "reporthandler ran\n"


def test_without_the_request_the_process_ends_as_usual():
    done = _run("")
    assert done.returncode == 3 and done.stdout == "reporthandler ran\n"


def test_explore_from_the_command_line_still_prints_its_whole_report():
    done = subprocess.run([sys.executable, "-m", "surfacecheck", "explore", "--events", "3", "--tool-pairs", "1",
                           "--compactions", "1", "--json"], capture_output=True, text=True, timeout=300)
    import json

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["verdict"] == "ok"
