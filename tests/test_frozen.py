"""model.frozen.quick_init (issue 19): every quick __init__ makes the very instance the dataclass's own makes, and
the value stays frozen."""
from __future__ import annotations

import dataclasses
import inspect

import pytest

import surfacecheck.model.event  # noqa: F401  (the modules whose values are quick to make register them when imported)
import surfacecheck.model.meter  # noqa: F401
import surfacecheck.model.pairing  # noqa: F401
import surfacecheck.model.projection  # noqa: F401
import surfacecheck.model.session  # noqa: F401
import surfacecheck.model.surface  # noqa: F401
import surfacecheck.core.trace  # noqa: F401
from surfacecheck.model.frozen import QUICK, quick_init

HOT = {"Event", "Session", "MeterState", "ClaimStep", "Measurement", "SurfacePlan", "Cuts", "SurfaceProjection",
       "ContextBreakdown", "Surface", "Step"}


def _arguments(cls, salt: int) -> list:
    """One distinct object per field (identity shows which field received which argument)."""
    return [("arg", cls.__name__, f.name, salt) for f in dataclasses.fields(cls)]


def test_the_values_the_lockstep_makes_each_step_are_quick():
    assert HOT <= {cls.__name__ for cls in QUICK}


@pytest.mark.parametrize("cls", QUICK, ids=lambda c: c.__name__)
def test_quick_init_makes_what_the_dataclass_makes(cls):
    quick, reference = object.__new__(cls), object.__new__(cls)
    arguments = _arguments(cls, 1)
    cls.__init__(quick, *arguments)
    cls._dataclass_init(reference, *arguments)
    assert vars(quick) == vars(reference) and list(vars(quick)) == list(vars(reference))
    assert all(vars(quick)[f.name] is a for f, a in zip(dataclasses.fields(cls), arguments))
    by_name = {f.name: a for f, a in zip(dataclasses.fields(cls), _arguments(cls, 2))}  # keywords too
    assert vars(cls(**by_name)) == by_name
    defaults, reference = object.__new__(cls), object.__new__(cls)  # defaults and factories: only the required
    required = [a for f, a in zip(dataclasses.fields(cls), arguments)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    cls.__init__(defaults, *required)
    cls._dataclass_init(reference, *required)
    assert vars(defaults) == vars(reference)
    assert inspect.signature(cls.__init__).parameters.keys() == inspect.signature(cls._dataclass_init).parameters.keys()
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(quick, dataclasses.fields(cls)[0].name, None)


def test_a_factory_default_is_made_afresh_and_unsupported_shapes_are_refused():
    @quick_init
    @dataclasses.dataclass(frozen=True)
    class Box:
        items: list = dataclasses.field(default_factory=list)

    assert Box().items == [] and Box().items is not Box().items
    QUICK.remove(Box)

    @dataclasses.dataclass
    class Mutable:
        x: int = 0

    @dataclasses.dataclass(frozen=True)
    class Checked:
        x: int = 0

        def __post_init__(self):
            pass

    for cls in (Mutable, Checked):
        with pytest.raises(TypeError, match="quick_init"):
            quick_init(cls)
