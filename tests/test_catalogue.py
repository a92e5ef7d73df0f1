"""The property catalogue: one id per property, every engine check mapped to one, and the table built from it."""
from __future__ import annotations

import json

import pytest

from surfacecheck.catalogue_table import ENGINES, coverage_table, engine_checks, unmapped
from surfacecheck.cli import main
from surfacecheck.core import catalogue
from surfacecheck.core.catalogue import CATALOGUE, PROPERTIES, Property, lookup
from surfacecheck.properties.monitors import all_monitors, register
from surfacecheck.core.protocol import LEVELS
from surfacecheck.verify.runner import monitors_for


def test_lookup_names_the_known_ids():
    assert lookup("overflow-retry-after-progress").section.startswith("spec 10.2")
    with pytest.raises(KeyError, match="known: generation-counts-replaces"):
        lookup("no-such-property")


def test_levels_are_the_protocol_levels_and_values_are_immutable():
    assert catalogue.LEVELS == tuple(LEVELS)
    with pytest.raises(ValueError):
        Property("x", "spec 1", "session", "invariant", "a level the protocol does not have")
    with pytest.raises(AttributeError):
        PROPERTIES[0].level = "policy"


def test_every_engine_check_maps_to_a_catalogue_property():
    assert unmapped() == []
    checks = engine_checks()
    assert set(checks) == set(ENGINES) and all(checks.values())
    monitors = all_monitors()
    assert all(spec.property is CATALOGUE[spec.property.id] for spec in monitors.values())


def test_an_unknown_id_cannot_be_registered():
    with pytest.raises(KeyError, match="unknown property"):
        register("not-in-the-catalogue", engine="verify")
    with pytest.raises(ValueError, match="catalogue id"):
        register("bracket-order", engine="explore", checks="summaries-smaller")


def test_every_property_is_checked_by_some_engine():
    assert [row.id for row in coverage_table() if not any(row.engines.values())] == []


def test_the_table_lists_every_engine_checking_spec_10_2():
    row = {r.id: r for r in coverage_table()}["overflow-retry-after-progress"]
    assert row.engines["verify"] == "overflow-retry-after-progress"
    assert row.engines["audit"] == "retry-without-progress"
    assert set(row.engines["explore"].split(", ")) == {"overflow-retry-after-progress", "explore-no-compaction-loop"}
    assert set(row.engines["prove"].split(", ")) == {"overflow-retry-progress", "generation-progress"}


def test_verify_runs_the_catalogue_invariants_of_its_level():
    policy = monitors_for("policy")
    assert monitors_for("log") == ("generation-counts-replaces", "projection-equals-recount")
    assert monitors_for("compaction") == policy[:5] and policy[4] == "bracket-order"
    assert all(lookup(name).kind == "invariant" for name in policy)
    assert policy[5:] == ("overflow-retry-after-progress", "retries-within-budget", "runtime-context-reemitted")


def test_cli_prints_the_table(capsys):
    assert main(["catalogue", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == [p.id for p in PROPERTIES]
    assert main(["catalogue"]) == 0
    assert "overflow-retry-after-progress" in capsys.readouterr().out
