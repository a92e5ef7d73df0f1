"""Hooks for seeded bugs: one-idea broken variants of the embedded runtime.

A bug is a subclass of one component that overrides one protected method (the override points are
listed in the package docstring), plugged into an :class:`~.runtime.EmbeddedRuntime` subclass by
:func:`variant`. :func:`seeded_bug` also registers it as the runtime ``embedded:<name>`` so
``verify``, ``replay`` and reproducers can open it by name::

    from surfacecheck.runtime.embedded.bugs import override, seeded_bug
    from surfacecheck.runtime.embedded.pairing import PairingCache

    seeded_bug("cache-not-rebuilt", section="spec 3", idea="the pairing cache is not rebuilt after a replace",
               pairing=override(PairingCache, _needs_rebuild=lambda self, nodes, generation: False))

Nothing here changes the correct runtime: every variant is a new subclass.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .runtime import EmbeddedRuntime

COMPONENTS = {"session": "session_class", "meter": "meter_class", "projection": "projection_class",
              "pairing": "pairing_class", "tracker": "tracker_class", "engine": "engine_class",
              "compaction": "compaction_class", "transaction": "transaction_class",
              "context": "context_class"}
"""Which runtime class attribute each component keyword replaces (``surface`` goes through the session)."""


@dataclass(frozen=True)
class SeededBug:
    """A registered bug: its runtime name, the spec/seed section it breaks, the one idea, the level that finds it."""

    name: str
    section: str
    idea: str
    level: str
    runtime: type[EmbeddedRuntime]

    @property
    def spec(self) -> str:
        return f"embedded:{self.name}"

    def open(self) -> EmbeddedRuntime:
        return self.runtime()


BUGS: dict[str, SeededBug] = {}


def override(base: type, name: str | None = None, **methods: Callable[..., Any]) -> type:
    """A subclass of ``base`` with ``methods`` replaced (flag-patching without touching ``base``)."""
    return type(name or f"Buggy{base.__name__}", (base,), dict(methods))


def variant(name: str, *, surface: type | None = None, runtime_methods: dict | None = None,
            **components: type) -> type[EmbeddedRuntime]:
    """An EmbeddedRuntime subclass named ``embedded:<name>`` using the given component classes.

    ``components`` keys: session, meter, projection, pairing, tracker, engine, compaction, transaction,
    context;
    ``surface`` replaces the session's surface manager; ``runtime_methods`` overrides runtime methods."""
    unknown = set(components) - set(COMPONENTS)
    if unknown:
        raise TypeError(f"unknown component(s) {sorted(unknown)}; expected {sorted(COMPONENTS)} or surface")
    attrs: dict[str, Any] = {"name": f"embedded:{name}", **(runtime_methods or {})}
    for key, cls in components.items():
        attrs[COMPONENTS[key]] = cls
    if surface is not None:
        base = components.get("session", EmbeddedRuntime.session_class)
        attrs["session_class"] = type(f"{base.__name__}With{surface.__name__}", (base,), {"surface_class": surface})
    return type(f"Embedded_{name.replace('-', '_')}", (EmbeddedRuntime,), attrs)


def seeded_bug(name: str, *, section: str, idea: str, level: str = "log", register: bool = True,
               **parts: Any) -> SeededBug:
    """Define (and by default register as ``embedded:<name>``) a one-idea bug; ``parts`` as for :func:`variant`."""
    bug = SeededBug(name, section, idea, level, variant(name, **parts))
    BUGS[name] = bug
    if register:
        from ..select import register_variant

        register_variant(bug.spec, bug.runtime)
    return bug
