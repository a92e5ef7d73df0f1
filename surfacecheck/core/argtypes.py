"""Option types every command shares (argparse ``type=``): a bad value is exit 2 naming the option."""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path


def positive_seconds(text: str) -> float:
    """``--timeout`` and the like: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive, finite number of seconds")
    return value


def positive_count(text: str, most: int | None = None) -> int:
    """``--concurrency``, ``--workers`` and the like: a whole number from 1 (to ``most``, when given)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    if most is not None and int(text) > most:
        raise argparse.ArgumentTypeError(f"{text} is more than {most}")
    return int(text)


def writable_dir(text: str) -> str:
    """An output folder (``--report-dir``, ``--trace-dir``, ``--bundle-dir``, ...), refused before any work when
    nothing could be written there: a counterexample found after an hour must not be lost to a typo. The check
    is real (a file is created and removed in the folder; missing folders are made and removed again), so a
    read-only mount or ``/proc`` is refused even for root; it leaves nothing behind."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: not a directory (a file is there)")
    made = []
    try:
        missing = path
        while not missing.exists():
            made.append(missing)
            missing = missing.parent
        if not missing.is_dir():
            raise argparse.ArgumentTypeError(f"{text}: cannot be created ({missing} is a file)")
        for folder in reversed(made):
            folder.mkdir()
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{text}: cannot be written ({exc.strerror or exc})") from None
    finally:
        for folder in made:
            try:
                folder.rmdir()
            except OSError:
                pass
    return text


def writable_file(text: str) -> str:
    """An output file (``findings --report PATH``): not a folder, and its folder writable (:func:`writable_dir`)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a directory, not a file")
    writable_dir(str(path.parent))
    return text
