"""Case N's peak as open-model Locust scenarios (``loadtests/notifications.py`` hands Locust over to them):
``--scenario notifications-peak`` and its faults.

The peak minute: 1,736.11 notifications/s (BI1-BI3) for ``--duration`` s (60 by default,
104,167 notifications), recipients with the seed's channel preferences (BI4), texts from
faker (Turkish among them) and 30% urgent (transaction news; reminders are the rest).
After the arrivals the run waits for the cascade to finish (3 rounds of
``--backoff`` s; the reference target's backoff is 30 s / ``--time-scale``), reads every
notification's final status and judges against the providers' record
(``--provider-url``, the simulator's ``GET /calls``).

Faults: ``notifications-push-down`` (push answers nothing but failures),
``notifications-ack-lost`` (5% of calls deliver but their answer is lost),
``notifications-reminder-flood`` (reminders at 3x the peak beside a 2% trickle of urgent).

    locust -f loadtests/ --headless --host http://127.0.0.1:8000/notifications \\
        --provider-url http://127.0.0.1:8001 --scenario notifications-peak --scale 0.1 --duration 20
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable

import gevent
import gevent.pool

from peakproof import nemesis
from peakproof.arrivals import arrival_times, constant
from peakproof.capabilities import CapabilityMissing
from peakproof.checks import CheckResult
from peakproof.errors import SetupFailed, UsageError
from peakproof.history import FAIL, OK, History
from peakproof.load.engine import OpenModelUser, ScenarioShape
from peakproof.load.scenario import Arrival, Calibration, Context, Handler, Scenario, scenario, set_up_each
from peakproof.report import Chart
from peakproof.run import Run

from .analysis import NotificationsAnalysis
from .case import CASE
from .delivery import dead_address_met_every_channel
from .driver import Providers, provider_record
from .report import judge_notifications
from .workload import addressed_for_run, peak_minute

__all__ = ["OpenModelUser", "ScenarioShape", "NotificationsPeak", "NotificationsPushDown", "NotificationsAckLost",
           "NotificationsReminderFlood", "NotificationsCalibrate"]
# A share of notifications whose status a client reads while the cascade is under way (and
# again at the end): status_moves_forward needs two reads of one notification to have a chance.
WATCH_SHARE = 0.05
# A share of notifies their client sends again, the same event to the same recipient, a moment later (it did not
# trust the answer, or a retry after a timeout): exactly one delivery per (event, recipient) gets its chances at
# the peak, whether the replay meets the notification queued, on its way, or delivered
REPLAY_SHARE = 0.02
# Every run kills every address of a few recipients (the nemesis, recorded in the history): their
# notifications fail on every channel, so the attempt budget and "no retry after a permanent
# failure" are put to the test in every run, not only when the seed's rates happen to line up.
# Few enough to leave the delivery ratio's margin (0.99) to the design: 1 recipient in 500.
DEAD_EVERYWHERE_EVERY = 500
TITLES = ["Siparişiniz yolda", "Ödemeniz alındı", "Your order shipped", "Güvenlik kodu", "Randevu hatırlatması"]


def set_up_recipients(scenario: Scenario, d: Any, run_id: str, people: list[Any], concurrency: int) -> None:
    """Every recipient put once; asked again when the target did not answer (set_up_each); a refusal on a
    route the target lacks says it speaks another API, not a finding."""
    def put(person: Any) -> Any:
        rid, channels, addresses, _ = person
        return d.put_recipient(f"{run_id}-{rid}", channels, addresses, process="setup")

    try:
        set_up_each(people, put, host=scenario.host, what="recipients", concurrency=concurrency)
    except SetupFailed:
        scenario.need(d, "setup", next(op for op in d.history.ops if op.f == "put_recipient" and op.type == FAIL))
        raise


def lost_answer_met_a_retry(a: NotificationsAnalysis) -> int:
    """Notifications called again after a call whose answer the target never heard."""
    return sum(1 for cs in a.calls_by_key.values() if any(a.unheard(c) for c in cs[:-1]))


DEAD_EVERYWHERE = (("attempt_budget_respected", "a dead address meet every channel", dead_address_met_every_channel),
                   ("no_retry_after_permanent_on_same_channel", "a dead address meet every channel",
                    dead_address_met_every_channel))


@scenario
class NotificationsPeak(Scenario):
    name = f"{CASE.name}-peak"
    case = CASE.name
    description = "Case N: the peak minute, 1,736.11 notifications/s over push / SMS / e-mail"
    urgent_share = 0.3
    rate_factor = 1.0
    provider_faults: dict[str, Any] = {}
    default_slos: list[str] = []  # the urgent mean latency is judged from the providers' record (see judge)
    saturates = False  # meant to saturate delivery: the priority check must then be put to the test
    drives_down = False  # drives a channel down: a breaker falls due, and breaker_opens_when_due must judge it
    # What the scenario must exercise: (check, what had to happen, how many times it did). A check
    # that held while its count stayed 0 was never put to the test: unknown, never a pass.
    exercises: tuple[tuple[str, str, Callable[[NotificationsAnalysis], int]], ...] = DEAD_EVERYWHERE

    def __init__(self, run: Run) -> None:
        super().__init__(run)
        spec = run.spec
        self.provider_url = spec.opt("provider_url", "")
        # the target's rules as the spec resolved them (the seed's rounds shrunk like the scenario's time)
        self.rules = run.rules()
        self.backoff = self.rules.backoff
        self.seconds = float(spec.duration or 60.0)
        self.set_rate(CASE.peak_rate() * spec.number_scale * self.rate_factor)
        self.run_id = ""
        self._arrivals: list[Arrival] | None = None

    def set_rate(self, rate: float) -> None:
        self.rate = rate
        self.n = max(1, round(self.rate * self.seconds))
        self._people = peak_minute(self.n, self.spec.seed, urgent_share=self.urgent_share)

    def params(self) -> dict[str, Any]:
        return {"notifications": self.n, "rate (per s)": round(self.rate, 2), "seconds": self.seconds,
                "urgent share": self.urgent_share, "provider faults": self.provider_faults or "none",
                "target's rules (judged by)": self.rules.describe(), "provider url": self.provider_url,
                "run id": self.run_id}

    def _driver(self, history: History | None = None, transport: Any = None) -> Any:
        return self.driver(history, transport)

    def providers(self, history: History) -> Providers:
        """The simulator the target delivers through (its model and record: ours, whatever the driver)."""
        return Providers(self.provider_url, history=history, timeout=self.spec.request_timeout)

    # -- master / local ---------------------------------------------------------------------

    def setup(self) -> dict[str, Any]:
        if not self.provider_url:
            raise UsageError("--provider-url", "the providers' base URL (their record is the ground truth)", None,
                             "Start them with peakproof serve providers and pass --provider-url.")
        self.run_id = uuid.uuid4().hex[:8]
        d = self._driver()
        self.need(d, "setup")
        sim = self.providers(d.history)
        config = sim.config()  # the whole model, reset: an earlier run leaves nothing
        if config.type == OK and self.provider_faults:  # the scenario's fault, an op of the nemesis (drawn on charts)
            config = nemesis.inject(d.history, "providers", lambda: sim.config(**self.provider_faults).type == OK,
                                    **self.provider_faults)
        if config.type != OK:
            raise SetupFailed(f"the providers at {self.provider_url} refused their configuration: {config!r}")
        people = addressed_for_run(self._people, self.run_id)  # never an earlier run's addresses
        doomed = people[::DEAD_EVERYWHERE_EVERY]
        dead = {"push": [a["push_token"] for _, _, a, _ in doomed], "sms": [a["phone"] for _, _, a, _ in doomed],
                "email": [a["email"] for _, _, a, _ in doomed]}
        took = nemesis.inject(d.history, "dead_everywhere",
                              lambda: sim.config(replace=False, dead=dead).type == OK,
                              recipients=[f"{self.run_id}-{r}" for r, _, _, _ in doomed])
        if took.type != OK:
            raise SetupFailed(f"the providers at {self.provider_url} refused dead addresses: {took!r}")
        set_up_recipients(self, d, self.run_id, people, concurrency=50)
        self.setup_history = d.history
        return {"run_id": self.run_id, "rate": self.rate}

    def adopt(self, shared: dict[str, Any]) -> None:
        self.run_id = shared["run_id"]
        if shared.get("rate") != self.rate:  # the master sized the run (a flood from measured capacity)
            self.set_rate(shared["rate"])

    def peak_rate(self) -> float:
        return CASE.peak_rate() * self.rate_factor

    def finish(self, history: History) -> None:
        """Wait for every cascade to end (3 rounds), then read every notification once."""
        history.prepend(getattr(self, "setup_history", History(time.time)).ops)
        ids = [op.value["notification_id"] for op in history.ops if op.f == "notify" and op.type == OK]
        d = self._driver(history)
        deadline = time.time() + 3 * self.backoff + 30
        pending = list(dict.fromkeys(ids))
        while pending and time.time() < deadline:
            probe = self._driver()  # polls are not part of the judged history
            pool = gevent.pool.Pool(50)
            ops = pool.map(lambda nid: probe.get_notification(nid, process="poll"), pending)
            pending = [op.args["notification_id"] for op in ops
                       if op.type != OK or op.value["status"] in ("queued", "sending")]
            if pending:
                gevent.sleep(min(2.0, self.backoff / 4))
        pool = gevent.pool.Pool(50)
        pool.map(lambda nid: d.get_notification(nid, process="final"), list(dict.fromkeys(ids)))
        self.unfinished = len(pending)
        self.providers(d.history).config()  # back to the seed's model

    def judge(self, history: History) -> tuple[list, list[Chart], dict[str, Any]]:
        d = self._driver(history)
        try:
            everything = provider_record(d, self.provider_url, history)  # may hold earlier runs too
        except CapabilityMissing as e:  # no record: every check that reads it is undecided, saying why
            self.lacking.add("providers_record")
            return [CheckResult(name, "unknown", {}, note=str(e)) for name in CASE.capability("providers_record").checks
                    ], [], {}
        calls = [c for c in everything if c["recipient_id"].startswith(f"{self.run_id}-")]
        return judge_notifications(history, calls, everything, rules=self.rules, saturated=self.saturates,
                                   drives_down=self.drives_down, exercises=self.exercises, breakers=d.breakers() if self.has(d, "stats") else None,
                                   unfinished=getattr(self, "unfinished", 0), capacity=getattr(self, "capacity", None))

    # -- every dispatching process -------------------------------------------------------------

    def arrivals(self) -> list[Arrival]:
        if self._arrivals is None:
            times = arrival_times(constant(self.rate, self.seconds, "peak minute"), self.spec.spacing,
                                  self.spec.seed)
            self._arrivals = [Arrival(t, "notify", i) for i, t in enumerate(times[: self.n])]
        return self._arrivals

    def bound_seconds(self) -> float:
        return self.seconds + 3 * self.backoff + 90

    def handlers(self) -> dict[str, Handler]:
        return {"notify": self.notify, "status": self.read_status, "replay": self.replay}

    def read_status(self, ctx: Context, a: Arrival) -> None:
        ctx.driver.get_notification(a.data, process="status-reader", intended_time=ctx.intended(a.t))

    def replay(self, ctx: Context, a: Arrival) -> None:
        self.notify(ctx, a, replayed=True)

    def notify(self, ctx: Context, a: Arrival, replayed: bool = False) -> None:
        i = a.data
        rid, _, _, priority = self._people[i]
        title = TITLES[i % len(TITLES)]
        # every event goes to two recipients, by design (a broadcast): answers_belong_to_who_asked
        # gets its chances (a service deduplicating on the event alone answers one with the other's)
        op = ctx.driver.notify(f"{self.run_id}-ev{i // 2}", f"{self.run_id}-{rid}", priority, title,
                               f"{title}: ayrıntılar uygulamada. Details in the app. #{i}",
                               process=f"event-{i}" + ("-replay" if replayed else ""), intended_time=ctx.intended(a.t))
        if not replayed and op.type != FAIL and ctx.random.random() < REPLAY_SHARE:
            ctx.later(ctx.random.uniform(0.2, 2.0) * self.backoff, "replay", i)
        if op.type == OK and ctx.random.random() < WATCH_SHARE:  # a client checks on it mid-cascade
            ctx.later(ctx.random.uniform(0.1, 1.5) * self.backoff, "status", op.value["notification_id"])


@scenario
class NotificationsPushDown(NotificationsPeak):
    name = f"{CASE.name}-push-down"
    description = "Case N fault: the push channel answers nothing but failures"
    # With push down, SMS carries most cascades; a tenth of its numbers dead puts the breaker to the
    # test (permanent failures alone would open a breaker that wrongly counted them) in every run,
    # while e-mail still delivers those recipients' notifications.
    # Push down makes its breaker due under the stated rules within its first calls: what happened at each
    # such moment is breaker_opens_when_due's to judge (a skip missing when due is a violation, not a lack
    # of exercise), and those moments are its chances.
    provider_faults = {"down": ["push"], "permanent": {"sms": 0.1}}
    drives_down = True


@scenario
class NotificationsAckLost(NotificationsPeak):
    name = f"{CASE.name}-ack-lost"
    description = "Case N fault: 5% of provider calls deliver but their answer is lost"
    provider_faults = {"ack_lost": 0.05}
    exercises = DEAD_EVERYWHERE + (("one_delivery_per_event", "a lost answer met by a retry", lost_answer_met_a_retry),)


@scenario
class NotificationsReminderFlood(NotificationsPeak):
    """Reminders at twice the delivery capacity the target showed just before, beside a 2% trickle
    of urgent notifications: the backlog grows, and each urgent one must overtake it.

    The providers answer in :attr:`FLOOD_LATENCY` s (a slow gateway), so delivery, not the
    accept path, is what saturates. Setup measures the capacity first (a burst of reminders, the
    rate their first calls reached the providers), then sizes the flood from it; if the
    generator cannot offer the flood, or the backlog never forms, the priority check says it
    was not exercised (INCONCLUSIVE), never PASS.
    """

    name = f"{CASE.name}-reminder-flood"
    description = "Case N fault: reminders at 2x the measured delivery capacity beside a 2% trickle of urgent"
    urgent_share = 0.02
    saturates = True
    FLOOD_LATENCY = 0.2
    PROBE = 300  # reminders in the capacity burst
    provider_faults = {"latency": FLOOD_LATENCY}

    def setup(self) -> dict[str, Any]:
        if self.provider_url:
            self.capacity = self.measure_delivery_capacity()
            if self.capacity:  # twice the capacity, but no more than the generator was given (3x the scaled peak)
                self.set_rate(min(2 * self.capacity, 3 * CASE.peak_rate() * self.spec.number_scale))
        return super().setup()

    def measure_delivery_capacity(self) -> float:
        """Deliveries/s the target reaches with the providers as slow as in the flood: a burst of
        reminders sent by 50 clients at once, timed by their first calls in the providers' record."""
        d = self._driver()
        if not self.has(d, "setup"):
            return 0.0
        self.providers(d.history).config(**self.provider_faults)
        tag = "cap" + uuid.uuid4().hex[:6]
        people = peak_minute(30, self.spec.seed + 1)
        for rid, channels, addresses, _ in people:
            d.put_recipient(f"{tag}-{rid}", channels, {k: f"{tag}{v}" for k, v in addresses.items()})
        pool = gevent.pool.Pool(50)
        pool.map(lambda i: d.notify(f"{tag}-ev{i}", f"{tag}-{people[i % len(people)][0]}", "reminder", "Kapasite",
                                    "capacity probe", process="capacity"), range(self.PROBE))
        deadline = time.time() + 60
        firsts: dict[str, float] = {}
        while time.time() < deadline:
            for c in provider_record(d, self.provider_url):
                if c["event_id"].startswith(tag):
                    firsts.setdefault(c["event_id"], c["at"])
            if len(firsts) >= self.PROBE:
                break
            gevent.sleep(0.5)
        if len(firsts) < 20:
            return 0.0
        times = sorted(firsts.values())
        return round(len(times) / max(1e-3, times[-1] - times[0]), 1)


@scenario
class NotificationsCalibrate(Calibration):
    """What this machine offers on the accept path: rising rates of reminders to a few recipients."""

    name = f"{CASE.name}-calibrate"
    case = CASE.name
    description = "Calibration: rising rates of accepted notifications until arrivals go out late or slow"
    latency_limit = 0.5  # an accept that takes longer holds the pool at the peak's rate

    def setup(self) -> dict[str, Any]:
        self.run_id = "cal" + uuid.uuid4().hex[:6]
        d = self.driver()
        self.need(d, "setup")
        people = addressed_for_run(peak_minute(50, self.spec.seed), self.run_id)  # never the run's own addresses
        set_up_recipients(self, d, self.run_id, people, concurrency=1)
        return {"run_id": self.run_id, "recipients": [f"{self.run_id}-{p[0]}" for p in people]}

    def adopt(self, shared: dict[str, Any]) -> None:
        self.run_id, self.recipients = shared["run_id"], shared["recipients"]

    def probe(self, ctx: Context, a: Arrival) -> None:
        i = a.data[1]
        ctx.driver.notify(f"{self.run_id}-ev{i}", self.recipients[i % len(self.recipients)], "reminder",
                          TITLES[i % len(TITLES)], f"calibration #{i}", process="probe",
                          intended_time=ctx.intended(a.t))
