"""What a notifications scenario's report shows, from its history and the providers' record: pure.

The scenarios in ``load.py`` send, poll and fetch the providers' record; this
module turns what they gathered into the checks, the charts and the details of the report, over
one analysis. A scenario states what it must put to the test (:data:`Exercise`: a dead address
meeting every channel); a check that held while its count stayed 0 is
"unknown" (not exercised), never True.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable, Sequence

from peakproof.checks import CheckResult
from peakproof.history import History
from peakproof.report import Chart
from .analysis import DeliveryRules, NotificationsAnalysis
from .checks import check_analysis
from .delivery import urgent_mean_latency

# (the check it feeds, what the scenario must see, how many times the run saw it)
Exercise = tuple[str, str, Callable[[NotificationsAnalysis], int]]

CHANNELS = ("push", "sms", "email")


def exercised(results: list[CheckResult], counts: dict[str, int], exercises: Sequence[Exercise]) -> list[CheckResult]:
    """``results`` with every check that held while what it must be put to the test was never seen made
    "unknown", saying so (new results: the checks' own are not edited)."""
    out = []
    for r in results:
        missing = [what for name, what, _ in exercises if name == r.name and counts.get(what) == 0]
        if r.valid is True and missing:
            r = replace(r, valid="unknown", note=f"not exercised: this scenario must see {missing[0]}, and it saw none")
        out.append(r)
    return out


def judge_notifications(history: History, calls: list[dict[str, Any]], every_call: list[dict[str, Any]], *,
                        rules: DeliveryRules, saturated: bool, exercises: Sequence[Exercise], drives_down: bool = False,
                        breakers: dict[str, Any] | None = None, unfinished: int = 0,
                        capacity: dict[str, Any] | None = None) -> tuple[list[CheckResult], list[Chart], dict[str, Any]]:
    """The run's checks, charts and details. ``calls``: this run's provider calls; ``every_call``: all the
    providers saw (a breaker remembers earlier runs); ``breakers``: the reference's /_breakers, if any."""
    a = NotificationsAnalysis(history, calls, channel_calls=every_call, **rules.judging())
    counts = {what: count(a) for _, what, count in exercises}
    checks = exercised(check_analysis(a, saturated=saturated, drives_down=drives_down), counts, exercises)
    checks.append(urgent_mean_latency(a))
    t0 = min((op.invoke_time for op in history.ops if op.f == "notify"), default=time.time())
    details = {"provider calls": {"total": len(calls),
                                  "per notification": round(len(calls) / max(1, len(a.accepted)), 3),
                                  **{ch: sum(1 for c in calls if c["channel"] == ch) for ch in CHANNELS}},
               "notifications": {"accepted": len(a.accepted), "unfinished when judged": unfinished},
               "exercised (what the scenario must put to the test)": counts or "nothing beyond the checks' chances",
               **({"delivery capacity measured first": capacity} if capacity else {})}
    return checks, charts(a, calls, t0, breakers), details


def charts(a: NotificationsAnalysis, calls: list[dict[str, Any]], t0: float,
           breakers: dict[str, Any] | None = None) -> list[Chart]:
    per_channel: dict[str, dict[int, int]] = {}
    outcomes: dict[str, dict[int, int]] = {}
    for c in calls:
        sec = int(c["at"] - t0)
        if c["outcome"] in ("ok", "ack_lost"):
            row = per_channel.setdefault(c["channel"], {})
            row[sec] = row.get(sec, 0) + 1
        row = outcomes.setdefault(f"{c['channel']} {c['outcome']}", {})
        row[sec] = row.get(sec, 0) + 1
    lat: dict[str, dict[int, list[float]]] = {"urgent": {}, "reminder": {}}
    for key, op in a.accepted.items():
        if a.delivered.get(key):
            first = min(d["at"] for d in a.delivered[key])
            lat[op.args["priority"]].setdefault(int(op.invoke_time - t0), []).append(first - op.invoke_time)
    out = [Chart("Deliveries per channel over time (the providers' record)", "deliveries / s",
                 {ch: sorted(v.items()) for ch, v in per_channel.items()}),
           Chart("Provider call outcomes over time", "calls / s", {k: sorted(v.items()) for k, v in outcomes.items()}),
           Chart("Mean delivery latency by acceptance second: urgent vs reminder", "seconds",
                 {p: [(s, sum(v) / len(v)) for s, v in sorted(d.items())] for p, d in lat.items()})]
    try:
        state = {"closed": 0, "half-open": 1, "open": 2}
        out.append(Chart("Breaker state over time (reference target: 0 closed, 1 half-open, 2 open)", "state",
                         {ch: [(t - t0, state[s]) for t, s in breakers[ch]["transitions"] if t >= t0]
                          for ch in CHANNELS if ch in breakers},  # type: ignore[index, operator]
                         note="Transitions reported by the reference target's /_breakers (not in the contract)."))
    except (TypeError, ValueError, KeyError):
        pass  # a target without /_breakers (or another shape): no chart
    return out
