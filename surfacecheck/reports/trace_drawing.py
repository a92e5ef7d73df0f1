"""A counterexample trace drawn as the surface changing step by step, as inline SVG.

The trace's operations are replayed on the reference model (``ModelRuntime``): after each step the model's
surface is asked for, so each row shows the surface *as the spec computes it* after that step: one box per
node (its seq, and its kind: U user/message, A assistant/message, T tool/result, C made by a compaction),
nodes the step added outlined green, nodes it shadowed struck through in red, and the row of the step where
the property broke highlighted. A step the model refuses ends the drawing there, with the reason. A node's kind
comes from the model's own log: U a prompt, A assistant/message, T tool/result (t once pruned), C a compaction
checkpoint, R the runtime-context snapshot (spec 12).
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from html import escape

from surfacecheck.coverage.situations import surface_op

KIND_LETTER = {"user/message": "U", "assistant/message": "A", "tool/result": "T"}
MAX_STEPS = 80
LABEL_CHARS = 40  # per line of a label: 11 px monospace fits the 290 px left of the boxes
LINE = 14  # px between the lines of a wrapped label
BOX, GAP, ROW, LEFT = 30, 3, 34, 330


def kind_letter(event) -> str:
    """The letter a node is drawn with, from its event in the model's log."""
    if event is None:
        return "·"
    source = (event.data or {}).get("source") if isinstance(event.data, dict) else None
    plugin = source.get("plugin") if isinstance(source, dict) and source.get("kind") == "plugin" else None
    if plugin == "compact":
        return "C"
    if plugin == "@deepseek-ai/dsh-system-prompt":
        return "R"
    if event.type == "tool/result" and surface_op(event.surface_op) == "replace":
        return "t"
    return KIND_LETTER.get(event.type, "·")


@dataclass
class Frame:
    """The surface after one step: ``nodes`` (seqs), which the step ``added`` and ``shadowed``."""

    step: int
    op: str
    label: str
    nodes: list[int]
    added: list[int] = field(default_factory=list)
    shadowed: list[int] = field(default_factory=list)
    note: str = ""


def frames(trace) -> tuple[list[Frame], dict[int, str], str]:
    """Replay ``trace`` on the model: the frames, each node's kind letter, and a note when the drawing stops."""
    from surfacecheck.core.protocol import ProtocolError
    from surfacecheck.runtime.model_runtime import ModelRuntime
    from surfacecheck.verify.replay import ensure_variants

    ensure_variants()
    runtime = ModelRuntime()
    out, kinds, before, stopped = [], {}, [], ""
    for number, step in enumerate(trace.steps[:MAX_STEPS], start=1):
        try:
            result = runtime.call(step.op, step.args)
            nodes = list(runtime.call("surface", {}).get("nodes", []))
        except (ProtocolError, Exception) as exc:  # noqa: BLE001 - the model refusing a step ends the drawing
            stopped = f"the model stopped at step {number}: {type(exc).__name__}: {exc}"
            break
        previous = set(before)
        added = [n for n in nodes if n not in previous]
        for n in added:
            kinds[n] = kind_letter(runtime.session.event_at(n))
        out.append(Frame(number, step.op, step.label, nodes, added, [n for n in before if n not in set(nodes)],
                         f"error: {result['error'].get('type', '')}" if isinstance(result, dict) and result.get("error")
                         else ""))
        before = nodes
    if len(trace.steps) > MAX_STEPS and not stopped:
        stopped = f"the first {MAX_STEPS} of {len(trace.steps)} steps are drawn"
    return out, kinds, stopped


def label_lines(frame: Frame) -> list[str]:
    """A step's label (and the error it returned) wrapped to :data:`LABEL_CHARS` a line: never cut."""
    text = (frame.label or frame.op) + (f" — {frame.note}" if frame.note else "")
    return textwrap.wrap(text, LABEL_CHARS, break_long_words=True, break_on_hyphens=False) or [""]


def svg(trace, broken_step: int | None = None) -> str:
    """The drawing as one ``<svg>`` element (self-contained, no scripts), with a caption if it stops early.
    A row is as tall as its wrapped label (one ``<tspan>`` a line)."""
    rows, kinds, stopped = frames(trace)
    widest = max((len(f.nodes) + len(f.shadowed) for f in rows), default=1)
    width = LEFT + widest * (BOX + GAP) + 20
    lines = [label_lines(f) for f in rows]
    heights = [max(ROW, LINE * len(ls) + 12) for ls in lines]
    height = sum(heights) + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="trace" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="surface after each step">']
    y = 5
    for f, ls, tall in zip(rows, lines, heights):
        if f.step == broken_step:
            parts.append(f'<rect class="broken" x="0" y="{y - 2}" width="{width}" height="{tall}" />')
        spans = "".join(f'<tspan x="34" dy="{0 if i == 0 else LINE}">{escape(line)}</tspan>' for i, line in enumerate(ls))
        parts.append(f'<text class="step" x="4" y="{y + 19}">{f.step:>3}</text>'
                     f'<text class="label" x="34" y="{y + 19}">{spans}</text>')
        x = LEFT
        for n in f.nodes:
            cls = "node added" if n in f.added else "node"
            parts.append(f'<g class="{cls}"><rect x="{x}" y="{y}" width="{BOX}" height="{BOX - 4}" rx="3" />'
                         f'<text x="{x + BOX / 2}" y="{y + 11}">{n}</text>'
                         f'<text class="kind" x="{x + BOX / 2}" y="{y + 22}">{kinds.get(n, "·")}</text></g>')
            x += BOX + GAP
        for n in f.shadowed:
            parts.append(f'<g class="node shadowed"><rect x="{x}" y="{y}" width="{BOX}" height="{BOX - 4}" rx="3" />'
                         f'<text x="{x + BOX / 2}" y="{y + 11}">{n}</text>'
                         f'<line x1="{x}" y1="{y + BOX - 4}" x2="{x + BOX}" y2="{y}" /></g>')
            x += BOX + GAP
        y += tall
    parts.append("</svg>")
    caption = f'<p class="note">{escape(stopped)}</p>' if stopped else ""
    return "".join(parts) + caption
