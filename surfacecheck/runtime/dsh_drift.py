"""Library-level drift: the pinned dsh tree with one package swapped for another
published version, as a ``node_modules`` folder for ``--runtime dsh:DIR``.

``python -m surfacecheck.runtime.dsh_drift [PACKAGE@VERSION]`` (default ``dsh-session@0.1.1-rc.2``) builds
the tree in the cache beside the pinned one (``npm pack`` of that version unpacked over a copy; the pinned
cache is never touched) and prints its path; then ``surfacecheck verify --runtime dsh:PATH --level log``
runs the lockstep against it. Node resolves each package's imports from its real path, so the tree is a
copy, not symlinks (dsh-npm-facts).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from ..core.protocol import RuntimeUnavailable
from .dsh import cache_root, ensure_installed, run_main

DEFAULT = "dsh-session@0.1.1-rc.2"


def drift_tree(package_at_version: str = DEFAULT) -> Path:
    """The pinned tree with ``@deepseek-ai/<package>`` replaced by ``<version>`` (built once, cached)."""
    package, _, version = package_at_version.partition("@")
    if not package or not version:
        raise ValueError(f"expected PACKAGE@VERSION (e.g. {DEFAULT}), got {package_at_version!r}")
    target = cache_root() / f"dsh-drift-{package}-{version}" / "node_modules"
    if (target / "@deepseek-ai" / package / "package.json").is_file():
        return target
    pinned = ensure_installed()
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeUnavailable("unsupported", "npm is not on PATH")
    work = Path(tempfile.mkdtemp(prefix=".drift-", dir=cache_root()))
    try:
        done = subprocess.run([npm, "pack", f"@deepseek-ai/{package}@{version}", "--silent"], cwd=work,
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeUnavailable("unsupported", f"npm pack @deepseek-ai/{package}@{version} failed: "
                                     + (done.stderr or done.stdout)[-1000:])
        tgz = work / done.stdout.strip().splitlines()[-1]
        tree = work / "node_modules"
        shutil.copytree(pinned, tree)
        dest = tree / "@deepseek-ai" / package
        shutil.rmtree(dest)
        dest.mkdir()
        with tarfile.open(tgz) as archive:
            for member in archive.getmembers():
                member.name = member.name.split("/", 1)[1] if "/" in member.name else ""
                if member.name:
                    archive.extract(member, dest, filter="data")
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            tree.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return run_main(lambda: drift_tree(args[0] if args else DEFAULT))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
