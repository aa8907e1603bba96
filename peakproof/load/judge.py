"""The judgement of a load run: a pure function of the scenario, its history, the run's spec
and the dispatchers' counters, giving a :class:`~peakproof.report.RunReport` whose verdict
is the run's (judged here once; every reader after reads it). No Locust import.
"""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass, field
from typing import Any

from ..checks import CheckResult
from ..history import History
from ..offered import (LoadCounters, LoadSettings, judge_offered_load, load_charts, undecide_latency,
                       undecide_when_shared)
from ..report import Chart, RunReport
from ..slo import ErrorBudget, Threshold, parse_thresholds, with_error_budget
from ..spec import RunSpec
from .scenario import Calibration, Scenario


@dataclass
class RunRecord:
    """What the dispatchers left: the merged history's context, for the judge."""

    started_wall: float
    finished_wall: float
    processes: int
    counters: dict[str, int]
    dropped_by_second: dict[int, int] = field(default_factory=dict)
    # (kind, text): "target" (it refused, answered 500 or garbage: a finding) or "harness" (our bug)
    setup_error: tuple[str, str] | None = None
    harness_errors: list[str] = field(default_factory=list)
    locust_html: str | None = None
    tenancy: Any = None  # peakproof.tenants.Tenancy: the machine's CPU by tenant over the run, or None


def judge_run(sc: Scenario, history: History, spec: RunSpec, rec: RunRecord) -> RunReport:
    """Every check, SLO and the offered load of one run, in one report."""
    harness_errors = list(rec.harness_errors)
    slo_texts = with_error_budget(list(spec.slo) or sc.default_slos)
    checks: list[CheckResult] = []
    charts: list[Chart] = []
    details: dict[str, Any] = {}
    slos: list[CheckResult] = []
    load: list[CheckResult] = []
    load_chart_list: list[Chart] = []
    load_details: dict[str, Any] = {}
    if rec.setup_error is not None:
        kind, text = rec.setup_error
        if kind == "target":
            checks = [CheckResult("target_setup_succeeded", False, {}, f"the scenario could not prepare the target "
                                  f"{sc.host}: {text}", note="nothing was sent; fix the target or the URL")]
        elif kind == "undecided":  # another API or a missing capability: not a broken promise
            checks = [CheckResult("target_setup_succeeded", "unknown", {}, note=f"nothing was sent: {text}")]
        else:
            harness_errors.append(f"the scenario's setup raised (a harness error, not the target's):\n{text}")
        load = [CheckResult("offered_load_matches_curve", "unknown", {}, note="no load was offered: setup failed",
                            chances=0, chance_kind="due arrivals")]
    else:
        try:
            checks, charts, details = sc.judge(history)
        except Exception:  # a checker bug: the run says nothing about the target
            harness_errors.append(f"{sc.name}.judge raised:\n{traceback.format_exc()}")
        checks = with_capabilities(sc, spec, checks)
        thresholds = parse_thresholds(slo_texts)
        shared = shared_cores(sc, rec)
        slos = [t.judge(history.ops, contended=shared) if isinstance(t, ErrorBudget) else t.judge(history.ops)
                for t in thresholds]
        load, load_chart_list, load_details = offered_load(sc, history, spec, rec, thresholds, shared)
        latency_slos = {r.name for t, r in zip(thresholds, slos) if isinstance(t, Threshold)}
        # the neighbour named before "the generator fell behind": beside a busy loop, a slow shop's miss read
        # "the generator fell behind the curve" though the tenant meter had measured what took the CPU
        slos = undecide_latency(slos, load[0], shared, latency_slos)
        checks = undecide_when_shared(checks, shared, latency_checks(sc))
        slos = name_the_busiest(slos, rec.tenancy, latency_slos)
        checks = name_the_busiest(checks, rec.tenancy, latency_checks(sc))
        charts += component_charts(rec.tenancy)
    draw_faults(load_chart_list + charts, history, rec.started_wall)
    params = {**sc.params(), "scale": spec.scale, "time_scale": spec.time_scale, "spacing": spec.spacing,
              "seed": spec.seed, "pool_size": spec.pool_size, "processes": rec.processes, "slos": ", ".join(slo_texts),
              "calibrated rate (arrivals/s per process)": spec.calibrated_rate or "not measured",
              "driver": spec.driver or "the case's contract", "waived (--without)": ", ".join(spec.without) or "none",
              "placement": sc.run.facts.placement or "not stated (Locust run directly)",
              "the machine's CPU by tenant": rec.tenancy.sentence() if rec.tenancy else "not measured",
              "the target's processes": rec.tenancy.target_sentence() if rec.tenancy else "not measured"}
    for error in harness_errors:  # the whole traceback on the console, not only in the HTML (its last line is the verdict's)
        print(f"peakproof: {sc.name}: a harness error (INCONCLUSIVE), its traceback:\n{error}", file=sys.stderr, flush=True)
    design = sc.run.with_spec(spec).design()
    if design.stated:
        params["the design stated"] = "; ".join(design.lines())
    rules = stated_rules(sc, spec)
    if rules and not any("rules" in k for k in params):
        params["the target's rules (judged by)"] = rules
    return RunReport(sc.name, sc.host, rec.started_wall, rec.finished_wall, params, checks, slos, load,
                     load_chart_list + charts, {**load_details, **details}, locust_html=rec.locust_html,
                     harness_errors=harness_errors)


def shared_cores(sc: Scenario, rec: RunRecord) -> str | None:
    """Why the target's latency was partly not its own, or None: a neighbour that took CPU the run needed
    (measured, :func:`peakproof.tenants.contention`); else what ``peakproof run`` placed
    (its ``RunFacts.shared_cores``); else, for a target on loopback, this machine's cores against the generator
    processes of this run (``locust -f loadtests/ --processes N`` run directly)."""
    from ..tenants import contention

    measured = contention(rec.tenancy) if rec.tenancy is not None else None
    if measured:
        return measured
    said = sc.run.facts.shared_cores
    if said is not None:
        return said or None
    from ..placement import place, usable_cores
    from ..placement import on_loopback

    if not sc.host or not on_loopback(sc.host):
        return None
    return place(usable_cores(), rec.processes, "loopback", can_pin=False).shared_reason()


def name_the_busiest(results: list[CheckResult], tenancy: Any, names: Any) -> list[CheckResult]:
    """A latency promise the target missed (decided: nothing outside it took CPU the run needed) names the
    target's busiest component and how saturated it was: where a reader looks first (the USE method)."""
    from dataclasses import replace

    said = tenancy.busiest_sentence() if tenancy is not None else ""
    if not said:
        return results
    wanted = set(names)
    # on the violation itself: the terminal's "why" line and the verdict's reasons read it
    return [replace(r, first_violation=f"{r.first_violation}; {said}" if r.first_violation else said)
            if r.failed and r.name in wanted else r for r in results]


def component_charts(tenancy: Any) -> list[Chart]:
    """The target as a system over time: each component's CPU (cores) and its threads' run-queue wait, per
    window of the tenant meter (about a second): which part was busy, and which waited, when the target missed."""
    if tenancy is None or not tenancy.component_windows or not tenancy.components:
        return []
    t, cpu, wait = 0.0, {}, {}
    labels = [c["label"] for c in tenancy.components[:8]]
    for w, comp in zip(tenancy.windows, tenancy.component_windows):
        t += w.span
        for label in labels:
            used, waited = comp.get(label, (0.0, 0.0))
            cpu.setdefault(label, []).append((round(t, 2), round(used / max(w.span, 1e-9), 3)))
            wait.setdefault(label, []).append((round(t, 2), round(waited / max(w.span, 1e-9), 3)))
    note = tenancy.components_sentence()
    return [Chart("The target's components: CPU used (cores) over time", "cores", cpu,
                  x_label="s from the tenant meter's first reading", note=note),
            Chart("The target's components: waiting for a CPU (run-queue wait, thread-seconds per second)",
                  "thread-s / s", wait, x_label="s from the tenant meter's first reading",
                  note="saturation: a component whose threads wait for a CPU while the target misses is short of cores")]


def stated_rules(sc: Scenario, spec: RunSpec) -> dict[str, Any]:
    """The rules the run's checks judged by (the case's :meth:`~peakproof.case.Case.rules`)."""
    return sc.run.with_spec(spec).stated_rules()


def latency_checks(sc: Scenario) -> tuple[str, ...]:
    """The case's checks that judge a time (they are latency promises too)."""
    return sc.run.case.latency_checks


def with_capabilities(sc: Scenario, spec: RunSpec, checks: list[CheckResult]) -> list[CheckResult]:
    """The checks, with those a waived capability fed marked waived and those a lacking one fed
    naming it (see :mod:`peakproof.capabilities`)."""
    from ..capabilities import apply_waivers

    checks = apply_waivers(checks, sc.run.case.capabilities, spec.without, sc.lacking)
    # and those the product's stated design leaves out (peakproof.design), whatever they found; a FAIL an
    # unstated statement would explain says which
    return sc.run.with_spec(spec).design().apply(checks)


def conclude_calibration(sc: Calibration, history: History, rec: RunRecord) -> dict[str, Any]:
    """A calibration's figures: the highest step offered on time (and answered in time), every step."""
    if rec.setup_error is not None:
        doc: dict[str, Any] = {"scenario": sc.name, "rate": 0.0, "error": rec.setup_error[1]}
    else:
        doc = sc.conclude(history, rec.started_wall)
    doc["harness_errors"] = rec.harness_errors
    if rec.tenancy is not None:
        from ..tenants import contention

        doc["tenancy"] = rec.tenancy.to_json()
        doc["contention"] = contention(rec.tenancy)
    return doc


def witnesses_of(sc: Scenario, history: History, spec: RunSpec, report: RunReport) -> RunReport:
    """``report`` with a witness of each check the run violated, replayed and shrunk against the target
    (peakproof.replay); none on a PASS (nothing is sent). A replay that raised loses the reproduction,
    says so in the report's details, and leaves the verdict as judged."""
    if not any(r.valid is False for r in report.checks):
        return report
    from ..shrink import reproduce

    try:
        report.witnesses = reproduce(sc.run.with_spec(spec), history.ops, report.checks, seconds=spec.replay_seconds,
                                     directory=spec.report_dir, stem=report.slug(),
                                     log=lambda text: print(text, flush=True))
    except Exception as e:  # noqa: BLE001 - the verdict stands; the reproduction is lost, and said so
        report.details["reproduction"] = f"the witness replay raised (the verdict stands): {type(e).__name__}: {e}"
        traceback.print_exc()
    return report


def summary(report: RunReport, path: Any) -> str:
    judged = report.judged
    lines = [f"\npeakproof {report.scenario}: {judged.outcome}  (report: {path})"]
    label = "note" if judged.outcome.value == "PASS" else "why"  # a PASS lists only what was waived
    lines += [f"  {label}: {reason}" for reason in judged.reasons[:6]]
    for group in (report.load, report.checks, report.slos):
        for r in group:
            lines.append("  " + r.line())
    for w in report.witnesses:
        lines += ["  " + line for line in w.verdict_lines()]
    return "\n".join(lines)


def draw_faults(charts: list[Chart], history: History, t0: float) -> None:
    """Every fault the nemesis put in force, drawn on every chart over run time (fault windows)."""
    from .. import nemesis

    spans = [(w["start"], w["end"], w["fault"] + (f" {_brief(w['params'])}" if w["params"] else ""))
             for w in nemesis.windows(history.ops, t0)]
    for chart in charts:
        if chart.x_label.startswith("seconds since"):
            chart.faults = spans


def _brief(params: dict[str, Any]) -> str:
    text = ", ".join(f"{k}={v}" for k, v in params.items())
    return text if len(text) <= 60 else text[:57] + "..."


def offered_load(sc: Scenario, history: History, spec: RunSpec, rec: RunRecord,
                 thresholds: list[Any] = (), shared: str | None = None
                 ) -> tuple[list[CheckResult], list[Chart], dict[str, Any]]:
    """Did the run offer the curve? Target vs achieved sends per second, late and dropped."""
    t0 = rec.started_wall
    planned = [a.t for a in sc.arrivals()]
    c = rec.counters
    counters = LoadCounters(c["due"], c["sent"], c["late"], c["dropped"], c["pool_full"], rec.dropped_by_second,
                            c.get("late_by_pool", 0), c.get("late_by_pool_busy", 0), c.get("cpu_percent_max", 0))
    settings = LoadSettings(spec.late_threshold, spec.max_lateness, spec.offered_tolerance, spec.pool_size,
                            rec.processes, spec.calibrated_rate, sc.peak_rate(), shared, sc.run.facts.calibrated_by)
    sends = [op.send_time - t0 for op in history.ops if op.send_time is not None and op.intended_time is not None]
    result = judge_offered_load(counters, planned, sends, settings)
    charts = load_charts(planned, history.ops, t0, rec.dropped_by_second, thresholds)
    limit_ms = spec.late_threshold * 1000
    details = {"offered load": {"planned arrivals (curve)": len(planned), "due (incl. follow-ups)": c["due"],
                                "sent": c["sent"], f"sent > {limit_ms:g} ms late": c["late"], "dropped": c["dropped"],
                                "arrivals that found the pool full": c["pool_full"],
                                "late or dropped while the pool was full": c.get("late_by_pool", 0),
                                "... of them already late when they fell due (the generator behind, not the pool)":
                                    c.get("late_by_pool_busy", 0),
                                "generator CPU, busiest process (% of a core while dispatching)":
                                    c.get("cpu_percent_max", 0),
                                "max lateness before drop (s)": spec.max_lateness,
                                "cores shared with the target": shared or "no"}}
    return [result], charts, details
