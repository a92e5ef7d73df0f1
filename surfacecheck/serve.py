"""Serve any runtime over the protocol on stdin/stdout (``docs/protocol.md``).

``python -m surfacecheck.serve model|embedded|BASE:VARIANT`` reads one JSON request per line,
``{"id": n, "op": ..., "args": {...}}``, and writes one response per line, ``{"id": n, "result":
{...}}`` or ``{"id": n, "error": {"type", "message"}}`` for a protocol-level error. ``hello`` is the
handshake; ``bench`` is delegated to :mod:`surfacecheck.bench.inprocess` when that module exists.
A spec refusal is a normal ``result`` carrying ``error`` (with ``rule`` and ``seq``). End of input
ends the server with status 0. Diagnostics go to stderr only.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
import traceback
from typing import IO, Any

from surfacecheck.core.protocol import PROTOCOL, ProtocolError, RuntimeUnavailable
from surfacecheck.runtime.select import open_runtime, runtime_problem


def handle(runtime: Any, spec: str, request: Any) -> dict[str, Any]:
    """One request -> one response object (never raises for a request's content)."""
    if not isinstance(request, dict):
        return {"id": None, "error": {"type": "bad-request", "message": "a request must be a JSON object"}}
    rid = request.get("id")
    try:
        if isinstance(rid, bool) or not isinstance(rid, (int, str)) and rid is not None:
            raise ProtocolError("bad-request", "id must be an integer or a string")
        op = request.get("op")
        if not isinstance(op, str):
            raise ProtocolError("bad-request", "op must be a string")
        args = request.get("args", {})
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise ProtocolError("bad-args", "args must be a JSON object")
        if op == "hello":
            result = dict(runtime.hello())
            result.setdefault("protocol", PROTOCOL)
            result["server"] = f"surfacecheck.serve {spec}"
        elif op == "bench":
            result = _bench(spec, args)
        else:
            result = runtime.call(op, args)
        return {"id": rid, "result": result}
    except ProtocolError as exc:
        return {"id": rid, "error": exc.to_json()}
    except RuntimeUnavailable as exc:
        return {"id": rid, "error": {"type": "internal", "message": f"runtime unavailable ({exc.kind}): {exc}"}}
    except Exception as exc:  # a bug in the served runtime: report it, keep serving
        traceback.print_exc(file=sys.stderr)
        return {"id": rid, "error": {"type": "internal", "message": f"{type(exc).__name__}: {exc}"}}


def _bench(spec: str, args: dict) -> dict:
    try:
        module = importlib.import_module("surfacecheck.bench.inprocess")
    except ImportError:
        raise ProtocolError("unsupported", "bench is not available in this server (surfacecheck.bench.inprocess missing)")
    handler = getattr(module, "handle", None)
    if handler is None:
        raise ProtocolError("unsupported", "surfacecheck.bench.inprocess has no handle(runtime, args)")
    return handler(spec, args)


def serve(spec: str, stdin: IO[str], stdout: IO[str]) -> int:
    """The request loop: a line in, a line out, flushed, until end of input."""
    runtime = open_runtime(spec)
    try:
        for line in stdin:
            if not line.strip():
                continue
            try:
                request = json.loads(line)
            except ValueError as exc:
                response = {"id": None, "error": {"type": "bad-request", "message": f"request is not JSON: {exc}"}}
            else:
                response = handle(runtime, spec, request)
            stdout.write(json.dumps(response, separators=(",", ":"), allow_nan=False) + "\n")
            stdout.flush()
    finally:
        runtime.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m surfacecheck.serve",
                                     description="Serve a runtime over the surfacecheck JSON-lines protocol on stdin/stdout.")
    parser.add_argument("runtime", help="model, embedded, or a registered BASE:VARIANT")
    args = parser.parse_args(argv)
    problem = runtime_problem(args.runtime)
    if problem or args.runtime.startswith("cmd:"):
        print(f"surfacecheck.serve: {problem or 'cannot serve a cmd: runtime'}", file=sys.stderr)
        return 2
    try:
        return serve(args.runtime, sys.stdin, sys.stdout)
    except (ValueError, ImportError) as exc:
        print(f"surfacecheck.serve: cannot open runtime {args.runtime!r}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
