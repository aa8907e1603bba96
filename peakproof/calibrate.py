"""Fit the load to the machine, honestly: measure what this machine's generator offers on
one process before the load, and size ``--scale auto`` from it.

Machines of one kind differ 2-3x, so no fixed default holds everywhere. The case's
calibration scenario (a Locust run of rising constant-rate steps of the case's commonest
request) finds the highest rate that one process still sends on time (>= 98% within
100 ms of their instants) and, when the target shares this machine, that the target
still answers within the case's limit. The load then runs at ``headroom`` of it.

A ladder whose first step failed steps down to :data:`STEP_DOWN` (1/s) and climbs again, the
target warmed before each ladder's first step is judged: a target just started is judged warm. When
even that lowest step failed, the calibration could not conclude and says so; ``--scale auto``
then runs at the lowest rate it tried, where the promises are still judged and a latency miss is
the target's. ``--scale auto`` never runs above the highest step a ladder saw kept
(:attr:`CalibrationResult.highest_kept`), nor, when none was, above the lowest step it tried.
"""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .case import Case
from .spec import RunFacts, RunSpec, StageResult


GIVEN = "--calibrated-rate"  # the figure was stated, not measured


@dataclass
class CalibrationResult:
    scenario: str
    rate: float  # arrivals/s one process offered on time (0: not even the first step)
    top: float = 0.0
    latency_checked: bool = False
    steps: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    latency_limit: float = 0.1  # s: the answer time a step must keep when the latency is checked
    stopped_by: str = "top"  # "generator" (it fell behind its curve), "target" (it missed its limits), "top"
    generator_rate: float = 0.0  # the highest step the generator sent on time (at least this: it stopped there)
    answer_time: float | None = None  # s: the target's answer to probes one at a time, before the ladder
    drained: float | None = None  # s the target took to answer in time again after the ladder (None: not seen)
    drain_limit: float = 60.0
    contention: str | None = None  # a neighbour that took CPU the ladder needed (peakproof.tenants)
    neighbour_cores: float | None = None  # the most of a core processes outside the run took in any 5 s
    warmup: float = 0.0  # s of unjudged probes at the first step's rate before each ladder's first step
    stepped_down_from: float | None = None  # the first ladder's first step (arrivals/s), when it failed

    @property
    def ok(self) -> bool:
        return self.error is None and self.rate > 0

    @property
    def highest_kept(self) -> float | None:
        """The highest step of any ladder that was sent and kept every limit the ladder judged (None: none)."""
        kept = [float(st["rate"]) for st in self.steps if st.get("kept", st.get("rate", 0) <= self.rate)
                and st.get("sent", 1) > 0 and st.get("rate", 0) > 0]
        return max(kept) if kept else None

    @property
    def lowest_tried(self) -> float | None:
        """The lowest step any ladder sent (None: no step ran)."""
        tried = [float(st["rate"]) for st in self.steps if st.get("sent", 1) > 0 and st.get("rate", 0) > 0]
        return min(tried) if tried else None

    def sentence(self) -> str:
        if self.error:
            return f"calibration failed: {self.error}"
        if self.rate <= 0:
            return self.inconclusive()
        if self.scenario == GIVEN:
            return f"this machine offers about {self.rate:,.0f} arrivals/s per process (as stated: --calibrated-rate)"
        what = "with the target answering in time" if self.latency_checked else "on time"
        if self.stopped_by == "target":
            return (f"the target kept its service levels up to about {self.rate:,.0f} arrivals/s (its knee"
                    f"{self.why_stopped()}; the generator kept up to there at least){self.after()}")
        return f"this machine offers about {self.rate:,.0f} arrivals/s per process ({what}{self.why_stopped()}){self.after()}"

    def inconclusive(self) -> str:
        """Why the ladders kept no step: the lowest step tried and what failed in it (and where the first
        ladder began, when it stepped down from there)."""
        tried = [st for st in self.steps if st.get("sent", 1) > 0]
        if not tried:
            return "the calibration could not conclude: no step of its ladder ran"
        low = min(tried, key=lambda st: st.get("rate", 0))
        first = tried[0]
        down = (f"its first step ({per_s(first['rate'])}) failed, so did the ladder that stepped down to "
                if self.stepped_down_from and first is not low else "even ")
        warm = f" after a {self.warmup:g} s warm-up" if self.warmup else ""
        return (f"the calibration could not conclude: {down}its lowest step ({per_s(low['rate'])}){warm}: "
                f"{low.get('on_time_share', 0):.0%} on time, p99 {(low.get('p99_from_intended') or 0) * 1000:,.0f} ms "
                f"from the intended instant (limit {self.latency_limit * 1000:,.0f} ms), {low.get('errors', 0):,} "
                f"errors" + (f", {low['broken']:,} answers broke a promise" if low.get("broken") else ""))

    def to_json(self) -> dict[str, Any]:
        """Every figure of the calibration, its steps (each with ``kept``), and the two bounds ``--scale auto``
        keeps below: the highest step kept and the lowest tried."""
        from dataclasses import asdict

        return {**asdict(self), "highest_kept": self.highest_kept, "lowest_tried": self.lowest_tried,
                "sentence": self.sentence()}

    @property
    def knee(self) -> float | None:
        """The highest rate at which the target kept every limit the ladder judges, when it was the
        target that stopped the ladder; None when the generator or the top stopped it first."""
        return self.rate if self.stopped_by == "target" else None

    def after(self) -> str:
        """What followed the ladder: the drain, and a neighbour that took CPU meanwhile."""
        out = ""
        if self.stepped_down_from and self.rate > 0:
            out += (f"; the first ladder's first step ({per_s(self.stepped_down_from)}) missed, so the ladder stepped "
                    f"down to {STEP_DOWN:g}/s and climbed again, the target warmed first (a cold start?)")
        if self.latency_checked and self.drained is None and self.steps:
            out += (f"; the target did not answer in time again within {self.drain_limit:.0f} s after the ladder: "
                    f"the next stage may start on its backlog")
        elif self.drained is not None and self.drained > 1:
            out += f"; the target worked off the ladder's backlog in {self.drained:.0f} s"
        if self.contention:
            out += f"; NOTE: {self.contention.split(': a neighbour')[0]} during the calibration"
        return out

    def why_stopped(self) -> str:
        """Where the ladder stopped and why: the first step that failed, and what failed in it."""
        failed = next((st for st in self.steps if st.get("rate", 0) > self.rate and not st.get("kept")
                       and st.get("sent", 1) > 0), None)
        if failed is None:
            return f"; even its top step, {self.top:,.0f}/s, held: at least this" if self.top else ""
        cause = []
        if failed.get("on_time_share", 1) < 0.98:
            cause.append(f"the generator sent {failed['on_time_share']:.1%} on time")
        if self.latency_checked:
            p99 = failed.get("p99_from_intended")
            if p99 is not None and p99 > self.latency_limit:
                cause.append(f"the target answered in p99 {p99 * 1000:,.0f} ms from the intended instant "
                             f"(limit {self.latency_limit * 1000:,.0f} ms)")
            if failed.get("errors"):
                cause.append(f"{failed['errors']:,} errors")
            if failed.get("broken"):
                cause.append(f"{failed['broken']:,} answers broke a promise of the design")
        who = {"generator": "the generator fell behind", "target": "the target missed its limits"}.get(self.stopped_by, "")
        return (f"; stopped at {failed['rate']:,.0f}/s{' (' + who + ')' if who else ''}: "
                + (", ".join(cause) or "too few answers in time"))


def per_s(rate: float) -> str:
    """A step's rate as the ladder's lines print it: three digits below 100/s (1.4/s), whole above (2,296/s)."""
    return f"{rate:,.0f}/s" if rate >= 100 else f"{rate:.3g}/s"


LADDER_LIMIT = 240.0  # s: one ladder's Locust run at most (from 1/s: about 60 s of steps, then up to 60 s of drain)


def run_calibration(case: Case, spec: RunSpec, work: Path, *, latency: bool, timeout: float = LADDER_LIMIT,
                    pin: int | None = None, facts: RunFacts | None = None, **options: Any) -> CalibrationResult:
    """One Locust process, the case's calibration scenario, against ``spec``'s target (on core ``pin``
    if given), told the run's ``facts``; ``options`` change the spec for it (e.g. ``calibrate_max_rate``)."""
    import time

    result = Path(work) / "calibration-result.json"
    result.unlink(missing_ok=True)
    stage = spec.with_options(scenario=case.calibration, calibrate_latency=latency, result=str(result),
                              report_dir=str(work), html=None, **options)
    spec_file = stage.dump(Path(work) / "calibration-spec.json", facts)
    cmd = [sys.executable, "-m", "locust", "-f", str(case.loadtest_file()), "--headless", "--spec", str(spec_file),
           "--only-summary", "--loglevel", "WARNING"]
    if pin is not None:
        from .placement import taskset

        cmd = taskset((pin,)) + cmd
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return CalibrationResult(case.calibration, 0.0, error=f"no result within {timeout:.0f} s")
    seconds = time.monotonic() - t0
    if not result.exists():
        tail = (proc.stderr or proc.stdout).strip()[-800:]
        return CalibrationResult(case.calibration, 0.0, error=f"Locust exited {proc.returncode}: {tail}",
                                 seconds=seconds)
    doc = StageResult.load(result).data
    err = doc.get("error")
    if doc.get("harness_errors"):
        err = f"the calibration scenario raised: {doc['harness_errors'][0].splitlines()[0]}"
    neighbour = None
    if doc.get("tenancy"):
        from .tenants import Tenancy

        busiest = Tenancy.from_json(doc["tenancy"]).busiest()
        neighbour = busiest.neighbours / busiest.span if busiest else None
    return CalibrationResult(doc.get("scenario", case.calibration), float(doc.get("rate", 0.0)),
                             float(doc.get("top", 0.0)), bool(doc.get("latency_checked")), doc.get("steps", []),
                             err, seconds, float(doc.get("latency_limit", 0.1)), doc.get("stopped_by", "top"),
                             float(doc.get("generator_rate") or 0.0), doc.get("answer_time"), doc.get("drained"),
                             float(doc.get("drain_limit", 60.0)), doc.get("contention"), neighbour,
                             float(doc.get("warmup") or 0.0))


def write_calibration(cal: CalibrationResult, report_dir: str | Path, case: str, **fitted: Any) -> Path:
    """The calibration as JSON beside the run's reports (``calibration-<case>-<time>.json``): its steps and
    bounds, and ``fitted`` (what the run settled from it: the scale, the rate at the peak)."""
    import json
    import time

    out = Path(report_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"calibration-{case}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({**cal.to_json(), **fitted}, indent=1, default=str))
    return path


def ladder_top(case: Case) -> float:
    """The calibration ladder's first top: well past the peak (the machine's limit, not "at least
    the peak"): 4x the peak, 40,000/s at least; its first step stays at 2% of the peak."""
    return max(40_000.0, 4 * case.peak_rate())


CLIMBS = 3  # a ladder whose top step passed climbs again from there, 4x higher, at most this often
STEP_DOWN = 1.0  # arrivals/s: where a ladder whose first step failed starts again


def climb(case: Case, spec: RunSpec, work: Path, *, latency: bool, pin: int | None = None, climbs: int = CLIMBS,
          facts: RunFacts | None = None, **options: Any) -> CalibrationResult:
    """The case's calibration ladder up to where the generator (or, with ``latency``, the target
    sharing the machine) gives way, whatever the host: when even the top step held, it climbs
    again 4x higher (at most :data:`CLIMBS` times), so the figure is the machine's, never the cap's.
    Every step of every ladder is kept, in order; ``top`` is the last ladder's. ``climbs=1``: never
    above ``spec.calibrate_max_rate`` (an explicit ``--scale``: no ladder above the rate it asks).

    When the first ladder's first step failed (a target just started, or one slow at any rate), the
    ladder starts again at :data:`STEP_DOWN` (warmed first, as every ladder is); when that step fails
    too, the result keeps no step (``rate`` 0) and says so."""
    top = float(spec.calibrate_max_rate or ladder_top(case))
    # the first ladder starts low (2% of the peak, or --calibrate-min-rate); a climb again starts below its last top
    low = spec.calibrate_min_rate
    steps: list[dict[str, Any]] = []
    seconds = 0.0
    stepped_down_from = None
    for ladder in range(max(1, climbs)):
        cal = run_calibration(case, spec, work, latency=latency, pin=pin, calibrate_max_rate=top,
                              calibrate_min_rate=low, facts=facts, **options)
        steps += cal.steps
        seconds += cal.seconds
        first = float(cal.steps[0]["rate"]) if cal.steps else 0.0
        if cal.error is None and cal.rate <= 0 and ladder == 0 and STEP_DOWN < first:
            # nothing kept, not even the first step: down to 1/s, and climb from there
            stepped_down_from = first
            cal = run_calibration(case, spec, work, latency=latency, pin=pin, calibrate_max_rate=top,
                                  calibrate_min_rate=STEP_DOWN, facts=facts, **options)
            steps += cal.steps
            seconds += cal.seconds
        if not cal.ok or cal.rate < cal.top or climbs <= 1 or spec.calibrate_max_rate:
            break  # (a stated top, --calibrate-max-rate or an explicit --scale's rate: never a ladder above it)
        low, top = top, top * 4
    cal.steps, cal.seconds, cal.stepped_down_from = steps, seconds, stepped_down_from
    return cal


def auto_scale(case: Case, cal: CalibrationResult, peak_rate: float, processes: int = 1) -> float:
    """The largest scale whose peak fits ``headroom`` of what the calibration measured.

    ``peak_rate``: the scenario's arrivals/s at scale 1 on the adjusted axis (tickets: 20,000 /
    ``--scale``; the feed: its rate per unit of ``--time-scale``). Rounded down to two
    significant digits so that the figure printed is the figure run. Never above the highest step
    the calibration saw kept when that rate was the target's knee (more generator processes do not
    make the target faster); a calibration that kept no step sizes nothing (0.0): see
    :func:`lowest_scale`.
    """
    if not cal.ok or peak_rate <= 0:
        return 0.0
    raw = case.headroom * cal.rate * max(1, processes) / peak_rate
    kept = cal.highest_kept
    if cal.stopped_by == "target" and kept is not None:
        raw = min(raw, kept / peak_rate)
    return _round_down(raw)


def lowest_scale(cal: CalibrationResult | None, peak_rate: float) -> tuple[float, float]:
    """A calibration that kept no step: the scale at whose peak the load offers the lowest rate any ladder
    tried (:data:`STEP_DOWN` when no step ran), and that rate. Rounded down: never above it."""
    rate = (cal.lowest_tried if cal else None) or STEP_DOWN
    return (_round_down(rate / peak_rate) if peak_rate > 0 else 0.0), rate


def _round_down(x: float, digits: int = 2) -> float:
    if x <= 0:
        return 0.0
    exp = math.floor(math.log10(x)) - digits + 1
    step = 10 ** exp
    return round(math.floor(x / step + 1e-9) * step, max(0, -exp))


def processes_for(peak_rate: float, per_process: float) -> int:
    """Generator processes/machines the full peak needs at this machine's per-process rate."""
    return max(1, math.ceil(peak_rate / per_process)) if per_process > 0 else 0
