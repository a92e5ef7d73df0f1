"""Provider output re-assembled from stream chunks (dsh-llm `BlockAssembler`; spec 4.2).

The meter prices an `assistant/message` with usage by what the provider streamed: the cited
`assistant/chunk` events re-assembled into blocks. Closed blocks (`block-end`) win; open ones are
built from deltas; a `max-tokens` finish drops tool calls.
"""
from __future__ import annotations

from typing import Iterable


class BlockAssembler:
    """Mutable assembler: feed chunks with :meth:`push`, read :meth:`blocks`."""

    def __init__(self) -> None:
        self._partials: dict[int, dict] = {}
        self._order: list[int] = []
        self._finish: dict = {"kind": "stop"}

    def _partial(self, index: int, block_type: str) -> dict:
        partial = self._partials.get(index)
        if partial is None:
            partial = {"type": block_type, "text": "", "args": "", "id": None, "name": None, "closed": None}
            self._partials[index] = partial
            self._order.append(index)
        return partial

    def push(self, chunk: dict) -> None:
        kind = chunk.get("type")
        if kind == "block-start":
            self._partial(chunk["index"], chunk["blockType"])
        elif kind in ("text-delta", "reasoning-delta"):
            partial = self._partial(chunk["index"], "text" if kind == "text-delta" else "reasoning")
            if partial["closed"] is None:
                partial["text"] += chunk["text"]
        elif kind == "tool-call-delta":
            partial = self._partial(chunk["index"], "tool-call")
            if partial["closed"] is None:
                partial["id"] = chunk.get("id")
                if chunk.get("name"):
                    partial["name"] = chunk["name"]
                partial["args"] += chunk.get("argumentsDelta", "")
        elif kind == "block-end":
            partial = self._partial(chunk["index"], chunk["block"]["type"])
            if partial["closed"] is None:
                partial["closed"] = chunk["block"]
        elif kind == "finish":
            self._finish = chunk.get("reason") or {"kind": "stop"}

    def blocks(self) -> list[dict]:
        from surfacecheck.model.errors import TokenMeterError

        out = []
        for index in self._order:
            partial = self._partials[index]
            if partial["closed"] is not None:
                out.append(partial["closed"])
            elif partial["type"] in ("text", "reasoning"):
                out.append({"type": partial["type"], "text": partial["text"]})
            elif partial["type"] == "tool-call":
                out.append({"type": "tool-call", "id": partial["id"] or f"call-{index}",
                            "name": partial["name"] or "", "arguments": partial["args"]})
            else:
                raise TokenMeterError(f'cannot assemble incomplete block of type "{partial["type"]}"')
        if self._finish.get("kind") == "max-tokens":
            out = [block for block in out if block.get("type") != "tool-call"]
        return out


def assemble(chunks: Iterable[dict]) -> list[dict]:
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.push(chunk)
    return assembler.blocks()
