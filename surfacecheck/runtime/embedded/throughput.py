"""Throughput of the embedded runtime at level ``log``, alone and in lockstep with the model.

``python -m surfacecheck.runtime.embedded.throughput [--steps N] [--seed S] [--json]`` builds one
deterministic dsh-shaped event stream (user messages, tool rounds, metered prunes and summaries
with their shadow prices), then times (1) the embedded runtime alone: each step is an ``append``
plus the four state queries (surface, cuts, measure, projection); (2) the lockstep: the same step
on the embedded runtime and the model, results compared. A benchmark, not a test: figures depend
on the machine and its load.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time

STATE_OPS = ("surface", "cuts", "measure", "projection")


def _user(rng: random.Random) -> dict:
    return {"type": "user/message", "surfaceOp": "append", "data": {
        "id": "u", "role": "user", "source": {"kind": "user"},
        "content": [{"type": "text", "text": "w" * rng.randint(1, 400)}]}}


def stream(steps: int, seed: int) -> list[dict]:
    """``steps`` append requests; replaces name nodes the generator tracked on its own surface copy."""
    rng, events, nodes, prices = random.Random(seed), [], [], {}
    from .events import price_event

    def emit(event: dict) -> None:
        seq = len(events)
        events.append(event)
        op = event.get("surfaceOp")
        if op == "append":
            nodes.append(seq)
        elif isinstance(op, dict):
            i, j = nodes.index(op["start"]), nodes.index(op["end"])
            nodes[i:j + 1] = [seq]
        if op is not None:
            prices[seq] = price_event({"seq": seq, **event})

    while len(events) < steps:
        roll = rng.random()
        if roll < 0.6 or len(nodes) < 4:
            emit(_user(rng))
        elif roll < 0.97:
            emit({"type": "assistant/message", "surfaceOp": "append", "data": {"turn": 1, "step": 1, "message": {
                "id": "a", "role": "assistant", "content": [{"type": "tool-call", "id": "c", "name": "t",
                                                             "arguments": "{}"}]}}})
            emit({"type": "tool/result", "surfaceOp": "append", "data": {"turn": 1, "step": 1, "message": {
                "id": "r", "role": "user", "source": {"kind": "tool", "callId": "c"}, "content": [
                    {"type": "tool-result", "toolCallId": "c", "content": [{"type": "text", "text": "x" * 900}]}]}}})
        else:
            end = rng.randint(0, len(nodes) - 2)
            span = nodes[:end + 1]
            emit({"type": "compaction/summary", "data": {"shadowedRange": {"start": span[0], "end": span[-1]},
                                                         "shadowedTokenCount": sum(prices[s] for s in span)}})
            emit({**_user(rng), "surfaceOp": {"op": "replace", "start": span[0], "end": span[-1]},
                  "sourceEventSeqs": list(span)})
    return events[:steps]


def run(steps: int = 2000, seed: int = 0) -> dict:
    from ..model_runtime import ModelRuntime
    from .runtime import EmbeddedRuntime

    events = stream(steps, seed)
    embedded = EmbeddedRuntime()
    started = time.perf_counter()
    for event in events:
        embedded.call("append", {"event": event})
        for op in STATE_OPS:
            embedded.call(op, {})
    alone = time.perf_counter() - started
    embedded, model, divergences = EmbeddedRuntime(), ModelRuntime(), 0
    started = time.perf_counter()
    for event in events:
        divergences += embedded.call("append", {"event": event}) != model.call("append", {"event": event})
        for op in STATE_OPS:
            divergences += embedded.call(op, {}) != model.call(op, {})
    lockstep = time.perf_counter() - started
    return {"steps": steps, "seed": seed, "surface_nodes": len(embedded.session.surface.nodes),
            "generation": embedded.session.generation, "divergences": divergences,
            "embedded_steps_per_s": round(steps / alone), "lockstep_steps_per_s": round(steps / lockstep)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m surfacecheck.runtime.embedded.throughput",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    print(f"seed {args.seed}", file=sys.stderr)
    result = run(args.steps, args.seed)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['steps']} steps (append + surface/cuts/measure/projection), final surface "
              f"{result['surface_nodes']} nodes, generation {result['generation']}: embedded alone "
              f"{result['embedded_steps_per_s']} steps/s; lockstep with the model {result['lockstep_steps_per_s']} "
              f"steps/s; {result['divergences']} divergences")
    return 1 if result["divergences"] else 0


if __name__ == "__main__":
    sys.exit(main())
