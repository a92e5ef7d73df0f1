"""The Node conversation runtimes (``--runtime gemini``, ``--runtime ai``): gemini-cli-core's chat compression and
the Vercel AI SDK's ``pruneMessages``, each served by a Node adapter in ``runtimes/conversation-node/``.

Both adapters share one ``node_modules``: the packages pinned by ``runtimes/conversation-node/package-lock.json``,
installed with ``npm ci --ignore-scripts`` into the cache on first use (:func:`surfacecheck.runtime.dsh.npm_ci_cached`;
the folder is named by the lock's digest, so a changed lock installs anew), never into the repository and never
twice. ``python -m surfacecheck.runtime.conversation.node`` installs ahead of time (CI's setup step).
"""
from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from ...core.protocol import RuntimeUnavailable
from ..dsh import INSTALL_HINT as DSH_HINT
from ..dsh import cache_root, node_binary, npm_ci_cached, run_main

ADAPTER = Path(__file__).resolve().parents[3] / "runtimes" / "conversation-node"
SCRIPTS = {"gemini": ADAPTER / "gemini.mjs", "ai": ADAPTER / "ai.mjs"}
PACKAGES = {"gemini": ("@google/gemini-cli-core", "0.61.0"), "ai": ("ai", "7.0.173")}
MODULES_ENV = "SURFACECHECK_CONVERSATION_NODE_MODULES"
INSTALL_HINT = DSH_HINT.replace("the dsh runtime", "the gemini and ai runtimes")


def lock_digest() -> str:
    return hashlib.sha256((ADAPTER / "package-lock.json").read_bytes()).hexdigest()[:16]


def entry() -> Path:
    """The cache folder of the pinned packages (its ``node_modules`` inside)."""
    return cache_root() / f"conversation-node-{lock_digest()}"


def ensure_installed(progress=None) -> Path:
    """The cached ``node_modules``, installed with ``npm ci`` on first use (``RuntimeUnavailable`` when npm fails)."""
    if node_binary() is None:
        raise RuntimeUnavailable("unsupported", INSTALL_HINT)
    label = ", ".join(f"{name} {version}" for name, version in PACKAGES.values())
    return npm_ci_cached(ADAPTER, entry(), f"{label} (package-lock {lock_digest()})", progress)


def adapter_command(name: str) -> tuple[list[str], dict[str, str]]:
    """argv and environment that start ``name``'s adapter (``gemini`` or ``ai``) on the installed packages."""
    node = node_binary()
    if node is None:
        raise RuntimeUnavailable("unsupported", INSTALL_HINT)
    # A working copy (``surfacecheck mutate --runtime gemini|ai``) names its own node_modules in MODULES_ENV.
    modules = Path(os.environ[MODULES_ENV]) if os.environ.get(MODULES_ENV) else ensure_installed()
    env = dict(os.environ)
    env[MODULES_ENV] = str(modules)
    # The adapters import the packages by path from the cache; Node resolves their own imports from there.
    env["NODE_PATH"] = str(modules)
    env.setdefault("GEMINI_CLI_NO_RELAUNCH", "true")
    env["OTEL_SDK_DISABLED"] = "true"
    return [node, str(SCRIPTS[name])], env


def open_node_runtime(spec: str, timeout: float):
    """A :class:`~surfacecheck.runtime.client.ProcessRuntime` speaking to ``spec``'s Node adapter."""
    from ..client import ProcessRuntime

    argv, env = adapter_command(spec.split(":", 1)[0])
    return ProcessRuntime(" ".join(argv), timeout=timeout, argv=argv, env=env, name=spec,
                          handshake_timeout=max(timeout, 60.0))


def spec_problem(spec: str) -> str | None:
    """Why the Node runtimes cannot run here (a usage error), or None."""
    return INSTALL_HINT if node_binary() is None else None


def main(argv: list[str] | None = None) -> int:
    """Install the pinned packages into the cache; print the ``node_modules`` folder."""
    problem = spec_problem("gemini")
    if problem:
        print(f"surfacecheck: Node conversation runtimes unavailable: {problem}", file=sys.stderr)
        return 2
    return run_main(ensure_installed)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
