"""JavaScript value semantics the estimator and validators depend on (spec conventions).

dsh prices text by ``String.prototype.length`` (UTF-16 code units), the pruner slices by code
points (``Array.from``), and several prices use ``JSON.stringify``. Python strings are code-point
sequences, so these helpers make the difference explicit.
"""
from __future__ import annotations

import json
import math
from typing import Any, Callable

MAX_SAFE_INTEGER = 2**53 - 1


def js_length(text: str | list) -> int:
    """`text.length` in JavaScript: UTF-16 code units (astral characters count 2, a lone surrogate 1).
    ASCII text is its own length; otherwise the UTF-16 encoding's size (surrogatepass keeps a lone surrogate
    one unit, as JavaScript does). An array's is its number of elements (a text block whose `text` is a list:
    live appends do not check message shapes, §15 G18)."""
    if isinstance(text, list):
        return len(text)
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def code_points(text: str | list) -> int:
    """`Array.from(text).length`: Unicode code points; an array's elements."""
    return len(text)


def array_from(text: str | list) -> list:
    """`Array.from(text)`: a string's code points, an array's elements."""
    return list(text)


def js_string(value: Any) -> str:
    """`String(value)` (and `${value}`) for a JSON value: an array's elements joined by commas, null and undefined
    elements as empty (`Array.prototype.join`), an object `[object Object]`."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, (int, float)):
        return _js_number(value)
    if isinstance(value, (list, tuple)):
        return js_join(value, ",")
    return "[object Object]"


def js_join(items: list | tuple, separator: str = ",") -> str:
    """`items.join(separator)`: each element as `String(element)`, null and undefined as empty."""
    return separator.join("" if item is None else js_string(item) for item in items)


def is_safe_integer(value: Any) -> bool:
    """`Number.isSafeInteger` for a decoded JSON value (bool is not a number in JS)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) <= MAX_SAFE_INTEGER
    if isinstance(value, float):
        return value.is_integer() and abs(value) <= MAX_SAFE_INTEGER
    return False


def is_nonneg_safe_integer(value: Any) -> bool:
    return is_safe_integer(value) and value >= 0


def _js_number(value: float | int) -> str:
    """ECMAScript Number::toString for finite numbers (decimal for 1e-6 <= |x| < 1e21)."""
    if isinstance(value, bool):
        raise TypeError("bool is not a number")
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return "null"  # JSON.stringify(NaN/Infinity) === "null"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # shortest round-trip digits, as JS picks them
    shortest = repr(abs(value))
    mantissa, _, e = shortest.partition("e")
    int_part, _, frac = mantissa.partition(".")
    frac = frac.rstrip("0")
    k_digits = (int_part + frac).lstrip("0")
    lead_zeros = len(int_part + frac) - len((int_part + frac).lstrip("0"))
    n = len(int_part) + (int(e) if e else 0) - lead_zeros  # value = 0.d1d2.. x 10^n
    k_digits = k_digits.rstrip("0") or "0"
    k = len(k_digits)
    if k <= n <= 21:
        return sign + k_digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + k_digits[:n] + "." + k_digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + k_digits
    exp_sign = "+" if n - 1 >= 0 else "-"
    body = k_digits[0] + ("." + k_digits[1:] if k > 1 else "")
    return f"{sign}{body}e{exp_sign}{abs(n - 1)}"


def _escape_string(text: str) -> str:
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif code < 0x20 or 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")  # control chars and lone surrogates, lower-case hex
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def js_stringify(value: Any) -> str:
    """`JSON.stringify(value)`: insertion-ordered keys, no whitespace, non-ASCII verbatim."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return _js_number(value)
    if isinstance(value, str):
        return _escape_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(js_stringify(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(_escape_string(str(k)) + ":" + js_stringify(v) for k, v in value.items()) + "}"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def json_equal(a: Any, b: Any) -> bool:
    """Structural JSON equality (`isDeepEqualJson`): key order does not matter, 1 == 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def canonical(value: Any) -> str:
    """A canonical text for hashing JSON values (sorted keys); not dsh's wire form."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_PLAIN = frozenset({str, int, bool, type(None)})


def plain_json_first(value: Any, by_definition: Callable[[Any], bool]) -> bool:
    """A JSON-value check (spec 1.3 step 1) that answers plain leaves, dicts and lists by exact type and leaves
    anything else (a float, a tuple, a subclass) to ``by_definition``, the check as its spec words it, which
    it answers as: a string-keyed dict or a list is lossless iff its items are; a str, int, bool or None is."""
    kind = type(value)
    if kind in _PLAIN:
        return True
    if kind is dict:
        for key, item in value.items():
            if not isinstance(key, str) or (type(item) not in _PLAIN and not plain_json_first(item, by_definition)):
                return False
        return True
    if kind is list:
        for item in value:
            if type(item) not in _PLAIN and not plain_json_first(item, by_definition):
                return False
        return True
    return by_definition(value)
