"""Run one conversation script through a real dsh release, hermetically (contract ``run_script``).

Every release in :mod:`.release` runs through this one pipeline; the release descriptor only chooses the
interpreter, the SDK arguments, the wire of the scripted server and the log's shape.

Per run, under one run dir: a fresh ``home/`` (HOME: the executable unpacks native add-ons under
``~/.cache/pkg``), ``dsh-home/`` (DSH_HOME: the anonymous id), ``tmp/`` (TMPDIR), ``workspace/`` (cwd of the
agent and its bash tool) and ``sessions/`` (the session root); ``cordis.json`` (see :mod:`.config`),
``driver-args.json`` (0.2.x: ``patch.yml`` instead of the cordis file), then the collected ``session.jsonl``, ``requests.jsonl`` (the server's record) and
``runtime-stderr.txt`` (the runtime's logger records, copied to stderr by the test plugin: ``RunResult.runtime_log``).
The SDK runs in a child process (:mod:`.driver`, run as ``<python> driver.py ARGS``) in its own process
group; a wall-clock timeout kills the whole group, runtime executable included. Proxies are cleared
(``NO_PROXY=*``), telemetry stays off (no telemetry row; ``DSH_TELEMETRY_MODE=DISABLED``,
``OTEL_SDK_DISABLED=true``), and the model endpoint is the scripted server on 127.0.0.1.

``isolate_network=True`` runs the driver inside ``unshare -rn`` (a user + network namespace whose only
interface is ``lo``) together with its own scripted server (``python -m surfacecheck.e2e.server``): nothing
can leave loopback because nothing else exists. ``trace_connect=True`` records every ``connect()`` of the
driver, the runtime and its tools with ``strace -f`` into ``connect.log`` (``RunResult.connects``).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from surfacecheck.e2e import config as cordis
from surfacecheck.e2e.release import DEFAULT as DEFAULT_RELEASE, Layout, NoInterpreter, Release, release as release_for
from surfacecheck.e2e.server import COMPACT_MARKER, CONTROL_PATH, ScriptedServer, script_json
from surfacecheck.e2e.wire_anthropic import AnthropicScriptedServer

DRIVER = Path(__file__).resolve().parent / "driver.py"
INSTALL_HINT = "pip install -e '.[dsh]'"
EXIT_NO_SDK = 10
DEFAULT_TIMEOUT = 120.0
DEFAULT_STALL = 30.0
STDERR_TAIL = 40


class RuntimeNotInstalled(RuntimeError):
    """The dsh SDK (and its runtime executable) cannot be imported by the chosen python: exit 3."""


class NoPython(RuntimeNotInstalled, NoInterpreter):
    """The release's interpreter is named by an environment variable that is unset (the CLI exits 2)."""


class RuntimeFailed(RuntimeError):
    """The runtime could not complete the script (crash, timeout, server stopped answering): exit 3."""


@dataclass
class RunResult:
    """What one real run left behind (contract fields first)."""
    log_path: Path
    events: list[dict]
    requests: list[dict]
    stderr_tail: str
    seconds: float
    run_dir: Path
    version: str | None
    turns: list[dict] = field(default_factory=list)
    server_errors: list[str] = field(default_factory=list)
    connects: list[str] | None = None
    isolated: bool = False
    runtime_log: list[str] = field(default_factory=list)
    header: dict | None = None  # the log's header row, for a release whose log has one (0.2.x)
    release: str = DEFAULT_RELEASE.name
    headroom_tokens: int | None = None
    _discard: Any = field(default=None, repr=False, compare=False)

    @property
    def log_name(self) -> str:
        """The file name the runtime gave its session log (the copy in the run dir keeps it)."""
        return self.log_path.name

    def discard(self) -> None:
        """Delete a temporary run dir now (it goes anyway when the result is collected or at exit)."""
        if self._discard is not None:
            self._discard()


def run_script(script: Any, *, runtime: str = "0.1.1rc1", keep_dir: str | Path | None = None,
               timeout: float = DEFAULT_TIMEOUT, python: str | None = None, isolate_network: bool = False,
               trace_connect: bool = False, server: ScriptedServer | None = None,
               on_spawn: Callable[[subprocess.Popen], None] | None = None,
               sdk_kwargs: dict | None = None, stall_timeout: float = DEFAULT_STALL,
               release: Release | str | None = None, headroom_tokens: int | None = None) -> RunResult:
    """Run ``script`` (dict or ``Script``) on a dsh release; raise RuntimeNotInstalled / RuntimeFailed.

    ``release`` (a :class:`Release` or its name) chooses how the SDK is driven; without it, ``runtime`` (the SDK
    version the caller expects) chooses it. ``python`` is the interpreter whose venv holds that SDK (default: the
    release's, see :meth:`Release.interpreter`; unset -> :class:`NoPython`); the version actually installed is
    ``RunResult.version``. ``headroom_tokens`` sets 0.2.x's pressure headroom (None: its default). ``keep_dir``: the run dir is created there and kept; otherwise a
    temporary dir whose homes, workspace and session root are deleted at once, and the rest (``session.jsonl``,
    ``requests.jsonl``, ``script.json``) when the result is collected, at exit, or on ``discard()``. ``server``: a
    prepared :class:`ScriptedServer` (tests use it for ``stop_answering``); ``on_spawn`` is called with the
    driver process once it started (tests kill it). ``sdk_kwargs`` are merged over the
    ``DeepSeekHarness(...)`` arguments the release builds (a ``None`` value removes one).
    ``timeout`` bounds the whole run; ``stall_timeout`` bounds the time without progress (no model request
    recorded, no turn finished): a hung runtime or a silent server fails after it, not after ``timeout``.
    """
    doc = script_json(script)
    chosen = release if isinstance(release, Release) else release_for(release or runtime)
    try:
        python = chosen.interpreter(python)
    except NoInterpreter as exc:
        raise NoPython(str(exc)) from None
    if chosen.wire == "openai-chat":
        cordis.resolve(doc.get("config"))  # refuse a config the runtime would hang on, before starting anything
    if isolate_network and server is not None:
        raise ValueError("isolate_network runs its own server inside the namespace; do not pass server=")
    if isolate_network and chosen.wire != "openai-chat":
        raise ValueError(f"isolate_network starts the OpenAI-wire server; dsh {chosen.name} speaks {chosen.wire}")
    if keep_dir is not None:
        run_dir = Path(keep_dir).resolve()
        run_dir.mkdir(parents=True, exist_ok=True)
    else:
        run_dir = Path(tempfile.mkdtemp(prefix="surfacecheck-e2e-"))
    try:
        result = _run(doc, run_dir, timeout=timeout, python=python, isolate=isolate_network,
                      trace=trace_connect, server=server, on_spawn=on_spawn, sdk_kwargs=sdk_kwargs,
                      stall_timeout=stall_timeout, release=chosen, headroom_tokens=headroom_tokens)
    except BaseException:
        if keep_dir is None:
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    if keep_dir is None:  # the homes go now; the log and record stay readable while the result lives
        for name in ("home", "dsh-home", "tmp", "workspace", "sessions"):
            shutil.rmtree(run_dir / name, ignore_errors=True)
        result._discard = weakref.finalize(result, shutil.rmtree, str(run_dir), True)
    return result


def _run(doc: dict, run_dir: Path, *, timeout: float, python: str, isolate: bool, trace: bool,
         server: ScriptedServer | None, on_spawn: Callable | None, sdk_kwargs: dict | None,
         stall_timeout: float, release: Release, headroom_tokens: int | None) -> RunResult:
    dirs = {name: run_dir / name for name in ("home", "dsh-home", "tmp", "workspace")}
    dirs["sessions"] = run_dir / release.session_root
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    turns = doc.get("turns", [])
    result_path = run_dir / "driver-result.json"
    session_id = f"surfacecheck-{uuid.uuid4().hex[:12]}"
    layout = Layout(run_dir=run_dir, dirs=dirs)
    runtime_env = _runtime_env(dirs, release)
    args = {
        "sdk_kwargs": {**release.driver(doc, layout, {"headroom_tokens": headroom_tokens, "timeout": timeout}),
                       "env": runtime_env},
        "session_id": session_id, "prompts": [t.get("prompt", "") for t in turns],
        "compact_after": [bool(t.get("compact")) for t in turns], "result_path": str(result_path),
        "compact_wait_seconds": max(2.0, stall_timeout / 2), "marker": COMPACT_MARKER,
    }
    for key, value in (sdk_kwargs or {}).items():  # a caller's own arguments over the release's
        if value is None:
            args["sdk_kwargs"].pop(key, None)
        else:
            args["sdk_kwargs"][key] = value
    (run_dir / "script.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    own_server = server is None and not isolate
    if isolate:
        args["base_url_file"] = str(run_dir / "server-url")
        args["record_path"] = str(run_dir / "requests.jsonl")
    else:
        server = server or _server_class(release)(doc)
        if own_server or server._httpd is None:
            server.start()
        args["sdk_kwargs"]["base_url"] = server.base_url
        args["control_url"] = server.base_url + CONTROL_PATH
    args_path = run_dir / "driver-args.json"
    args_path.write_text(json.dumps(args, indent=1), encoding="utf-8")
    command = [python, str(DRIVER), str(args_path)]
    if isolate:
        command = _isolated(command, run_dir, python)
    if trace:
        if shutil.which("strace") is None:
            raise RuntimeFailed("trace_connect needs strace, which is not installed")
        command = ["strace", "-f", "-qq", "-e", "trace=connect", "-o", str(run_dir / "connect.log"), *command]
    started = time.monotonic()

    def progress() -> tuple:
        record = run_dir / "requests.jsonl"
        count = len(server.requests) if server is not None else (record.stat().st_size if record.exists() else 0)
        return count, result_path.stat().st_mtime_ns if result_path.exists() else 0

    try:
        how, code, stderr = _spawn(command, run_dir, timeout, stall_timeout, on_spawn, dirs["workspace"],
                                   _child_env(runtime_env, own_venv=release.python is not None), progress)
    finally:
        if own_server and server is not None:
            server.stop()
    seconds = time.monotonic() - started
    tail = "\n".join(stderr.strip().splitlines()[-STDERR_TAIL:])
    outcome = _read_json(result_path) or {}
    runtime_log = [str(line) for line in outcome.get("runtime_stderr") or []]
    (run_dir / "runtime-stderr.txt").write_text("".join(line + "\n" for line in runtime_log), encoding="utf-8")
    if code == EXIT_NO_SDK:
        raise RuntimeNotInstalled(f"the dsh SDK is not importable by {python}: {INSTALL_HINT} ({outcome.get('error')})")
    requests = _requests(server, run_dir, isolate)
    (run_dir / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requests), encoding="utf-8")
    server_errors = list(server.errors) if server is not None else [
        e for r in requests for e in ([r.get("error")] if r.get("error") else [])]
    if how != "exited":
        silent = sum(1 for r in requests if r.get("status") is None)
        why = f"; the scripted server left {silent} request(s) unanswered" if silent else ""
        what = (f"runtime timed out after {timeout:g} s" if how == "timeout"
                else f"runtime stalled: no model request and no finished turn for {stall_timeout:g} s")
        what += f" in phase {outcome.get('phase', 'starting')!r}"
        raise RuntimeFailed(f"{what} (process group killed; {len(requests)} model requests recorded{why})"
                            f"{_tail(tail)}")
    if code != 0:
        why = outcome.get("error") or (f"the driver was killed by signal {-code}" if code < 0
                                       else f"the driver exited with status {code}")
        died = outcome.get("runtime_exit")
        if isinstance(died, int) and died < 0:
            why = f"the runtime executable was killed by signal {-died} ({why.splitlines()[0]})"
        elif isinstance(died, int) and died > 0:
            why = f"the runtime executable exited with status {died} ({why.splitlines()[0]})"
        raise RuntimeFailed(f"runtime failed: {why.strip()}{_server_note(server_errors)}{_tail(tail)}")
    closing = outcome.get("closing_exit")
    if isinstance(closing, int) and closing != 0:  # every turn ran, but the runtime died or hung while shutting down
        how = f"was killed by signal {-closing}" if closing < 0 else f"exited with status {closing}"
        raise RuntimeFailed(f"runtime failed while shutting down: after the last turn the runtime executable {how} "
                            f"(its log may be unfinished){_server_note(server_errors)}{_tail(tail)}")
    log = _find_log(dirs["sessions"], session_id)
    if log is None:
        raise RuntimeFailed(f"runtime finished but wrote no session.jsonl under {dirs['sessions']}{_tail(tail)}")
    log_path = run_dir / log.name
    if log != log_path:
        shutil.copyfile(log, log_path)
    events = _read_events(log_path)
    header = events.pop(0) if release.log_header and events and events[0].get("type") == "session" else None
    connects = _connects(run_dir / "connect.log") if trace else None
    return RunResult(log_path=log_path, events=events, requests=requests, stderr_tail=tail, seconds=seconds,
                     run_dir=run_dir, version=outcome.get("sdk_version"), turns=outcome.get("turns", []),
                     server_errors=server_errors, connects=connects, isolated=isolate, runtime_log=runtime_log,
                     header=header, release=release.name, headroom_tokens=headroom_tokens)


def _server_class(release: Release) -> type:
    """The scripted model endpoint speaking ``release``'s wire (looked up per run: tests replace it)."""
    return ScriptedServer if release.wire == "openai-chat" else AnthropicScriptedServer


def _runtime_env(dirs: dict[str, Path], release: Release = DEFAULT_RELEASE) -> dict[str, str]:
    """Environment overrides for the runtime (the SDK copies the parent's environment, then these)."""
    return {"HOME": str(dirs["home"]), "DSH_HOME": str(dirs["dsh-home"]), "TMPDIR": str(dirs["tmp"]),
            "DSH_TELEMETRY_MODE": "DISABLED", "OTEL_SDK_DISABLED": "true", "DO_NOT_TRACK": "1",
            "NO_PROXY": "*", "no_proxy": "*", **dict(release.runtime_env)}


def _child_env(runtime_env: dict[str, str], *, own_venv: bool) -> dict[str, str]:
    """The driver's environment: no proxy, no dsh or coverage setting of ours; a release in its own venv also
    loses this venv's markers, so its interpreter imports only its own SDK."""
    dropped = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME") if own_venv else ()
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "ftp_proxy") and k not in dropped
           and not k.startswith(("DEEPSEEK_", "DSH_")) and k != "NODE_V8_COVERAGE"}  # check's coverage is dsh's npm code
    env.update(runtime_env)
    return env


def _spawn(command: list[str], run_dir: Path, timeout: float, stall: float, on_spawn: Callable | None,
           cwd: Path, env: dict[str, str], progress: Callable[[], Any]) -> tuple[str, int | None, str]:
    """Run the driver in its own process group; ``(how, exit code, stderr)``, how in exited|timeout|stalled.

    ``progress()`` returns a value that changes whenever the run moves on (a model request, a finished
    turn); when it has not changed for ``stall`` seconds the run is declared stalled and killed.
    """
    stderr_path = run_dir / "driver-stderr.txt"
    how, code = "exited", None
    with open(stderr_path, "w", encoding="utf-8") as stderr:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                                cwd=str(cwd), env=env, start_new_session=True)
        if on_spawn is not None:
            threading.Thread(target=on_spawn, args=(proc,), daemon=True).start()
        started = last_move = time.monotonic()
        seen = progress()
        try:
            while True:
                try:
                    code = proc.wait(timeout=0.1)
                    break
                except subprocess.TimeoutExpired:
                    pass
                now, state = time.monotonic(), progress()
                if state != seen:
                    seen, last_move = state, now
                if now - started >= timeout:
                    how = "timeout"
                    break
                if now - last_move >= stall:
                    how = "stalled"
                    break
        finally:
            kill_tree(proc.pid)
            if proc.poll() is None:
                proc.wait(timeout=10)
    return how, code, stderr_path.read_text(encoding="utf-8", errors="replace")


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from /proc), children first."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL the process group of ``pid`` and any descendant that left it (the runtime's tool groups)."""
    stray = descendants(pid)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for child in stray:
        try:
            os.kill(child, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _isolated(command: list[str], run_dir: Path, python: str) -> list[str]:
    """Wrap ``command`` in a user+net namespace holding only ``lo`` and the scripted server."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        raise RuntimeFailed("isolate_network needs unshare and ip (util-linux, iproute2)")
    server = [sys.executable, "-m", "surfacecheck.e2e.server", str(run_dir / "script.json"),
              "--url-file", str(run_dir / "server-url"), "--record", str(run_dir / "requests.jsonl")]
    inner = ("ip link set lo up || exit 97; " + " ".join(map(_quote, server)) + " & "
             + " ".join(map(_quote, command)) + "; status=$?; kill -KILL $! 2>/dev/null; wait $! 2>/dev/null; exit $status")
    return ["unshare", "-rn", "sh", "-c", inner]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _requests(server: ScriptedServer | None, run_dir: Path, isolate: bool) -> list[dict]:
    if server is not None:
        return [dict(r) for r in server.requests]
    path = run_dir / "requests.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _find_log(root: Path, session_id: str) -> Path | None:
    """The session log: ``<root>/--<cwd with / as ->--/<sessionId>/session.jsonl`` (0.2.x: ``session.v4.jsonl``),
    found by glob."""
    logs = sorted(root.rglob("session*.jsonl"))
    exact = [p for p in logs if p.parent.name == session_id]
    return (exact or logs or [None])[0]


_SOCKADDR = re.compile(r'connect\(\d+, \{sa_family=(AF_\w+), (.*?)\}, \d+\)')


def _connects(path: Path) -> list[str]:
    """Every distinct ``connect()`` target in an ``strace -e trace=connect`` log, as ``family address``."""
    if not path.exists():
        return []
    found = set()
    for match in _SOCKADDR.finditer(path.read_text(errors="replace")):
        family, rest = match.groups()
        port = re.search(r'htons\((\d+)\)', rest)
        host = re.search(r'inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)"', rest)
        unix = re.search(r'sun_path=(?:@)?"([^"]*)"', rest)
        if host:
            found.add(f"{family} {host.group(1) or host.group(2)}:{port.group(1) if port else '?'}")
        elif unix:
            found.add(f"{family} {unix.group(1)}")
        else:
            found.add(f"{family} {rest}")
    return sorted(found)


def outside_loopback(connects: list[str]) -> list[str]:
    """The recorded connects that would leave the machine: any IP target other than 127.0.0.0/8 or ::1."""
    leaks = []
    for target in connects:
        family, _, address = target.partition(" ")
        if family == "AF_INET" and not address.startswith("127."):
            leaks.append(target)
        elif family == "AF_INET6" and not address.rsplit(":", 1)[0] in ("::1", "::ffff:127.0.0.1"):
            leaks.append(target)
        elif family not in ("AF_INET", "AF_INET6", "AF_UNIX", "AF_LOCAL", "AF_NETLINK"):
            leaks.append(target)
    return leaks


def _read_events(path: Path) -> list[dict]:
    """The log's records, read as dsh's scanner would (spec 1.7); a log the runtime left unfinished or corrupt is
    a failed run (inconclusive), named by file and line: a torn final record (the runtime exited without finishing
    it: dsh ignores it, so the run's last event is lost), a line that is not JSON, bytes that are not UTF-8."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise RuntimeFailed(f"{path}:{line}: the runtime's session log is not UTF-8 ({exc.reason})") from None
    lines = text.split("\n")
    if lines[-1]:
        raise RuntimeFailed(f"{path}:{len(lines)}: the runtime's session log ends in a torn record (no newline): "
                            "the runtime did not finish writing it")
    events = []
    for number, line in enumerate(lines[:-1], start=1):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except ValueError as exc:
            raise RuntimeFailed(f"{path}:{number}: the runtime's session log holds a line that is not JSON "
                                f"({getattr(exc, 'msg', exc)})") from None
    return events


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _tail(tail: str) -> str:
    return f"\nstderr tail:\n{tail}" if tail else ""


def _server_note(errors: list[str]) -> str:
    return f" (scripted server: {'; '.join(errors[:3])})" if errors else ""
