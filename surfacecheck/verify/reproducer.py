"""A standalone pytest reproducer beside each trace.

The file embeds the trace's steps (it needs no other file) and asserts that replaying them on the
runtime finds no violation: it fails while the bug is there and passes once it is fixed. Run it
with ``python -m pytest -q FILE``.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from surfacecheck.core.trace import Trace

TEMPLATE = '''"""Reproducer for {trace_name}: {prop} on runtime {runtime!r} ({level} level, {n} steps).

{message}

Fails while the violation persists; passes once it is fixed.
Run: python -m pytest -q {file_name}
Or:  surfacecheck replay {trace_name} --runtime {runtime_q}
"""
import json

from surfacecheck.core.trace import Step, Trace
from surfacecheck.verify.replay import replay_trace

RUNTIME = {runtime!r}
STEPS = json.loads({steps_json!r})
TRACE = Trace(source={source!r}, level={level!r}, property={prop!r},
              steps=tuple(Step(s["op"], s.get("args", {{}}), s.get("label", "")) for s in STEPS),
              runtime=RUNTIME, seed={seed!r})


def test_{func}():
    outcome = replay_trace(TRACE, RUNTIME)
    assert outcome.unavailable is None, outcome.describe()
    assert outcome.violation is None, outcome.describe()
'''


def reproducer_path(trace_path: Path) -> Path:
    stem = re.sub(r"[^0-9A-Za-z_]", "_", trace_path.stem)
    return trace_path.with_name(f"test_{stem}.py")


def write_reproducer(trace_path: str | Path, trace: Trace) -> Path:
    """Write ``test_<trace stem>.py`` next to ``trace_path``; returns its path."""
    trace_path = Path(trace_path)
    path = reproducer_path(trace_path)
    steps = [step.to_json(i) for i, step in enumerate(trace.steps, 1)]
    message = trace.violation.message if trace.violation else "(no violation recorded)"
    text = TEMPLATE.format(
        trace_name=trace_path.name, file_name=path.name, prop=trace.property, runtime=trace.runtime,
        runtime_q=json.dumps(trace.runtime), level=trace.level, n=len(steps), message=message.replace('"""', "'''"),
        steps_json=json.dumps(steps, ensure_ascii=False), source=trace.source, seed=trace.seed,
        func=re.sub(r"[^0-9a-z_]", "_", trace.property.lower()) + "_no_longer_fails")
    path.write_text(text, encoding="utf-8")
    return path
