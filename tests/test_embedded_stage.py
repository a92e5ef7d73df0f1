"""The ``embedded`` check stage: every scenario and corpus log replays identically through the
embedded runtime and the model; a broken variant is reported as a violation with the log and seq."""
from __future__ import annotations

import io

from surfacecheck.runtime.embedded.bugs import override, variant
from surfacecheck.runtime.embedded.projection import ShadowPriceProjection
from surfacecheck.runtime.embedded.stage import stage
from surfacecheck.core.stage import CheckContext


def test_stage_holds_on_every_log(corpus, tmp_path):
    result = stage(CheckContext("embedded", corpus, False, tmp_path, io.StringIO()))
    assert result.status == "ok", result.summary["divergent"]
    assert result.summary["logs"] > 150 and result.exit_code == 0


def test_stage_reports_a_broken_projection(corpus, tmp_path):
    """Negative control: a projection that never consumes its claim diverges on the metered corpus logs."""
    broken = variant("never-consume", projection=override(
        ShadowPriceProjection, _consume=lambda self, tokens, claim: self._unpriced_replace(tokens)))
    result = stage(CheckContext("embedded", corpus, False, tmp_path, io.StringIO()), factory=broken)
    assert result.status == "violation" and result.exit_code == 1
    first = result.summary["divergent"][0]
    assert first["op"] == "projection" and isinstance(first["seq"], int)
    assert any(case.failure is not None for case in result.cases)


def test_throughput_stream_runs_in_lockstep_without_divergence():
    """The benchmark's workload (metered summaries, tool rounds) is itself a lockstep check; no timing asserted."""
    from surfacecheck.runtime.embedded.throughput import run

    result = run(steps=300, seed=3)
    assert result["divergences"] == 0
    assert result["generation"] > 0 and result["surface_nodes"] > 0


def test_served_over_the_protocol_matches_the_model():
    """`python -m surfacecheck.serve embedded`: the sample session over a real child process, every level."""
    import shlex
    import sys

    from surfacecheck.runtime.stage import conformance

    run = conformance(f"cmd:{shlex.quote(sys.executable)} -m surfacecheck.serve embedded")
    assert run["levels"] == ["log", "compaction", "policy"]
    assert run["divergences"] == [] and run["schema_problems"] == [] and run["requests"] > 40
