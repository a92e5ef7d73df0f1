"""``surfacecheck bench``: per-append cost of pressure updates and the O(1) gate (``docs/bench.md``).

``cli.py`` the command, ``measure.py`` what is run and judged, ``plot.py`` the log-log PNG,
``inprocess.py`` the protocol's ``bench`` op, ``stage.py`` the quick stage of ``surfacecheck check``.
The workload, variants, harness, cost model and memory probe live in :mod:`benchmarks`.
"""
