"""A contract witness drawn as a conversation: the initial history as message boxes, then each step's story in
the contract's words, then the broken promise with what was expected and what was observed.

A conversation trace needs no model to draw: its ``open`` step holds the history and each step's label tells what
the runtime did (``surfacecheck/contract/driver.py`` writes them). Boxes: U user, A assistant (with its calls), T
tool result, S summary, Y system.
"""
from __future__ import annotations

import json
from html import escape
from pathlib import Path

LETTER = {"user": "U", "assistant": "A", "tool": "T", "system": "Y"}
TEXT_CHARS = 60


def _box(message: dict) -> str:
    letter = "S" if message.get("summary") else LETTER.get(message.get("role"), "?")
    text = " ".join(str(message.get("text") or "").split())
    calls = ", ".join(f"{c.get('name')}#{c.get('id')}" for c in message.get("calls") or ())
    body = (text[:TEXT_CHARS] + ("…" if len(text) > TEXT_CHARS else "")) or ("" if calls else "(empty)")
    if message.get("role") == "tool":
        body = f"→{message.get('call_id')}: {body}"
    if calls:
        body = (body + " " if body else "") + f"calls {calls}"
    return f'<span class="msg msg-{letter}"><b>{letter}</b> {escape(body)}</span>'


def draw(path: str | Path) -> str:
    """The witness at ``path`` as HTML (a note instead when it cannot be read)."""
    try:
        records = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        return f'<p class="note">witness not drawn: {escape(str(exc))}</p>'
    steps = [r for r in records if "step" in r and "op" in r]
    violation = next((r["violation"] for r in records if "violation" in r), {})
    rows = []
    for step in steps:
        broke = step["step"] == violation.get("step")
        label = escape(step.get("label") or step["op"])
        history = "".join(_box(m) for m in (step.get("args") or {}).get("history") or []) if step["op"] == "open" else ""
        shown = f'<div class="history">{history}</div>' if history else ""
        rows.append(f'<li class="{"broke" if broke else ""}"><span class="op">{step["step"]}. {escape(step["op"])}</span> '
                    f'{label}{shown}</li>')
    tail = ""
    if violation:
        tail = (f'<p class="broken"><b>{escape(str(violation.get("property")))}</b> at step {violation.get("step")}: '
                f'{escape(str(violation.get("message")))}<br>expected: <code>{escape(json.dumps(violation.get("expected"))[:300])}'
                f'</code><br>observed: <code>{escape(json.dumps(violation.get("observed"))[:300])}</code></p>')
    return f'<ol class="conversation">{"".join(rows)}</ol>{tail}'
