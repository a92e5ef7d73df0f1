"""The client's pipe (surfacecheck/runtime/pipe.py): lines read in the calling thread within a deadline, and
writes that never deadlock against a child blocked on its own full stdout."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import pytest

from surfacecheck.runtime.pipe import LinePipe, LineTooLong, PipeClosed, PipeTimeout


def _child(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)


@contextmanager
def _piped(code: str, max_line: int = 1000):
    """A Python child running ``code``, and a :class:`LinePipe` on its stdin and stdout; killed afterwards."""
    child = _child(code)
    try:
        yield LinePipe(child.stdin.fileno(), child.stdout.fileno(), max_line=max_line)
    finally:
        child.kill()
        child.wait()


ECHO = "import sys\nfor line in sys.stdin.buffer: sys.stdout.buffer.write(line); sys.stdout.buffer.flush()"
BATCH = b"".join(b"%06d " % i + b"x" * 200 + b"\n" for i in range(20_000))  # ~4 MB: far beyond both pipes


def test_a_batch_larger_than_both_pipes_is_sent_while_the_answers_are_read():
    with _piped(ECHO, max_line=1 << 20) as pipe:
        pipe.send(BATCH, time.monotonic() + 30)
        lines = [pipe.line(time.monotonic() + 30) for _ in range(20_000)]
    assert b"".join(lines) == BATCH


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
    with _piped("import sys; sys.stdout.write('y' * 5000); sys.stdout.flush(); import time; time.sleep(30)") as pipe, \
            pytest.raises(LineTooLong):
        pipe.line(time.monotonic() + 20)


def test_the_last_line_may_lack_its_newline_then_the_stream_is_closed():
    with _piped("import sys; sys.stdout.write('first\\nlast')") as pipe:
        deadline = time.monotonic() + 20
        assert pipe.line(deadline) == b"first\n"
        assert pipe.line(deadline) == b"last"
        with pytest.raises(PipeClosed):
            pipe.line(deadline)


def test_a_silent_child_times_out_at_the_deadline():
    with _piped("import time; time.sleep(30)") as pipe:
        began = time.monotonic()
        with pytest.raises(PipeTimeout):
            pipe.line(began + 0.3)
        assert 0.25 <= time.monotonic() - began < 5


def test_a_child_that_never_reads_times_the_send_out():
    with _piped("import time; time.sleep(30)") as pipe, pytest.raises(PipeTimeout):
        pipe.send(BATCH, time.monotonic() + 0.5)


def test_a_child_that_closes_its_stdout_but_never_reads_times_the_send_out_without_spinning():
    """Its stdout's end (a hang-up poll reports at once, for ever) must not turn the wait for room in stdin into a
    busy loop that never sees the deadline."""
    code = "import os, time; os.close(1); time.sleep(30)"
    with _piped(code) as pipe:
        began, cpu = time.monotonic(), time.process_time()
        with pytest.raises(PipeTimeout):
            pipe.send(BATCH, began + 0.5)
        assert time.monotonic() - began < 5
        assert time.process_time() - cpu < 0.3  # waited, did not spin


def test_descriptors_numbered_past_select_s_limit_are_read():
    """``poll``, not ``select``: a long campaign's process may hold a child's pipes at descriptors above 1023."""
    resource = pytest.importorskip("resource")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    high = 1500
    if hard != resource.RLIM_INFINITY and hard <= high + 1:
        pytest.skip(f"the descriptor limit ({hard}) is too low")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, high + 2), hard))
    child = _child(ECHO)
    stdin_fd, stdout_fd = os.dup2(child.stdin.fileno(), high), os.dup2(child.stdout.fileno(), high + 1)
    try:
        pipe = LinePipe(stdin_fd, stdout_fd, max_line=1000)
        pipe.send(b"hello\n", time.monotonic() + 10)
        assert pipe.line(time.monotonic() + 10) == b"hello\n"
    finally:
        os.close(stdin_fd)
        os.close(stdout_fd)
        child.kill()
        child.wait()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
