"""Case T's load scenarios (``loadtests/tickets.py`` hands Locust over to them): the opening as an
open-model Locust scenario, ``--scenario tickets-opening``.

200,000 reservation requests uniformly over 10 s (20,000/s) against a 5,000 quota; 60%
ask 1 item and 40% ask 2; buyers from faker; 1% of requests are client retries that reuse
their request id, 0.5% replay it with another quantity. Then the window phase: 65% of
holds are confirmed at random times inside the hold window (BS5 at 120 s), the rest are
abandoned and expire (5% of those buyers try to pay after the hold lapsed), 5% of sales
are cancelled (30% of those twice), and a late wave of buyers arrives after the window to
pick up the returned units. The odd buyers are there so that every invariant gets chances
to fail on every run. ``--scale S`` multiplies the rate and the quota (the 10 s opening and the 56x
demand ratio stay); ``--time-scale T`` divides the 120 s hold window.

    locust -f loadtests/ --headless --host http://127.0.0.1:8000/tickets \\
        --scenario tickets-opening --scale 0.1 --time-scale 24
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from peakproof import nemesis
from peakproof.errors import SetupFailed
from peakproof.history import INFO, OK, History, Op
from peakproof.load.engine import OpenModelUser, ScenarioShape
from peakproof.load.scenario import Arrival, Calibration, Context, Handler, Scenario, scenario
from peakproof.report import Chart
from peakproof.run import Run
from peakproof.arrivals import arrival_times, constant

from .case import CASE
from .report import judge_lease_faults, judge_opening, judge_sold_out
from .rules import tolerance_of
from .workload import OpeningWorkload, buyer_names

__all__ = ["OpenModelUser", "ScenarioShape", "TicketsOpening", "TicketsSoldOut", "TicketsLeaseFaults",
           "TicketsCalibrate"]

CONFIRM_SHARE = 0.65  # BS5 at the 120 s window
CANCEL_SHARE = 0.05  # of sales
RETRY_SHARE = 0.01  # client retries reusing their request id
# Buyers who give every check a chance to fail (a check that cannot fail says nothing):
LATE_CONFIRM_SHARE = 0.05  # of abandoned holds: the buyer pays after the hold lapsed (must be refused)
MIN_LATE_CONFIRMS = 5  # per process
# The opening's holds are all taken within a fraction of a second, so they lapse together: a target that
# releases lapsed holds in a periodic job decides all their late payments with one tick of it (whether it ran
# between the lapse and the payment is luck). The late wave's holds spread over LATE_WAVE_SECONDS: of them,
# holds whose lapses lie LATE_PAYER_SPACING apart are paid late, so whatever the job's period (up to the
# wave's length), some late payment comes before its next tick.
LATE_PAYER_SPACING = 0.2  # s between the lapses of the late wave's late payers
LATE_WAVE_PAYERS = 10  # per process, at most
DOUBLE_CANCEL_SHARE = 0.3  # of cancels: sent twice (the units must come back once)
OTHER_QUANTITY_SHARE = 0.005  # requests replayed with the same id and another quantity (must be refused)
LATE_WAVE_SECONDS = 2.0
MIN_QUOTA = 20  # items: the opening's smallest quota, whatever the scale


def _after_lapse(tol: Any) -> float:
    """How long after a hold's expiry a late payment comes: past the clock skew and the stated
    release lag (within it a sale is the target's stated rule, not a bug), and just past them (a
    target that releases lapsed holds in a periodic job sells them until it runs: a payment long
    after the lapse would meet a job already done)."""
    return tol.skew + tol.sale_lag


def _request_id(i: int) -> str:
    """Buyers' apps number their requests alike: every request id is sent by two buyers, by design
    (answers_belong_to_who_asked gets its chances: a server that keys idempotency on the request
    id alone hands one buyer the other's reservation). The key is (quota, buyer, request id)."""
    return f"req-{i // 2}"


@scenario
class TicketsOpening(Scenario):
    name = f"{CASE.name}-opening"
    case = CASE.name
    description = "Case T: 200,000 reservations in 10 s on a 5,000 quota, then the hold window"
    default_slos = ["reserve:p99<=100ms"]

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        spec = run.spec
        base = OpeningWorkload()
        scale = spec.number_scale
        # a quota of a few items leaves holds too few for every check to get its chances (a late confirm, a
        # release): below MIN_QUOTA the opening keeps MIN_QUOTA items (a slow staging box at --scale auto)
        self.quota = max(MIN_QUOTA, round(base.quota * scale))
        self.requests = max(1, round(base.requests * scale))
        self.seconds = base.seconds
        self.hold = base.hold_seconds / spec.number_time_scale
        self.p_single = base.p_single
        self.quota_id = ""
        self._arrivals: list[Arrival] | None = None
        self._buyers = buyer_names(2_000, spec.seed)
        self._late_confirms = 0
        self._late_wave_lapses: list[float] = []  # monotonic instants the late wave's late payers' holds lapse

    def params(self) -> dict[str, Any]:
        return {"quota": self.quota, "opening requests": self.requests, "opening seconds": self.seconds,
                "rate (req/s)": self.requests / self.seconds, "hold window (s)": self.hold,
                "confirm share": CONFIRM_SHARE, "cancel share of sales": CANCEL_SHARE, "retry share": RETRY_SHARE,
                "late confirm share of abandoned holds": LATE_CONFIRM_SHARE,
                "double cancel share": DOUBLE_CANCEL_SHARE, "replays with another quantity": OTHER_QUANTITY_SHARE,
                "quota id": self.quota_id}

    def _driver(self, history: History | None = None, transport: Any = None) -> Any:
        return self.driver(history, transport)

    # -- master / local ---------------------------------------------------------------------

    def setup(self) -> dict[str, Any]:
        self.quota_id = f"opening-{uuid.uuid4().hex[:10]}"
        self.setup_driver = self._driver()
        self.need(self.setup_driver, "setup")
        op = self.setup_driver.put_quota(self.quota_id, self.quota, self.hold)
        self.need(self.setup_driver, "setup", op)
        if op.type != OK:
            raise SetupFailed(f"could not create the quota on {self.host}: {op.value} {op.error}")
        return {"quota_id": self.quota_id}

    def monitor(self, history: History, now: float | None) -> None:
        if self.quota_id:
            self._driver(history).read_quota(self.quota_id, process="monitor")

    def finish(self, history: History) -> None:
        self._driver(history).read_quota(self.quota_id, process="final")

    def judge(self, history: History) -> tuple[list, list[Chart], dict[str, Any]]:
        return judge_opening(history, tolerance_of(self.setup_driver))

    # -- every dispatching process -------------------------------------------------------------

    def adopt(self, shared: dict[str, Any]) -> None:
        self.quota_id = shared["quota_id"]

    def arrivals(self) -> list[Arrival]:
        if self._arrivals is None:
            opening = arrival_times(constant(self.requests / self.seconds, self.seconds, "opening"),
                                    self.spec.spacing, self.spec.seed)
            import random

            rnd = random.Random(self.spec.seed)
            arr = []
            for i, t in enumerate(opening):
                qty = 1 if rnd.random() < self.p_single else 2
                arr.append(Arrival(t, "reserve", (i, qty, rnd.random() < RETRY_SHARE, False)))
            # late buyers after the window: enough to take back what expired or was cancelled
            returned = self.quota * (1 - CONFIRM_SHARE * (1 - CANCEL_SHARE))
            late_n = max(1, round(returned / 1.4 * 1.5))
            start = self.seconds + self.hold * 1.05
            for j in range(late_n):
                qty = 1 if rnd.random() < self.p_single else 2
                arr.append(Arrival(start + j * LATE_WAVE_SECONDS / late_n, "reserve",
                                   (len(opening) + j, qty, False, True)))
            self._arrivals = arr
        return self._arrivals

    def bound_seconds(self) -> float:
        return self.seconds + 2 * self.hold * 1.05 + LATE_WAVE_SECONDS + 30

    def handlers(self) -> dict[str, Handler]:
        return {"reserve": self.reserve, "retry": self.retry, "confirm": self.confirm, "cancel": self.cancel,
                "cancel-again": self.cancel_again}

    def reserve(self, ctx: Context, a: Arrival) -> None:
        d = ctx.driver
        rnd = ctx.random
        i, qty, retry, late_wave = a.data
        buyer = f"{self._buyers[i % len(self._buyers)]}-{i}"
        op = d.reserve(self.quota_id, buyer, qty, _request_id(i), process=f"buyer-{i}", intended_time=ctx.intended(a.t))
        if retry:  # the client did not trust the answer and sends the same request again
            ctx.later(0.2, "retry", (i, qty))
        elif rnd.random() < OTHER_QUANTITY_SHARE:  # the same request id, another quantity: a 422
            ctx.later(0.2, "retry", (i, 3 - qty))
        if op.type == OK and op.value["status"] == "held":
            if not self._lapses_in_the_run(op.value):
                # a hold that does not lapse within the run (holds that never lapse, a window longer than the run):
                # no payment is planned for after its lapse (a wait past the run, and --max-wait); its buyer pays
                # in time or cancels, so its units come back the one way such a product returns them
                if rnd.random() < CONFIRM_SHARE:
                    ctx.later(rnd.uniform(0.05, 0.9) * self.hold, "confirm", op.value["reservation_id"])
                elif late_wave or rnd.random() < LATE_CONFIRM_SHARE or self._late_confirms < MIN_LATE_CONFIRMS:
                    self._late_confirms += 1
                    ctx.later(rnd.uniform(0.05, 0.9) * self.hold, "cancel", op.value["reservation_id"])
            elif late_wave and self._spread_late_payer(op.value):
                late = _expires_in(op.value, self.hold) + _after_lapse(tolerance_of(d)) + rnd.uniform(0.05, 0.3)
                ctx.later(late, "confirm", op.value["reservation_id"])
            elif rnd.random() < CONFIRM_SHARE:
                ctx.later(rnd.uniform(0.05, 0.9) * self.hold, "confirm", op.value["reservation_id"])
            elif rnd.random() < LATE_CONFIRM_SHARE or self._late_confirms < MIN_LATE_CONFIRMS:
                # pays after the hold lapsed: must not be sold (a few on every run, whatever the scale)
                self._late_confirms += 1
                late = _expires_in(op.value, self.hold) + _after_lapse(tolerance_of(d)) + rnd.uniform(0.05, 0.5)
                ctx.later(late, "confirm", op.value["reservation_id"])

    def _lapses_in_the_run(self, reservation: dict[str, Any]) -> bool:
        """Whether the hold lapses early enough that a payment after its lapse fits in the run (its bound) and
        in ``--max-wait``."""
        return _expires_in(reservation, self.hold) <= min(self.bound_seconds(), self.spec.max_wait)

    def _spread_late_payer(self, reservation: dict[str, Any]) -> bool:
        """Whether this late-wave hold is paid late: its lapse is LATE_PAYER_SPACING past the last late
        payer's (and fewer than LATE_WAVE_PAYERS were chosen)."""
        lapse = time.monotonic() + _expires_in(reservation, self.hold)
        last = self._late_wave_lapses[-1] if self._late_wave_lapses else None
        if len(self._late_wave_lapses) >= LATE_WAVE_PAYERS or (last is not None and lapse - last < LATE_PAYER_SPACING):
            return False
        self._late_wave_lapses.append(lapse)
        self._late_confirms += 1
        return True

    def retry(self, ctx: Context, a: Arrival) -> None:
        i, qty = a.data
        ctx.driver.reserve(self.quota_id, f"{self._buyers[i % len(self._buyers)]}-{i}", qty, _request_id(i),
                           process=f"buyer-{i}", intended_time=ctx.intended(a.t))

    def confirm(self, ctx: Context, a: Arrival) -> None:
        op = ctx.driver.confirm(a.data, intended_time=ctx.intended(a.t))
        if op.type == OK and ctx.random.random() < CANCEL_SHARE:
            ctx.later(ctx.random.uniform(0.1, 1.0), "cancel", a.data)

    def cancel(self, ctx: Context, a: Arrival) -> None:
        ctx.driver.cancel(a.data, intended_time=ctx.intended(a.t))
        if ctx.random.random() < DOUBLE_CANCEL_SHARE:  # the buyer clicks twice
            ctx.later(ctx.random.uniform(0.05, 0.5), "cancel-again", a.data)

    def cancel_again(self, ctx: Context, a: Arrival) -> None:
        ctx.driver.cancel(a.data, intended_time=ctx.intended(a.t))


def _expires_in(reservation: dict[str, Any], hold: float) -> float:
    """Seconds from now until the hold's ``expires_at`` (the target's clock; loopback shares ours),
    or the whole hold window when the answer did not say."""
    expires = reservation.get("expires_at")
    return max(0.0, float(expires) - time.time()) if isinstance(expires, (int, float)) else hold


def _empty_quota(sc: Scenario, prefix: str) -> str:
    """A new quota with no stock: every reservation takes the sold-out path."""
    quota_id = f"{prefix}-{uuid.uuid4().hex[:10]}"
    d = sc.driver()
    sc.need(d, "setup")
    op = d.put_quota(quota_id, 0, 60.0)
    sc.need(d, "setup", op)
    if op.type != OK:
        raise SetupFailed(f"could not create the quota on {sc.host}: {op.value} {op.error}")
    return quota_id


@scenario
class TicketsSoldOut(Scenario):
    """The normal path of 196,429 requests: reservations against a sold-out quota, at a constant rate.

    The rate is 20,000/s x ``--scale`` for ``--duration`` seconds (default 10). Used to
    measure the engine's sustained rate and its arrival accuracy.
    """

    name = f"{CASE.name}-sold-out"
    case = CASE.name
    description = "Case T's sold-out path: constant-rate reservations on an empty quota"
    default_slos = ["reserve:p99<=100ms"]

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        spec = run.spec
        self.rate = CASE.peak_rate() * spec.number_scale
        self.seconds = float(spec.duration or 10.0)
        self.quota_id = ""
        self._arrivals: list[Arrival] | None = None

    def params(self) -> dict[str, Any]:
        return {"rate (req/s)": self.rate, "seconds": self.seconds, "quota id": self.quota_id}

    def setup(self) -> dict[str, Any]:
        self.quota_id = _empty_quota(self, "soldout")
        return {"quota_id": self.quota_id}

    def adopt(self, shared: dict[str, Any]) -> None:
        self.quota_id = shared["quota_id"]

    def arrivals(self) -> list[Arrival]:
        if self._arrivals is None:
            times = arrival_times(constant(self.rate, self.seconds, "sold-out"), self.spec.spacing,
                                  self.spec.seed)
            self._arrivals = [Arrival(t, "reserve", i) for i, t in enumerate(times)]
        return self._arrivals

    def bound_seconds(self) -> float:
        return self.seconds + 30

    def handlers(self) -> dict[str, Handler]:
        return {"reserve": self.reserve}

    def reserve(self, ctx: Context, a: Arrival) -> None:
        ctx.driver.reserve(self.quota_id, f"b{a.data}", 1, f"r{a.data}", process=f"buyer-{a.data}",
                           intended_time=ctx.intended(a.t))

    def finish(self, history: History) -> None:
        self.driver(history).read_quota(self.quota_id, process="final")

    def judge(self, history: History) -> tuple[list, list[Chart], dict[str, Any]]:
        return judge_sold_out(history, tolerance_of(self.driver()))


@scenario
class TicketsLeaseFaults(TicketsOpening):
    """Case T fault: the quota row's lock holder misbehaves while every buyer still finds stock.

    The quota is larger than all the demand, so every reservation takes the lock. The nemesis
    (the reference's ``POST /_nemesis``, recorded as fault ops) makes the next holder *stall*
    past its lease (2 leases between its read and its write), then makes one *die* holding it,
    then *restarts* the target (its memory rebuilt from its database). The promises: nothing
    oversold or lost (all six checks), sales never stop longer than the lease (+1 s), decisions
    outside the faults' windows within 100 ms, and a buyer answered 503 busy who retries with
    the same request id is served. A target without the hook: INCONCLUSIVE, never PASS.
    """

    name = f"{CASE.name}-lease-faults"
    description = "Case T fault: the lock holder stalls past its lease, dies holding it, then the target restarts"
    default_slos = ["errors:rate<=2%"]  # the faults' casualties: answered 503 busy, nothing changed; retried
    RESUME_SLACK = 1.0  # s beyond the lease that sales may stop for
    CONFIRM_SHARE = 0.05  # each confirm is a write of its own: the lock must stay the reservations' bottleneck
    DECISION_LIMIT = 0.1  # s, the seed's decision time, judged outside the faults' windows

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        spec = run.spec
        self.lease = float(spec.opt("lease_seconds", 2.0))
        # While a lease holds the row, every request in the meantime stays in flight: the rate is
        # capped so that they fit the generator's pool (or arrivals would be dropped for it)
        pool = spec.pool_size
        self.rate = min(OpeningWorkload().rate * spec.number_scale, pool / (1.5 * self.lease + 1.0))
        # when each fault strikes, s from the start: each one's effect is over before the next
        # aimed at a reservation: a confirm or an expiry that took the stall would write a row no buyer's sale
        # was read from, and a holder's late write would overwrite nothing the counts show (one CI run in many)
        self.plan = [(2.0, "stall", {"seconds": 2 * self.lease, "on": "reserve"}),
                     (2.0 + 2 * self.lease + 1.5, "die", {"on": "reserve"}),
                     (2.0 + 3 * self.lease + 3.0, "restart", {})]
        self.seconds = float(spec.duration or self.plan[-1][0] + self.lease + 1.5)
        self.requests = max(1, round(self.rate * self.seconds))
        self.quota = 2 * self.requests + 10  # never sold out: every decision takes the lock
        self.fired: list[tuple[float, str, Op]] = []
        self.lifted: set[int] = set()

    def params(self) -> dict[str, Any]:
        return {"quota (above all demand)": self.quota, "requests": self.requests, "rate (req/s)": round(self.rate, 1),
                "seconds": self.seconds, "hold window (s)": self.hold,
                "rate cap (the pool over 1.5 leases + 1 s)": "pool-size / (1.5 x lease + 1)", "target's lease (s)": self.lease,
                "faults (s from start)": ", ".join(f"{f} at {t:g}" for t, f, _ in self.plan), "quota id": self.quota_id}

    def arrivals(self) -> list[Arrival]:
        if self._arrivals is None:
            import random

            times = arrival_times(constant(self.rate, self.seconds, "lease-faults"), self.spec.spacing,
                                  self.spec.seed)
            rnd = random.Random(self.spec.seed)
            self._arrivals = [Arrival(t, "reserve", (i, 1 if rnd.random() < self.p_single else 2, False, False))
                              for i, t in enumerate(times)]
        return self._arrivals

    def bound_seconds(self) -> float:
        return self.seconds + 30

    def handlers(self) -> dict[str, Handler]:
        return {**super().handlers(), "reserve": self.reserve_under_faults}

    def reserve_under_faults(self, ctx: Context, a: Arrival) -> None:
        i, qty, _, _ = a.data
        op = ctx.driver.reserve(self.quota_id, f"{self._buyers[i % len(self._buyers)]}-{i}", qty, _request_id(i),
                                process=f"buyer-{i}", intended_time=ctx.intended(a.t))
        if op.value == "busy" or op.type == INFO:  # "try again" (or no answer), with the same
            ctx.later(0.5, "retry", (i, qty))  # request id: a buyer is never served twice
        elif ctx.random.random() < RETRY_SHARE:  # a client that did not trust the answer: replays come with
            ctx.later(0.2, "retry", (i, qty))  # or without faults (reservation_is_idempotent's chances)
        elif op.type == OK and ctx.random.random() < self.CONFIRM_SHARE:
            ctx.later(ctx.random.uniform(0.05, 0.5) * self.hold, "confirm", op.value["reservation_id"])
        elif op.type == OK and self._late_confirms < MIN_LATE_CONFIRMS and self._lapses_in_the_run(op.value):
            self._late_confirms += 1  # pays after the hold lapsed
            late = _expires_in(op.value, self.hold) + _after_lapse(tolerance_of(ctx.driver)) + ctx.random.uniform(0.05, 0.5)
            ctx.later(late, "confirm", op.value["reservation_id"])

    def monitor(self, history: History, now: float | None) -> None:
        super().monitor(history, now)
        if now is None:
            return
        d = self._driver()  # the hook's own call is not a buyer's operation: only the fault op is recorded
        if not self.has(d, "faults"):  # no hook: nothing is put in; the lease checks say which capability
            return
        while len(self.fired) < len(self.plan) and self.plan[len(self.fired)][0] <= now:
            _, fault, params = self.plan[len(self.fired)]
            op = nemesis.inject(history, fault, lambda: d.nemesis(fault, **params).type == OK,
                                lease_seconds=self.lease, **params)
            self.fired.append((now, fault, op))
        for k, (at, fault, op) in enumerate(self.fired):  # each fault's window: the time its effect may last
            if op.type == OK and k not in self.lifted and now >= at + self._window(fault):
                nemesis.lift(history, fault, lambda: True)
                self.lifted.add(k)

    def _window(self, fault: str) -> float:
        return self.lease + self.RESUME_SLACK + (self.plan[0][2]["seconds"] if fault == "stall" else 0.0)

    DRAIN_SECONDS = 2.0  # after a fault's window, for the requests it held up to be answered

    def judge(self, history: History) -> tuple[list, list[Chart], dict[str, Any]]:
        windows = {fault: self._window(fault) for _, fault, _ in self.plan}
        return judge_lease_faults(history, tolerance_of(self.setup_driver), self.lease, self.RESUME_SLACK, windows,
                                  self.DRAIN_SECONDS, self.DECISION_LIMIT)


@scenario
class TicketsCalibrate(Calibration):
    """What this machine offers on the opening's commonest request: a reservation on a sold-out quota."""

    name = f"{CASE.name}-calibrate"
    case = CASE.name
    description = "Calibration: rising rates of sold-out reservations until arrivals go out late"
    latency_limit = 0.1  # the seed's decision threshold

    def setup(self) -> dict[str, Any]:
        self.quota_id = _empty_quota(self, "calibrate")
        return {"quota_id": self.quota_id}

    def adopt(self, shared: dict[str, Any]) -> None:
        self.quota_id = shared["quota_id"]

    def probe(self, ctx: Context, a: Arrival) -> None:
        i = a.data[1]
        ctx.driver.reserve(self.quota_id, f"b{i}", 1, f"r{i}", process="probe", intended_time=ctx.intended(a.t))

    def probe_kept(self, op: Op) -> bool | None:
        """no_oversell on the sold-out quota: a hold granted there sold stock that does not exist."""
        return op.type != OK
