"""``explore`` at given bounds in one plain process and with ``--workers N``: the same JSON (cost figures aside)?
And what each costs, side by side in one run.

    python benchmarks/explore_workers.py 6/2/2 --workers 1 2 4
    python benchmarks/explore_workers.py 7/2/2 --workers 1 2 4 --json figures.json
    python benchmarks/explore_workers.py 7/2/2 --workers 2 --rounds 3

Each run is the real command in a fresh process (``surfacecheck explore --json``), one after another (never two
at once: the machine's cores are the thing measured). It prints per run the search's wall seconds, distinct
states per second, the checks' seconds, the command's wall seconds and the tasks and model runs of the workers,
then whether every ``--workers`` report equals the plain one once the cost figures are left out (exit 1 if not), and
each worker count's speed-up against the plain run of the same round, search and whole command, with the median.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

COST = ("seconds", "states_per_second", "check_seconds", "model_runs", "distributed")


def run(bounds: str, workers: int | None) -> tuple[dict, float]:
    events, pairs, compactions = bounds.split("/")
    command = [sys.executable, "-m", "surfacecheck", "explore", "--events", events, "--tool-pairs", pairs,
               "--compactions", compactions, "--json"] + ([] if workers is None else ["--workers", str(workers)])
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - began
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command[1:])}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return json.loads(done.stdout), wall


def cost_free(report: dict) -> dict:
    return {key: value for key, value in report.items() if key not in COST}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bounds", help="events/tool-pairs/compactions, e.g. 6/2/2")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rounds", type=int, default=1,
                        help="rounds of one plain run then one run per worker count; each ratio is taken within its "
                             "round (a shared machine's speed drifts over minutes) and the median is reported")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    rows = []
    for number in range(1, args.rounds + 1):
        plain = None
        for workers in [None] + args.workers:
            report, wall = run(args.bounds, workers)
            plain = report if workers is None else plain
            same = workers is None or cost_free(report) == cost_free(plain)
            dist = report.get("distributed") or {}
            rows.append({"round": number, "workers": workers, "states": report["states"], "edges": report["edges"],
                         "search_seconds": report["seconds"], "states_per_second": report["states_per_second"],
                         "check_seconds": report["check_seconds"], "wall_seconds": round(wall, 1),
                         "tasks": dist.get("tasks"), "model_runs": report["model_runs"], "same_json": same})
            print(f"#{number} {'plain' if workers is None else f'--workers {workers}':<12} {report['states']:>9} states "
                  f"{report['edges']:>10} edges  search {report['seconds']:7.2f} s "
                  f"({report['states_per_second']:>9.0f}/s)  checks {report['check_seconds']:6.2f} s  wall {wall:6.1f} s"
                  f"  model runs {report['model_runs']:>6}" + ("" if workers is None else
                                                              f"  same JSON: {'yes' if same else 'NO'}"), flush=True)
    ratios = {}
    for row in rows:
        if row["workers"] is not None:
            base = next(r for r in rows if r["round"] == row["round"] and r["workers"] is None)
            found = ratios.setdefault(row["workers"], {"search": [], "wall": []})
            found["search"].append(base["search_seconds"] / row["search_seconds"])
            found["wall"].append(base["wall_seconds"] / row["wall_seconds"])
    for workers, found in ratios.items():
        print(f"--workers {workers} against the plain run of its round: search "
              f"{' '.join(f'{r:.2f}x' for r in found['search'])} (median {statistics.median(found['search']):.2f}x), "
              f"whole command {' '.join(f'{r:.2f}x' for r in found['wall'])} "
              f"(median {statistics.median(found['wall']):.2f}x)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"bounds": args.bounds, "runs": rows, "ratios": ratios}, out, indent=2)
    return 0 if all(row["same_json"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
