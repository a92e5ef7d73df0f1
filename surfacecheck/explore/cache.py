"""A persistent cache of the model's transitions (``explore --cache FILE``).

Every model-run transition (the moves built on them are cheap to rebuild, and are not kept) is a pure
function of (operation, abstract surface or its shape, overflow retries, summary outcome) for a
given policy, variant and model source, so its :class:`~.oracle.Effect` can be kept between runs. The file is keyed by a fingerprint of all of those: the model's and the
explorer's source files, the settings and the variant. A changed model never reuses a stale entry;
an unreadable or foreign file is ignored (and rewritten).
"""
from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

from surfacecheck import model

from .world import World

_SOURCES = ("oracle.py", "concrete.py", "safety.py", "world.py", "variants.py", "shape.py", "prefix.py")


def fingerprint(world: World) -> str:
    digest = hashlib.sha256()
    for path in sorted(Path(model.__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    here = Path(__file__).parent
    for name in _SOURCES:
        digest.update(name.encode() + (here / name).read_bytes())
    digest.update(repr((world.settings, world.variant.name, world.outcomes, world.shared)).encode())
    return digest.hexdigest()


def load(world: World, path: str | Path) -> int:
    """Fill the world's model-run cache from ``path``; the number of transitions loaded (0 if none fit)."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            stored = pickle.load(handle)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError):
        return 0
    if not isinstance(stored, dict) or stored.get("fingerprint") != fingerprint(world):
        return 0
    world._runs.update(stored["runs"])
    world._candidates.update(stored["candidates"])
    world._groups.update(stored.get("groups", {}))
    return len(stored["runs"])


def save(world: World, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("wb") as handle:
        pickle.dump({"fingerprint": fingerprint(world), "runs": world._runs, "candidates": world._candidates,
                     "groups": world._groups},
                    handle, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(path)
