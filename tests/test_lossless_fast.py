"""The JSON-value check's fast path (spec 1.3 step 1) answers as its definition does.

`model.session.is_lossless_json` and the embedded runtime's copy take plain leaves and dicts by exact type
first (issue 19: it runs on every append of the lockstep); a subclass, a float or a tuple goes the long way,
`lossless_by_definition`. Both are compared here with that definition, on values of every shape.
"""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from surfacecheck.model.session import is_lossless_json as model_check
from surfacecheck.model.session import lossless_by_definition as model_definition
from surfacecheck.runtime.embedded.runtime import copy_json
from surfacecheck.runtime.embedded.session import is_lossless_json as embedded_check
from surfacecheck.runtime.embedded.session import lossless_by_definition as embedded_definition


class Text(str):
    pass


class Mapping(dict):
    pass


leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3) | st.builds(Text, st.text(max_size=2)) \
    | st.just(-0.0) | st.just(float("nan")) | st.just(object())
keys = st.text(max_size=2) | st.integers(0, 3) | st.builds(Text, st.text(max_size=2))
values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
                      | st.dictionaries(keys, inner, max_size=3) | st.builds(Mapping, st.dictionaries(keys, inner, max_size=2)),
                      max_leaves=12)


@given(values)
def test_the_fast_checks_answer_as_their_definitions(value):
    assert model_check(value) == model_definition(value)
    assert embedded_check(value) == embedded_definition(value)


@given(values)
def test_a_copied_event_equals_the_event_and_shares_no_container(value):
    copied = copy_json(value)
    assert copied == value or copied != copied  # NaN inside: not equal to itself either
    if isinstance(value, (dict, list)) and value:
        assert copied is not value
