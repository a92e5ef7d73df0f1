"""Faults for the e2e path (issue 18 point 2): a scripted server that misbehaves at model request k, hooks
that kill or freeze the real dsh runtime at request k, and a session log that goes missing or is cut short.

Each fault is installed with pytest's ``monkeypatch`` in the module the e2e runner reads, so the command
under test (``surfacecheck e2e dsh``) runs unchanged: :func:`install` is the single entry point.
"""
from __future__ import annotations

import functools
import json
import os
import signal
import time
from pathlib import Path

from e2e_helpers import runtime_pids
from surfacecheck.e2e import runner
from surfacecheck.e2e.server import ScriptedServer

SERVER_FAULTS = ("stall", "garbage", "truncated", "empty", "http-500", "reset")
"""At request k the server: accepts and never replies; streams a ``data:`` line that is not JSON; sends half
of the scripted stream and closes; sends a 200 with no body; answers HTTP 500; drops the connection."""
KILL_FAULTS = ("kill-runtime", "kill-driver", "freeze-runtime")
"""At request k: SIGKILL the dsh runtime executable; SIGKILL the SDK driver process (the runtime's parent);
SIGSTOP the runtime (a hang: the stall watchdog must end the run)."""
LOG_FAULTS = ("log-missing", "log-truncated", "log-not-json")
"""After a run that finished: no session.jsonl; its last line cut mid-event; a line that is not JSON."""
FAULTS = SERVER_FAULTS + KILL_FAULTS + LOG_FAULTS


class FaultyServer(ScriptedServer):
    """The OpenAI-wire scripted server with one fault at model request ``k`` (0-based, compaction requests
    included); every request before and after is served as the script says."""

    fault, k = "garbage", 0

    def start(self) -> str:
        url = super().start()
        self._httpd.handle_error = lambda *_a: None  # the `reset` fault raises in the handler: no traceback noise
        return url

    def answer(self, path, headers, body):
        status, reply, sse = super().answer(path, headers, body)
        if len(self.requests) - 1 != self.k:
            return status, reply, sse
        FIRED.append(f"{self.fault}@{self.k}")
        if self.fault == "stall":
            self.requests[-1]["status"] = None
            return None, None, None
        if self.fault == "http-500":
            return 500, self._error_body("surfacecheck fault: injected HTTP 500"), None
        if sse is None:  # an error the script asked for (a failing summary, an overflow): mangle it as a stream too
            return 200, reply, []
        return status, reply, sse

    def _frame(self, payloads):
        data = super()._frame(payloads)
        if len(self.requests) - 1 != self.k:
            return data
        if self.fault == "garbage":
            return b"data: {this is not json\n\n"
        if self.fault == "truncated":
            return data[: len(data) // 2]
        if self.fault == "empty":
            return b""
        if self.fault == "reset":
            raise ConnectionResetError("surfacecheck fault: connection dropped")
        return data


def _server_class(fault: str, k: int) -> type:
    return type(f"FaultyServer_{fault.replace('-', '_')}", (FaultyServer,), {"fault": fault, "k": k})


_SERVERS: list[ScriptedServer] = []
FIRED: list[str] = []
"""Each fault delivered since :func:`install` (a fault whose request k never came is not in it)."""


CLOSING = -1
"""``k`` for a kill fault delivered after the last turn, while the driver closes the harness (phase ``closing``)."""


def _closing(proc) -> bool:
    result = Path(proc.args[-1]).with_name("driver-result.json")
    try:
        return json.loads(result.read_text(encoding="utf-8")).get("phase") == "closing"
    except (OSError, ValueError):
        return False


def _kill_hook(fault: str, k: int):
    """An ``on_spawn`` hook: once the run's server has seen ``k + 1`` requests (or, for :data:`CLOSING`, once the
    driver is closing the harness), deliver the fault."""

    def due(proc) -> bool:
        return _closing(proc) if k == CLOSING else bool(_SERVERS and len(_SERVERS[-1].requests) > k)

    def hook(proc):
        while proc.poll() is None and not due(proc):
            time.sleep(0.005)
        if proc.poll() is not None:
            return
        if fault == "kill-driver":
            os.kill(proc.pid, signal.SIGKILL)
            FIRED.append(f"{fault}@{k}")
            return
        sig = signal.SIGKILL if fault == "kill-runtime" else signal.SIGSTOP
        for pid in runtime_pids(proc.pid):  # live ones only: a runtime that already exited cannot be faulted
            try:
                os.kill(pid, sig)
                FIRED.append(f"{fault}@{k}")
            except ProcessLookupError:
                continue

    return hook


def _log_fault(fault: str, find_log):
    """Wrap ``runner._find_log``: the log the runner then reads is missing, cut short, or holds a non-JSON line
    (the runtime's own file is left as it is; the damaged copy sits beside it)."""

    @functools.wraps(find_log)
    def find(root, session_id):
        log = find_log(root, session_id)
        FIRED.append(fault)
        if fault == "log-missing" or log is None:
            return None
        text = log.read_text(encoding="utf-8")
        damaged = log.with_name("damaged-session.jsonl")
        if fault == "log-truncated":
            lines = text.splitlines(keepends=True)
            damaged.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2], encoding="utf-8")
        else:
            lines = text.splitlines(keepends=True)
            middle = len(lines) // 2
            damaged.write_text("".join(lines[:middle]) + "not json at all\n" + "".join(lines[middle:]), encoding="utf-8")
        return damaged

    return find


def install(monkeypatch, fault: str, k: int) -> None:
    """Put ``fault`` at model request ``k`` (server and kill faults) or on the finished log (log faults)."""
    if fault not in FAULTS:
        raise ValueError(f"unknown e2e fault {fault!r}; one of {', '.join(FAULTS)}")
    cls = _server_class(fault, k) if fault in SERVER_FAULTS else _server_class("none", -2)
    FIRED.clear()

    def make(*args, **kwargs):
        server = cls(*args, **kwargs)
        _SERVERS.append(server)
        return server

    monkeypatch.setattr(runner, "ScriptedServer", make)
    if fault in KILL_FAULTS:
        real = runner.run_script
        monkeypatch.setattr(runner, "run_script", functools.partial(real, on_spawn=_kill_hook(fault, k)))
    if fault in LOG_FAULTS:
        monkeypatch.setattr(runner, "_find_log", _log_fault(fault, runner._find_log))
