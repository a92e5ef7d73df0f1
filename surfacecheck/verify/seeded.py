"""Variant provider: registers the seeded bugs of the checkout's ``tests/seeded_bugs`` as
``embedded:<bug>`` runtimes, so ``verify``, ``replay`` and reproducers can name them.

The bugs live in the test tree, not in the package; when the checkout has no test tree (an
installed wheel) nothing is registered and ``embedded:<bug>`` is an unknown variant.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

MODULE = "seeded_bugs"
PACKAGE_DIR = Path(__file__).resolve().parents[2] / "tests" / "seeded_bugs"


def load() -> None:
    if MODULE in sys.modules:
        return
    init = PACKAGE_DIR / "__init__.py"
    if not init.is_file():
        return
    spec = importlib.util.spec_from_file_location(MODULE, init, submodule_search_locations=[str(PACKAGE_DIR)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[MODULE]
        raise


load()
