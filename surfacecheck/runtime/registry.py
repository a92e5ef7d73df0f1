"""Every runtime the suite can drive, by name: how to open it, its levels, its coverage and mutation tools, its help.

The one table every command reads (``--runtime`` choices and help, ``coverage``'s Python sources, ``mutate``'s
tools, :func:`.select.open_runtime`). Adding a named runtime is one more :class:`Entry` in :data:`ENTRIES`, in
this file only. Seeded-bug and negative-control variants (``BASE:VARIANT``) are registered at run time by the
modules in :data:`VARIANT_PROVIDERS` (through :func:`register_variant`) and opened through this registry too.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..core.protocol import CONVERSATION, LEVELS, Runtime

PACKAGE = Path(__file__).resolve().parents[1]
ANNOUNCED = ()  # levels: whatever the runtime's hello announces


def _import(module: str, name: str) -> Callable[[str, float], Runtime]:
    return lambda spec, timeout: getattr(importlib.import_module(module), name)()


def _dsh_problem(spec: str) -> str | None:
    return importlib.import_module("surfacecheck.runtime.dsh").spec_problem(spec)


def _open_dsh(spec: str, timeout: float) -> Runtime:
    return importlib.import_module("surfacecheck.runtime.dsh").open_dsh(spec, timeout)


def _open_python(spec: str, timeout: float) -> Runtime:
    return importlib.import_module("surfacecheck.runtime.conversation.pyenv").open_python_runtime(spec, timeout)


def _node_problem(spec: str) -> str | None:
    return importlib.import_module("surfacecheck.runtime.conversation.node").spec_problem(spec)


def _open_node(spec: str, timeout: float) -> Runtime:
    return importlib.import_module("surfacecheck.runtime.conversation.node").open_node_runtime(spec, timeout)


def _python_problem(spec: str) -> str | None:
    return importlib.import_module("surfacecheck.runtime.conversation.pyenv").runtime_problem(spec)


def _cmd_problem(spec: str) -> str | None:
    return None if spec[4:].strip() else "runtime 'cmd:' needs a command after the colon, e.g. cmd:./my-runtime"


def _open_cmd(spec: str, timeout: float) -> Runtime:
    return importlib.import_module("surfacecheck.runtime.client").ProcessRuntime(spec[4:].strip(), timeout=timeout)


@dataclass(frozen=True)
class Entry:
    """One runtime spelling. ``name`` is its spelling in help (``dsh:DIR``); ``prefix`` marks a family whose
    spellings start with it (``dsh:``, ``cmd:``)."""
    name: str
    open: Callable[[str, float], Runtime]
    levels: tuple[str, ...]
    help: str
    coverage: str | None = None  # "coverage.py" (over ``source``) | "V8" | None
    mutation: str | None = None  # the tool ``surfacecheck mutate`` changes its code with
    source: Path | None = None  # the Python package coverage.py measures
    prefix: str | None = None
    problem: Callable[[str], str | None] = lambda spec: None
    not_applicable: tuple[tuple[str, str], ...] = ()  # contract promises this runtime cannot be asked, and why

    def matches(self, spec: str) -> bool:
        return spec == self.name if self.prefix is None else spec.startswith(self.prefix)


NO_SUMMARIZER = tuple((promise, "pruneMessages has no summarizer: it drops reasoning, tool calls and empty messages, "
                                 "and writes no summary") for promise in (
    "contract-summary-covers-removed", "contract-summarizer-used", "contract-summarizer-input-fits",
    "contract-summary-not-nested"))
"""The promises about summaries, which a runtime that only prunes cannot be asked."""

ENTRIES: tuple[Entry, ...] = (
    Entry("embedded", _import("surfacecheck.runtime.embedded", "EmbeddedRuntime"), LEVELS,
          "the independent embedded runtime (in process)", coverage="coverage.py", mutation="mutmut",
          source=PACKAGE / "runtime" / "embedded"),
    Entry("model", _import("surfacecheck.runtime.model_runtime", "ModelRuntime"), LEVELS,
          "the reference model behind the protocol", coverage="coverage.py", source=PACKAGE / "model"),
    Entry("dsh", _open_dsh, LEVELS, "dsh's own published npm code, through the Node adapter", coverage="V8",
          mutation="StrykerJS", problem=_dsh_problem),
    Entry("dsh:DIR", _open_dsh, LEVELS, "dsh's code from the node_modules folder DIR", coverage="V8",
          mutation="StrykerJS", prefix="dsh:", problem=_dsh_problem),
    Entry("langchain", _open_python, (CONVERSATION,), "LangChain 1.5.0's SummarizationMiddleware and create_agent loop, "
          "in its own environment (conversation level)"),
    Entry("strands", _open_python, (CONVERSATION,), "Strands Agents 1.62.0's conversation managers and Agent loop, "
          "in its own environment (conversation level)"),
    Entry("deepagents", _open_python, (CONVERSATION,), "deepagents 0.7.32's SummarizationMiddleware and "
          "create_deep_agent loop on one checkpointed thread, in its own environment (conversation level)"),
    Entry("adk", _open_python, (CONVERSATION,), "Google ADK 2.13.0's events compaction inside its Runner, "
          "in its own environment (conversation level)"),
    Entry("openhands", _open_python, (CONVERSATION,), "OpenHands SDK 1.58.2's LLMSummarizingCondenser over its View, "
          "in its own Python 3.12 environment (conversation level)", problem=_python_problem),
    Entry("gemini", _open_node, (CONVERSATION,), "gemini-cli-core 0.61.0's ChatCompressionService under a GeminiChat-like "
          "loop, through the Node adapter (conversation level)", problem=_node_problem),
    Entry("ai", _open_node, (CONVERSATION,), "the Vercel AI SDK 7.0.173's pruneMessages before every model call, through the "
          "Node adapter (conversation level)", problem=_node_problem, not_applicable=NO_SUMMARIZER),
    Entry("reference", _import("surfacecheck.runtime.conversation.reference", "ReferenceRuntime"), (CONVERSATION,),
          "the reference conversation runtime that keeps every promise of the compaction contract (in process)"),
    Entry("cmd:COMMAND", _open_cmd, ANNOUNCED, "a child process speaking docs/protocol.md", prefix="cmd:",
          problem=_cmd_problem),
)
VARIANT_PROVIDERS: list[str] = [  # modules that register seeded-bug and negative-control variants when imported
    "surfacecheck.explore.variants",
    "surfacecheck.properties.proofs.monitors",
    "surfacecheck.runtime.conversation.variants",
]
_VARIANTS: dict[str, Callable[[], Runtime]] = {}


def names() -> list[str]:
    """Every spelling, as help shows it: ``embedded``, ``model``, ``dsh``, ``dsh:DIR``, ``cmd:COMMAND``."""
    return [e.name for e in ENTRIES]


def runtime_help(*, only: tuple[str, ...] | None = None) -> str:
    """The spellings ``--runtime`` help lists (``only`` these), and ``BASE:VARIANT``."""
    shown = [e.name for e in ENTRIES if only is None or e.name in only]
    tail = "" if only is not None else ", or a registered variant BASE:VARIANT"
    return ", ".join(shown) + tail


def entry(spec: str) -> Entry | None:
    """The entry whose spelling ``spec`` is (``dsh:/x`` -> ``dsh:DIR``), or None."""
    return next((e for e in ENTRIES if e.matches(spec)), None)


def base(spec: str) -> str:
    """The named runtime a spelling builds on: ``embedded:slow-tracker`` -> ``embedded``, ``dsh:/x`` -> ``dsh``."""
    return spec.split(":", 1)[0]


def with_coverage(tool: str) -> dict[str, Path | None]:
    """name -> source for every named runtime measured by ``tool``."""
    return {e.name: e.source for e in ENTRIES if e.coverage == tool and e.prefix is None}


def mutable() -> tuple[str, ...]:
    """The named runtimes ``surfacecheck mutate`` can change (those with a mutation tool)."""
    return tuple(e.name for e in ENTRIES if e.mutation and e.prefix is None)


def register_variant(spec: str, factory: Callable[[], Runtime]) -> None:
    """Make ``spec`` (``BASE:VARIANT``, e.g. ``model:retry-without-progress``) openable."""
    _VARIANTS[spec] = factory


def add_variant_provider(module: str) -> None:
    """A module that calls :func:`register_variant` when imported (imported on first lookup)."""
    if module not in VARIANT_PROVIDERS:
        VARIANT_PROVIDERS.append(module)


def variants() -> list[str]:
    """Every registered variant (importing the providers)."""
    for module in list(VARIANT_PROVIDERS):
        importlib.import_module(module)
    return sorted(_VARIANTS)


def serves_conversation(spec: str) -> bool:
    """Does ``spec`` (a named runtime, a spelling or a variant ``BASE:VARIANT``) serve the conversation level?"""
    found = entry(spec) or entry(base(spec))
    return found is not None and CONVERSATION in found.levels


def conversation_runtimes() -> list[str]:
    """The named runtimes that serve the conversation level (``langchain``, ``strands``, ...)."""
    return [e.name for e in ENTRIES if e.prefix is None and CONVERSATION in e.levels]


def not_applicable(spec: str) -> dict[str, str]:
    """The contract promises ``spec``'s runtime has nothing to be judged by (promise -> why): a runtime with no
    summarizer writes no summary."""
    found = entry(spec) or entry(base(spec))
    return dict(found.not_applicable) if found is not None else {}


def problem(spec: str) -> str | None:
    """Why ``spec`` is not a runtime spelling (a message), or ``None``."""
    found = entry(spec)
    if found is not None:
        return found.problem(spec)
    if spec in _VARIANTS:  # registered at run time (a test's own runtime, a variant on a base not named here)
        return None
    if ":" in spec and base(spec) in [e.name for e in ENTRIES if e.prefix is None]:
        return None
    return f"unknown runtime {spec!r}: expected {', '.join(names())}"


def open_spec(spec: str, timeout: float) -> Runtime:
    """A fresh runtime for ``spec``; ``ValueError`` for an unknown spelling or variant."""
    why = problem(spec)
    if why:
        raise ValueError(why)
    found = entry(spec)
    if found is not None:
        return found.open(spec, timeout)
    if spec not in _VARIANTS:
        variants()
    if spec not in _VARIANTS:
        known = ", ".join(sorted(_VARIANTS)) or "none registered"
        raise ValueError(f"unknown runtime variant {spec!r}; known variants: {known}")
    return _VARIANTS[spec]()
