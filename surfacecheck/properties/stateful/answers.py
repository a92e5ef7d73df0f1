"""The runtime's answers to one lockstep step: the step's own request, then the read-only state queries
(spec 2.1 surface, spec 3 cuts, spec 4.3 measure, spec 5.1/5.2 projection, spec 1.1 events), in the order
the lockstep compares them.

Over a pipe (a :class:`~surfacecheck.runtime.client.ProcessRuntime`, e.g. ``--runtime dsh``) every request is
one round trip; the queries are read-only, so they are sent together with the step (``call_many``: one write,
the answers read in order) instead of one request waiting for the last answer. The lockstep still reads the
answers one at a time and stops at the first divergence, so it reports what the one-by-one calls reported.
A runtime without ``call_many`` (in process) is asked on demand, one request at a time.
"""
from __future__ import annotations

from typing import Any, Callable

from surfacecheck.core.protocol import ProtocolError, Runtime, RuntimeUnavailable

Request = tuple[str, dict]


def as_result(answer: Any) -> dict:
    """A ``call_many`` entry as :func:`surfacecheck.properties.stateful.lockstep.call_runtime` would have returned it: a
    protocol error becomes ``{"protocol_error": ...}``, a lost runtime is raised (inconclusive), never hidden."""
    if isinstance(answer, RuntimeUnavailable):
        raise answer
    if isinstance(answer, ProtocolError):
        return {"protocol_error": {"type": answer.type}}
    if not isinstance(answer, dict):
        return {"__crash__": f"result is not an object: {answer!r}"}
    return answer


class Answers:
    """``answers(i)`` is the runtime's answer to ``requests[i]``: all sent at once when the runtime pipelines
    (``call_many``), else each asked the first time it is needed (``call``, the old order)."""

    def __init__(self, runtime: Runtime, requests: list[Request], call: Callable[[Runtime, str, dict], dict],
                 many: Callable[[list[Request]], list] | None = None):
        """``many``: the runtime's ``call_many`` when its requests are to be pipelined (``None``: one at a time)."""
        self._requests = requests
        self._batch = many(requests) if many is not None else None
        self._runtime, self._call = runtime, call
        self._asked: dict[int, dict] = {}

    def __call__(self, index: int) -> dict:
        if self._batch is not None:
            return as_result(self._batch[index])
        if index not in self._asked:
            op, args = self._requests[index]
            self._asked[index] = self._call(self._runtime, op, args)
        return self._asked[index]
