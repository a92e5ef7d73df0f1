"""Every bundled runtime's ``hello`` announces exactly the ops ``surfacecheck.core.protocol`` defines for its levels.

The op table lives three times: ``api.OPS`` (the protocol), each Python runtime's handlers and the Node adapter's
``OPS_BY_LEVEL`` beside its handlers (``runtimes/dsh/adapter/serve.mjs``). ``hello``'s ``ops`` is built from a
runtime's own table and handlers, so a drift in any of them fails here.
"""
from __future__ import annotations

import sys

import jsonschema
import pytest

from surfacecheck.runtime import dsh
from surfacecheck.core.protocol import LEVELS, OPTIONAL_OPS, ops_at
from surfacecheck.runtime.schemas import documents
from surfacecheck.runtime.select import open_runtime

NODE_MISSING = dsh.spec_problem("dsh")
BUNDLED = ["model", "embedded", f"cmd:{sys.executable} -m surfacecheck.serve embedded",
           pytest.param("dsh", marks=pytest.mark.skipif(NODE_MISSING is not None, reason=str(NODE_MISSING)))]


@pytest.mark.parametrize("spec", BUNDLED)
def test_hello_lists_exactly_the_protocol_ops_of_its_levels(spec):
    runtime = open_runtime(spec, timeout=120)
    try:
        hello = runtime.hello()
    finally:
        runtime.close()
    jsonschema.validate(hello, documents()["hello.result.json"])
    assert tuple(hello["levels"]) == LEVELS, f"{spec} announces {hello['levels']}"
    expected = list(ops_at(LEVELS[-1])) + list(OPTIONAL_OPS)  # every bundled runtime serves the persistence views
    assert hello["ops"] == expected, (
        f"{spec}'s op table drifted from runtime/api.py: missing {sorted(set(expected) - set(hello['ops']))}, "
        f"extra {sorted(set(hello['ops']) - set(expected))}")
