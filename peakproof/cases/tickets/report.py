"""What a tickets scenario's report shows, from its history: pure functions.

The scenarios in ``load.py`` send; what turns their history into checks, charts and details is
here (as in the other cases' ``report.py``), so it is read and tested on histories made by hand.
"""

from __future__ import annotations

from typing import Any

from peakproof.checks import CheckResult
from peakproof.history import OK, History
from peakproof.report import Chart

from .checks import TICKETS, check_tickets
from .lease import decisions_within_100ms_outside_faults, sales_resume_within_the_lease
from .rules import Tolerance


def judge_opening(history: History, tolerance: Tolerance) -> tuple[list[CheckResult], list[Chart], dict[str, Any]]:
    """Every tickets check over the opening's history; the stock as the target counted it and the
    reservations' outcomes per second; the operations by outcome and the quota's final counts."""
    checks = check_tickets(history, tolerance)
    t0 = min((op.invoke_time for op in history.ops), default=0.0)
    reads = sorted((op for op in history.ops if op.f == "read_quota" and op.type == OK),
                   key=lambda o: o.complete_time)
    stock = Chart("Stock over time (the target's own counts)", "items",
                  {k: [(op.complete_time - t0, op.value[k]) for op in reads] for k in ("available", "held", "sold")})
    outcomes: dict[str, dict[int, int]] = {}
    for op in history.ops:
        if op.f == "reserve" and op.done:
            key = "ok" if op.type == OK else f"{op.type} {op.value}"
            sec = int(op.complete_time - t0)
            outcomes.setdefault(key, {})[sec] = outcomes.setdefault(key, {}).get(sec, 0) + 1
    outcome_chart = Chart("Reservation outcomes per second", "answers / s",
                          {k: sorted(v.items()) for k, v in outcomes.items()})
    counts: dict[str, int] = {}
    for op in history.ops:
        key = f"{op.f} {op.type}" + ("" if op.type == OK else f" {op.value}")
        counts[key] = counts.get(key, 0) + 1
    final = reads[-1].value if reads else {}
    return checks, [stock, outcome_chart], {"operations by outcome": dict(sorted(counts.items())),
                                            "final quota": final}


def judge_sold_out(history: History, tolerance: Tolerance) -> tuple[list[CheckResult], list[Chart], dict[str, Any]]:
    """Nothing is ever free on a sold-out quota: only the promises a sold-out path can break (its
    check group ``sold_out``: a sale on an empty quota, counts that stop adding up)."""
    sold_out = TICKETS.group("sold_out")
    return [r for r in check_tickets(history, tolerance) if r.name in sold_out], [], {}


def judge_lease_faults(history: History, tolerance: Tolerance, lease: float, resume_slack: float,
                       windows: dict[str, float], drain: float,
                       decision_limit: float) -> tuple[list[CheckResult], list[Chart], dict[str, Any]]:
    """The opening's report without ``no_oversell`` (the quota is above all demand: a holder's late
    write shows in the counts), with the lease's two checks over each fault's window."""
    checks, charts, details = judge_opening(history, tolerance)
    checks = [r for r in checks if r.name != "no_oversell"]
    details["not judged here"] = ("no_oversell: the quota is above all demand, so every decision takes the "
                                  "lock; a holder's late write shows in stock_is_conserved and "
                                  "units_return_exactly_once. The opening judges no_oversell.")
    checks += [sales_resume_within_the_lease(history, lease, resume_slack, windows),
               decisions_within_100ms_outside_faults(history, windows, drain, decision_limit)]
    return checks, charts, details
