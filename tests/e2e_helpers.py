"""Helpers shared by the e2e tests that run the real dsh runtime (``test_e2e_cli.py``, ``test_e2e_runner.py``)."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def kill_runtime_after(server, requests: int = 3):
    """An ``on_spawn`` hook for ``run_script``: once ``server`` has seen ``requests`` model requests, SIGKILL
    the runtime executable (``dsh-jsonrpc-agent``) among the spawned driver's descendants."""
    from surfacecheck.e2e.runner import descendants

    def kill_runtime(proc):
        while proc.poll() is None and len(server.requests) < requests:
            time.sleep(0.01)
        for pid in descendants(proc.pid):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
                if "dsh-jsonrpc-agent" in cmdline:
                    os.kill(pid, signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError):  # it exited between the listing and the read
                continue

    return kill_runtime
