"""Counted nouns in the summaries people read: "1 warning", "2 warnings", never "warning(s)"."""
from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, in the plural unless ``n`` is 1 (``plural`` for an irregular one)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def errors_line(errors: int, set_aside: int) -> str:
    """"0 errors", or "0 errors (2 known set aside)" when registered errors were not counted."""
    return count(errors, "error") + (f" ({set_aside} known set aside)" if set_aside else "")
