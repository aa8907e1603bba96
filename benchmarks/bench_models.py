"""Benchmark: wall time of `peakproof models <case>` end to end (a fresh interpreter each run).

Goals (issue 4): feed (1,000,000 followers drawn, both tables) under 3 s; tickets and
notifications under 5 s each, on a 2-core machine.

    python benchmarks/bench_models.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

GOALS = {"tickets": 5.0, "notifications": 5.0, "feed": 3.0}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    for case, goal in GOALS.items():
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "peakproof", "models", case], check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - t0)
        print(f"peakproof models {case:<13} median {statistics.median(times):.2f} s  "
              f"(min {min(times):.2f}, max {max(times):.2f}; goal < {goal:.0f} s)")


if __name__ == "__main__":
    main()
