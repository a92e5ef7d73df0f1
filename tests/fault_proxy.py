"""A fault-injecting runtime for the robustness tests (issue 18): it fronts a good runtime and misbehaves once.

    python tests/fault_proxy.py FAULT K STATUS_FILE -- COMMAND...

runs ``COMMAND`` (a runtime serving the protocol on stdin/stdout, e.g. ``python -m surfacecheck.serve
embedded``) and relays requests and responses line by line; at the K-th request (1 = ``hello``) it injects
FAULT instead of (or around) relaying the answer. STATUS_FILE receives ``{"fired": bool, "requests": n}`` as
requests arrive, so a test knows whether the fault happened and whether another request followed it.

Faults (:data:`FAULTS`): ``exit0`` / ``exit7`` (exit before answering), ``hang`` (never answer),
``sigkill`` (kill itself), ``partial`` (half the answer, no newline, exit), ``nonjson`` (a line that is not
JSON), ``wrong-id`` (the answer with another id), ``unasked`` (a response to a request never sent, then the
answer), ``duplicate`` (the answer twice), ``huge`` (a line of 300 MB), ``bad-utf8`` (invalid UTF-8 before
the answer), ``bad-hello`` (hello answered with another protocol string), ``grandchild`` (spawn a sleeper
that keeps stdout open, then exit), and the benign ``stderr-flood`` (50 MB on stderr, then the answer) and
``slow`` (the answer after SLOW seconds): those two must not change the verdict.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

FAULTS = ("exit0", "exit7", "hang", "sigkill", "partial", "nonjson", "wrong-id", "unasked", "duplicate", "huge",
          "bad-utf8", "bad-hello", "grandchild", "stderr-flood", "slow")
BENIGN = ("stderr-flood", "slow")
SLOW = float(os.environ.get("FAULT_PROXY_SLOW", "0.9"))


def main(argv: list[str]) -> int:
    fault, k, status_file, command = argv[0], int(argv[1]), argv[2], argv[argv.index("--") + 1:]
    inner = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    out = sys.stdout.buffer
    seen, fired = 0, False

    def status() -> None:  # atomically: the test may read it while a fault kills us
        with open(status_file + ".tmp", "w", encoding="utf-8") as f:
            json.dump({"fired": fired, "requests": seen}, f)
        os.replace(status_file + ".tmp", status_file)

    status()
    for line in sys.stdin.buffer:
        seen += 1
        if seen == k:
            fired = True
        status()
        inner.stdin.write(line)
        inner.stdin.flush()
        answer = inner.stdout.readline()
        if seen != k:
            out.write(answer)
            out.flush()
            continue
        request = json.loads(line)
        if fault in ("exit0", "exit7"):
            inner.kill()
            os._exit(0 if fault == "exit0" else 7)
        if fault == "hang":
            time.sleep(3600)
        if fault == "sigkill":
            inner.kill()
            os.kill(os.getpid(), signal.SIGKILL)
        if fault == "partial":
            out.write(answer[: len(answer) // 2])
            out.flush()
            inner.kill()
            os._exit(0)
        if fault == "nonjson":
            answer = b"this is not a protocol response\n"
        if fault == "wrong-id":
            response = json.loads(answer)
            response["id"] = request["id"] + 1000
            answer = (json.dumps(response) + "\n").encode()
        if fault == "unasked":
            out.write((json.dumps({"id": 424242, "result": {}}) + "\n").encode())
        if fault == "duplicate":
            answer = answer + answer
        if fault == "huge":
            chunk = b"x" * (1 << 20)
            for _ in range(300):
                out.write(chunk)
            answer = b"\n"
        if fault == "bad-utf8":
            answer = b"\xff\xfe" + answer
        if fault == "bad-hello":
            response = json.loads(answer)
            if isinstance(response.get("result"), dict):
                response["result"]["protocol"] = "surfacecheck-runtime/0"
            answer = (json.dumps(response) + "\n").encode()
        if fault == "grandchild":
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"], stdout=sys.stdout.fileno())
            inner.kill()
            os._exit(0)
        if fault == "stderr-flood":
            chunk = b"e" * 1023 + b"\n"
            for _ in range(50 * 1024):
                sys.stderr.buffer.write(chunk)
            sys.stderr.flush()
        if fault == "slow":
            time.sleep(SLOW)
        out.write(answer)
        out.flush()
    inner.stdin.close()
    inner.wait(timeout=5)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
