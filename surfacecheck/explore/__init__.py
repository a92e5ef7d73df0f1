"""``surfacecheck explore``: exhaustive bounded model checking of the compaction model (see ``docs/explore.md``).

Importing the package makes the negative-control runtimes ``model:<variant>`` openable through
:func:`surfacecheck.runtime.select.open_runtime` (they are registered on first lookup).
"""
from surfacecheck.runtime.select import add_variant_provider

add_variant_provider("surfacecheck.explore.variants")
