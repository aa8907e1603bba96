"""The tickets' lease checks: what the lock's lease promises when its holder fails
(``tickets-lease-faults``: the holder stalls past its lease, dies holding it, the target restarts).

Pure functions of the history (the nemesis's fault ops in it, :mod:`peakproof.nemesis`) and
the run's numbers: the lease, the slack, each fault's window (how long after it was put in
force its effect may last, s, by fault name). Load-only: not in ``TICKETS_CHECKS`` (they do
not judge a :class:`~peakproof.cases.tickets.checks.TicketsAnalysis`, and a run without the
faults could only leave them unknown).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from peakproof import nemesis
from peakproof.checks import CheckResult, Measure
from peakproof.history import OK, History, Op
from peakproof.slo import statistic

__all__ = ["first_sales", "sales_resume_within_the_lease", "decisions_within_100ms_outside_faults"]


def _ops(history: History | Iterable[Op]) -> list[Op]:
    return history.ops if isinstance(history, History) else list(history)


def first_sales(history: History | Iterable[Op]) -> list[Op]:
    """The ok reserves that made a sale, by completion time: the first ok answer of each (buyer,
    request id). A replay is answered without the lock, so it says nothing of sales."""
    seen: set[tuple[Any, Any]] = set()
    first = []
    for op in sorted((o for o in _ops(history) if o.f == "reserve" and o.type == OK), key=lambda o: o.complete_time):
        key = (op.args.get("buyer_id"), op.args.get("request_id"))
        if key not in seen:
            seen.add(key)
            first.append(op)
    return first


def sales_resume_within_the_lease(history: History | Iterable[Op], lease: float, slack: float,
                                  fault_windows: Mapping[str, float], watched_after: float = 2.0) -> CheckResult:
    """After each fault of the lock holder, new sales resume within ``lease`` + ``slack`` s: the
    lock is freed when its lease runs out, whatever its holder does.

    For each applied fault (an ok ``fault_start`` of the nemesis): the longest time without a
    new sale (:func:`first_sales`) from the fault's start to the end of its window
    (``fault_windows[fault]``) plus ``watched_after`` s; no sale at all in that stretch, or none
    for its last ``lease + slack`` s, counts to its end. A chance: an applied fault. None
    applied (the target refused the nemesis, or none was injected): unknown."""
    ops = _ops(history)
    starts = [op for op in ops if op.process == nemesis.NEMESIS and op.f == "fault_start"]
    applied = [op for op in starts if op.type == OK]
    if not applied:
        why = (f"the target refused the nemesis ({starts[0].value}: {starts[0].error}): it has no "
               f"POST /_nemesis fault hook, so the lease was never put to the test") if starts else \
            "no fault was injected (the run ended first)"
        return CheckResult("sales_resume_within_the_lease", "unknown", {"faults": 0}, note=why)
    sales = [op.complete_time for op in first_sales(ops)]
    limit = lease + slack
    gaps: dict[str, float] = {}
    worst: tuple[float, str] = (0.0, "")
    for op in applied:
        fault = op.args["fault"]
        lo, hi = op.complete_time, op.complete_time + fault_windows[fault] + watched_after
        inside = [t for t in sales if lo <= t <= hi]
        points = [lo, *inside] + ([hi] if not inside or hi - inside[-1] > limit else [])
        gap = max((b - a for a, b in zip(points, points[1:])), default=hi - lo)
        gaps[f"{fault}: longest time without a new sale (s)"] = round(gap, 3)
        worst = max(worst, (gap, fault))
    ok = worst[0] <= limit
    watched = fault_windows[worst[1]] + watched_after
    took = (f"for {worst[0]:.2f} s" if worst[0] < watched - 1e-6
            else f"in the {watched:.2f} s watched after it")
    return CheckResult("sales_resume_within_the_lease", ok, {"faults": len(applied), **gaps},
                       None if ok else f"after the {worst[1]} fault no new sale was made {took}, "
                                       f"though buyers kept coming and stock remained: the lock was not freed "
                                       f"when its lease ran out",
                       chances=len(applied), chance_kind="faults of the lock holder",
                       actual=Measure(round(worst[0], 3), "s"), limit=Measure(limit, "s", "<="))


def decisions_within_100ms_outside_faults(history: History | Iterable[Op], fault_windows: Mapping[str, float],
                                          drain: float = 2.0, limit: float = 0.1) -> CheckResult:
    """Outside the faults' windows, reservations are decided within the seed's 100 ms (``limit``
    s) at the 99th percentile, from their intended start (or their invocation).

    A fault's window runs from its start for ``fault_windows[fault]`` + ``drain`` s (the
    requests it held up being answered); a reserve invoked or completed inside one, and the
    ``monitor`` process's, are left out. None left: unknown."""
    ops = _ops(history)
    windows = [(w["start"], w["start"] + fault_windows[w["fault"]] + drain) for w in nemesis.windows(ops)]
    took = [op.complete_time - (op.intended_time or op.invoke_time) for op in ops
            if op.f == "reserve" and op.done and op.process != "monitor"
            and not any(a <= op.invoke_time <= b or a <= op.complete_time <= b for a, b in windows)]
    if not took:
        return CheckResult("decisions_within_100ms_outside_faults", "unknown", {"decisions": 0},
                           note="no reservation was decided outside the faults' windows")
    p99 = statistic(sorted(took), "p99")
    ok = p99 <= limit
    return CheckResult("decisions_within_100ms_outside_faults", ok,
                       {"decisions outside the faults' windows": len(took), "p99 (s)": round(p99, 4)},
                       None if ok else f"p99 decision time {p99 * 1000:.0f} ms outside the faults' windows",
                       actual=Measure(round(p99, 4), "s"), limit=Measure(limit, "s", "<="))
