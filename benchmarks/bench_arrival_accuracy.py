"""Benchmark: how closely the arrivals the target receives follow the curve, second by second.

Serves the reference tickets target on 127.0.0.1, replays ``tickets-sold-out`` through
``locust -f loadtests/`` at a constant rate, and prints, for every whole second inside the
run, the requests the target itself counted (``GET /_arrivals``) and their deviation from
the curve's rate, then the largest deviation. The figure depends on this machine's speed
and load, so it is printed here, never asserted in a test (``tests/e2e/test_load_engine.py``
asserts what holds on any machine: every sent arrival reached the target once).

    python benchmarks/bench_arrival_accuracy.py [--scale 0.1] [--seconds 6] [--processes 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from peakproof.cases import get_case  # noqa: E402
from peakproof.launch import ServedTarget  # noqa: E402

PEAK = get_case("tickets").peak_rate()  # tickets-sold-out's arrivals/s at scale 1, from the ported model


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=0.1, help="share of the seed's 20,000/s (default 0.1: 2,000/s)")
    p.add_argument("--seconds", type=int, default=6)
    p.add_argument("--processes", type=int, default=1)
    args = p.parse_args()
    rate = PEAK * args.scale
    with ServedTarget(get_case("tickets")) as served, tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "locust", "-f", str(ROOT / "loadtests"), "--headless", "--host", served.url,
               "--scenario", "tickets-sold-out", "--scale", str(args.scale), "--duration", str(args.seconds),
               "--report-dir", tmp, "--result", f"{tmp}/result.json", "--only-summary", "--loglevel", "WARNING"]
        if args.processes > 1:
            cmd += ["--processes", str(args.processes)]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        result = Path(tmp) / "result.json"
        if not result.exists():
            raise SystemExit(f"no result; locust exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        doc = json.loads(Path(json.loads(result.read_text())["report"]).with_suffix(".json").read_text())
        counted = requests.get(f"{served.url}/_arrivals", timeout=5).json()["by_second"]
    start = doc["started"]
    full = sorted(int(s) for s in counted if start + 1 <= int(s) and int(s) + 1 <= start + args.seconds)
    load = next(r for r in doc["load"] if r["name"] == "offered_load_matches_curve")["counts"]
    print(f"curve {rate:,.0f} arrivals/s for {args.seconds} s, {args.processes} process(es); verdict "
          f"{doc['verdict']['outcome']}; due {load['due']:,}, sent {load['sent']:,} ({load['late']:,} late), "
          f"dropped {load['dropped']:,}")
    if not full:
        raise SystemExit("no whole second of the run was counted by the target")
    worst = 0.0
    for sec in full:
        n = counted[str(sec)]
        deviation = n / rate - 1
        worst = max(worst, abs(deviation))
        print(f"  second {sec - int(start):>3}: {n:>7,} received  {deviation:+7.2%}")
    print(f"largest per-second deviation from the curve: {worst:.2%} over {len(full)} whole seconds")


if __name__ == "__main__":
    main()
