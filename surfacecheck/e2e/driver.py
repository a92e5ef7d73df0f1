"""Drive one scripted session through the installed dsh SDK (a standalone child process).

Run as ``<python> driver.py ARGS.json``: it imports nothing from surfacecheck, so any venv's python with any
SDK version can run it. ARGS.json::

    {"sdk_kwargs": {...DeepSeekHarness keyword arguments...}, "session_id": "...",
     "prompts": ["...", ...], "compact_after": [bool per turn], "control_url": "http://127.0.0.1:P/...",
     "result_path": "...", "compact_wait_seconds": 60}

One process, one ``DeepSeekHarness`` and one session take every turn (``Session.run`` per prompt): this
release refuses to resume a session in a new process (id collision). Before each turn it announces the turn
to the scripted server (``POST control_url {"turn": i}``). After a turn whose reply carries the compact
marker, the test plugin runs the shipped ``/compact``; the driver waits for its ``command/done`` before the
next prompt (a prompt that arrived first would make /compact ``busy``).

Exit 0 when every turn ran; 10 when the SDK cannot be imported; anything else is a failure whose reason
is in ``result_path`` (``"error"``) and on stderr.
"""
import json
import queue
import sys
import time
import traceback
import urllib.request

EXIT_NO_SDK = 10
DEFAULT_MARKER = "[[surfacecheck:compact]]"  # server.COMPACT_MARKER (no surfacecheck import here)


def announce(url, turn):
    request = urllib.request.Request(url, data=json.dumps({"turn": turn}).encode(), method="POST",
                                     headers={"content-type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
    with opener.open(request, timeout=10) as response:
        response.read()


def write(path, doc):
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(doc, handle)


def main(argv):
    with open(argv[1], encoding="utf-8") as handle:
        args = json.load(handle)
    result = {"turns": [], "error": None, "sdk_version": None, "phase": "starting"}
    try:
        import deepseek_harness
        from deepseek_harness import DeepSeekHarness
    except ImportError as exc:
        print(f"deepseek_harness not importable: {exc}", file=sys.stderr)
        result["error"] = f"not-installed: {exc}"
        write(args["result_path"], result)
        return EXIT_NO_SDK
    try:
        from importlib.metadata import version
        result["sdk_version"] = version("deepseek-harness-sdk")
    except Exception:  # noqa: BLE001 - a version is informative only
        result["sdk_version"] = getattr(deepseek_harness, "__version__", None)
    if args.get("base_url_file"):  # isolated run: the scripted server starts beside us in the namespace
        base_url = wait_for_file(args["base_url_file"], 30)
        args["sdk_kwargs"]["base_url"] = base_url
        args["control_url"] = base_url + "/__surfacecheck__/turn"
    harness = DeepSeekHarness(**args["sdk_kwargs"])
    try:
        session = harness.start_session(args["session_id"])
        for turn, prompt in enumerate(args["prompts"]):
            result["phase"] = f"turn {turn}"
            write(args["result_path"], result)
            announce(args["control_url"], turn)
            watch = harness.client.subscribe_session_notifications(session.id)
            started = time.monotonic()
            try:
                run = session.run(prompt)
                record = {"turn": turn, "finish_reason": run.finish_reason,
                          "final_response": run.final_response, "seconds": round(time.monotonic() - started, 3)}
                if args.get("compact_after", [])[turn:turn + 1] == [True]:
                    if (args.get("marker") or DEFAULT_MARKER) in (run.final_response or ""):
                        record["compact"] = wait_command_done(watch, args.get("compact_wait_seconds", 60))
                    else:  # the turn did not end on the marked reply (e.g. it failed): /compact never runs
                        record["compact"] = None
            finally:
                watch.close()
            result["turns"].append(record)
            write(args["result_path"], result)
    except BaseException as exc:  # noqa: BLE001 - report every failure to the parent
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["runtime_exit"] = runtime_exit(harness)
        report_failure(args["result_path"], exc)
        return 1
    finally:
        result["phase"] = "closing"
        write(args["result_path"], result)
        proc = getattr(harness.client, "_proc", None)
        try:
            harness.close()
        except Exception as exc:  # noqa: BLE001
            report_failure(args["result_path"], exc)
        result["runtime_stderr"] = list(getattr(harness.client, "_stderr_lines", []))
        result["closing_exit"] = getattr(proc, "returncode", None)  # the runtime's status after the shutdown
        result["phase"] = "closed"
        write(args["result_path"], result)
    return 0


def report_failure(result_path, exc):
    """One line on stderr (the parent quotes its stderr tail); the traceback beside the result, for a kept run dir."""
    print(f"driver: {type(exc).__name__}: {exc}", file=sys.stderr)
    with open(result_path + ".traceback.txt", "a", encoding="utf-8") as handle:
        traceback.print_exception(exc, file=handle)


def runtime_exit(harness):
    """The runtime executable's exit status if it has died (negative: killed by that signal), else None."""
    proc = getattr(harness.client, "_proc", None)
    if proc is None:
        return None
    try:
        return proc.wait(timeout=2)
    except Exception:  # noqa: BLE001 - still running: the failure was elsewhere
        return None


def wait_for_file(path, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read().strip()
            if text:
                return text
        except OSError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"the scripted server did not start within {seconds} s")


def wait_command_done(watch, seconds):
    """Wait for the plugin's /compact lifecycle (``command/done``) on the session's notifications."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            note = watch._notifications.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        if isinstance(note, BaseException):
            raise note
        event = note.payload.get("event") if note.method == "session.event" else None
        if isinstance(event, dict) and event.get("type") == "command/done":
            return event.get("data")
    raise TimeoutError(f"/compact did not finish within {seconds} s after the turn went idle")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
