"""``peakproof run``: the main job, end to end, with a one-screen verdict.

Against the embedded reference target (started on 127.0.0.1) unless ``--target-url`` is
given, in which case *every* stage goes to that URL and nothing runs in process:

1. calibration: what this machine's generator offers on one process (``--scale auto``
   sizes the load from it);
2. the case's Hypothesis properties (ci profile) over HTTP;
3. the case's open-model load scenario through Locust (and its fault scenarios with
   ``--faults``);
4. tickets on the reference target only: the seed-scale opening replayed in process.

The verdict merges the parts: PASS (exit 0) only when every part was decided and held;
FAIL (exit 1) when the target broke a promise; INCONCLUSIVE (exit 2) when the harness
could not test one (its generator fell behind, a check was not exercised, a stage raised).
Every case goes through this one path: what differs is in its :class:`~peakproof.case.Case`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from .calibrate import CalibrationResult, auto_scale, processes_for, run_calibration
from .case import Case, get_case
from .checks import CheckResult
from .errors import UsageError
from .launch import ServedTarget
from .verdict import Outcome, judge_results, merge_outcomes


@dataclass
class Part:
    """One stage of a run: what ran where, its outcome, and why."""

    name: str
    outcome: Outcome
    detail: str
    results: list[CheckResult] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)


def project_dir(what: str) -> Path:
    """``properties/`` or ``loadtests/`` of the checkout peakproof runs from."""
    for root in (Path.cwd(), Path(__file__).resolve().parents[1]):
        path = root / what
        if path.is_dir():
            return path
    raise UsageError(what, f"a {what}/ folder in the current directory or beside the package", str(Path.cwd()),
                     "Run peakproof from a checkout of the project.")


def run(args: argparse.Namespace) -> int:
    case = get_case(args.case)
    started = time.monotonic()
    parts: list[Part] = []
    notes: list[str] = []
    with ExitStack() as stack:
        if case.needs_providers and not args.provider_url:
            if args.target_url:
                raise UsageError("--provider-url", f"the providers' base URL your {case.name} target calls", None,
                                 "Their record of calls is the ground truth of every delivery check; with "
                                 "--target-url, pass the --provider-url that target delivers through.")
            providers = stack.enter_context(ServedTarget("providers"))
            args.provider_url = providers.base
            print(f"peakproof: started the provider simulator at {providers.base}", flush=True)
        embedded = not args.target_url
        url = args.target_url
        if embedded:
            served = stack.enter_context(_serve(case, args))
            url = served.url
            print(f"peakproof: started the reference {case.name} target ({args.policy or case.default_policy}) "
                  f"at {url}", flush=True)
        else:
            print(f"peakproof: every stage goes to {url}; nothing runs in process", flush=True)

        cal = None
        if not args.skip_load:
            cal = _calibrate(case, args, url, embedded)
            notes.append(_fit_load(case, args, cal))
            print(f"peakproof: {notes[-1]}", flush=True)

        if not args.skip_properties:
            parts.append(_properties(case, args, url))

        if not args.skip_load:
            for scenario in case.all_scenarios(args.faults):
                if case.fresh_target_per_scenario and embedded:
                    with _serve(case, args) as fresh:
                        print(f"peakproof: started a fresh reference {case.name} target at {fresh.url}", flush=True)
                        parts.append(_load_scenario(case, args, fresh.url, scenario, cal))
                else:
                    parts.append(_load_scenario(case, args, url, scenario, cal))

    if embedded and case.in_process_stage is not None and not args.skip_load:
        t0 = time.monotonic()
        name, results, detail = case.in_process_stage(args)
        judged = judge_results(results)
        parts.append(Part(name, judged.outcome, f"{time.monotonic() - t0:.1f} s; {detail}", results, judged.reasons))

    outcome = merge_outcomes(p.outcome for p in parts)
    print()
    print(f"peakproof verdict for {case.name}: {outcome} ({time.monotonic() - started:.0f} s; "
          f"target {'the embedded reference' if embedded else args.target_url})")
    for note in notes:
        print(f"  {note}")
    for p in parts:
        if p.outcome is not Outcome.PASS:
            for reason in p.reasons[:4]:
                print(f"  why ({p.name}): {reason}")
    for p in parts:
        print(f"  [{ {Outcome.PASS: 'ok', Outcome.FAIL: 'FAIL', Outcome.INCONCLUSIVE: '??'}[p.outcome] }] "
              f"{p.name}: {p.detail}")
        for r in p.results:
            print("      " + r.line().replace("\n", "\n      "))
    print(f"exit {outcome.exit_code}: 0 PASS, 1 FAIL (the target broke a promise), 2 INCONCLUSIVE (not decided)")
    return outcome.exit_code


def _serve(case: Case, args: argparse.Namespace) -> ServedTarget:
    return ServedTarget(case.name, policy=args.policy or case.default_policy, **case.served_options(args))


def on_loopback(url: str) -> bool:
    """The URL's host is this machine (127.0.0.0/8, ::1 or localhost)."""
    import ipaddress
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _calibrate(case: Case, args: argparse.Namespace, url: str, embedded: bool) -> CalibrationResult | None:
    if not case.calibration:
        return None
    loadtests = project_dir("loadtests")
    extra = ["--provider-url", args.provider_url] if case.needs_providers else []
    with ExitStack() as stack:
        where = url
        if embedded:  # its own target, so the burst leaves no backlog behind for the run
            where = stack.enter_context(_serve(case, args)).url
        # A target on this machine (embedded, or any loopback URL) shares its cores with the generator:
        # a step passes only if it also answered in time. Elsewhere the generator alone is measured.
        cal = run_calibration(case, where, loadtests, latency=embedded or on_loopback(url),
                              admin_token=args.admin_token, extra=extra)
    print(f"peakproof: calibration ({case.calibration}, {cal.seconds:.1f} s): {cal.sentence()}", flush=True)
    return cal


def _fit_load(case: Case, args: argparse.Namespace, cal: CalibrationResult | None) -> str:
    """Settle ``--scale`` (or the feed's ``--time-scale``) and say what the load will be, and why."""
    peak = case.peak_rate()  # the seed's full peak, arrivals/s
    axis = case.scale_axis
    if axis == "scale":
        per_unit = peak  # arrivals/s per unit of --scale
    else:  # the feed: --scale sizes the graph; the rates grow with --time-scale
        if args.scale == "auto":
            args.scale = case.default_scale
        per_unit = peak * args.scale
    asked = getattr(args, axis)
    flag = "--" + axis.replace("_", "-")
    head = ""
    if asked == "auto":
        fitted = auto_scale(case, cal, per_unit, args.processes) if cal else 0.0
        default = case.default_scale if axis == "scale" else case.default_time_scale
        cap = case.max_auto_scale if axis == "scale" else case.default_time_scale
        if fitted <= 0:
            setattr(args, axis, default)
            head = f"{flag} auto could not size the load ({cal.sentence() if cal else 'no calibration'}); "
        else:
            setattr(args, axis, min(cap, fitted))
            head = f"{flag} auto: "
    value = getattr(args, axis)
    rate = per_unit * value
    text = head + (f"running at {flag} {value:g}: {rate:,.0f} arrivals/s at peak, {rate / peak:.1%} of the seed's "
                   f"{peak:,.0f}/s")
    if axis == "time_scale":
        text += f" (on --scale {args.scale:g} of the seed's users)"
    if cal and cal.ok:
        text += (f"; {cal.sentence()}; to replay the full peak use {processes_for(peak, cal.rate)} "
                 f"processes/machines (--processes, Locust --master/--worker)")
    return text


def _properties(case: Case, args: argparse.Namespace, url: str) -> Part:
    props = project_dir("properties") / f"test_{case.name}.py"
    cmd = [sys.executable, "-m", "pytest", str(props), "-q", "-p", "no:cacheprovider", "-x", "-rs",
           "--target-url", url, *case.property_args(args)]
    if args.admin_token:
        cmd += ["--admin-token", args.admin_token]
    print(f"peakproof: properties: pytest {' '.join(cmd[4:])}", flush=True)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="peakproof-properties-") as tmp:
        summary_path = Path(tmp) / "summary.json"
        env = dict(os.environ, HYPOTHESIS_PROFILE=os.environ.get("HYPOTHESIS_PROFILE", "ci"),
                   PEAKPROOF_PROPERTIES_SUMMARY=str(summary_path))
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired:
            return Part("properties (Hypothesis)", Outcome.INCONCLUSIVE, "did not finish within 900 s",
                        reasons=["the properties did not finish within 900 s (a hung target?)"])
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    lines = proc.stdout.strip().splitlines()
    tail = next((ln for ln in reversed(lines) if " passed" in ln or " failed" in ln or " skipped" in ln
                 or "no tests ran" in ln), lines[-1] if lines else proc.stderr.strip()[-200:])
    detail = f"{tail.strip('= ')} in {time.monotonic() - t0:.1f} s, against {url}"
    chances = summary.get("chances", {})
    idle = sorted(name for name, n in chances.items() if not n)
    if idle:
        detail += f"; not exercised by the properties (the load must): {', '.join(idle)}"
    if proc.returncode == 1:
        print(proc.stdout[-6000:])
        return Part("properties (Hypothesis)", Outcome.FAIL, detail,
                    reasons=[_first_failure(proc.stdout) or "a property failed (output above)"])
    ran = " passed" in tail
    if proc.returncode != 0 or not ran:
        print(proc.stdout[-3000:], proc.stderr[-2000:])
        why = ("no property ran against the URL (all skipped or none collected)" if proc.returncode in (0, 5)
               else f"pytest exited {proc.returncode} (an error in the harness or its options)")
        return Part("properties (Hypothesis)", Outcome.INCONCLUSIVE, detail, reasons=[why])
    return Part("properties (Hypothesis)", Outcome.PASS, detail)


def _first_failure(out: str) -> str:
    for line in out.splitlines():
        if line.startswith("E ") and len(line.strip()) > 2:
            return line[1:].strip()[:300]
    return ""


def _load_scenario(case: Case, args: argparse.Namespace, url: str, scenario: str,
                   cal: CalibrationResult | None) -> Part:
    """Run one Locust scenario (open model) and read its verdict from the report's sidecar."""
    reports = Path(args.report_dir)
    reports.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    locust_html = reports / f"{scenario}-{stamp}-locust.html"
    scale = args.scale * case.scenario_scale.get(scenario, 1.0)
    cmd = [sys.executable, "-m", "locust", "-f", str(project_dir("loadtests")), "--headless", "--host", url,
           "--scenario", scenario, "--scale", f"{scale:g}", "--time-scale", f"{args.time_scale:g}",
           "--report-dir", str(reports), "--html", str(locust_html), "--only-summary", "--loglevel", "WARNING",
           *case.load_args(args)]
    if args.processes > 1:
        cmd += ["--processes", str(args.processes)]
    if cal and cal.ok:
        cmd += ["--calibrated-rate", f"{cal.rate:.0f}"]
    if args.admin_token:
        cmd += ["--admin-token", args.admin_token]
    for slo in args.slo or []:
        cmd += ["--slo", slo]
    print(f"peakproof: load: {scenario} at scale {scale:g} (time scale {args.time_scale:g}) through Locust",
          flush=True)
    t0 = time.time()
    name = f"load scenario {scenario} (Locust, open model)"
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    except subprocess.TimeoutExpired:
        return Part(name, Outcome.INCONCLUSIVE, "Locust did not stop within 1,200 s",
                    reasons=["the load run passed its bound without stopping (a harness bug)"])
    sidecars = [p for p in reports.glob(f"{scenario}-*.json") if p.stat().st_mtime >= t0 - 1]
    if not sidecars:
        print(proc.stdout[-3000:], proc.stderr[-3000:])
        return Part(name, Outcome.INCONCLUSIVE, f"Locust exited {proc.returncode} without a report",
                    reasons=[f"Locust exited {proc.returncode} without a report: {proc.stderr.strip()[-300:]}"])
    doc = json.loads(max(sidecars, key=lambda p: p.stat().st_mtime).read_text())
    results = [CheckResult.from_json(r) for group in ("load", "checks", "slos") for r in doc[group]]
    judged = judge_results(results, [e.splitlines()[-1] for e in doc.get("harness_errors", []) if e.strip()])
    load = doc["load"][0]["counts"] if doc["load"] else {}
    detail = (f"{load.get('sent', 0):,} requests, peak {load.get('peak_sent_per_s', 0):,}/s sent vs "
              f"{load.get('peak_target_per_s', 0):,}/s due; report {reports / doc['html']}")
    outcome = judged.outcome
    if outcome is Outcome.PASS and proc.returncode != 0:  # Locust itself said something went wrong
        outcome = Outcome.INCONCLUSIVE
        judged.reasons.append(f"Locust exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return Part(name, outcome, detail, results, judged.reasons)
