"""Driving a conversation runtime through a script of requests and recording the :class:`.Session` the promises
read: ``open`` is trace step 0, each later request its own step (1, 2, ...)."""
from __future__ import annotations

from collections.abc import Iterable

from surfacecheck.core.protocol import Runtime

from .session import Exchange, Session


def record(runtime: Runtime, open_args: dict, requests: Iterable[tuple[str, dict]],
           provider: str = "anthropic") -> Session:
    """Open a session on ``runtime`` with ``open_args``, run each ``(op, args)`` and record every answer. A protocol
    error (an in-process runtime's ``ProtocolError``) propagates: a script the runtime refuses records nothing."""
    opened = runtime.call("open", open_args)
    session = Session(runtime=runtime.name, settings=dict(opened.get("settings") or {}),
                      trigger=opened.get("trigger"), system=open_args.get("system"),
                      initial=tuple(open_args.get("history") or ()), provider=provider)
    for number, (op, args) in enumerate(requests, start=1):
        session = session.then(Exchange(number, op, dict(args), runtime.call(op, args)))
    return session
