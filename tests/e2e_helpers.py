"""Helpers shared by the e2e tests that run the real dsh runtime (``test_e2e_cli.py``, ``test_e2e_runner.py``)."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path


RUNTIME_EXECUTABLE = b"dsh-jsonrpc-agent"


def runtime_pids(driver_pid: int) -> list[int]:
    """The dsh runtime executable(s) among the live descendants of the SDK driver ``driver_pid`` (a zombie, one
    that already exited, is not live)."""
    from surfacecheck.e2e.runner import descendants

    found = []
    for pid in descendants(driver_pid):
        try:
            alive = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            if alive and RUNTIME_EXECUTABLE in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:  # it exited between the listing and the read
            continue
    return found


def kill_runtime_after(server, requests: int = 3):
    """An ``on_spawn`` hook for ``run_script``: once ``server`` has seen ``requests`` model requests, SIGKILL
    the runtime executable (``dsh-jsonrpc-agent``) among the spawned driver's descendants."""
    def kill_runtime(proc):
        while proc.poll() is None and len(server.requests) < requests:
            time.sleep(0.01)
        for pid in runtime_pids(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue

    return kill_runtime
