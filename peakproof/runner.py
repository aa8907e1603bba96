"""``peakproof run``: the main job, end to end, with a one-screen verdict.

Against the embedded reference target (started on 127.0.0.1) unless ``--target-url`` is
given: the case's Hypothesis properties (ci profile), a concurrent HTTP burst around
sell-out judged by the case's checks, and (reference target only) the seed-scale opening
replayed in process. Exit 0 only when every part holds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

from .cases.tickets import HttpTickets, InProcessTickets, OpeningWorkload, check_tickets, concurrent_burst, replay_opening
from .checks import CheckResult
from .errors import UsageError
from .launch import ServedTarget


def find_properties(case: str) -> Path:
    for root in (Path.cwd(), Path(__file__).resolve().parents[1]):
        path = root / "properties" / f"test_{case}.py"
        if path.exists():
            return path
    raise UsageError("properties", f"properties/test_{case}.py in the current directory or beside the package",
                     str(Path.cwd()), "Run peakproof from a checkout of the project.")


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    parts: list[tuple[str, bool, str, list[CheckResult]]] = []
    with ExitStack() as stack:
        url = args.target_url
        if not url:
            served = stack.enter_context(ServedTarget(args.case, policy=args.policy))
            url = served.url
            print(f"peakproof: started the reference {args.case} target (policy {args.policy}) at {url}", flush=True)
        else:
            print(f"peakproof: target {url}", flush=True)

        if not args.skip_properties:
            props = find_properties(args.case)
            cmd = [sys.executable, "-m", "pytest", str(props), "-q", "-p", "no:cacheprovider",
                   "--target-url", url, "-x"]
            if args.admin_token:
                cmd += ["--admin-token", args.admin_token]
            print(f"peakproof: properties: {' '.join(cmd[2:])}", flush=True)
            t0 = time.monotonic()
            proc = subprocess.run(cmd, env=dict(os.environ, HYPOTHESIS_PROFILE="ci"), capture_output=True,
                                  text=True, timeout=900)
            tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr.strip()[-200:]
            if proc.returncode not in (0, 5):
                print(proc.stdout[-6000:])
            ok = proc.returncode == 0
            parts.append(("properties (Hypothesis, ci profile)", ok, f"{tail} in {time.monotonic() - t0:.1f} s", []))

        print(f"peakproof: concurrent burst: {args.burst_requests:,} reservations from {args.threads} threads "
              f"on a {args.burst_capacity:,} quota", flush=True)
        t0 = time.monotonic()
        _, history = concurrent_burst(lambda h: HttpTickets(url, history=h, admin_token=args.admin_token),
                                      capacity=args.burst_capacity, requests=args.burst_requests,
                                      threads=args.threads, hold_seconds=600.0, deadline_seconds=300.0)
        elapsed = time.monotonic() - t0
        results = check_tickets(history, HttpTickets.tolerance)
        c = history.counts()
        parts.append(("concurrent burst over HTTP", not any(r.failed for r in results),
                      f"{len(history.of('reserve')):,} requests in {elapsed:.1f} s "
                      f"({len(history.of('reserve')) / elapsed:,.0f}/s): ok {c['ok']:,}, fail {c['fail']:,}, "
                      f"info {c['info']:,}", results))

    if not args.target_url:
        t0 = time.monotonic()
        driver = InProcessTickets(policy=args.policy)
        quota, history = replay_opening(driver, OpeningWorkload())
        results = check_tickets(history, driver.tolerance)
        parts.append(("seed-scale opening in process (200,000 requests, 5,000 quota)",
                      not any(r.failed for r in results),
                      f"{time.monotonic() - t0:.1f} s; quota-row lock taken "
                      f"{driver.core.lock_acquisitions(quota):,} times", results))

    verdict = all(ok for _, ok, _, _ in parts)
    print()
    print(f"peakproof verdict for {args.case}: {'PASS' if verdict else 'FAIL'} "
          f"({time.monotonic() - started:.0f} s)")
    for name, ok, detail, checks in parts:
        print(f"  [{'ok' if ok else 'FAIL'}] {name}: {detail}")
        for r in checks:
            mark = {True: "ok", False: "FAIL", "unknown": "??"}[r.valid]
            print(f"      [{mark}] {r.name}: violations {r.counts.get('violations', 0):,} (limit 0)"
                  + (f"\n          {r.first_violation}" if r.first_violation else ""))
    _write_summary(args.case, verdict, parts)
    return 0 if verdict else 1


def _write_summary(case: str, verdict: bool, parts: list[tuple[str, bool, str, list[CheckResult]]]) -> None:
    out = Path("reports")
    out.mkdir(exist_ok=True)
    path = out / f"{case}-run-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"case": case, "pass": verdict,
                                "parts": [{"name": n, "ok": o, "detail": d, "checks": [c.to_json() for c in cs]}
                                          for n, o, d, cs in parts]}, indent=1, default=str))
    print(f"  summary written to {path}")
