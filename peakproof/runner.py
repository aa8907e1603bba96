"""``peakproof run``: the main job, end to end, with a one-screen verdict.

Against the embedded reference target (started on 127.0.0.1) unless ``--target-url`` is
given: the case's Hypothesis properties (ci profile; tickets and feed over HTTP), the
case's open-model load scenario through Locust (and its fault scenarios with
``--faults``), and for tickets (reference target only) the seed-scale opening replayed in
process. Exit 0 only when every part holds.
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

from .cases.tickets import InProcessTickets, OpeningWorkload, check_tickets, replay_opening
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
        if args.case == "notifications" and not args.provider_url:
            providers = stack.enter_context(ServedTarget("providers"))
            args.provider_url = providers.base
            print(f"peakproof: started the provider simulator at {providers.base}", flush=True)
        if not url and args.case == "feed":
            # each part gets a fresh reference target: a load run builds a 1.5-million-follow graph
            served = stack.enter_context(ServedTarget("feed", policy=args.policy or DEFAULT_POLICY["feed"]))
            url = served.url
            print(f"peakproof: started the reference feed target for the properties at {url}", flush=True)
        elif not url:
            options: dict[str, object] = {"policy": args.policy or DEFAULT_POLICY[args.case]}
            if args.case == "notifications":  # the seed's 30 s rounds, shrunk like the scenario's
                options.update(provider_url=args.provider_url, backoff=30.0 / args.time_scale,
                               breaker_cool_down=max(1.0, 10.0 / args.time_scale))
            served = stack.enter_context(ServedTarget(args.case, **options))
            url = served.url
            print(f"peakproof: started the reference {args.case} target ({options['policy']}) at {url}", flush=True)
        else:
            print(f"peakproof: target {url}", flush=True)
        if not args.skip_properties:
            props = find_properties(args.case)
            cmd = [sys.executable, "-m", "pytest", str(props), "-q", "-p", "no:cacheprovider", "-x"]
            if args.case in ("tickets", "feed"):  # the notification machine decides provider answers: in-process
                cmd += ["--target-url", url]
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

        for scenario in SCENARIOS[args.case] + (FAULTS.get(args.case, []) if args.faults else []):
            if args.case == "feed" and not args.target_url:
                with ServedTarget("feed", policy=args.policy or DEFAULT_POLICY["feed"]) as fresh:
                    print(f"peakproof: started a fresh reference feed target at {fresh.url}", flush=True)
                    parts.append(_load_scenario(args, fresh.url, scenario))
            else:
                parts.append(_load_scenario(args, url, scenario))

    if not args.target_url and args.case == "tickets":
        t0 = time.monotonic()
        driver = InProcessTickets(policy=args.policy or "pessimistic")
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
            actual = (f"Actual {r.counts['actual_ms']:,.1f} ms / Limit {r.counts['limit_ms']:,.1f} ms"
                      if "actual_ms" in r.counts else
                      f"Actual {r.counts['actual']} / Limit {r.counts['limit']}" if "actual" in r.counts else
                      f"violations {r.counts['violations']:,} / Limit 0" if "violations" in r.counts else
                      "; ".join(f"{k} {v}" for k, v in r.counts.items())[:400])
            print(f"      [{mark}] {r.name}: {actual}" + (f"\n          {r.first_violation}" if r.first_violation else ""))
    return 0 if verdict else 1


DEFAULT_POLICY = {"tickets": "pessimistic", "notifications": "cascade", "feed": "hybrid"}
SCENARIOS = {"tickets": ["tickets-opening"], "notifications": ["notifications-peak"], "feed": ["feed-peak"]}
FAULTS = {"notifications": ["notifications-push-down", "notifications-ack-lost", "notifications-reminder-flood"],
          "feed": ["feed-slow-consumer", "feed-shard-down"]}


def _load_scenario(args: argparse.Namespace, url: str, scenario: str) -> tuple[str, bool, str, list[CheckResult]]:
    """Run one Locust scenario (open model) and read its verdict from the report's sidecar."""
    loadtests = find_properties(args.case).parents[1] / "loadtests"
    reports = Path(args.report_dir)
    reports.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    locust_html = reports / f"{scenario}-{stamp}-locust.html"
    cmd = [sys.executable, "-m", "locust", "-f", str(loadtests), "--headless", "--host", url,
           "--scenario", scenario, "--scale", str(args.scale), "--time-scale", str(args.time_scale),
           "--report-dir", str(reports), "--html", str(locust_html), "--only-summary", "--loglevel", "WARNING"]
    if args.admin_token:
        cmd += ["--admin-token", args.admin_token]
    if args.case == "notifications":
        # Faults cost the target more per notification (timeouts held, 3x the arrivals in a flood):
        # they run at half the scale (a quarter for the flood) so they judge the design, not the CPU.
        scale = args.scale / 4 if scenario.endswith("reminder-flood") else (
            args.scale / 2 if scenario in FAULTS["notifications"] else args.scale)
        cmd[cmd.index("--scale") + 1] = str(scale)
        cmd += ["--provider-url", args.provider_url, "--duration", str(args.duration)]
    if args.case == "feed":
        cmd += ["--duration", str(args.duration)]
    print(f"peakproof: load: {scenario} at scale {args.scale:g} (time scale {args.time_scale:g}) through Locust",
          flush=True)
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    sidecars = [p for p in reports.glob(f"{scenario}-*.json") if p.stat().st_mtime >= t0 - 1]
    if not sidecars:
        print(proc.stdout[-3000:], proc.stderr[-3000:])
        return (f"load scenario {scenario}", False, f"Locust exited {proc.returncode} without a report", [])
    doc = json.loads(max(sidecars, key=lambda p: p.stat().st_mtime).read_text())
    results = [_result(r) for group in ("load", "checks", "slos") for r in doc[group]]
    load = doc["load"][0]["counts"] if doc["load"] else {}
    detail = (f"{load.get('sent', 0):,} requests, peak {load.get('peak_sent_per_s', 0):,}/s sent vs "
              f"{load.get('peak_target_per_s', 0):,}/s due; report {reports / doc['html']}")
    return (f"load scenario {scenario} (Locust, open model)", bool(doc["pass"]) and proc.returncode == 0, detail,
            results)


def _result(d: dict) -> CheckResult:
    return CheckResult(d["name"], d["valid"], d["counts"], d["first_violation"], d.get("examples", []), d.get("note"))


