"""The counter's peak as an open-model Locust scenario: ``--scenario counter-peak``.

Increments (each of 1..``--counter-max-by``, seeded) at a constant rate of
``peak_rate x --scale`` (200/s at scale 1) for ``--duration`` s; a baseline read in
``setup`` and a final read in ``finish`` give ``every_increment_counted`` its baseline and
its last word.

    PEAKPROOF_CASES=counter_case PYTHONPATH=tests/fourth_case:. locust -f tests/fourth_case/counter_load.py \\
        --headless --host http://127.0.0.1:8000/counter --scenario counter-peak --scale 1 --duration 2
"""

from __future__ import annotations

import random
from typing import Any

from counter_case import CASE, HttpCounter
from counter_case.report import judge_counter

from peakproof.arrivals import arrival_times, constant
from peakproof.errors import SetupFailed
from peakproof.history import OK, History
from peakproof.load.engine import OpenModelUser, ScenarioShape
from peakproof.load.scenario import Arrival, Context, Handler, Scenario, scenario
from peakproof.report import Chart
from peakproof.run import Run

__all__ = ["OpenModelUser", "ScenarioShape", "CounterPeak"]


@scenario
class CounterPeak(Scenario):
    name = "counter-peak"
    case = CASE.name
    description = "Case C: increments at a constant rate (200/s at scale 1), then a final read"
    default_slos: list[str] = []  # the error budget only: nothing here depends on the machine's speed

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        spec = run.spec
        self.seconds = float(spec.duration or CASE.default_duration or 5.0)
        self.rate = CASE.peak_rate() * spec.number_scale
        self.n = max(1, round(self.rate * self.seconds))
        self.max_by = int(spec.opt("counter_max_by", 5))
        self.setup_history: History | None = None
        self._arrivals: list[Arrival] | None = None

    def params(self) -> dict[str, Any]:
        return {"increments": self.n, "rate (per s)": round(self.rate, 2), "seconds": self.seconds,
                "largest increment": self.max_by}

    def _driver(self, history: History | None = None, transport: Any = None) -> HttpCounter:
        return HttpCounter(self.host, history=history, transport=transport, timeout=self.spec.request_timeout,
                           admin_token=self.spec.admin_token)

    # -- master / local ---------------------------------------------------------------------------

    def setup(self) -> dict[str, Any]:
        d = self._driver()
        op = d.read(process="setup")
        if op.type != OK:
            raise SetupFailed(f"could not read the counter at {self.host} before the run: {op!r}")
        self.setup_history = d.history
        return {"baseline": op.value["value"]}

    def finish(self, history: History) -> None:
        if self.setup_history is not None:
            history.prepend(self.setup_history.ops)  # the baseline read, before every increment
        self._driver(history).read(process="final")

    def judge(self, history: History) -> tuple[list, list[Chart], dict[str, Any]]:
        return judge_counter(history)

    # -- every dispatching process -------------------------------------------------------------------

    def arrivals(self) -> list[Arrival]:
        if self._arrivals is None:
            times = arrival_times(constant(self.rate, self.seconds, "counter peak"), self.spec.spacing,
                                  self.spec.seed)
            rnd = random.Random(self.spec.seed)
            self._arrivals = [Arrival(t, "increment", (i, rnd.randint(1, self.max_by)))
                              for i, t in enumerate(times[: self.n])]
        return self._arrivals

    def make_driver(self, history: History, transport: Any) -> HttpCounter:
        return self._driver(history, transport)

    def handlers(self) -> dict[str, Handler]:
        return {"increment": self.increment}

    def increment(self, ctx: Context, a: Arrival) -> None:
        i, by = a.data
        ctx.driver.increment(by, process=f"client-{i}", intended_time=ctx.intended(a.t))
