"""New verify traces go to the committed folder only in a checkout; an installed suite is never written to."""
from __future__ import annotations

from pathlib import Path

from surfacecheck.verify import run


def test_a_checkout_keeps_new_traces_in_properties_regressions():
    assert (Path(run.__file__).resolve().parents[2] / ".git").exists()
    assert run.default_regressions() == run.REGRESSIONS


def test_an_installed_suite_keeps_them_in_the_working_directory(tmp_path, monkeypatch):
    installed = tmp_path / "site-packages" / "properties" / "regressions"
    installed.mkdir(parents=True)
    monkeypatch.setattr(run, "REGRESSIONS", installed)
    assert run.default_regressions() == run.LOCAL_REGRESSIONS == Path(".surfacecheck") / "regressions"
