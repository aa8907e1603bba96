"""What the counter's load report shows, from its history: pure (the scenario only sends)."""

from __future__ import annotations

from typing import Any

from peakproof.checks import CheckResult
from peakproof.history import OK, History
from peakproof.report import Chart

from .checks import check_counter


def judge_counter(history: History) -> tuple[list[CheckResult], list[Chart], dict[str, Any]]:
    """The counter's checks, a chart of the value each ok increment left, and the details."""
    checks = check_counter(history)
    incs = [op for op in history.ops if op.f == "increment" and op.type == OK and op.intended_time is not None]
    t0 = min((op.intended_time for op in incs), default=0.0)
    chart = Chart("The value each ok increment left", "counter value",
                  {"value": [(op.intended_time - t0, op.value["value"]) for op in incs]})
    counted = next(r for r in checks if r.name == "every_increment_counted")
    return checks, [chart], {"counter": {**counted.counts, "ops": history.counts()}}
