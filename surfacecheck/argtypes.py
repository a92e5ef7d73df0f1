"""Option types every command shares (argparse ``type=``): a bad value is exit 2 naming the option."""
from __future__ import annotations

import argparse


def positive_seconds(text: str) -> float:
    """``--timeout`` and the like: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive, finite number of seconds")
    return value
