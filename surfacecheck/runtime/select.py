"""Open a runtime from its ``--runtime`` spelling.

``model`` — the reference model behind the protocol (:mod:`.model_runtime`);
``embedded`` — the independent embedded runtime (:mod:`.embedded`);
``cmd:COMMAND`` — a child process speaking ``docs/protocol.md`` (:mod:`.client`);
``dsh`` / ``dsh:DIR`` — dsh's own published code from npm, or from the ``node_modules`` folder DIR (:mod:`.dsh`);
``BASE:VARIANT`` — a registered variant (a seeded bug or a negative-control model), see
:func:`register_variant`.
"""
from __future__ import annotations

import importlib
from typing import Callable

from ..core.protocol import Runtime

DEFAULT_TIMEOUT = 10.0
_VARIANTS: dict[str, Callable[[], Runtime]] = {}
_VARIANT_PROVIDERS: list[str] = [  # modules defining negative-control models
    "surfacecheck.explore.variants",
    "surfacecheck.properties.proofs.monitors",
]


def register_variant(spec: str, factory: Callable[[], Runtime]) -> None:
    """Make ``spec`` (``BASE:VARIANT``, e.g. ``model:retry-without-progress``) openable."""
    _VARIANTS[spec] = factory


def add_variant_provider(module: str) -> None:
    """A module that calls :func:`register_variant` when imported (imported on first lookup)."""
    if module not in _VARIANT_PROVIDERS:
        _VARIANT_PROVIDERS.append(module)


def runtime_problem(spec: str) -> str | None:
    """Why ``spec`` is not a runtime spelling (a message), or ``None``."""
    if spec in ("model", "embedded"):
        return None
    if spec.startswith("cmd:"):
        return None if spec[4:].strip() else "runtime 'cmd:' needs a command after the colon, e.g. cmd:./my-runtime"
    from .dsh import is_dsh_spec, spec_problem
    if is_dsh_spec(spec):
        return spec_problem(spec)
    if ":" in spec and spec.split(":", 1)[0] in ("model", "embedded"):
        return None
    return f"unknown runtime {spec!r}: expected model, embedded, dsh, dsh:DIR or cmd:COMMAND"


def open_runtime(spec: str, *, timeout: float = DEFAULT_TIMEOUT) -> Runtime:
    """A fresh runtime for ``spec``; ``ValueError`` for an unknown spelling or variant."""
    problem = runtime_problem(spec)
    if problem:
        raise ValueError(problem)
    if spec == "model":
        return importlib.import_module("surfacecheck.runtime.model_runtime").ModelRuntime()
    if spec == "embedded":
        return importlib.import_module("surfacecheck.runtime.embedded").EmbeddedRuntime()
    if spec.startswith("cmd:"):
        return importlib.import_module("surfacecheck.runtime.client").ProcessRuntime(spec[4:].strip(), timeout=timeout)
    dsh = importlib.import_module("surfacecheck.runtime.dsh")
    if dsh.is_dsh_spec(spec):
        return dsh.open_dsh(spec, timeout)
    if spec not in _VARIANTS:
        for module in list(_VARIANT_PROVIDERS):
            importlib.import_module(module)
    if spec not in _VARIANTS:
        known = ", ".join(sorted(_VARIANTS)) or "none registered"
        raise ValueError(f"unknown runtime variant {spec!r}; known variants: {known}")
    return _VARIANTS[spec]()
