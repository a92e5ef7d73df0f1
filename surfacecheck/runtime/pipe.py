"""A child runtime's stdin and stdout as the protocol client uses them: whole lines read within a deadline, and
requests written without ever waiting on a child that is itself waiting to write its answers.

The answers are read in the calling thread, straight from the pipe (``poll`` for the deadline — no limit on the
descriptor's number, unlike ``select`` — and ``os.read`` for whatever has arrived): no reader thread, so no
thread wake-ups and no hand-over of the interpreter lock per answer, of which a lockstep step has seven. The writes are
non-blocking: while the child's stdin is full the answers it has already written are read into the buffer, so a
large batch never deadlocks against a child blocked on a full stdout.
"""
from __future__ import annotations

import math
import os
import select
import time


class PipeTimeout(Exception):
    """The deadline passed before a whole line (or the whole request) got through."""


class PipeClosed(Exception):
    """The child closed its stdout (it exited) before a line was complete."""


class LineTooLong(Exception):
    """The child wrote more than ``max_line`` bytes without a newline."""


class LinePipe:
    """Lines from ``stdout_fd``, bytes to ``stdin_fd`` (set non-blocking here). Not thread-safe: one caller at a
    time, as the protocol asks one request (or one pipelined batch) at a time."""

    def __init__(self, stdin_fd: int, stdout_fd: int, max_line: int):
        os.set_blocking(stdin_fd, False)
        self._in, self._out, self.max_line = stdin_fd, stdout_fd, max_line
        self._readable = select.poll()  # stdout has something (or its end)
        self._readable.register(stdout_fd, select.POLLIN)
        self._either = select.poll()  # that, or stdin has room
        self._either.register(stdout_fd, select.POLLIN)
        self._either.register(stdin_fd, select.POLLOUT)
        self._buffer = bytearray()
        self._scanned = 0  # the buffer's first bytes known to hold no newline
        self._eof = False

    def send(self, data: bytes, deadline: float) -> None:
        """Write all of ``data``; while stdin is full, keep reading stdout into the buffer. Raises
        :class:`PipeTimeout`, or ``OSError`` (``BrokenPipeError``) when the child has closed its stdin."""
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self._in, view):]
                continue
            except BlockingIOError:
                pass
            ready = self._either.poll(self._left(deadline))
            if any(fd == self._out for fd, _ in ready):
                self._fill()
            elif not ready and time.monotonic() >= deadline:
                raise PipeTimeout

    def line(self, deadline: float) -> bytes:
        """The next line, its newline included (at the end of the stream, what is left, without one). Raises
        :class:`PipeTimeout`, :class:`PipeClosed` or :class:`LineTooLong`."""
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end >= 0:
                if end + 1 > self.max_line:
                    raise LineTooLong
                line = bytes(self._buffer[:end + 1])
                del self._buffer[:end + 1]
                self._scanned = 0
                return line
            self._scanned = len(self._buffer)
            if self._scanned > self.max_line:
                raise LineTooLong
            if self._eof:
                if self._buffer:
                    line, self._buffer[:] = bytes(self._buffer), b""
                    self._scanned = 0
                    return line
                raise PipeClosed
            if not self._readable.poll(self._left(deadline)):
                raise PipeTimeout
            self._fill()

    def _fill(self) -> None:
        chunk = os.read(self._out, 1 << 16)
        if chunk:
            self._buffer += chunk
        else:  # the end of stdout: from now on its hang-up must not wake a send that waits for room in stdin
            self._eof = True
            self._either.unregister(self._out)

    @staticmethod
    def _left(deadline: float) -> int:
        """Milliseconds to ``deadline`` for ``poll`` (rounded up: a wait never ends before the deadline)."""
        return max(0, math.ceil((deadline - time.monotonic()) * 1000))
