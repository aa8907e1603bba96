"""``peakproof run``: the main job, end to end, with a one-screen verdict.

Against the embedded reference target (started on 127.0.0.1) unless ``--target-url`` is
given, in which case *every* stage goes to that URL and nothing runs in process:

1. calibration: what this machine's generator offers on one process (``--scale auto``
   sizes the load from it);
2. the case's Hypothesis properties (ci profile) over HTTP;
3. the case's open-model load scenario through Locust (and its fault scenarios with
   ``--faults``);
4. a case's in-process stage, on the reference target only (tickets: the seed-scale opening).

The run is one :class:`~peakproof.spec.RunSpec`, parsed once by the CLI. Each child stage
(the calibration, pytest, Locust) gets it as a file (``--spec``) and writes a
:class:`~peakproof.spec.StageResult` (``--result``), judged where its checks ran; this
module reads those results and merges their outcomes: PASS (exit 0) only when every part was
decided and held; FAIL (exit 1) when the target broke a promise; INCONCLUSIVE (exit 2) when
the harness could not test one. Every case goes through this one path: what differs is in
its :class:`~peakproof.case.Case`.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .calibrate import (CLIMBS, CalibrationResult, auto_scale, climb, lowest_scale, per_s, processes_for,
                        write_calibration)
from .placement import Placement, on_loopback, pin, taskset, usable_cores
from .case import Case
from . import junit
from .checks import CheckResult
from .errors import UsageError
from .launch import ServedTarget, free_port
from .machine import conditions_changed, placement_for, tenancy_line
from .run import Run
from .spec import RunFacts, RunSpec, StageResult
from .verdict import Outcome, judge_results, merge_outcomes
from .witness import Witness


@dataclass
class Part:
    """One stage of a run: what ran where, its outcome, and why."""

    name: str
    outcome: Outcome
    detail: str
    results: list[CheckResult] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    skipped: bool = False  # did not run at all (shown "skipped", never "ok"); its reasons say why
    seconds: float = 0.0
    junit_cases: list[Any] = field(default_factory=list)  # its own JUnit test cases (the properties': pytest's)
    witnesses: list[dict[str, Any]] = field(default_factory=list)  # peakproof.witness.Witness.to_json(), per FAIL

    def as_junit(self) -> "junit.Stage":
        return junit.Stage(self.name, self.outcome, self.results, self.reasons, self.detail, self.seconds,
                           self.skipped, self.junit_cases)

    @property
    def mark(self) -> str:
        return "skipped" if self.skipped else {Outcome.PASS: "ok", Outcome.FAIL: "FAIL", Outcome.INCONCLUSIVE: "??"}[
            self.outcome]


def _timed(stage: Any, *args: Any) -> Part:
    """A stage's part, with the seconds it took."""
    t0 = time.monotonic()
    part = stage(*args)
    part.seconds = time.monotonic() - t0
    return part


def run(record: Run) -> int:
    """The run ``record`` asks for (its stages, its verdict); the exit code."""
    case, spec = record.case, record.spec
    started = time.monotonic()
    junit_file, spec = spec.junit, spec.with_options(junit=None)  # the run's file: no stage writes one of its own
    # what the run learns as it goes, passed to each stage beside the request: the request without a URL asks
    # for the embedded reference
    facts = record.facts.learned(embedded=not spec.target_url, run_pid=os.getpid())
    parts: list[Part] = []
    notes: list[str] = []
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="peakproof-run-")))
        providers = None
        if case.needs_providers and not spec.opt("provider_url"):
            if not facts.embedded:
                raise UsageError("--provider-url", f"the providers' base URL your {case.name} target calls", None,
                                 "Their record of calls is the ground truth of every delivery check; with "
                                 "--target-url, pass the --provider-url that target delivers through.")
            providers = stack.enter_context(ServedTarget("providers"))
            spec = spec.with_case_options(provider_url=providers.base)
            print(f"peakproof: started the provider simulator at {providers.base}", flush=True)
        if facts.embedded:
            if not spec.admin_token:  # the reference's admin calls need one: then the contract stage checks auth too
                import secrets

                spec = spec.with_options(admin_token=f"embedded-{secrets.token_hex(8)}")
            served = stack.enter_context(serve(case, spec))
            spec = spec.with_options(target_url=served.url)
            facts = facts.learned(target_pids=(served.proc.pid,) if served.proc else ())
            print(f"peakproof: started the reference {case.name} target ({spec.policy or case.default_policy}) "
                  f"at {spec.target_url}", flush=True)
        else:
            print(f"peakproof: every stage goes to {spec.target_url}; nothing runs in process", flush=True)
        placement = placement_for(spec, facts, helpers=("the provider simulator",) if providers else ())
        facts = facts.learned(placement=placement.sentence(), shared_cores=placement.shared_reason() or "")
        if facts.embedded:
            pin(served.proc.pid if served.proc else None, placement.target_cores)
        if not spec.skip_load:
            print(f"peakproof: placement: {placement.sentence()}", flush=True)

        cal = None
        if not spec.skip_load:
            cal = _calibrate(case, spec, facts, work)
            spec, note = fit_load(case, spec, cal, facts.embedded)
            facts = facts.learned(calibrated_by=calibrated_by(cal, facts.embedded))
            notes.append(note)
            print(f"peakproof: {note}", flush=True)
            if cal is not None:  # its steps, as judged, and what the load was fitted to, beside the reports
                axis = case.scale_axis
                cal_file = write_calibration(cal, spec.report_dir, case.name, scale_axis=axis,
                                             scale=getattr(spec, axis), rate_at_peak=fitted_rate(case, spec))
                print(f"peakproof: calibration: {steps_line(cal)}; written to {cal_file}", flush=True)

        if not spec.skip_properties:
            parts.append(_timed(_properties, case, spec, facts, work))
            contract = _contract_part(case, spec, work)
            if contract is not None:
                parts.append(contract)

        if not spec.skip_load:
            for scenario in case.all_scenarios(spec.faults):
                if case.fresh_target_per_scenario and facts.embedded:
                    with serve(case, spec) as fresh:
                        pin(fresh.proc.pid if fresh.proc else None, placement.target_cores)
                        print(f"peakproof: started a fresh reference {case.name} target at {fresh.url}", flush=True)
                        pids = (fresh.proc.pid,) if fresh.proc else ()
                        parts.append(_timed(_load_scenario, case, spec.with_options(target_url=fresh.url),
                                            facts.learned(target_pids=pids), scenario, cal, work, placement))
                else:
                    parts.append(_timed(_load_scenario, case, spec, facts, scenario, cal, work, placement))

    if facts.embedded and case.in_process_stage is not None and not spec.skip_load:
        t0 = time.monotonic()
        name, results, detail = case.in_process_stage(spec)
        judged = judge_results(results)
        parts.append(Part(name, judged.outcome, f"{time.monotonic() - t0:.1f} s; {detail}", results, judged.reasons,
                          seconds=time.monotonic() - t0))

    outcome = merge_outcomes(p.outcome for p in parts)
    print()
    print(f"peakproof verdict for {case.name}: {outcome} ({time.monotonic() - started:.0f} s; "
          f"target {'the embedded reference' if facts.embedded else spec.target_url})")
    for note in notes:
        print(f"  {note}")
    for rule, value in record.with_spec(spec).stated_rules().items():  # and the rules it holds under
        print(f"  rule: {rule}: {value}")
    for line in record.with_spec(spec).design().lines():  # the product's own design, as stated: every verdict's
        print(f"  {line}")
    if spec.without:  # what the user waived is part of every verdict, PASS included
        from .capabilities import waiver_lines

        for line in waiver_lines(case.capabilities, spec.without):
            print(f"  {line}")
    for p in parts:
        if p.outcome is not Outcome.PASS:
            for reason in p.reasons[:4]:
                print(f"  why ({p.name}): {reason}")
    for p in parts:
        print(f"  [{p.mark}] {p.name}: {p.detail}")
        for r in p.results:
            print("      " + r.line().replace("\n", "\n      "))
        for doc in p.witnesses:  # a reproduction for every FAIL: the shrunk witness, its rate, its script
            print("    " + "\n      ".join(Witness.from_json(doc).verdict_lines()))
    if junit_file:
        path = junit.write(junit_file, case.name, [p.as_junit() for p in parts], outcome, time.monotonic() - started)
        print(f"  JUnit XML: {path} ({sum(len(p.results) for p in parts)} checks and service levels in "
              f"{len(parts)} stages)")
    print(f"exit {outcome.exit_code}: 0 PASS, 1 FAIL (the target broke a promise), 2 INCONCLUSIVE (not decided), "
          f"4 usage error")
    return outcome.exit_code


def serve(case: Case, spec: RunSpec, **options: object) -> ServedTarget:
    """The embedded reference for this run, served as the spec says."""
    extra = {"admin_token": spec.admin_token} if spec.admin_token else {}
    return ServedTarget(case, policy=spec.policy or case.default_policy,
                        **{**extra, **case.served_options(spec), **options})


def calibrated_by(cal: CalibrationResult | None, embedded: bool) -> str | None:
    """What the calibrated rate is a limit of, for the load's judge: None (the generator's, or the embedded
    reference's on the core the harness gave it: a curve above it is not decided), "target" (your target's
    knee: a curve above it is the target's to take) or "top" (the ladder's top held: a floor, not a limit)."""
    if not cal or not cal.ok:
        return None
    if cal.stopped_by == "top":
        return "top"
    return "target" if cal.stopped_by == "target" and not embedded else None


def _calibrate(case: Case, spec: RunSpec, facts: RunFacts, work: Path) -> CalibrationResult | None:
    if not case.calibration:
        return None
    if spec.calibrated_rate:  # the user stated the machine's figure (an earlier run, peakproof plan)
        from .calibrate import GIVEN

        return CalibrationResult(GIVEN, float(spec.calibrated_rate))
    from .placement import place, usable_cores

    with ExitStack() as stack:
        where, known = spec, facts
        # one generator process; an embedded target of its own, so the burst leaves no backlog behind for the
        # run, on its own core when the machine has two (the figure is one generator's, on one core)
        kind = "embedded" if facts.embedded else ("loopback" if on_loopback(spec.url) else "remote")
        placed = place(usable_cores(), 1, kind)
        if facts.embedded:
            own = stack.enter_context(serve(case, spec))
            pin(own.proc.pid if own.proc else None, placed.target_cores)
            where = spec.with_options(target_url=own.url)
            known = facts.learned(target_pids=(own.proc.pid,) if own.proc else ())
        # Every step must also be answered in time, without errors, keeping the design's promises: the
        # ladder finds the rate the *target* keeps its service levels at (its knee) when that comes before
        # the generator's limit. An explicit scale is honoured: no step above the rate it asks.
        asked = explicit_rate(case, spec)
        if asked:
            where = where.with_options(calibrate_max_rate=asked)
        cal = climb(case, where, work, facts=known, latency=True, pin=placed.generator_cores[0] if placed.generator_cores else None,
                    climbs=1 if asked else CLIMBS)
    print(f"peakproof: calibration ({case.calibration}, {cal.seconds:.1f} s): {cal.sentence()}", flush=True)
    return cal


def explicit_rate(case: Case, spec: RunSpec) -> float | None:
    """The arrivals/s per generator process at the peak of a load whose scale was stated (None: ``auto``)."""
    axis = case.scale_axis
    asked = getattr(spec, axis)
    if asked == "auto" or asked is None:
        return None
    per_unit = case.peak_rate() if axis == "scale" else case.peak_rate() * spec.number_scale
    return per_unit * float(asked) / max(1, int(spec.processes))


def does_not_fit(case: Case, spec: RunSpec, cal: CalibrationResult | None, rate: float,
                 embedded: bool = False) -> str | None:
    """Said before the load: the curve's peak asks more than the calibration found, by how much, and the fix."""
    if not cal or not cal.ok or cal.scenario == "--calibrated-rate":
        return None
    per_process = rate / max(1, int(spec.processes))
    if per_process <= cal.rate * 1.001:
        return None
    need = f"{per_process / cal.rate:.1f}x what the calibration found ({cal.rate:,.0f}/s per process)"
    if cal.stopped_by == "target" and not embedded:
        return (f"the curve does not fit the target: its peak asks {per_process:,.0f} arrivals/s, {need}, where the "
                f"target stopped keeping its limits. The load runs as asked: a miss is the target's (FAIL); "
                f"for a run it can take, --scale auto (or peakproof plan --target-url)")
    procs = processes_for(rate, cal.rate)
    return (f"the curve does not fit this machine: its peak asks {per_process:,.0f} arrivals/s per generator "
            f"process, {need}. The load runs and stays INCONCLUSIVE where it falls behind; to fit it: "
            f"--processes {procs} (on {math.ceil(procs / max(1, usable_cores() - 1))} machine(s) like this one: "
            f"peakproof plan {case.name}), or a lower --scale")


def fit_load(case: Case, spec: RunSpec, cal: CalibrationResult | None,
             embedded: bool = False) -> tuple[RunSpec, str]:
    """Settle ``--scale`` (or the feed's ``--time-scale``), once, and say what the load will be, and why.

    ``auto`` never runs above the highest step the calibration saw kept; when it kept none (even the lowest
    step failed: a target slow at any rate), at the lowest rate it tried: the promises are still judged
    there, and a latency miss at a rate the target was offered is the target's. Never at a fixed share of
    the seed's peak when a calibration ran."""
    peak = case.peak_rate()  # the seed's full peak, arrivals/s
    axis = case.scale_axis
    per_unit = peak if axis == "scale" else peak * spec.number_scale  # the feed: the rates grow with time scale
    asked = getattr(spec, axis)
    flag = "--" + axis.replace("_", "-")
    head = ""
    if asked == "auto":
        fitted = auto_scale(case, cal, per_unit, int(spec.processes)) if cal else 0.0
        default = case.default_scale if axis == "scale" else case.default_time_scale
        cap = case.max_auto_scale if axis == "scale" else case.default_time_scale
        if fitted <= 0 and cal is not None and cal.scenario != "--calibrated-rate":
            lowest, low_rate = lowest_scale(cal, per_unit)
            spec = spec.with_options(**{axis: min(cap, lowest)})
            where = ("the lowest rate the calibration tried" if cal.lowest_tried else "the ladder's lowest step")
            head = (f"{flag} auto could not size the load ({cal.sentence()}); the load runs at {where} "
                    f"({per_s(low_rate)}), where every promise is still judged and a latency miss is the "
                    f"target's; ")
        elif fitted <= 0:
            spec = spec.with_options(**{axis: default})
            head = f"{flag} auto could not size the load ({cal.sentence() if cal else 'no calibration'}); "
        else:
            spec = spec.with_options(**{axis: min(cap, fitted)})
            head = f"{flag} auto: "
            if fitted > cap:  # the target could take more than the largest value this axis allows: say so, and how
                other = "--time-scale" if axis == "scale" else "--scale"
                head += (f"capped at {flag} {cap:g}, the most this case runs at (the machine and target would take "
                         f"{flag} {fitted:g}, {per_unit * fitted:,.0f} arrivals/s); to load the target nearer its "
                         f"knee, raise {other}{' (' + str(spec.scale) + ' now)' if axis == 'time_scale' else ''}; ")
        if case.resolve:  # what depends on the time scale follows it
            spec = case.resolve(spec)
    value = getattr(spec, axis)
    rate = per_unit * value
    text = head + (f"running at {flag} {value:g}: {rate:,.3g} arrivals/s at peak, {100 * rate / peak:.2g}% of the seed's "
                   f"{peak:,.0f}/s" if rate < 10 else
                   f"running at {flag} {value:g}: {rate:,.0f} arrivals/s at peak, {rate / peak:.1%} of the seed's "
                   f"{peak:,.0f}/s")
    if axis == "time_scale":
        text += f" (on --scale {spec.scale:g} of the seed's users)"
    if cal and cal.ok:
        text += f"; {cal.sentence()}"
        if cal.stopped_by == "top" and not embedded:  # the ladder stopped at the rate asked: a floor only
            text += (f"; to replay the full peak use at most {processes_for(peak, cal.rate)} processes/machines "
                     f"(the machine was measured only up to the rate this run asked; --processes, Locust "
                     f"--master/--worker)")
        elif cal.stopped_by != "target" or embedded:
            text += (f"; to replay the full peak use {processes_for(peak, cal.rate)} processes/machines "
                     f"(--processes, Locust --master/--worker)")
        misfit = does_not_fit(case, spec, cal, rate, embedded)
        if misfit:
            text += f". BEFORE THE LOAD: {misfit}"
    return spec, text


def fitted_rate(case: Case, spec: RunSpec) -> float:
    """The arrivals/s at the peak of the load ``spec`` settled (both generators' together)."""
    axis = case.scale_axis
    per_unit = case.peak_rate() if axis == "scale" else case.peak_rate() * spec.number_scale
    return per_unit * float(getattr(spec, axis))


def steps_line(cal: CalibrationResult) -> str:
    """Every step of every ladder, as judged: its rate, its p99 from the intended instant, kept or missed."""
    def one(st: dict) -> str:
        p99 = st.get("p99_from_intended")
        how = "kept" if st.get("kept") else ("not sent" if not st.get("sent") else "missed")
        return f"{per_s(st['rate'])} " + (f"p99 {p99 * 1000:,.0f} ms " if p99 is not None else "") + how

    shown = [st for st in cal.steps if st.get("sent")]
    return (f"{len(shown)} step(s), each ladder's target warmed first: " + ", ".join(one(st) for st in shown)
            if shown else "no step ran")


PROPERTIES_LIMIT = 1_800  # s: the properties stage's bound under peakproof run (a hung target must not hang the run)


def _properties(case: Case, spec: RunSpec, facts: RunFacts, work: Path) -> Part:
    props = case.properties_file()
    result = work / "properties-result.json"
    spec_file = spec.with_options(result=str(result)).dump(work / "properties-spec.json", facts)
    own_junit = work / "properties-junit.xml"  # each property as a test case of the run's JUnit XML
    # no -x unless --stop-at-first: every property judged on its own, a broken one hiding none of the others
    cmd = [sys.executable, "-m", "pytest", str(props), "-q", "-p", "no:cacheprovider", "-rs", *(["-x"] * spec.stop_at_first),
           "--spec", str(spec_file), f"--junitxml={own_junit}"]
    print(f"peakproof: properties: pytest {props.name} against {spec.target_url} (spec {spec_file.name})",
          flush=True)
    t0 = time.monotonic()
    name = "properties (Hypothesis)"
    env = dict(os.environ, HYPOTHESIS_PROFILE=os.environ.get("HYPOTHESIS_PROFILE", "ci"))
    from .tenants import Metered, contention

    try:
        with Metered(spec.target_url, facts.target_pids, spec) as metered:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=PROPERTIES_LIMIT)
    except subprocess.TimeoutExpired:
        return Part(name, Outcome.INCONCLUSIVE, f"stopped by the harness's own limit ({PROPERTIES_LIMIT:,} s)",
                    reasons=[f"the properties were stopped by peakproof run's own limit of {PROPERTIES_LIMIT:,} s, "
                             f"not by the target: nothing was decided. State the target's shorter windows "
                             f"(--help: --hold-window, --backoff, ...), run fewer examples (HYPOTHESIS_PROFILE=dev), "
                             f"or run pytest properties/ directly, which has no such limit"])
    took = f" in {time.monotonic() - t0:.1f} s, against {spec.target_url}"
    busy = contention(metered.tenancy) if metered.tenancy else None
    if metered.tenancy:
        print(f"peakproof: properties: {metered.tenancy.sentence()}", flush=True)
    if busy:  # said, not undecided: a property's failure names its own cause; this says what else went on
        took += f"; NOTE: {busy.split(': a neighbour')[0]} during the properties"
    if not result.exists():  # pytest stopped before its session ended: its options or our plugin
        print(last_lines(proc.stdout, 3000), last_lines(proc.stderr, 2000))
        return Part(name, Outcome.INCONCLUSIVE, f"pytest exited {proc.returncode} without a result" + took,
                    reasons=[f"pytest exited {proc.returncode} without a result: {proc.stderr.strip()[-300:]}"])
    res = StageResult.load(result)
    if res.outcome != "PASS":
        print(failures_of(proc.stdout) if res.outcome == "FAIL" else
              last_lines(proc.stdout, 3000) + last_lines(proc.stderr, 2000))
    chances = res.data.get("chances", {})
    if any(chances.values()):  # a PASS says what it rests on, as the load's checks do
        took += "; chances to fail: " + ", ".join(f"{check} {n:,}" for check, n in sorted(chances.items()) if n)
    idle = sorted(check for check, n in chances.items() if not n)
    if idle:
        took += f"; not exercised by the properties (the load must): {', '.join(idle)}"
    return Part(name, Outcome[res.outcome], res.detail + took, reasons=res.reasons, witnesses=res.data.get("witnesses") or [],
                junit_cases=junit.pytest_cases(own_junit, f"peakproof.{case.name}.properties"))


def failures_from(text: str, marker: str, limit: int = 12_000) -> str:
    """``text`` from the line that holds ``marker`` on (at most ``limit`` characters), else its last lines."""
    at = text.find(marker)
    return text[text.rfind("\n", 0, at) + 1:][:limit] if at >= 0 else last_lines(text, 3000)


def failures_of(text: str) -> str:
    """pytest's report from its FAILURES section on, whole: the violating run's history in full (its tail
    alone left out the operations that led to the violation)."""
    at = text.find("= FAILURES =")
    return text[text.rfind("\n", 0, at) + 1:] if at >= 0 else last_lines(text, 6000)


def last_lines(text: str, limit: int) -> str:
    """The whole lines that fit in the last ``limit`` characters of ``text`` (a cut mid-line printed
    ": no chance to fail ..." without the check it was about)."""
    if len(text) <= limit:
        return text
    tail = text[-limit:]
    return tail[tail.find("\n") + 1:] if "\n" in tail else tail


def _contract_part(case: Case, spec: RunSpec, work: Path) -> Part | None:
    """The contract stage's result, as the properties' pytest session recorded it (its test is the last of
    the case's properties file), with a report of its own in reports/; None when it did not run."""
    from .contract import ContractResult
    from .report import RunReport, write_report

    path = work / "properties-result.json"
    if not path.exists():
        return None
    found = StageResult.load(path).data.get("contract") or []
    if not found:
        return None
    res = ContractResult.from_json(found[-1])
    name = "contract (Schemathesis)"
    if res.skipped:
        return Part(name, Outcome.PASS, f"skipped: {res.skipped}", reasons=[f"contract skipped: {res.skipped}"],
                    skipped=True)
    now = time.time()
    report = RunReport(f"{case.name}-contract", res.target, now - res.elapsed, now,
                       {"openapi": res.source, "seed": res.seed, "phases": res.judged_phases(), "operations": res.operations,
                        "test cases": res.test_cases, "not checked": ", ".join(res.unchecked) or "-"},
                       res.as_checks(), [], [], details={"findings": "\n\n".join(f.text() for f in res.failing)
                                                         or "none",
                                                         "notes (no promise of the design broken)": "\n\n".join(
                                                             f.text() for f in res.notes) or "none",
                                                         "errors": "\n".join(res.errors) or "none"},
                       harness_errors=list(res.errors) if res.outcome == "INCONCLUSIVE" and res.errors else [])
    html = write_report(report, spec.report_dir)
    print(f"peakproof: {res.headline()}; report {html}", flush=True)
    outcome = Outcome[res.outcome]
    return Part(name, outcome, f"{len(res.failing)} finding(s), {len(res.notes)} note(s), {res.test_cases:,} test cases, phases "
                f"{', '.join(f'{k} {v}' for k, v in res.judged_phases().items())}; report {html.name}",
                res.as_checks(), res.reasons())


def _load_scenario(case: Case, spec: RunSpec, facts: RunFacts, scenario: str, cal: CalibrationResult | None,
                   work: Path, placement: Placement | None = None) -> Part:
    """Run one Locust scenario (open model) and read the result it judged."""
    reports = Path(spec.report_dir)
    reports.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    result = work / f"{scenario}-result.json"
    stage = spec.with_options(scenario=scenario, scale=spec.number_scale * case.scenario_scale.get(scenario, 1.0),
                              calibrated_rate=cal.rate if cal and cal.ok else None, result=str(result),
                              html=str(reports / f"{scenario}-{stamp}-locust.html"))
    spec_file = stage.dump(work / f"{scenario}-spec.json", facts)
    cmd = [*taskset(placement.generator_cores if placement else ()), sys.executable, "-m", "locust", "-f", str(case.loadtest_file()),
           "--headless", "--spec", str(spec_file), "--html", str(stage.html), "--only-summary", "--loglevel", "WARNING"]
    if int(spec.processes) > 1:  # the master on a port of its own (another Locust here may hold Locust's 5557)
        cmd += ["--processes", str(spec.processes), "--master-bind-host", "127.0.0.1", "--master-bind-port", port := str(free_port()), "--master-port", port]
    print(f"peakproof: load: {scenario} at scale {stage.scale:g} (time scale {stage.time_scale:g}) through Locust",
          flush=True)
    name = f"load scenario {scenario} (Locust, open model)"
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    except subprocess.TimeoutExpired:
        return Part(name, Outcome.INCONCLUSIVE, "Locust did not stop within 1,200 s",
                    reasons=["the load run passed its bound without stopping (a harness bug)"])
    if not result.exists():
        print(proc.stdout[-3000:], proc.stderr[-3000:])
        return Part(name, Outcome.INCONCLUSIVE, f"Locust exited {proc.returncode} without a result",
                    reasons=[f"Locust exited {proc.returncode} without a result: {proc.stderr.strip()[-300:]}"])
    res = StageResult.load(result)
    cpu = tenancy_line(res.data.get("tenancy")) + conditions_changed(cal, res.data.get("tenancy"))
    print(f"peakproof: {scenario}: {cpu}", flush=True)
    outcome, reasons = Outcome[res.outcome], list(res.reasons)
    if any(r.startswith("harness error") for r in reasons):  # the traceback Locust's process printed, whole
        print(failures_from(proc.stderr, "a harness error (INCONCLUSIVE), its traceback"), flush=True)
    if outcome.exit_code != proc.returncode:  # Locust itself said something else went wrong
        reasons.append(f"Locust exited {proc.returncode} where the verdict says {outcome.exit_code}: "
                       f"{proc.stderr.strip()[-300:]}")
        outcome = Outcome.INCONCLUSIVE if outcome is not Outcome.FAIL else outcome
    return Part(name, outcome, f"{res.detail}; {cpu}", [CheckResult.from_json(r) for r in res.checks], reasons,
                witnesses=res.data.get("witnesses") or [])
