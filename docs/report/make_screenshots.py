"""Regenerate the report screenshots in this folder: ``held.png``, ``violated.png``, ``inconclusive.png``.

Each comes from a small real run of ``surfacecheck check`` (no coverage), rendered by headless Chromium at a
laptop's width and cut to the page's top (paths shown relative to the checkout), then reduced to a 256-colour palette so it stays under 300 KB:

* held: the embedded runtime, stages audit, findings, explore and bench;
* violated: the seeded bug ``embedded:cut-toward-tail`` (tests/seeded_bugs), stage verify;
* inconclusive: ``cmd:sleep 100``, a runtime that never answers, stage verify with a short timeout.

Run from the checkout's root: ``python docs/report/make_screenshots.py [--keep DIR]`` (``--keep`` leaves the
three report folders there).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RUNS = {
    "held": {"runtime": "embedded", "stages": ("audit", "findings", "explore", "bench")},
    "violated": {"runtime": "embedded:cut-toward-tail", "stages": ("verify",)},
    "inconclusive": {"runtime": "cmd:sleep 100", "stages": ("verify",), "timeout": 2.0},
}
EXIT = {"held": 0, "violated": 1, "inconclusive": 3}
HEIGHT = 1500  # px of the page's top kept: the first screen and a little more
LIMIT = 300_000


def shoot(name: str, folder: Path, out: Path) -> Path:
    """One run of ``check`` into ``folder`` and its page's screenshot as ``out/<name>.png``."""
    from PIL import Image

    from surfacecheck.check import run_check
    from surfacecheck.reports import screenshot

    options = RUNS[name]
    with open(os.devnull, "w") as quiet:
        code = run_check(runtime=options["runtime"], report_dir=folder, stages=options["stages"], coverage=False,
                         timeout=options.get("timeout", 10.0), out=quiet, err=quiet)
    if code != EXIT[name]:
        raise SystemExit(f"{name}: check exited {code}, expected {EXIT[name]} (see {folder}/report.json)")
    shown = folder / "shown.html"  # the machine's own folders left out: paths as a checkout sees them
    page = (folder / "report.html").read_text(encoding="utf-8").replace(str(folder), f"reports/{name}")
    shown.write_text(page.replace(str(ROOT) + "/", "").replace(str(ROOT.parent) + "/", "../"), encoding="utf-8")
    png = screenshot.render(shown, folder / "full.png", height=HEIGHT)
    target = out / f"{name}.png"
    Image.open(png).convert("RGB").quantize(colors=256).save(target, optimize=True)
    if target.stat().st_size >= LIMIT:
        raise SystemExit(f"{target} is {target.stat().st_size} bytes, over {LIMIT}")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="leave the three report folders in DIR")
    parser.add_argument("--only", nargs="*", choices=sorted(RUNS), default=sorted(RUNS))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        base = args.keep or Path(scratch)
        for name in args.only:
            print(shoot(name, base / name, HERE))
    return 0


if __name__ == "__main__":
    sys.exit(main())
