"""A conversation adapter with mutmut's mutated modules in place of the installed ones (``mutate --runtime langchain``).

Runs as a script inside the framework's own environment, standard library only (it never imports surfacecheck):

    python mutant_peer.py ADAPTER OVERLAY MODULES_JSON

* ``MODULES_JSON`` maps a dotted module name to the mutated file (mutmut's trampolines) that is imported in its
  place: a finder first on ``sys.meta_path`` answers those names only, so the installed package, its ``__init__``
  and every other module load from the environment unchanged, and the environment itself is never written.
* ``OVERLAY`` holds a copy of mutmut's own package, which the trampolines import
  (``mutmut.mutation.trampoline``); the environment has no mutmut of its own.
* ``ADAPTER`` (``langchain_peer.py``, ``strands_peer.py``, ...) is then run as ``__main__``, unchanged, with two
  more ops announced beside its own (``peer.serve``'s ``extra_ops``):

  - ``mutant {"name": N}`` makes ``N`` the active mutant for every later call (mutmut's trampolines read
    ``MUTANT_UNDER_TEST`` at every call, so one process serves every mutant); ``""`` is the unmutated code,
    ``"stats"`` the unmutated code recording which mutated functions run.
  - ``hits {}`` answers the functions reached since the last ``hits`` (in ``stats`` mode), and forgets them.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import runpy
import sys
from pathlib import Path

HITS: set[str] = set()


class MutatedModules(importlib.abc.MetaPathFinder):
    """Loads the named modules from their mutated files; every other import goes on as usual."""

    def __init__(self, files: dict[str, str]):
        self.files = files

    def find_spec(self, fullname, path=None, target=None):
        file = self.files.get(fullname)
        return importlib.util.spec_from_file_location(fullname, file) if file else None


def _record(name: str, caller: str | None = None) -> None:
    HITS.add(name)


def main(argv: list[str]) -> None:
    adapter, overlay, modules = argv[0], argv[1], json.loads(argv[2])
    os.environ["MUTANT_UNDER_TEST"] = ""
    sys.path.insert(0, overlay)
    from mutmut.mutation import trampoline

    # mutmut's own recorder reads a project configuration from the working directory; the hits are kept here
    trampoline.record_trampoline_hit = _record
    sys.meta_path.insert(0, MutatedModules(modules))
    here = str(Path(adapter).resolve().parent)
    sys.path.insert(0, here)
    import peer

    def mutant(args: dict) -> dict:
        name = args.get("name")
        if not isinstance(name, str):
            raise peer.BadArgs("mutant needs a string name")
        os.environ["MUTANT_UNDER_TEST"] = name
        return {"active": name}

    def hits(args: dict) -> dict:
        found = sorted(HITS)
        HITS.clear()
        return {"hits": found}

    serve = peer.serve

    def serve_with_mutants(name, version, open_session, stdin=None, stdout=None, extra_ops=None):
        return serve(name, version, open_session, stdin, stdout,
                     extra_ops={**(extra_ops or {}), "mutant": mutant, "hits": hits})

    peer.serve = serve_with_mutants
    sys.argv = [adapter]
    runpy.run_path(adapter, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
