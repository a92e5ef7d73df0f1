"""pytest setup for ``benchmarks/``: collect ``bench_*.py`` (pytest-benchmark files) when the directory is given.

``python -m pytest benchmarks/`` runs every benchmark; the ordinary test run (``testpaths = tests``)
never collects them. A file named on the command line is collected by pytest itself.
"""
from __future__ import annotations

import pytest


def pytest_collect_file(file_path, parent):
    if file_path.suffix == ".py" and file_path.name.startswith("bench_") and not parent.session.isinitpath(file_path):
        return pytest.Module.from_parent(parent, path=file_path)
    return None
