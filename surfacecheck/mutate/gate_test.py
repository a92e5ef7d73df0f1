"""The gate as pytest tests, one per unit, for mutmut (``mutate --runtime embedded``): mutmut records which tests
reach each mutated function and runs a mutant against only those (the dsh side gets the same from Stryker's
per-test coverage). Copied into mutmut's working copy as ``gate_tests/test_gate.py``; configured by
``SURFACECHECK_MUTATE_GATE`` (JSON: runtime, gate stages, verify profile, corpus, timeout).

A unit that fails fails its test (a kill); an inconclusive unit (the runtime hung or died) ends the session with
exit code 40, which the scoring reads as a crash, never a kill.
"""
import json
import os
from pathlib import Path

import pytest

from surfacecheck.mutate.units import FAILED, INCONCLUSIVE, Shared, gate_units

INCONCLUSIVE_EXIT = 40
SETTINGS = json.loads(os.environ.get("SURFACECHECK_MUTATE_GATE", "{}"))
CORPUS = Path(SETTINGS["corpus"]) if SETTINGS.get("corpus") else None
UNITS = gate_units(tuple(SETTINGS.get("gate", ("runtime",))), CORPUS)


@pytest.mark.parametrize("unit", UNITS, ids=[u.id for u in UNITS])
def test_unit(unit):
    shared = Shared(SETTINGS.get("runtime", "embedded"), SETTINGS.get("timeout", 10.0), CORPUS,
                    SETTINGS.get("verify_profile", "smoke"), collect=False)
    try:
        outcome = unit.run(shared)
    finally:
        shared.close()
    if outcome.status == INCONCLUSIVE:
        pytest.exit(f"inconclusive at {unit.id}: {outcome.message}", returncode=INCONCLUSIVE_EXIT)
    assert outcome.status != FAILED, outcome.message
