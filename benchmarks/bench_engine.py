"""Benchmark: the open-model engine's sustained arrival rate on one Locust process.

Against the reference tickets target's sold-out path (both on this machine, sharing its
cores), it measures:

1. Locust FastHttpUser in a closed loop (no wait), 1 process: requests/s it completes;
2. the engine (``--scenario tickets-sold-out``) at rising constant rates: the highest rate
   at which >= 98% of arrivals left within 100 ms of their instant, and its p99 send lag.

Goal (issue 3): the engine on one process within 80% of the closed loop's rate, with
arrivals spread as the curve says.

    python benchmarks/bench_engine.py [--rates 3000 4000 5000 6000 7000] [--seconds 8]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from peakproof.launch import ServedTarget  # noqa: E402


def closed_loop(url: str, users: int, seconds: int) -> float:
    requests.put(f"{url}/quotas/bench-sold-out", json={"capacity": 0}, timeout=5)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "locust", "-f", str(ROOT / "benchmarks" / "closed_loop_locustfile.py"),
                        "--headless", "--host", url, "-u", str(users), "-r", str(users), "-t", f"{seconds}s",
                        "--csv", f"{tmp}/cl", "--only-summary", "--loglevel", "ERROR"],
                       check=False, capture_output=True, cwd=ROOT, env=dict(os.environ, BENCH_QUOTA="bench-sold-out"))
        rows = list(csv.DictReader(open(f"{tmp}/cl_stats.csv")))
        agg = next(r for r in rows if r["Name"] == "Aggregated")
        return float(agg["Requests/s"])


def open_model(url: str, rate: float, seconds: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "locust", "-f", str(ROOT / "loadtests"), "--headless", "--host", url,
                        "--scenario", "tickets-sold-out", "--scale", str(rate / 20_000), "--duration", str(seconds),
                        "--report-dir", tmp, "--only-summary", "--loglevel", "ERROR"],
                       check=False, capture_output=True, cwd=ROOT)
        doc = json.loads(next(Path(tmp).glob("tickets-sold-out-*.json")).read_text())
    load = doc["load"][0]["counts"]
    on_time = (load["sent"] - load["late"]) / load["due"]
    return {"rate": rate, "on_time": on_time, "sent": load["sent"], "due": load["due"],
            "peak_sent": load["peak_sent_per_s"], "p99_ms": _ms((doc["slos"][0].get("actual") or {}).get("value"))}


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rates", type=float, nargs="+", default=[3000, 4000, 5000, 5500, 6000, 7000])
    p.add_argument("--seconds", type=float, default=8)
    p.add_argument("--users", type=int, default=32)
    args = p.parse_args()
    with ServedTarget("tickets") as served:
        cl = closed_loop(served.url, args.users, int(args.seconds) + 4)
        print(f"closed loop (FastHttpUser, {args.users} users, no wait, 1 process): {cl:,.0f} req/s")
        best = None
        for rate in args.rates:
            r = open_model(served.url, rate, args.seconds)
            ok = r["on_time"] >= 0.98
            print(f"open model at {rate:>6,.0f}/s: {r['on_time']:.1%} sent within 100 ms of their instant, "
                  f"peak second {r['peak_sent']:,}/s, reserve p99 from intended {r['p99_ms']:,.1f} ms"
                  f"{'' if ok else '  <- cannot sustain'}")
            if ok:
                best = rate
            time.sleep(1)
        if best:
            print(f"sustained open-model rate on one process: {best:,.0f} req/s = {best / cl:.0%} of the closed loop")
        else:
            print("the engine sustained none of the rates tried")


if __name__ == "__main__":
    main()
