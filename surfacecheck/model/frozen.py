"""Immutable model values that are cheap to make.

The model's state is made of frozen dataclasses: a value never changes once made (seed §2; the explorer and the
memos key on identity because of it). CPython 3.11's generated ``__init__`` of a frozen dataclass stores every
field through ``object.__setattr__`` (it must get past the class's own ``__setattr__``, which refuses), about
0.15 µs a field; the lockstep makes some nine such values a step (an event, its session, the meter state, the
claim steps, ...). :func:`quick_init` gives a frozen dataclass an ``__init__`` with the same signature and defaults
that writes the fields straight into the instance's ``__dict__``: half the cost, the same instance. Assignment
after construction is still refused (``FrozenInstanceError``): only ``__init__`` changes.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, TypeVar

T = TypeVar("T")

QUICK: list[type] = []
"""Every class given a quick ``__init__`` (``tests/test_frozen.py`` checks each against the dataclass's own)."""

_FACTORY = object()  # a parameter's default when the field has a default_factory


def quick_init(cls: type[T]) -> type[T]:
    """Replace ``cls.__init__`` (a frozen dataclass's) with one that writes ``__dict__`` directly. Only the plain
    cases: every field in ``__init__``, no ``__post_init__``, no keyword-only fields or slots; anything else is
    refused here, at import, rather than made subtly wrong. The dataclass's own stays as ``_dataclass_init``."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"quick_init: {cls.__name__} is not a frozen dataclass")
    if hasattr(cls, "__post_init__") or "__slots__" in cls.__dict__:
        raise TypeError(f"quick_init: {cls.__name__} has __post_init__ or slots")
    fields = dataclasses.fields(cls)
    names: dict[str, Any] = {"_FACTORY": _FACTORY}
    signature, body = [], []
    for f in fields:
        if not f.init or f.kw_only:
            raise TypeError(f"quick_init: {cls.__name__}.{f.name} is not a plain positional field")
        if f.default is not dataclasses.MISSING:
            names[f"_default_{f.name}"] = f.default
            signature.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            names[f"_factory_{f.name}"] = f.default_factory
            signature.append(f"{f.name}=_FACTORY")
            body.append(f"    if {f.name} is _FACTORY: {f.name} = _factory_{f.name}()")
        else:
            signature.append(f.name)
        body.append(f"    fields[{f.name!r}] = {f.name}")
    source = f"def __init__(self, {', '.join(signature)}):\n    fields = self.__dict__\n" + "\n".join(body) + "\n"
    exec(source, names)  # noqa: S102 - the same technique dataclasses itself uses to make __init__
    init: Callable = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    cls._dataclass_init = cls.__init__
    cls.__init__ = init
    QUICK.append(cls)
    return cls
