"""Where in a JSON document a value sits: the line a ``PATH:LINE: reason`` names for a field of a script, a policy
or the findings registry (``json`` parses values but keeps no positions).

:func:`line_of` walks the text alongside the path (object keys, array indexes) with the standard decoder's own
pieces (``raw_decode`` for a value, ``scanstring`` for a key), so what it counts is exactly what ``json.loads``
read; a path that leaves the document stops at the deepest value it reached.
"""
from __future__ import annotations

import json
import re
from json.decoder import scanstring
from typing import Sequence

_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _skip(text: str, at: int) -> int:
    return _SPACE.match(text, at).end()


def _child(text: str, at: int, key: str | int) -> int | None:
    """Where the member ``key`` of the object or array starting at ``at`` starts (the last one of a repeated key,
    as ``json.loads`` keeps), or None."""
    opener = text[at]
    if opener not in "{[" or isinstance(key, int) != (opener == "["):
        return None
    closer, found, index = ("}" if opener == "{" else "]"), None, 0
    at = _skip(text, at + 1)
    while text[at] != closer:
        if opener == "{":
            name, at = scanstring(text, at + 1)
            at = _skip(text, _skip(text, at) + 1)  # past the colon
            hit = name == key
        else:
            hit, index = index == key, index + 1
        if hit:
            found = at
        _value, at = _DECODER.raw_decode(text, at)
        at = _skip(text, at)
        if text[at] == ",":
            at = _skip(text, at + 1)
    return found


def line_of(text: str, path: Sequence[str | int]) -> int:
    """The 1-based line where the value at ``path`` starts in the JSON document ``text`` (for a path that is
    not in the document, the deepest value on the way)."""
    at = _skip(text, 0)
    try:
        for key in path:
            child = _child(text, at, key)
            if child is None:
                break
            at = child
    except (ValueError, IndexError):  # not the document json.loads read: the line reached so far
        pass
    return text.count("\n", 0, at) + 1


def read_document(path, error: type[Exception]) -> tuple[str, object]:
    """The text and the parsed JSON of the file at ``path`` (a registry, a policy); ``error`` (a ``ValueError``
    subclass) as ``PATH:LINE: reason`` when it cannot be read, is not UTF-8, is not JSON or nests too deeply."""
    try:
        text = path.read_text(encoding="utf-8")
        return text, json.loads(text)
    except OSError as exc:
        raise error(f"{path}:0: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise error(f"{path}:0: not UTF-8 text: {exc}") from None
    except json.JSONDecodeError as exc:
        raise error(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
    except RecursionError:
        raise error(f"{path}:1: not JSON this suite can read: nested too deeply") from None
