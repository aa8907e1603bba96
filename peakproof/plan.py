"""``peakproof plan <case>``: how many generator processes and machines the seed's full peak needs.

A load generator's cost is the cores it needs to offer a curve on time. The plan measures,
on this machine, the rate one generator process offers on time (>= 98% of arrivals within
100 ms of their instants: the case's calibration scenario, the same one ``--scale auto``
uses), and, given a URL, the target's answer time at a low rate. From them it prints how
many processes and machines of this kind the seed's peak needs (with the case's headroom:
the calibration probes the cheapest request, the peak mixes heavier ones), how many
requests will be in flight at the peak (Little's law: rate x answer time) against the
pool, and the exact commands to run it on one machine or on several.
"""

from __future__ import annotations

import argparse
import math
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from typing import Any

from .calibrate import CalibrationResult, climb
from .placement import Placement, auto_processes, pin, place, usable_cores
from .case import Case
from .launch import ServedTarget


@dataclass
class Plan:
    case: str
    scenario: str
    peak: float  # the seed's full peak, arrivals/s
    per_process: float  # arrivals/s one generator process offers on time here
    headroom: float  # the share of it a process is planned at
    cores: int
    target_local: bool  # the target shares this machine's cores (embedded or loopback)
    answer_p99: float | None  # s, at the calibration's lowest rate (a URL was given or the target is embedded)
    low_rate: float | None
    pool_size: int = 1000
    time_axis: bool = False  # the case's rates grow with --time-scale (the feed): its full peak is --time-scale 1

    @property
    def processes(self) -> int:
        usable = self.per_process * self.headroom
        return max(1, math.ceil(self.peak / usable)) if usable > 0 else 0

    @property
    def processes_per_machine(self) -> int:
        return auto_processes(self.cores, self.target_local)  # what --processes auto gives

    @property
    def machines(self) -> int:
        return math.ceil(self.processes / self.processes_per_machine) if self.processes else 0

    @property
    def in_flight_per_process(self) -> float | None:
        if self.answer_p99 is None or not self.processes:
            return None
        return self.peak / self.processes * self.answer_p99


def make_plan(case: Case, cal: CalibrationResult, *, target_local: bool, pool_size: int = 1000) -> Plan:
    low = cal.steps[0] if cal.steps else {}
    p99 = low.get("p99_from_intended")
    return Plan(case.name, case.scenarios[0], case.peak_rate(), cal.rate, case.headroom, usable_cores(),
                target_local, p99, low.get("rate"), pool_size, case.scale_axis == "time_scale")


def render(plan: Plan, url: str | None, cal: CalibrationResult) -> str:
    out = [f"peakproof plan {plan.case}: the seed's full peak on machines like this one ({plan.cores} cores)", ""]
    capped = " (the calibration's top: at least this)" if cal.top and plan.per_process >= cal.top else ""
    out.append(f"  generator, one process:  {plan.per_process:,.0f} arrivals/s on time{capped} (>= 98% within 100 ms; "
               f"{cal.scenario}, {cal.seconds:.1f} s{cal.why_stopped()})")
    if plan.answer_p99 is not None:
        out.append(f"  target answer time:      p99 {plan.answer_p99 * 1000:,.1f} ms at {plan.low_rate or 0:,.0f} "
                   f"arrivals/s{'' if url else ' (the embedded reference, as light as it goes)'}")
    out.append(f"  the seed's peak:         {plan.peak:,.2f} arrivals/s ({plan.scenario} at --scale 1)")
    if not plan.processes:
        out += ["", f"  no plan: {cal.sentence()}"]
        return "\n".join(out)
    usable = plan.per_process * plan.headroom
    out.append(f"  generator processes:     {plan.processes} = ceil({plan.peak:,.0f} / ({plan.per_process:,.0f} x "
               f"{plan.headroom:g} headroom = {usable:,.0f}/s each))")
    where = ("the target shares these cores: one is left to it" if plan.target_local else
             "the target is elsewhere: every core generates")
    out.append(f"  per machine:             {plan.processes_per_machine} process(es) ({where})")
    out.append(f"  machines of this kind:   {plan.machines}")
    if plan.in_flight_per_process is not None:
        fits = plan.in_flight_per_process <= plan.pool_size
        out.append(f"  in flight per process:   {plan.in_flight_per_process:,.0f} at the peak (rate x p99 answer time) "
                   f"vs a pool of {plan.pool_size:,}: "
                   + ("fits" if fits else f"raise --pool-size to {math.ceil(plan.in_flight_per_process * 1.5):,}"))
    host = url or "URL"
    scale = "--scale 1 --time-scale 1" if plan.time_axis else "--scale 1"
    out += ["", "  commands:"]
    if plan.machines <= 1:
        out.append(f"    peakproof run {plan.case} --target-url {host} {scale} --processes {plan.processes}")
        out.append(f"    # or Locust itself: locust -f loadtests/ --headless --host {host} --scenario {plan.scenario} "
                   f"{scale} --processes {plan.processes}")
    else:
        out.append("    # on the master (it judges; it sends nothing itself):")
        out.append(f"    locust -f loadtests/ --headless --master --expect-workers {plan.processes} --host {host} "
                   f"--scenario {plan.scenario} {scale}")
        out.append(f"    # on each of the {plan.machines} worker machines (MASTER: the master's address):")
        out.append(f"    locust -f loadtests/ --worker --master-host MASTER --processes {plan.processes_per_machine}")
    if plan.processes <= plan.processes_per_machine:
        out.append("  this machine can replay the full peak by itself.")
    return "\n".join(out)


def plan_command(args: argparse.Namespace, case: Case) -> int:
    import tempfile

    from .placement import on_loopback

    if not case.calibration:
        print(f"peakproof plan: {case.name} has no calibration scenario", file=sys.stderr)
        return 2
    spec = case.resolved(case.spec_from(lambda name: getattr(args, name, None)))
    from .run import Run

    Run.of(spec, case)  # a driver that cannot be loaded is a usage error, said before anything runs
    with ExitStack() as stack:
        work = stack.enter_context(tempfile.TemporaryDirectory(prefix="peakproof-plan-"))
        url = spec.target_url
        target_local = url is None or on_loopback(url)
        knee = None
        if url is not None:
            # the target's own capacity first: the ladder from the rate it can take, judged by its limits and
            # the promises its answers can break, up to where it stops keeping them (or the generator does)
            knee = climb(case, spec, Path(work), latency=True, pin=_generator_core())
            print(f"peakproof plan: the target's knee ({knee.seconds:.1f} s): {knee.sentence()}", flush=True)
        # the generator's limit, against the embedded reference as light as it goes (notifications: accepts
        # only, no delivery) on the last core, never against the URL: a ladder well past the peak would only
        # bury a small staging box. The same ladder as peakproof run's calibration, so both print one figure
        served = stack.enter_context(ServedTarget(case, **case.light_options()))
        pin(served.proc.pid if served.proc else None, _placed().target_cores)
        cal = climb(case, spec.with_options(target_url=served.url), Path(work), latency=False, pin=_generator_core())
    plan = make_plan(case, cal, target_local=target_local, pool_size=spec.pool_size)
    if knee is not None and knee.steps:  # the answer time that matters is the URL's, at its ladder's first step
        plan.answer_p99, plan.low_rate = knee.steps[0].get("p99_from_intended"), knee.steps[0].get("rate")
    print(render(plan, url, cal))
    if knee is not None:
        print(render_knee(case, knee, spec))
    return 0 if plan.processes else 2


def render_knee(case: Case, knee: CalibrationResult, spec: "Any") -> str:
    """The target's knee: the highest rate at which every limit the ladder judges held, and the factor to the peak."""
    peak = case.peak_rate()
    out = ["", f"  the target's knee ({spec.target_url}):"]
    if not knee.ok:
        out.append(f"    none found: {knee.sentence()}")
        return "\n".join(out)
    judged = (f"every answer within {knee.latency_limit * 1000:,.0f} ms of its instant (p99), under 1% errors, "
              f"no answer breaking a promise the probe can break")
    if knee.stopped_by == "target":
        out.append(f"    {knee.rate:,.1f} arrivals/s: the highest step at which {judged}{knee.why_stopped()}")
        out.append(f"    the seed's peak ({peak:,.0f}/s) is {peak / knee.rate:,.0f}x its knee; a load it can take: "
                   f"peakproof run {case.name} --target-url {spec.target_url} --scale auto")
    else:
        out.append(f"    at least {knee.rate:,.0f} arrivals/s: the generator gave way first{knee.why_stopped()}; run "
                   f"more generator processes (peakproof run --processes) to find the target's own")
    return "\n".join(out)


def _placed() -> "Placement":
    """One generator process and the embedded target, each on its own core when there are two."""
    return place(usable_cores(), 1, "embedded")


def _generator_core() -> int | None:
    placed = _placed()
    return placed.generator_cores[0] if placed.generator_cores else None
