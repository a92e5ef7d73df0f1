"""Monitors: the properties checked after every step of a run, by name.

A *monitor* watches one run (a sequence of protocol requests and the runtime's results) and
reports the first :class:`~surfacecheck.core.trace.Violation` of its property. The same monitors serve
the Hypothesis machines (``verify``), the replay of any trace (``replay``), and the concrete
counterexamples of ``prove`` and ``explore``, so a property means one thing everywhere.

A module that defines monitors registers each with :func:`register` under the id of the catalogue property it
checks (:mod:`surfacecheck.core.catalogue`, which holds its section, level and meaning) and the engine whose
evaluator it is; the trace header's ``property`` names the monitor that ``replay`` re-checks.

``observe(step, result, query)``: ``step`` is the request just run, ``result`` the runtime's
answer, and ``query(op, args)`` asks the same runtime a read-only question (``surface``, ``cuts``,
``measure``, ``projection``, ``select_range``) about the state after the step.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

from surfacecheck.core import catalogue
from surfacecheck.core.catalogue import Property
from surfacecheck.core.trace import Step, Violation

Query = Callable[[str, dict], dict]


class Monitor(Protocol):
    name: str

    def observe(self, number: int, step: Step, result: dict[str, Any], query: Query) -> Violation | None:
        """Check the property after step ``number`` (1-based); the violation, or ``None``."""


@dataclass(frozen=True)
class MonitorSpec:
    """A registered monitor: its name (the catalogue id it checks, or an engine-local alias that a trace format
    pins), the catalogue property, the engine it evaluates for (``verify``, ``findings``, ``explore``,
    ``prove``), and a factory making a fresh monitor for one run."""

    name: str
    property: Property
    engine: str
    factory: Callable[[], Monitor]

    @property
    def section(self) -> str:
        return self.property.section

    @property
    def level(self) -> str:
        return self.property.level

    @property
    def description(self) -> str:
        return self.property.meaning


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


def register(name: str, *, engine: str, checks: str | None = None):
    """Class or factory decorator: ``@register("projection-equals-recount", engine="verify")``. ``checks`` names
    the catalogue property when ``name`` is an engine-local alias (a monitor whose name a trace format pins); an
    alias may not take another property's id."""
    prop = catalogue.lookup(checks or name)
    if checks is not None and name in catalogue.CATALOGUE:
        raise ValueError(f"monitor {name!r} is a catalogue id; it cannot check {checks!r}")

    def wrap(factory: Callable[[], Monitor]):
        existing = _REGISTRY.get(name)
        if existing is not None and existing.factory is not factory:
            raise ValueError(f"monitor {name!r} registered twice")
        _REGISTRY[name] = MonitorSpec(name, prop, engine, factory)
        if isinstance(factory, type):
            factory.name = name  # the violations it reports carry the registered name
        return factory

    return wrap


def registered_in(module: str) -> tuple[str, ...]:
    """The monitors ``module`` registers, in registration order (a module's own list, never written out)."""
    return tuple(name for name, spec in _REGISTRY.items() if spec.factory.__module__ == module)


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


def evaluators(engine: str) -> dict[str, list[str]]:
    """Catalogue id -> the names of the monitors ``engine`` checks it with."""
    out: dict[str, list[str]] = {}
    for name, spec in all_monitors().items():
        if spec.engine == engine:
            out.setdefault(spec.property.id, []).append(name)
    return out
