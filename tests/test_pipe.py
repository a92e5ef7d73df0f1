"""The client's pipe (surfacecheck/runtime/pipe.py): lines read in the calling thread within a deadline, and
writes that never deadlock against a child blocked on its own full stdout."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from surfacecheck.runtime.pipe import LinePipe, LineTooLong, PipeClosed, PipeTimeout


def _child(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)


ECHO = "import sys\nfor line in sys.stdin.buffer: sys.stdout.buffer.write(line); sys.stdout.buffer.flush()"
BATCH = b"".join(b"%06d " % i + b"x" * 200 + b"\n" for i in range(20_000))  # ~4 MB: far beyond both pipes


def test_a_batch_larger_than_both_pipes_is_sent_while_the_answers_are_read():
    child = _child(ECHO)
    try:
        pipe = LinePipe(child.stdin.fileno(), child.stdout.fileno(), max_line=1 << 20)
        pipe.send(BATCH, time.monotonic() + 30)
        lines = [pipe.line(time.monotonic() + 30) for _ in range(20_000)]
        assert b"".join(lines) == BATCH
    finally:
        child.kill()
        child.wait()


def test_the_same_batch_written_blocking_deadlocks_against_the_echo():
    """The negative control: a plain blocking write of the batch, nobody reading, never finishes (the echo is
    blocked on its full stdout, so it stops reading its stdin)."""
    child = _child(ECHO)
    done = threading.Event()

    def write() -> None:
        try:
            child.stdin.write(BATCH)
        except OSError:
            pass
        done.set()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        assert not done.wait(2.0)
    finally:
        child.kill()
        child.wait()
        writer.join(5.0)


def test_a_line_without_its_end_past_the_bound_is_too_long():
    child = _child("import sys; sys.stdout.write('y' * 5000); sys.stdout.flush(); import time; time.sleep(30)")
    try:
        pipe = LinePipe(child.stdin.fileno(), child.stdout.fileno(), max_line=1000)
        with pytest.raises(LineTooLong):
            pipe.line(time.monotonic() + 20)
    finally:
        child.kill()
        child.wait()


def test_the_last_line_may_lack_its_newline_then_the_stream_is_closed():
    child = _child("import sys; sys.stdout.write('first\\nlast')")
    try:
        pipe = LinePipe(child.stdin.fileno(), child.stdout.fileno(), max_line=1000)
        deadline = time.monotonic() + 20
        assert pipe.line(deadline) == b"first\n"
        assert pipe.line(deadline) == b"last"
        with pytest.raises(PipeClosed):
            pipe.line(deadline)
    finally:
        child.kill()
        child.wait()


def test_a_silent_child_times_out_at_the_deadline():
    child = _child("import time; time.sleep(30)")
    try:
        pipe = LinePipe(child.stdin.fileno(), child.stdout.fileno(), max_line=1000)
        began = time.monotonic()
        with pytest.raises(PipeTimeout):
            pipe.line(began + 0.3)
        assert 0.25 <= time.monotonic() - began < 5
    finally:
        child.kill()
        child.wait()


def test_a_child_that_never_reads_times_the_send_out():
    child = _child("import time; time.sleep(30)")
    try:
        pipe = LinePipe(child.stdin.fileno(), child.stdout.fileno(), max_line=1000)
        with pytest.raises(PipeTimeout):
            pipe.send(BATCH, time.monotonic() + 0.5)
    finally:
        child.kill()
        child.wait()
