"""A runtime in a child process, spoken to over the JSON-lines protocol (``cmd:COMMAND``; ``docs/protocol.md``).

:class:`ProcessRuntime` spawns ``COMMAND`` (split with :func:`shlex.split`, no shell), performs the
``hello`` handshake, and sends one request per :meth:`~ProcessRuntime.call`, waiting at most
``timeout`` seconds for the matching response. Anything that is not an answer — a child that hangs
past the timeout (it is killed), exits, or prints something that is not a protocol response — raises
:class:`~surfacecheck.core.protocol.RuntimeUnavailable` carrying the tail of the child's stderr, and the
runtime is dead from then on: the run is inconclusive, never a pass. A protocol-level error answered
by the child (unknown op, bad args, unsupported level) is raised as
:class:`~surfacecheck.core.protocol.ProtocolError`, exactly as an in-process runtime raises it.
"""
from __future__ import annotations

import collections
import io
import json
import os
import shlex
import signal
import subprocess
import threading
import time
import weakref
from typing import Any

from ..core.protocol import ANNOUNCEABLE, PROTOCOL, ProtocolError, RuntimeUnavailable
from .pipe import LinePipe, LineTooLong, PipeClosed, PipeTimeout

STDERR_LINES = 40
STDERR_LINE_CHARS = 4000
"""A flood of stderr keeps only its tail: so many lines, each cut to so many characters."""
MAX_LINE = 32 * 1024 * 1024
"""The longest response line read (bytes); a longer one is a protocol failure, not an allocation."""
_LIVE: "weakref.WeakSet[ProcessRuntime]" = weakref.WeakSet()


def live() -> frozenset:
    """The runtimes whose children are alive now (to spare them in :func:`kill_all`)."""
    return frozenset(_LIVE)


def kill_all(keep: frozenset = frozenset()) -> None:
    """Kill every runtime child still alive (and its process group), but those in ``keep``: what a command
    does before it returns, since the children lead their own sessions and a terminal's Ctrl-C no longer
    reaches them."""
    for runtime in [r for r in list(_LIVE) if r not in keep]:
        try:
            runtime._kill()
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass


class ProcessRuntime:
    """:class:`~surfacecheck.core.protocol.Runtime` over a child process (see the module docstring)."""

    def __init__(self, command: str, timeout: float = 10.0, *, handshake_timeout: float | None = None,
                 argv: list[str] | None = None, env: dict[str, str] | None = None, name: str | None = None):
        self.command, self.timeout = command, timeout
        self.name = name or f"cmd:{command}"
        self._next_id = 0
        self._dead: RuntimeUnavailable | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        try:
            argv = list(argv) if argv is not None else shlex.split(command)
        except ValueError as exc:
            raise RuntimeUnavailable("exited", f"cannot parse runtime command {command!r}: {exc}") from None
        if not argv:
            raise RuntimeUnavailable("exited", "empty runtime command")
        try:
            # its own process group, so a grandchild that keeps our pipes open dies with it (:meth:`_kill`)
            self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          bufsize=0, env=env, start_new_session=True)
        except OSError as exc:
            raise RuntimeUnavailable("exited", f"cannot start runtime command {command!r}: {exc}") from None
        _LIVE.add(self)
        # answers are read in the calling thread (pipe.py); stderr, which nobody waits for, by a thread of its own
        self._pipe = LinePipe(self._proc.stdin.fileno(), self._proc.stdout.fileno(), MAX_LINE)
        self._err_thread = threading.Thread(target=self._pump_stderr, daemon=True)
        self._err_thread.start()
        try:
            self._hello = self._request("hello", {}, handshake_timeout or max(timeout, 10.0))
        except ProtocolError as exc:
            raise self._fail("protocol", f"refused the hello handshake: {exc.type}: {exc}") from None
        self._check_hello(self._hello)

    # -- runtime interface ------------------------------------------------------------------
    def hello(self) -> dict[str, Any]:
        return dict(self._hello)

    def call(self, op: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._request(op, {} if args is None else args, self.timeout)

    def call_many(self, requests: list[tuple[str, dict[str, Any]]]) -> list[Any]:
        """Pipelined requests: every line written at once, the answers read in order, each within ``timeout`` of
        the last. One entry per request: its result, a :class:`ProtocolError` (refused by the protocol, or args
        that are not JSON: not sent), or the :class:`RuntimeUnavailable` that ended the runtime (for that request
        and every later one). Nothing is raised, so the caller reads the answers up to the one it stops at, as
        if it had asked one at a time; every answer is read, so no stale line is left for the next request."""
        if self._dead is not None:
            return [self._gone() for _ in requests]
        sent: list[tuple[int, str] | ProtocolError] = []
        lines = []
        for op, args in requests:
            self._next_id += 1
            try:
                lines.append(json.dumps({"id": self._next_id, "op": op, "args": args}, separators=(",", ":"),
                                        allow_nan=False))
                sent.append((self._next_id, op))
            except (TypeError, ValueError) as exc:
                sent.append(ProtocolError("bad-args", f"args of {op!r} are not JSON: {exc}"))
        try:
            self._send("".join(line + "\n" for line in lines), requests[0][0], self.timeout)
        except RuntimeUnavailable as lost:
            return [lost for _ in requests]
        return [entry if isinstance(entry, ProtocolError) else self._answer(*entry) for entry in sent]

    def _gone(self) -> RuntimeUnavailable:
        return RuntimeUnavailable(self._dead.kind, f"runtime {self.name!r} is no longer usable: {self._dead}",
                                  self._dead.stderr)

    def _answer(self, rid: int, op: str) -> Any:
        """The answer to request ``rid`` (already sent), or the exception it ends in (returned, not raised)."""
        if self._dead is not None:
            return self._gone()
        try:
            return self._receive(op, rid, self.timeout)
        except (ProtocolError, RuntimeUnavailable) as exc:
            return exc

    def close(self) -> None:
        """Close stdin (the server's end of input), give the child a moment, then kill it. Idempotent."""
        proc = getattr(self, "_proc", None)
        if proc is None:
            return
        if proc.poll() is None:
            try:
                proc.stdin.close()
                proc.wait(timeout=1.0)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()  # the child if it lingers, and whatever it left running in its group

    def __enter__(self) -> "ProcessRuntime":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort; close() is the contract
        try:
            self._kill()
        except Exception:
            pass

    @property
    def stderr_tail(self) -> str:
        return "".join(self._stderr)

    # -- plumbing -----------------------------------------------------------------------------
    def _pump_stderr(self) -> None:
        stderr = io.TextIOWrapper(io.BufferedReader(self._proc.stderr), encoding="utf-8", errors="replace")
        try:
            while True:
                line = stderr.readline(STDERR_LINE_CHARS)
                if not line:
                    break
                self._stderr.append(line if line.endswith("\n") else line + "…\n")
        except (OSError, ValueError):
            pass

    def _kill(self) -> None:
        """SIGKILL the child's whole process group (it leads its own session), then reap the child."""
        proc = getattr(self, "_proc", None)
        if proc is None or getattr(self, "_group_killed", False):
            return
        self._group_killed = True  # once: after that the group id may name someone else's group
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            if proc.poll() is None:
                proc.kill()
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass

    def _fail(self, kind: str, message: str) -> RuntimeUnavailable:
        """Kill the child, collect its stderr tail, and remember why it is unusable."""
        self._kill()
        self._err_thread.join(timeout=1.0)
        tail = self.stderr_tail
        full = f"runtime {self.name!r}: {message}"
        if tail.strip():
            full += "\n--- stderr (tail) ---\n" + tail.rstrip()
        self._dead = RuntimeUnavailable(kind, full, tail)
        return self._dead

    def _request(self, op: str, args: dict, timeout: float) -> dict[str, Any]:
        if self._dead is not None:
            raise self._gone()
        self._next_id += 1
        rid = self._next_id
        try:
            line = json.dumps({"id": rid, "op": op, "args": args}, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ProtocolError("bad-args", f"args of {op!r} are not JSON: {exc}") from None
        self._send(line + "\n", op, timeout)
        return self._receive(op, rid, timeout)

    def _send(self, text: str, op: str, timeout: float) -> None:
        """Write ``text`` (one request line, or a pipelined batch) within ``timeout``; a child that stops reading
        is killed, one that has exited is reported with its status."""
        try:
            self._pipe.send(text.encode("utf-8"), time.monotonic() + timeout)
        except PipeTimeout:
            raise self._fail("timeout", f"did not read {op!r} within {timeout:g} s; the child was killed") from None
        except (OSError, ValueError):
            raise self._exited(f"could not send {op!r}") from None

    def _receive(self, op: str, rid: int, timeout: float) -> dict[str, Any]:
        try:
            raw = self._pipe.line(time.monotonic() + timeout)
        except PipeTimeout:
            raise self._fail("timeout", f"no answer to {op!r} within {timeout:g} s; the child was killed") from None
        except PipeClosed:
            raise self._exited(f"exited before answering {op!r}") from None
        except LineTooLong:
            raise self._fail("protocol", f"answered {op!r} with a line longer than {MAX_LINE} bytes") from None
        except (OSError, ValueError):  # the pipe closed under us (the child was killed)
            raise self._exited(f"exited before answering {op!r}") from None
        return self._response(op, rid, raw.decode("utf-8", errors="replace"))

    def _exited(self, what: str) -> RuntimeUnavailable:
        try:
            code = self._proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            code = None
        return self._fail("exited", f"{what} (exit status {code})")

    def _response(self, op: str, rid: int, raw: str) -> dict[str, Any]:
        shown = raw.strip()[:200]
        try:
            response = json.loads(raw)
        except ValueError:
            raise self._fail("protocol", f"answered {op!r} with a line that is not JSON: {shown!r}") from None
        if not isinstance(response, dict) or response.get("id") != rid:
            raise self._fail("protocol", f"answered {op!r} with {shown!r}; expected a response with id {rid}")
        if "error" in response and "result" not in response:
            error = response["error"]
            if not isinstance(error, dict) or not isinstance(error.get("type"), str):
                raise self._fail("protocol", f"answered {op!r} with a malformed protocol error: {shown!r}")
            raise ProtocolError(error["type"], str(error.get("message", "")))
        result = response.get("result")
        if not isinstance(result, dict) or "error" in response:
            raise self._fail("protocol", f"answered {op!r} without a result object: {shown!r}")
        return result

    def _check_hello(self, hello: dict) -> None:
        if hello.get("protocol") != PROTOCOL:
            raise self._fail("protocol", f"hello announced protocol {hello.get('protocol')!r}; expected {PROTOCOL!r}")
        levels = hello.get("levels")
        if not isinstance(levels, list) or not levels or any(level not in ANNOUNCEABLE for level in levels):
            raise self._fail("protocol", f"hello announced levels {levels!r}; expected a non-empty subset of {list(ANNOUNCEABLE)}")
