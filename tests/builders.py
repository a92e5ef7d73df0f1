"""Hand-built dsh-shaped logs for the compaction-layer tests (shared by several test files)."""
from __future__ import annotations

import json
from pathlib import Path

from surfacecheck.model.session import Session, append

PROVIDER, MODEL = "prov", "mod"
OVERFLOW_CODE = "CONTEXT_WINDOW_EXCEEDED"


class Log:
    """Appends dsh-shaped events to a model Session (message shapes valid for `seeded`)."""

    def __init__(self, session: Session | None = None):
        self.session = session or Session()
        self._n = 0

    def add(self, type_, data, **kw) -> int:
        self.session, event = append(self.session, type_, data, **kw)
        return event.seq

    def _id(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}-{self._n}"

    def turn_start(self, turn):
        return self.add("turn/start", {"turn": turn})

    def turn_end(self, turn, kind="completed"):
        return self.add("turn/end", {"turn": turn, "reason": {"kind": kind}})

    def step_start(self, turn, step):
        return self.add("step/start", {"turn": turn, "step": step})

    def step_end(self, turn, step):
        return self.add("step/end", {"turn": turn, "step": step})

    def header(self, provider=PROVIDER, model=MODEL, reason="initial", **extra):
        return self.add("request/header", {"header": {"config": {"provider": provider, "model": model}, **extra},
                                           "reason": reason})

    def user(self, text, source=None):
        return self.add("user/message", {"content": [{"type": "text", "text": text}],
                                         "source": source or {"kind": "user"}, "role": "user",
                                         "id": self._id("u")}, surface_op="append")

    def assistant(self, turn, step, text=None, calls=()):
        content = [] if text is None else [{"type": "text", "text": text}]
        content += [{"type": "tool-call", "id": cid, "name": "read", "arguments": "{}"} for cid in calls]
        return self.add("assistant/message", {"turn": turn, "step": step, "message": {
            "role": "assistant", "content": content,
            "source": {"kind": "model", "provider": PROVIDER, "model": MODEL}, "id": self._id("a")}},
            surface_op="append")

    def result(self, turn, step, call_id, text="ok"):
        call = self.add("tool/call", {"turn": turn, "step": step, "callId": call_id, "name": "read",
                                      "arguments": "{}"})
        return self.add("tool/result", {"turn": turn, "step": step, "message": {
            "source": {"kind": "tool", "callId": call_id},
            "content": [{"type": "tool-result", "toolCallId": call_id,
                         "content": [{"type": "text", "text": text}], "isError": False}],
            "role": "user", "id": self._id("r")}}, surface_op="append", source_event_seqs=[call])

    def overflow_chunk(self, turn, step):
        """A provider stream that ends in a context overflow (spec 10.1)."""
        return self.add("assistant/chunk", {"turn": turn, "step": step, "chunk": {
            "type": "finish", "reason": {"kind": "error", "failure": {"message": "too large", "code": OVERFLOW_CODE}}}})


def read_events(path: Path) -> dict[int, dict]:
    """Verbatim events of a JSONL log by seq, as decoded JSON; the header line and packed chunk rows are skipped."""
    rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[1:] if line.strip())
    return {row["seq"]: row for row in rows if "seq" in row}
