"""A conversation runtime as a child process (``cmd:``), for the contract search's tests: the shared peer loop
around a history that grows without bound. ``hang``: every turn and compact sleeps past any timeout."""
from __future__ import annotations

import sys
import time

from surfacecheck.runtime.conversation.peer import Session, check_messages, check_settings, serve, tool_result


class Growing(Session):
    def __init__(self, history: list[dict], hang: bool):
        self.history, self.hang = history, hang

    def turn(self, args: dict) -> dict:
        if self.hang:
            time.sleep(60)
        self.history.append({"role": "user", "text": args["user"]})
        for reply in args.get("replies") or ():
            calls = reply.get("calls") or []
            self.history.append({"role": "assistant", "text": reply.get("text", ""), **({"calls": calls} if calls else {})})
            self.history += [{"role": "tool", "call_id": c["id"], "text": tool_result(c["args"])} for c in calls]
        return {"steps": [], "history": list(self.history)}

    def compact(self, args: dict) -> dict:
        if self.hang:
            time.sleep(60)
        return {"steps": [], "history": list(self.history)}


def open_session(args: dict, hang: bool = "hang" in sys.argv[1:]):
    settings = check_settings(args.get("settings"), {})
    return Growing(list(check_messages(args.get("history"))), hang), {"settings": settings, "trigger": None}


if __name__ == "__main__":
    serve("contract-fake", "0", open_session)
