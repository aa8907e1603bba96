"""Benchmark: the open-model engine's on-time rate per core against Locust's own closed loop.

Two targets answer the seed's sold-out path (409 ``sold_out`` to every reservation):

* ``reference``: the reference tickets target (``peakproof serve tickets``);
* ``nginx``: a C stand-in, nginx from Debian's packages answering the same 409 from a static
  config written by this script, so the target's own CPU is not what limits the figure.

Each target is pinned to core 1 and every generator to core 0 (``taskset``), so "per core"
means one core. For each target, in one run:

1. Locust ``FastHttpUser`` in a closed loop (no wait, ``--users``), one process: requests/s
   (measured before and after the engine's steps; the higher is used: the ratio is not
   flattered by a slow Locust run);
2. the engine (``--scenario tickets-sold-out``) at rising constant rates with no top (from
   ``--start``, x ``--ratio`` a step) until it falls behind: the highest rate at which >= 98% of
   arrivals left within 100 ms of their instant, where it stopped and why, and the ratio to (1).
   This host's speed drifts by +-15% from minute to minute, so a rate that failed is tried
   once more before the search stops.

``--processes-2`` adds the engine with ``--processes 2`` against the stand-in (both cores
generating; nginx shares them).

    python benchmarks/bench_engine.py [--targets nginx reference] [--start 4000 --ratio 1.15 | --rates ...] [--seconds 8]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from peakproof.cases import get_case  # noqa: E402
from peakproof.launch import ServedTarget, free_port, stop_process, wait_until_answering  # noqa: E402

PEAK = get_case("tickets").peak_rate()  # tickets-sold-out's arrivals/s at --scale 1, from the ported model

GENERATOR_CORE, TARGET_CORE = "0", "1"

NGINX_CONF = """
daemon off;
master_process off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 120s;
  default_type application/json;
  client_body_temp_path {tmp}/body;
  server {{
    listen 127.0.0.1:{port} backlog=8192;
    location ~ ^/tickets/quotas/[^/]+/reservations$ {{
      return 409 '{{"error":"sold_out","message":"only 0 available; asked 1","available":0}}';
    }}
    location ~ ^/tickets/quotas/([^/]+)$ {{
      return 200 '{{"quota_id":"$1","capacity":0,"available":0,"held":0,"sold":0,"hold_seconds":120.0}}';
    }}
    location / {{ return 404 '{{"error":"not_found","message":"the stand-in answers only the sold-out path"}}'; }}
  }}
}}
"""


@contextmanager
def nginx_standin() -> Iterator[str]:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(nginx):
        raise SystemExit("nginx is not installed: apt-get install nginx-light (Debian's package), or --targets reference")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="peakproof-nginx-") as tmp:
        conf = Path(tmp) / "nginx.conf"
        conf.write_text(NGINX_CONF.format(tmp=tmp, port=port))
        proc = subprocess.Popen(["taskset", "-c", TARGET_CORE, nginx, "-c", str(conf), "-p", tmp],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            url = f"http://127.0.0.1:{port}/tickets"
            if not wait_until_answering(f"{url}/quotas/probe", 5.0, proc=proc):
                raise SystemExit(f"nginx did not start: {proc.stderr.read().decode() if proc.stderr else ''}")
            yield url
        finally:
            stop_process(proc)


@contextmanager
def reference() -> Iterator[str]:
    with ServedTarget(get_case("tickets")) as served:
        os.sched_setaffinity(served.proc.pid, {int(TARGET_CORE)})  # type: ignore[union-attr]
        yield served.url


def closed_loop(url: str, users: int, seconds: int) -> float:
    requests.put(f"{url}/quotas/bench-sold-out", json={"capacity": 0}, timeout=5)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["taskset", "-c", GENERATOR_CORE, sys.executable, "-m", "locust",
                        "-f", str(ROOT / "benchmarks" / "closed_loop_locustfile.py"),
                        "--headless", "--host", url, "-u", str(users), "-r", str(users), "-t", f"{seconds}s",
                        "--csv", f"{tmp}/cl", "--only-summary", "--loglevel", "ERROR"],
                       check=False, capture_output=True, cwd=ROOT, env=dict(os.environ, BENCH_QUOTA="bench-sold-out"))
        rows = list(csv.DictReader(open(f"{tmp}/cl_stats.csv")))
        agg = next(r for r in rows if r["Name"] == "Aggregated")
        return float(agg["Requests/s"])


def open_model(url: str, rate: float, seconds: float, processes: int = 1) -> dict:
    pin = ["taskset", "-c", GENERATOR_CORE] if processes == 1 else []
    with tempfile.TemporaryDirectory() as tmp:
        cmd = pin + [sys.executable, "-m", "locust", "-f", str(ROOT / "loadtests"), "--headless", "--host", url,
                     "--scenario", "tickets-sold-out", "--scale", str(rate / PEAK), "--duration", str(seconds),
                     "--report-dir", tmp, "--result", f"{tmp}/result.json", "--only-summary", "--loglevel", "ERROR"]
        if processes > 1:
            cmd += ["--processes", str(processes)]
        subprocess.run(cmd, check=False, capture_output=True, cwd=ROOT)
        result = Path(tmp) / "result.json"
        if not result.exists():
            return {"rate": rate, "on_time": 0.0, "peak_sent": 0, "p99_ms": None, "cpu": None}
        doc = json.loads(Path(json.loads(result.read_text())["report"]).with_suffix(".json").read_text())
    load = doc["load"][0]["counts"]
    on_time = (load["sent"] - load["late"]) / load["due"]
    p99 = (doc["slos"][0].get("actual") or {}).get("value") if doc["slos"] else None
    return {"rate": rate, "on_time": on_time, "peak_sent": load["peak_sent_per_s"],
            "p99_ms": None if p99 is None else p99 * 1000, "cpu": load.get("generator_cpu_percent")}


def ladder(start: float, ratio: float) -> Iterator[float]:
    """Rising rates without a top: the search goes until the generator or the target gives way."""
    rate = start
    while True:
        yield round(rate, -2)
        rate *= ratio


def search(url: str, rates: Iterable[float], seconds: float, processes: int = 1) -> float:
    best = 0.0
    for rate in rates:
        for attempt in (1, 2):
            r = open_model(url, rate, seconds, processes)
            ok = r["on_time"] >= 0.98
            p99 = "-" if r["p99_ms"] is None else f"{r['p99_ms']:,.1f} ms"
            print(f"  engine x{processes} at {rate:>7,.0f}/s (try {attempt}): {r['on_time']:7.2%} sent within 100 ms, "
                  f"peak second {r['peak_sent']:,}/s, reserve p99 from intended {p99}, generator CPU {r['cpu']}%"
                  f"{'' if ok else '  <- not on time'}", flush=True)
            time.sleep(1)
            if ok:
                best = rate
                break
        else:
            why = ("the generator used all of its core" if (r["cpu"] or 0) >= 85 else
                   "the target's answers held the pool" if r["on_time"] < 0.98 else "not on time")
            print(f"  stopped at {rate:,.0f}/s: {why} (generator CPU {r['cpu']}%); the engine's rate here: "
                  f"{best:,.0f}/s", flush=True)
            return best
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--targets", nargs="+", choices=["nginx", "reference"], default=["nginx", "reference"])
    p.add_argument("--rates", type=float, nargs="+", default=None,
                   help="the rates to try (default: from --start up by --ratio until the engine falls behind)")
    p.add_argument("--start", type=float, default=4000)
    p.add_argument("--ratio", type=float, default=1.15)
    p.add_argument("--seconds", type=float, default=8)
    p.add_argument("--users", type=int, default=32)
    p.add_argument("--processes-2", action="store_true", help="also the engine with --processes 2 (stand-in only)")
    args = p.parse_args()
    summary = []
    for name in args.targets:
        with (nginx_standin() if name == "nginx" else reference()) as url:
            print(f"target: {name} ({url}), pinned to core {TARGET_CORE}; generators on core {GENERATOR_CORE}",
                  flush=True)
            before = closed_loop(url, args.users, int(args.seconds) + 4)
            print(f"  closed loop (FastHttpUser, {args.users} users, no wait, 1 process): {before:,.0f} req/s",
                  flush=True)
            best = search(url, args.rates or ladder(args.start, args.ratio), args.seconds)
            after = closed_loop(url, args.users, int(args.seconds) + 4)
            print(f"  closed loop again: {after:,.0f} req/s", flush=True)
            cl = max(before, after)
            line = (f"{name}: engine {best:,.0f} arrivals/s on time on one core vs Locust closed loop {cl:,.0f} req/s: "
                    f"{best / cl:.2f}x")
            summary.append(line)
            if args.processes_2 and name == "nginx":
                best2 = search(url, [r * 1.5 for r in args.rates] if args.rates else ladder(args.start * 1.5, args.ratio),
                               args.seconds, processes=2)
                summary.append(f"{name}: engine --processes 2 (both cores, nginx sharing them): {best2:,.0f} arrivals/s "
                               f"on time")
    print("\n" + "\n".join(summary))


if __name__ == "__main__":
    main()
