"""Monitors: the properties checked after every step of a run, by name.

A *monitor* watches one run (a sequence of protocol requests and the runtime's results) and
reports the first :class:`~surfacecheck.core.trace.Violation` of its property. The same monitors serve
the Hypothesis machines (``verify``), the replay of any trace (``replay``), and the concrete
counterexamples of ``prove`` and ``explore``, so a property means one thing everywhere.

A module that defines monitors registers each under a stable name with :func:`register`; the
trace header's ``property`` names the monitor that ``replay`` re-checks.

``observe(step, result, query)``: ``step`` is the request just run, ``result`` the runtime's
answer, and ``query(op, args)`` asks the same runtime a read-only question (``surface``, ``cuts``,
``measure``, ``projection``, ``select_range``) about the state after the step.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

from surfacecheck.core.trace import Step, Violation

Query = Callable[[str, dict], dict]


class Monitor(Protocol):
    name: str

    def observe(self, number: int, step: Step, result: dict[str, Any], query: Query) -> Violation | None:
        """Check the property after step ``number`` (1-based); the violation, or ``None``."""


@dataclass(frozen=True)
class MonitorSpec:
    """A registered property: its name, the spec/seed section it states, the lowest level it
    needs, a one-line description, and a factory making a fresh monitor for one run."""

    name: str
    section: str
    level: str
    description: str
    factory: Callable[[], Monitor]


_REGISTRY: dict[str, MonitorSpec] = {}
_PROVIDERS = (
    # modules that register monitors when imported (lazy, so importing this module stays cheap)
    "surfacecheck.properties.invariants",
    "surfacecheck.properties.proofs.monitors",
    "surfacecheck.explore.monitors",
    "surfacecheck.properties.promises",
    "surfacecheck.properties.promises_context",
    "surfacecheck.properties.promises_measure",
)


def register(name: str, *, section: str, level: str, description: str):
    """Class or factory decorator: ``@register("projection-equals-recount", section="5.2", ...)``."""

    def wrap(factory: Callable[[], Monitor]):
        existing = _REGISTRY.get(name)
        if existing is not None and existing.factory is not factory:
            raise ValueError(f"monitor {name!r} registered twice")
        _REGISTRY[name] = MonitorSpec(name, section, level, description, factory)
        return factory

    return wrap


def _load_providers() -> None:
    import importlib

    for module in _PROVIDERS:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module.startswith(exc.name):
                raise


def lookup(name: str) -> MonitorSpec:
    """The registered monitor ``name``; ``KeyError`` with the known names otherwise."""
    if name not in _REGISTRY:
        _load_providers()
    if name not in _REGISTRY:
        raise KeyError(f"unknown property {name!r}; known: {', '.join(sorted(_REGISTRY)) or 'none'}")
    return _REGISTRY[name]


def all_monitors() -> dict[str, MonitorSpec]:
    _load_providers()
    return dict(_REGISTRY)
