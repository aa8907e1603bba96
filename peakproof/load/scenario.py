"""The scenario API: what a case writes to replay its peak (no Locust, no gevent import).

A :class:`Scenario` is built from the run's :class:`~peakproof.spec.RunSpec`; it prepares
the target (``setup``, on the master), lists its arrivals (an open-model schedule, the same
on every process), builds its driver, and handles each arrival by its kind: ``handlers``
is a table from arrival kind to method. The engine gives it the run's history and the
time since the run started as arguments (``monitor``), never through a global.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, Callable, ClassVar, NamedTuple

from ..errors import UsageError
from ..history import History

if TYPE_CHECKING:
    from ..checks import CheckResult
    from ..report import Chart
    from ..run import Run
    from ..spec import RunSpec


class Arrival(NamedTuple):
    t: float  # intended offset from the run's start, s
    kind: str
    data: Any


class Context:
    """What a handler gets beside its arrival: its driver, a seeded Random, ``later`` and the run's clock.

    The engine's dispatcher implements it (:class:`peakproof.load.dispatch.DispatchContext`)."""

    driver: Any
    random: Any

    def later(self, delay: float, kind: str, data: Any) -> None:  # pragma: no cover - an interface
        raise NotImplementedError

    def intended(self, t: float) -> float:  # pragma: no cover - an interface
        raise NotImplementedError


Handler = Callable[[Context, Arrival], None]


class Scenario:
    """A named load scenario. Subclass, set ``name`` and ``case``, and decorate with :func:`scenario`."""

    name: ClassVar[str] = ""
    case: ClassVar[str] = ""  # the case it replays (its Case record gives the defaults and the peak)
    description: ClassVar[str] = ""
    default_slos: ClassVar[list[str]] = []
    monitor_interval: ClassVar[float] = 0.25

    def __init__(self, run: "Run") -> None:
        self.run = run  # the process's run record: its case and driver class, resolved at the entry point
        self.host = (run.spec.target_url or "").rstrip("/")
        self._handlers = self.handlers()
        self.lacking: set[str] = set()  # capabilities the driver or the target turned out not to have

    @property
    def spec(self) -> "RunSpec":
        """The user's request: what the Locust processes share (what the run learned: ``self.run.facts``)."""
        return self.run.spec

    def driver(self, history: History | None = None, transport: Any = None, **extra: Any) -> Any:
        """The run's driver (``--driver``, or the case's contract): every call of a scenario goes
        through one built here, never a case's HTTP driver by name."""
        return self.run.build_driver(history=history, transport=transport, **extra)

    def make_driver(self, history: History, transport: Any) -> Any:
        """The dispatchers' driver: one per generator process, on its transport and history."""
        return self.driver(history, transport)

    def has(self, driver: Any, capability: str) -> bool:
        """Does ``driver`` offer the case's ``capability``? Notes it as lacking when not."""
        from ..capabilities import offers

        ok = offers(driver, self.run.case.capability(capability), self.spec)
        if not ok:
            self.lacking.add(capability)
        return ok

    def need(self, driver: Any, capability: str, op: Any = None) -> None:
        """Raise :class:`~peakproof.capabilities.CapabilityMissing` (INCONCLUSIVE, naming it) when
        ``driver`` lacks ``capability``, or when ``op`` (its call) found no such route."""
        from ..capabilities import CapabilityMissing, no_route

        cap = self.run.case.capability(capability)
        if not self.has(driver, capability):
            raise CapabilityMissing(cap, driver=f"the driver {self.spec.driver or 'of the contract'}")
        if op is not None and no_route(op):
            self.lacking.add(capability)
            from ..errors import OffContract

            raise OffContract(self.case, f"{op.f} ({cap.what})", op.value, self.spec.driver)

    def off_contract(self, op: Any, what: str = "") -> None:
        """Raise :class:`~peakproof.errors.OffContract` (INCONCLUSIVE: "write a driver") when ``op``
        was answered 404 / 405 / 501: the target has no such route, it speaks another API."""
        from ..capabilities import no_route
        from ..errors import OffContract

        if no_route(op):
            raise OffContract(self.case, what or op.f, op.value, self.spec.driver)

    def waived(self, capability: str) -> bool:
        return capability in self.spec.without

    # master / local runner
    def setup(self) -> dict[str, Any]:
        """Prepare the target; returns what every worker must know (sent to them)."""
        return {}

    def monitor(self, history: History, now: float | None) -> None:
        """Every ``monitor_interval`` s on the master / local runner while the run goes on;
        ``now``: s since the run's first instant (None before it started)."""

    def finish(self, history: History) -> None:
        """After every worker is done: final reads for the verdict."""

    def schedule_over(self) -> bool:
        """True once the arrivals still due can no longer change the outcome: this process's dispatcher
        sends none of them and ends when the requests in flight are answered."""
        return False

    def judge(self, history: History) -> tuple[list["CheckResult"], list["Chart"], dict[str, Any]]:
        """Invariants, the case's own charts and details."""
        return [], [], {}

    # every process that dispatches
    def adopt(self, shared: dict[str, Any]) -> None:
        """Take what ``setup`` returned (workers run setup's result, not setup)."""

    def arrivals(self) -> list[Arrival]:
        raise NotImplementedError

    def handlers(self) -> dict[str, Handler]:
        """The table from arrival kind to the method that handles it."""
        return {}

    def perform(self, ctx: Context, arrival: Arrival) -> None:
        try:
            handle = self._handlers[arrival.kind]
        except KeyError:
            raise UsageError(f"{self.name} arrival kind", "one of " + ", ".join(self._handlers), arrival.kind,
                             "Add it to the scenario's handlers().") from None
        handle(ctx, arrival)

    def bound_seconds(self) -> float:
        """An upper bound on the run's length; the run stops then whatever happens."""
        return max(a.t for a in self.arrivals()) + 60

    def params(self) -> dict[str, Any]:
        return {}

    def peak_rate(self) -> float | None:
        """The curve's peak arrivals/s at the seed's full scale (for the capacity sentence): the case's."""
        return self.run.case.peak_rate()


class _Trickle(Context):
    """A context for probes sent one at a time, outside the schedule (before and after the ladder)."""

    def __init__(self, driver: Any) -> None:
        import random

        self.driver, self.random = driver, random.Random(0)

    def later(self, delay: float, kind: str, data: Any) -> None:
        pass

    def intended(self, t: float) -> float:
        return time.time()


class Calibration(Scenario):
    """Steps of rising constant rate: which rate does this machine's generator, on one process,
    still offer on time, and (``calibrate_latency``) does the target still answer within
    ``latency_limit``, without errors, keeping what :meth:`probe_kept` judges? Stops sending at
    the first step that fails. Its result is the steps' figures (the stage's result), not a report.

    When the target's service levels are judged, the ladder starts from the rate the target can
    take: a few probes one at a time measure its answer time, and the first step is a quarter of
    what one worker answering that fast would take (a few requests a second for a slow staging
    box), unless ``calibrate_min_rate`` says. Each step lasts long enough for :data:`MIN_PROBES`
    answers. Before its first step the target is warmed, unjudged: :data:`WARMUP_SECONDS` (at least
    :data:`WARMUP_PROBES` probes) at the first step's rate, so a target just started is judged on its
    answers once warm, not on its first ones (a cold start). After the ladder the target is let drain:
    probes one at a time until it answers in time again (bounded), so the next stage does not start on
    the calibration's backlog.

    A case subclasses it with ``probe`` (one cheap, representative request), ``setup`` and,
    where the probe's answer can break a promise, ``probe_kept``.
    """

    calibration: ClassVar[bool] = True
    step_seconds: ClassVar[float] = 0.5
    ratio: ClassVar[float] = 1.4
    min_share: ClassVar[float] = 0.02  # the first step's rate at most, as a share of the peak (or the top, if lower)
    latency_limit: ClassVar[float] = 0.1
    on_time_share: ClassVar[float] = 0.98
    MIN_PROBES: ClassVar[int] = 12  # answers a step needs to be judged (a slow target's steps last longer)
    FLOOR: ClassVar[float] = 2.0  # arrivals/s: the lowest first step
    TRICKLE: ClassVar[int] = 5  # probes one at a time that measure the target's answer time
    DRAIN_LIMIT: ClassVar[float] = 60.0  # s: how long the target is given to work off the ladder's backlog
    WARMUP_SECONDS: ClassVar[float] = 1.0  # s of unjudged probes at the first step's rate before it
    WARMUP_PROBES: ClassVar[int] = 4  # the warm-up's probes at least (a slow first step's warm-up lasts longer)

    def __init__(self, run: "Run") -> None:
        super().__init__(run)
        spec = run.spec
        self.stopped_at: int | None = None
        self.answer_time: float | None = None  # s: median of the probes sent one at a time
        self.drained: float | None = None  # s the target took to answer in time again after the ladder
        self._arrivals: list[Arrival] | None = None
        self.set_rates(float(spec.calibrate_min_rate) if spec.calibrate_min_rate else None)

    @property
    def top(self) -> float:
        return float(self.spec.calibrate_max_rate or self.peak_rate() or 1000.0)

    def set_rates(self, first: float | None) -> None:
        """The ladder: from ``first`` (None: 2% of the peak, or of the top when lower), by ``ratio``, to the top."""
        peak = float(self.peak_rate() or 1000.0)
        top = self.top
        low = first if first else self.min_share * min(peak, top)
        rates, r = [], min(low, top)
        while r < top:
            rates.append(r)
            r *= self.ratio
        self._lay_out(rates + [top])

    def _lay_out(self, rates: list[float]) -> None:
        """Each step's length and start, after the warm-up at the first step's rate."""
        self.rates = rates
        self.warmup = max(self.WARMUP_SECONDS, self.WARMUP_PROBES / rates[0])
        self.durations = [max(self.step_seconds, self.MIN_PROBES / r) for r in self.rates]
        self.starts = [self.warmup + sum(self.durations[:k]) for k in range(len(self.rates))]
        self._arrivals = None

    def start_from_the_target(self) -> dict[str, Any]:
        """On the master, after ``setup``: when the target's service levels are judged and no first rate was
        stated, time :data:`TRICKLE` probes sent one at a time and start the ladder where the target surely
        keeps up. Returns what workers adopt (the ladder)."""
        if self.spec.calibrate_latency:  # timed whatever the first rate: the drain after the ladder reads it too
            times = [t for t in (self._probe_alone(10**9 + k) for k in range(self.TRICKLE)) if t is not None]
            if times:
                self.answer_time = sorted(times)[len(times) // 2]
                if not self.spec.calibrate_min_rate:
                    cap = self.min_share * min(float(self.peak_rate() or 1000.0), self.top)
                    self.set_rates(max(self.FLOOR, min(cap, 0.25 / max(self.answer_time, 1e-4))))
        return {"calibration_rates": self.rates}

    def adopt_rates(self, shared: dict[str, Any]) -> None:
        if shared.get("calibration_rates"):
            self._lay_out(list(shared["calibration_rates"]))

    def _probe_alone(self, i: int) -> float | None:
        """One probe, alone; its answer time (s) if it was answered (ok or refused), else None."""
        from ..history import History

        history = History(time.time)
        self.probe(_Trickle(self.driver(history)), Arrival(0.0, "probe", (-1, i)))
        op = history.ops[-1] if history.ops else None
        return op.latency if op is not None and op.done and op.type != "info" else None

    def finish(self, history: History) -> None:
        """Let the target drain: probes one at a time until three in a row come back within the limit (or, for
        a target slower than the limit even alone, within half as much again as its answers alone took)."""
        if not self.spec.calibrate_latency:
            return
        t0 = time.monotonic()
        in_time, k = 0, 0
        limit = max(self.latency_limit, 1.5 * self.answer_time) if self.answer_time else self.latency_limit
        while time.monotonic() - t0 < self.DRAIN_LIMIT:
            took = self._probe_alone(2 * 10**9 + k)
            k += 1
            in_time = in_time + 1 if took is not None and took <= limit else 0
            if in_time >= 3:
                self.drained = time.monotonic() - t0
                return
            if took is None or took > limit:
                time.sleep(0.2)

    def handlers(self) -> dict[str, Handler]:
        return {"probe": self._maybe_probe}

    def arrivals(self) -> list[Arrival]:
        if self._arrivals is None:
            first = self.rates[0]  # the warm-up: unjudged (step -1), at the first step's rate
            out: list[Arrival] = [Arrival(i / first, "probe", (-1, i)) for i in range(round(first * self.warmup))]
            for k, rate in enumerate(self.rates):
                n = max(1, round(rate * self.durations[k]))
                out += [Arrival(self.starts[k] + i / rate, "probe", (k, len(out) + i)) for i in range(n)]
            self._arrivals = out
        return self._arrivals

    def bound_seconds(self) -> float:
        return self.warmup + sum(self.durations) + 15

    def schedule_over(self) -> bool:
        # the ladder stopped at a failed step: its later steps would be skipped one by one, in real time (a slow
        # target's calibration waited out 40 s of steps it never sent)
        return self.stopped_at is not None

    def _maybe_probe(self, ctx: Context, a: Arrival) -> None:
        if self.stopped_at is not None and a.data[0] > self.stopped_at:
            return  # a step already failed: what follows would only overload the target
        self.probe(ctx, a)

    def probe(self, ctx: Context, a: Arrival) -> None:
        raise NotImplementedError

    def probe_kept(self, op: Any) -> bool | None:
        """Whether a probe's answer kept the design's promises (None: its answer cannot break one)."""
        return None

    def step_of(self, offset: float) -> int:
        import bisect

        # 1e-4 s of slack: an arrival at a step's first instant, read back from a wall clock of 1.7e9 s, may
        # come out a few tenths of a microsecond early (and would count against the step before); -1: the warm-up
        return min(len(self.rates) - 1, bisect.bisect_right(self.starts, offset + 1e-4) - 1)

    def step_stats(self, history: History, t0: float) -> list[dict[str, Any]]:
        by_step: dict[int, list[Any]] = {}
        for op in history.ops:
            if op.process == "probe" and op.intended_time is not None:
                by_step.setdefault(self.step_of(op.intended_time - t0), []).append(op)  # -1 (warm-up): unjudged
        out = []
        for k, rate in enumerate(self.rates):
            ops = by_step.get(k, [])
            due = max(1, round(rate * self.durations[k]))
            on_time = sum(1 for op in ops if op.send_time is not None
                          and op.send_time - op.intended_time <= self.spec.late_threshold)
            lat = sorted(op.latency_from_intended for op in ops if op.done)
            errors = sum(1 for op in ops if op.type == "info")
            broken = sum(1 for op in ops if op.done and self.probe_kept(op) is False)
            p99 = lat[max(0, math.ceil(0.99 * len(lat)) - 1)] if lat else None
            out.append({"rate": round(rate, 1), "seconds": round(self.durations[k], 2), "due": due, "sent": len(ops),
                        "on_time": on_time, "on_time_share": round(on_time / due, 4), "p99_from_intended": p99,
                        "errors": errors, "broken": broken, "done": len(lat)})
        return out

    def generator_kept_up(self, st: dict[str, Any]) -> bool:
        return st["on_time_share"] >= self.on_time_share

    def target_kept_up(self, st: dict[str, Any]) -> bool:
        """Answered, without errors, within the limit, and every answer kept the design's promises."""
        if st["done"] < st["due"] * self.on_time_share or st["errors"] > 0.01 * st["due"] or st.get("broken"):
            return False
        return st["p99_from_intended"] is not None and st["p99_from_intended"] <= self.latency_limit

    def step_passes(self, st: dict[str, Any], check_latency: bool) -> bool:
        """On time, and (``check_latency``: the target's service levels are judged) answered, without
        errors, within the limit. Without it only the generator is measured: a target's errors
        and slowness are the load run's findings, not a reason to offer it less."""
        return self.generator_kept_up(st) and (not check_latency or self.target_kept_up(st))

    def monitor(self, history: History, now: float | None) -> None:
        if now is None or self.stopped_at is not None:
            return
        t0 = time.time() - now  # the run's first instant, on the wall clock the history keeps
        stats = self.step_stats(history, t0)
        for k, st in enumerate(stats):
            # judge a step once its answers had time to come (its end plus the latency limit, 0.5 s at least)
            if self.starts[k] + self.durations[k] + max(0.5, self.latency_limit) > now:
                break
            if not self.step_passes(st, self.spec.calibrate_latency):
                self.stopped_at = k
                break

    def conclude(self, history: History, t0: float) -> dict[str, Any]:
        check_latency = self.spec.calibrate_latency
        stats = self.step_stats(history, t0)
        best, generator, stopped_by = 0.0, 0.0, "top"
        for st in stats:
            if st["sent"] == 0:
                stopped_by = "generator"
                break
            if self.generator_kept_up(st):
                generator = st["rate"]
            if not self.step_passes(st, check_latency):
                # the target's when the generator sent this step on time (or the target also failed it)
                stopped_by = "target" if check_latency and not self.target_kept_up(st) and (
                    self.generator_kept_up(st) or st["done"] < st["sent"] * self.on_time_share) else "generator"
                break
            best = st["rate"]
        for st in stats:  # each step as judged: whether it was sent and kept every limit the ladder judges
            st["kept"] = st["sent"] > 0 and self.step_passes(st, check_latency)
        return {"scenario": self.name, "rate": best, "top": self.rates[-1], "latency_checked": check_latency,
                "warmup": round(self.warmup, 2),
                "latency_limit": self.latency_limit, "steps": stats, "stopped_by": stopped_by,
                "generator_rate": generator, "answer_time": self.answer_time, "drained": self.drained,
                "drain_limit": self.DRAIN_LIMIT}


SCENARIOS: dict[str, type[Scenario]] = {}


def scenario(cls: type[Scenario]) -> type[Scenario]:
    """Register a scenario class under its ``name``."""
    if not cls.name:
        raise UsageError("scenario class", "a non-empty 'name'", cls.__name__)
    SCENARIOS[cls.name] = cls
    return cls


def set_up_each(items: list[Any], call: Callable[[Any], Any], *, host: str, what: str, concurrency: int = 50,
                tries: int = 3, pause: float = 1.0) -> list[Any]:
    """Run a scenario's set-up call (idempotent: a PUT) for every item, ``concurrency`` at once, and ask
    again, fewer at once and after a growing pause, those whose outcome is unknown (a timeout, a reset, a
    refused connection): a target may still be working off an earlier stage's backlog. Returns the ops
    (the last try of each). A set-up the target refused is a finding (:class:`SetupFailed`); one it
    never answered decides nothing (:class:`SetupUnanswered`)."""
    import gevent
    import gevent.pool

    from ..errors import SetupFailed, SetupUnanswered
    from ..history import FAIL, OK

    last: dict[int, Any] = {}
    todo = list(range(len(items)))
    for attempt in range(tries):
        if attempt:
            gevent.sleep(pause * attempt)
        pool = gevent.pool.Pool(max(1, concurrency // (4 ** attempt)))
        jobs = [(i, pool.spawn(call, items[i])) for i in todo]
        pool.join(raise_error=True)
        for i, job in jobs:
            last[i] = job.value
        todo = [i for i in todo if last[i].type != OK and (last[i].type != FAIL or last[i].value == "connection_refused")]
        if not todo:
            break
    refused = [op for op in last.values() if op.type == FAIL and op.value != "connection_refused"]
    if refused:
        raise SetupFailed(f"{len(refused)} {what} refused by {host}: {refused[0]!r}")
    if todo:
        raise SetupUnanswered(f"{len(todo)} {what} were never answered by {host} in {tries} tries "
                              f"({pause:g} s and more apart): {last[todo[0]]!r}. Nothing was decided: a target still "
                              f"working off an earlier stage's backlog (the calibration's) does this")
    return [last[i] for i in range(len(items))]
