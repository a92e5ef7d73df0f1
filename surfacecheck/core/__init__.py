"""The suite's vocabulary, shared by every engine: the trace format (``Step``, ``Violation``, ``Trace``), the
verdict and its exit code, the stage contract, the runtime protocol's levels and ops, and the property catalogue.

It sits on the model and under everything else: ``core`` imports only ``surfacecheck.model`` and the standard
library (the import contract in ``pyproject.toml`` holds it there).
"""
