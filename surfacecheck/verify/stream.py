"""The example stream of a verify run depends on its seed alone.

Hypothesis (6.13x on) mixes constants read from the source of every *local* module loaded so far into its
integer and text choices (``providers._get_local_constants``): a verify run's examples then changed with any
edit to the suite's own source, and with which modules the process had imported (the CLI and a pytest worker
drew different examples at the same seed, and a pytest worker's changed with the tests run before). Inside a
verify run that pool is empty, so the same seed gives the same examples; Hypothesis's own constants stay.
Without the hook (another Hypothesis) this is a no-op.
"""
from __future__ import annotations

from contextlib import contextmanager

try:
    from hypothesis.internal.conjecture import providers as _providers
except ImportError:  # pragma: no cover
    _providers = None


@contextmanager
def seed_only_stream():
    """Run the block with no local constants; the permitted-constants cache is cleared on entry and exit, so
    neither side reuses choices computed with the other's pool."""
    saved = getattr(_providers, "_get_local_constants", None)
    cache = getattr(_providers, "CONSTANTS_CACHE", None)
    if saved is None or not hasattr(_providers, "Constants") or cache is None:
        yield
        return
    empty = _providers.Constants()
    _providers._get_local_constants = lambda: empty
    cache.cache.clear()
    try:
        yield
    finally:
        _providers._get_local_constants = saved
        cache.cache.clear()
