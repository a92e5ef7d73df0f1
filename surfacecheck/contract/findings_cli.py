"""``surfacecheck findings --runtime R`` for a conversation-level runtime: the contract's findings about it.

The command line is ``findings``'s own (``surfacecheck/findings/cli.py``); the CLI hands a conversation-level
runtime's run here: the registry's witnesses replayed and quotes checked, then the search (``--search-seconds``
its budget, ``0`` none), its broken promises sorted into known and NEW.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .registry import RegistryError


def main(args) -> int:
    from .findings_run import run_findings

    seconds = args.search_seconds
    if seconds is not None and seconds < 0:
        sys.stderr.write(f"surfacecheck findings: --search-seconds must be >= 0, got {seconds}\n")
        return 2
    try:
        report = run_findings(args.runtime, registry_path=args.registry, strict=args.strict,
                              trace_dir=Path(args.trace_dir), seed=args.seed, budget=seconds,
                              search=seconds != 0, timeout=max(args.timeout, 60.0))
    except (RegistryError, ValueError) as exc:
        sys.stderr.write(f"surfacecheck findings: {exc}\n")
        return 2
    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(report.text() + "\n")
    return report.exit_code
