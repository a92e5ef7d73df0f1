"""Open a runtime from its ``--runtime`` spelling (the spellings and how each opens: :mod:`.registry`).

``model``, ``embedded``, ``dsh``, ``dsh:DIR``, ``cmd:COMMAND``, and ``BASE:VARIANT`` — a registered variant
(a seeded bug or a negative-control model), see :func:`register_variant`.
"""
from __future__ import annotations

from ..core.protocol import Runtime
from .registry import add_variant_provider, register_variant  # noqa: F401 - the providers' entry points
from . import registry

DEFAULT_TIMEOUT = 10.0


def runtime_problem(spec: str) -> str | None:
    """Why ``spec`` is not a runtime spelling (a message), or ``None``."""
    return registry.problem(spec)


def open_runtime(spec: str, *, timeout: float = DEFAULT_TIMEOUT) -> Runtime:
    """A fresh runtime for ``spec``; ``ValueError`` for an unknown spelling or variant."""
    return registry.open_spec(spec, timeout)
