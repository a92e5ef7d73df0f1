"""The real dsh library as a runtime under test (``--runtime dsh``, ``dsh:DIR``; ``runtimes/dsh/README.md``).

The adapter ``runtimes/dsh/adapter/serve.mjs`` serves ``surfacecheck-runtime/1`` by calling dsh's own
published code in Node. Which code: ``dsh:DIR`` or ``SURFACECHECK_DSH_MODULES=DIR`` name a
``node_modules`` folder holding the ``@deepseek-ai/*`` packages (a dsh team's own build — how a change
to ``region.ts`` is gated); otherwise the packages pinned by ``runtimes/dsh/package-lock.json`` are
installed with ``npm ci`` into a cache on first use (``SURFACECHECK_CACHE``, default
``~/.cache/surfacecheck``), never into the repository and never twice.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..core.protocol import RuntimeUnavailable

ADAPTER = Path(__file__).resolve().parents[2] / "runtimes" / "dsh"
SERVE = ADAPTER / "adapter" / "serve.mjs"
MODULES_ENV = "SURFACECHECK_DSH_MODULES"
NODE_ENV = "SURFACECHECK_NODE"
PACKAGES = tuple(json.loads((ADAPTER / "packages.json").read_text(encoding="utf-8"))["packages"])
SETTLED = ADAPTER / "traces"
"""The traces of settled divergences (``runtimes/dsh/DIVERGENCES.md``): where dsh and the model once parted, both now
agree; replayed by every verify of dsh and by mutate's gate, so a change that reopens one is caught."""
INSTALL_HINT = ("the dsh runtime needs Node.js >= 20 and npm on PATH (Debian: apt-get install nodejs npm), "
                "or SURFACECHECK_NODE=/path/to/node")


def is_dsh_spec(spec: str) -> bool:
    """``dsh`` or ``dsh:DIR``."""
    return spec == "dsh" or spec.startswith("dsh:")


def settled_traces(spec: str) -> tuple[Path, ...]:
    """The folders of settled-divergence traces a verify of ``spec`` replays besides its regressions."""
    return (SETTLED,) if is_dsh_spec(spec) and SETTLED.is_dir() else ()


def node_binary() -> str | None:
    """The Node.js the adapter runs on: ``SURFACECHECK_NODE`` or ``node`` on PATH (None when neither)."""
    chosen = os.environ.get(NODE_ENV)
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    return shutil.which("node")


def explicit_modules(spec: str) -> Path | None:
    """The ``node_modules`` folder a spelling or the environment names, if any (``dsh:DIR`` wins)."""
    if spec.startswith("dsh:") and spec[4:].strip():
        return Path(spec[4:].strip()).expanduser().resolve()
    if os.environ.get(MODULES_ENV):
        return Path(os.environ[MODULES_ENV]).expanduser().resolve()
    return None


def modules_problem(folder: Path) -> str | None:
    """Why ``folder`` cannot serve as dsh's ``node_modules`` (names the first missing package), or None."""
    if not folder.is_dir():
        return f"dsh modules folder {folder} does not exist"
    missing = [p for p in PACKAGES if not (folder / "@deepseek-ai" / p / "package.json").is_file()]
    if missing:
        return (f"dsh modules folder {folder} lacks @deepseek-ai/{missing[0]}"
                f"{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''}: expected a node_modules folder "
                f"holding the @deepseek-ai packages")
    return None


def spec_problem(spec: str) -> str | None:
    """Why ``dsh`` / ``dsh:DIR`` cannot run here (usage error, exit 2), or None."""
    if node_binary() is None:
        return INSTALL_HINT
    folder = explicit_modules(spec)
    if folder is not None:
        problem = modules_problem(folder)
        named_by_env = not (spec.startswith("dsh:") and spec[4:].strip())
        return f"{MODULES_ENV}: {problem}" if problem and named_by_env else problem
    if shutil.which("npm") is None and not _cached_modules().is_dir():
        return "the dsh runtime installs its pinned packages with npm on first use; npm is not on PATH. " + INSTALL_HINT
    return None


def cache_root() -> Path:
    base = os.environ.get("SURFACECHECK_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "surfacecheck")
    return Path(base)


def lock_digest() -> str:
    return hashlib.sha256((ADAPTER / "package-lock.json").read_bytes()).hexdigest()[:16]


def _cached_modules() -> Path:
    return cache_root() / f"dsh-{lock_digest()}" / "node_modules"


def ensure_installed(progress=None) -> Path:
    """The cached ``node_modules`` of the pinned packages, installing them with ``npm ci`` on first use."""
    target = _cached_modules()
    if target.is_dir() and modules_problem(target) is None:
        return target
    return npm_ci_cached(ADAPTER, target.parent, f"dsh 0.1.0-rc.8 (package-lock {lock_digest()})", progress)


def npm_ci_cached(source: Path, entry: Path, label: str, progress=None) -> Path:
    """``npm ci`` of ``source``'s package.json and package-lock.json into the cache folder ``entry``; its
    ``node_modules``. Installs into a temporary folder beside the entry and renames it into place, so an
    interrupted install never leaves a half-populated cache. Raises :class:`RuntimeUnavailable` when npm fails."""
    target = entry / "node_modules"
    if target.is_dir():
        return target
    say = progress or (lambda msg: print(msg, file=sys.stderr, flush=True))
    entry.parent.mkdir(parents=True, exist_ok=True)
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeUnavailable("unsupported", "npm is not on PATH; " + INSTALL_HINT)
    say(f"surfacecheck: installing {label} from npm into {entry} ...")
    work = Path(tempfile.mkdtemp(prefix=f".{entry.name}-install-", dir=entry.parent))
    try:
        for name in ("package.json", "package-lock.json"):
            shutil.copy2(source / name, work / name)
        done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
                              cwd=work, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeUnavailable("unsupported", f"npm ci of {label} failed (exit {done.returncode}):\n"
                                     + (done.stderr or done.stdout)[-2000:])
        if entry.exists():  # another process finished first
            shutil.rmtree(work, ignore_errors=True)
        else:
            work.rename(entry)
    except subprocess.TimeoutExpired:
        raise RuntimeUnavailable("timeout", f"npm ci of {label} did not finish within 600 s") from None
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    say(f"surfacecheck: {label} ready in {target}")
    return target


def modules_for(spec: str) -> Path:
    """The ``node_modules`` folder ``spec`` runs against (installing the pinned packages if needed)."""
    folder = explicit_modules(spec)
    if folder is not None:
        problem = modules_problem(folder)
        if problem:
            raise RuntimeUnavailable("unsupported", problem)
        return folder
    return ensure_installed()


def adapter_command(spec: str) -> tuple[list[str], dict[str, str]]:
    """argv and environment that start the adapter for ``spec``."""
    node = node_binary()
    if node is None:
        raise RuntimeUnavailable("unsupported", INSTALL_HINT)
    env = dict(os.environ)
    env[MODULES_ENV] = str(modules_for(spec))
    return [node, str(SERVE)], env


def open_dsh(spec: str, timeout: float):
    """A :class:`~surfacecheck.runtime.client.ProcessRuntime` serving dsh's own code."""
    from .client import ProcessRuntime

    argv, env = adapter_command(spec)
    return ProcessRuntime(" ".join(argv), timeout=timeout, argv=argv, env=env, name=spec,
                          handshake_timeout=max(timeout, 30.0))


def run_main(produce) -> int:
    """A ``python -m`` entry point: print the folder ``produce()`` returns; exit 2 on a usage error, 3 when npm fails."""
    try:
        print(produce())
    except ValueError as exc:
        print(f"surfacecheck: {exc}", file=sys.stderr)
        return 2
    except RuntimeUnavailable as exc:
        print(f"surfacecheck: {exc}", file=sys.stderr)
        return 3
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m surfacecheck.runtime.dsh``: install the pinned packages into the cache (CI's setup step)."""
    problem = spec_problem("dsh")
    if problem:
        print(f"surfacecheck: dsh runtime unavailable: {problem}", file=sys.stderr)
        return 2
    return run_main(lambda: modules_for("dsh"))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
