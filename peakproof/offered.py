"""Did the run offer the curve it was asked to? A pure judgement, testable without Locust.

An arrival counts as offered only if it left within ``late_threshold`` of its instant.
When too few did, the cause decides the outcome:

* the curve's peak is above what this machine offered in calibration: the load asked for
  could not be offered here, whatever else happened: **"unknown"** (INCONCLUSIVE);
* most late arrivals fell due while the dispatcher waited for a free slot in a pool full
  of unanswered requests (the target's latency held it): the target could not take the load: **False** (FAIL);
* the pool filled, but most late arrivals were late before any wait for a slot (the
  generator behind the curve; answers waited unread in its buffers): **"unknown"**
  (INCONCLUSIVE), like any generator shortfall;
* otherwise the generator's own CPU fell behind the curve: the harness did not test the
  promise at the load asked for: **"unknown"** (INCONCLUSIVE), with the fix (a lower
  ``--scale``, more ``--processes`` / workers) and, when a calibration ran, what this
  machine offers per process.

Service levels judged from the intended instant include the generator's lateness, so
when the generator fell behind, an SLO that missed is not decided either
(:func:`undecide_when_behind`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from .checks import CheckResult, Measure
from .history import Op
from .report import Chart


@dataclass(frozen=True)
class LoadSettings:
    late_threshold: float = 0.1
    max_lateness: float = 2.0
    offered_tolerance: float = 0.02
    pool_size: int = 1000
    processes: int = 1
    calibrated_rate: float | None = None  # on-time arrivals/s one process offered in calibration
    peak_rate: float | None = None  # the scenario's peak arrivals/s at scale 1 (the seed's)
    # why the target's latency was partly the harness's (it shared cores with the generators), or None
    shared_cores: str | None = None
    # "target": the calibration's rate was where the target stopped keeping its limits (its knee); "top":
    # the ladder's top step held. Either way it says nothing of what the generator can offer above it
    calibrated_by: str | None = None


@dataclass
class LoadCounters:
    due: int = 0
    sent: int = 0
    late: int = 0
    dropped: int = 0
    pool_full: int = 0
    dropped_by_second: dict[int, int] = field(default_factory=dict)
    late_by_pool: int = 0  # late or dropped because the dispatcher was waiting for a free slot
    late_by_pool_busy: int = 0  # ... of them already late when they fell due: the generator was behind
    cpu_percent: int = 0  # the busiest generator process: CPU used while dispatching, % of what it could get


SATURATED_CPU_PERCENT = 85  # a generator this busy cannot tell its own slowness from the target's


def judge_offered_load(counters: LoadCounters, planned: Iterable[float], sends: Iterable[float],
                       s: LoadSettings) -> CheckResult:
    """``planned``: the curve's intended offsets (s); ``sends``: actual send offsets (s)."""
    target: dict[int, int] = {}
    for t in planned:
        target[int(t)] = target.get(int(t), 0) + 1
    sent_by_sec: dict[int, int] = {}
    for t in sends:
        sent_by_sec[int(t)] = sent_by_sec.get(int(t), 0) + 1
    c = counters
    on_time_n = c.sent - c.late
    on_time = on_time_n / c.due if c.due else 0.0
    peak_target = max(target.values(), default=0)
    peak_sent = max((sent_by_sec.get(sec, 0) for sec in target), default=0)
    limit = 1 - s.offered_tolerance
    measures = {"actual": Measure(round(on_time, 4), "share"), "limit": Measure(limit, "share", ">=")}
    counts = {"due": c.due, "planned": sum(target.values()), "sent": c.sent, "late": c.late, "dropped": c.dropped,
              "pool_full": c.pool_full, "late_by_pool": c.late_by_pool,
              "late_by_pool_busy": c.late_by_pool_busy, "generator_cpu_percent": c.cpu_percent, "peak_target_per_s": peak_target,
              "peak_sent_per_s": peak_sent}
    name = "offered_load_matches_curve"
    if c.due == 0:
        return CheckResult(name, "unknown", counts, note="no arrival was due: the run offered nothing",
                           chances=0, chance_kind="due arrivals", **measures)
    planned_n = sum(target.values())
    if c.due < planned_n:
        # stopped before its curve ended (Ctrl-C, the web UI's stop, a bound): the load asked for was not offered
        return CheckResult(name, "unknown", counts, None,
                           note=f"the run stopped before its curve ended: {c.due:,} of {planned_n:,} planned arrivals "
                                f"fell due; the promise was not tested at the load asked for",
                           chances=c.due, chance_kind="due arrivals", **measures)
    if on_time >= limit:
        return CheckResult(name, True, counts, chances=c.due, chance_kind="due arrivals", **measures)
    lim_ms = s.late_threshold * 1000
    head = (f"Actual {on_time_n:,} of {c.due:,} due arrivals sent within {lim_ms:g} ms of their instant "
            f"({on_time:.1%}) / Limit >= {limit:.0%}: {c.late:,} sent late, {c.dropped:,} dropped after "
            f"{s.max_lateness:g} s; peak second {peak_sent:,} sent vs {peak_target:,} due")
    # a rate that was the target's knee, or a ladder's top that held, is no limit of the generator's
    capacity = (s.calibrated_rate or 0.0) * s.processes if s.calibrated_by is None else 0.0
    if capacity and peak_target > capacity:
        # The curve asked more than this machine offered in calibration (with the target answering in
        # time when it shares the machine): whatever filled the pool, the load asked for was never
        # the load a target could be judged by here.
        return CheckResult(name, "unknown", counts, None,
                           note=f"{head}; the curve's peak ({peak_target:,}/s) is above what this machine offered "
                                f"in calibration ({capacity:,.0f}/s): " + generator_sentence(peak_target, s),
                           chances=c.due, chance_kind="due arrivals", **measures)
    by_target = c.late_by_pool - c.late_by_pool_busy
    saturated = c.cpu_percent >= SATURATED_CPU_PERCENT
    if c.late_by_pool > (c.late + c.dropped) / 2 and (saturated or by_target <= (c.late + c.dropped) / 2):
        # the pool filled, but the generator used all the CPU it could get (answers waited unread in its
        # buffers), or most arrivals were late before any wait for a slot: the generator was behind
        why = (f"the generator used {c.cpu_percent}% of the CPU it could get while the pool was full, so the "
               f"answers may have waited unread in its own buffers" if saturated else
               f"{c.late_by_pool_busy:,} of them were late already when they fell due, not while the dispatcher "
               f"waited for a free slot")
        return CheckResult(name, "unknown", counts, None,
                           note=f"{head}; {why}: the generator, not the target, may have held the pool; "
                                + generator_sentence(peak_target, s),
                           chances=c.due, chance_kind="due arrivals", **measures)
    if by_target > (c.late + c.dropped) / 2 and s.shared_cores:
        # the pool was held by answers that came late, but the target's CPU was partly ours: not its failure
        return CheckResult(name, "unknown", counts, None,
                           note=f"{head}; {c.late_by_pool:,} of them fell due while the pool of {s.pool_size:,} "
                                f"in-flight requests was full, but {s.shared_cores}",
                           chances=c.due, chance_kind="due arrivals", **measures)
    if by_target > (c.late + c.dropped) / 2:
        return CheckResult(name, False, counts,
                           f"{head}; {c.late_by_pool:,} of them fell due while the pool of {s.pool_size:,} in-flight "
                           f"requests was full: the target's latency held the pool (the target could not take the "
                           f"load; raise --pool-size if its latency is within its promise)",
                           chances=c.due, chance_kind="due arrivals", **measures)
    return CheckResult(name, "unknown", counts, None, note=f"{head}; " + generator_sentence(peak_target, s),
                       chances=c.due, chance_kind="due arrivals", **measures)


def generator_sentence(peak_due_per_s: float, s: LoadSettings) -> str:
    """Why the harness could not test the promise, and what to do about it."""
    procs = f"{s.processes} generator process{'es' if s.processes != 1 else ''}"
    text = (f"this machine could not offer {peak_due_per_s:,.0f} arrivals/s from {procs}: the promise was not "
            f"tested at this load")
    if s.calibrated_rate:
        per = s.calibrated_rate
        fits = per * s.processes / max(1.0, peak_due_per_s)
        if fits < 1:
            text += (f"; this machine offers about {per:,.0f} arrivals/s per process (scale down to {fits:.2g} of "
                     f"this, or use --scale auto)")
        else:
            text += (f", though it offered about {per:,.0f} arrivals/s per process in calibration: something else "
                     f"took the generator's CPU during the run (run again on a quieter machine, or lower --scale)")
        if s.peak_rate:
            text += f"; to replay the full peak ({s.peak_rate:,.0f}/s) use {math.ceil(s.peak_rate / per)} " \
                    f"processes/machines"
    else:
        text += "; lower --scale (or --scale auto), or add --processes / Locust workers"
    return text


def undecide_when_behind(slos: list[CheckResult], load: CheckResult) -> list[CheckResult]:
    """An SLO missed while the generator itself was late says nothing about the target."""
    if load.valid != "unknown":
        return slos
    return [replace(r, valid="unknown", note=f"not decided: the generator fell behind the curve "
                                             f"({r.first_violation})") if r.valid is False else r
            for r in slos]


def undecide_when_shared(results: list[CheckResult], shared: str | None,
                         names: Iterable[str] | None = None) -> list[CheckResult]:
    """A latency promise missed while the target shared its cores with the harness's generators says
    nothing about the target: not decided, naming the cause. ``names``: the results to consider
    (None: all of them, e.g. the latency SLOs)."""
    if not shared:
        return results
    wanted = None if names is None else set(names)
    # what the note said stays after it: an unstated design that would explain the miss (peakproof.design) was
    # dropped, and a product's own design read as unexplained beside a busy host
    return [replace(r, valid="unknown", note=f"not decided: {shared} ({r.first_violation})"
                    + (f"; {r.note}" if r.note else ""))
            if r.valid is False and (wanted is None or r.name in wanted) else r for r in results]


def undecide_latency(slos: list[CheckResult], load: CheckResult, shared: str | None,
                     names: Iterable[str]) -> list[CheckResult]:
    """The latency promises (``names``) a run cannot decide: a measured neighbour (or a shared core) first,
    named, since it is why the generator fell behind too when both happened; then a generator behind its curve."""
    return undecide_when_behind(undecide_when_shared(slos, shared, names), load)


def load_charts(planned: list[float], ops: Iterable[Op], t0: float,
                dropped_by_second: dict[int, int], thresholds: Iterable[Any] = ()) -> list[Chart]:
    """Target vs sent arrivals per second, latency percentiles by intended second, and each
    latency SLO's statistic over time beside its whole-run value: the judged one, from the same
    :class:`peakproof.slo.Latencies` the judge reads."""
    ops = ops if isinstance(ops, list) else list(ops)
    target: dict[int, int] = {}
    for t in planned:
        target[int(t)] = target.get(int(t), 0) + 1
    from .slo import Latencies

    sent_by_sec: dict[int, int] = {}
    timed = []
    for op in ops:
        if op.send_time is None or op.intended_time is None:
            continue
        sec = int(op.send_time - t0)
        sent_by_sec[sec] = sent_by_sec.get(sec, 0) + 1
        if op.done:
            timed.append(op)
    # recorded once per basis, in the structure the SLO judge reads (by intended second)
    from_intended = Latencies((op.intended_time - t0, op.latency_from_intended) for op in timed)
    from_send = Latencies((op.intended_time - t0, op.latency) for op in timed)
    secs = sorted(set(target) | set(sent_by_sec))
    return [Chart("Arrivals per second: the curve vs what was sent",
                  "requests / s", {"target (curve)": [(x, target.get(x, 0)) for x in secs],
                                   "sent": [(x, sent_by_sec.get(x, 0)) for x in secs],
                                   "dropped": [(x, dropped_by_second.get(x, 0)) for x in secs]},
                  note="Follow-up requests (confirms, cancels, retries) are scheduled during the run and "
                       "count in 'sent' but not in the precomputed curve."),
            Chart("Latency percentiles over time (by intended second)", "seconds",
                  {"p50 from intended": from_intended.series("p50"),
                   "p99 from intended": from_intended.series("p99"),
                   "p50 from send": from_send.series("p50"),
                   "p99 from send": from_send.series("p99")},
                  note="From intended = completion minus the instant the curve meant the request to start "
                       "(free of coordinated omission); from send = completion minus the actual send. "
                       "Percentiles by the same nearest-rank rule the service levels are judged with."),
            *slo_charts(ops, t0, thresholds)]


def slo_charts(ops: list[Op], t0: float, thresholds: Iterable[Any]) -> list[Chart]:
    """One chart per latency SLO: its statistic by second, and over the whole run (what was judged)."""
    from .slo import Latencies, Threshold

    series: dict[str, list[tuple[float, float]]] = {}
    for t in thresholds:
        if not isinstance(t, Threshold):
            continue
        lat = Latencies.of(ops, t.op, t.basis, t0)
        if not lat.values:
            continue
        by_sec = lat.series(t.stat)
        series[f"{t.op} {t.stat} by second"] = by_sec
        whole = lat.statistic(t.stat)
        series[f"{t.op} {t.stat} whole run (judged)"] = [(by_sec[0][0], whole), (by_sec[-1][0], whole)]
        series[f"{t.op} limit"] = [(by_sec[0][0], t.limit), (by_sec[-1][0], t.limit)]
    if not series:
        return []
    return [Chart("Service levels: each SLO's statistic by second and over the whole run", "seconds", series,
                  note="The whole-run line is the value the verdict judged (the same samples, the same rule).")]
