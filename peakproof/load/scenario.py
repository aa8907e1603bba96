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

    def __init__(self, spec: "RunSpec") -> None:
        self.spec = spec
        self.host = (spec.target_url or "").rstrip("/")
        self._handlers = self.handlers()
        self.lacking: set[str] = set()  # capabilities the driver or the target turned out not to have

    def driver(self, history: History | None = None, transport: Any = None, **extra: Any) -> Any:
        """The run's driver (``--driver``, or the case's contract): every call of a scenario goes
        through one built here, never a case's HTTP driver by name."""
        from ..driver import build_driver

        return build_driver(self.spec, history=history, transport=transport, **extra)

    def make_driver(self, history: History, transport: Any) -> Any:
        """The dispatchers' driver: one per generator process, on its transport and history."""
        return self.driver(history, transport)

    def has(self, driver: Any, capability: str) -> bool:
        """Does ``driver`` offer the case's ``capability``? Notes it as lacking when not."""
        from ..capabilities import offers
        from ..cases import get_case

        ok = offers(driver, get_case(self.case).capability(capability), self.spec)
        if not ok:
            self.lacking.add(capability)
        return ok

    def need(self, driver: Any, capability: str, op: Any = None) -> None:
        """Raise :class:`~peakproof.capabilities.CapabilityMissing` (INCONCLUSIVE, naming it) when
        ``driver`` lacks ``capability``, or when ``op`` (its call) found no such route."""
        from ..capabilities import CapabilityMissing, no_route
        from ..cases import get_case

        cap = get_case(self.case).capability(capability)
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
        from ..cases import all_cases

        case = all_cases().get(self.case)
        return case.peak_rate() if case else None


class Calibration(Scenario):
    """Steps of rising constant rate (each ``step_seconds``): which rate does this machine's
    generator, on one process, still offer on time, and (``calibrate_latency``) does the
    target still answer within ``latency_limit``? Stops sending at the first step that
    fails. Its result is the steps' figures (the stage's result), not a report.

    A case subclasses it with ``probe`` (one cheap, representative request) and ``setup``.
    """

    calibration: ClassVar[bool] = True
    step_seconds: ClassVar[float] = 0.5
    ratio: ClassVar[float] = 1.4
    min_share: ClassVar[float] = 0.02  # the first step's rate, as a share of the peak (or the top, if lower)
    latency_limit: ClassVar[float] = 0.1
    on_time_share: ClassVar[float] = 0.98

    def __init__(self, spec: "RunSpec") -> None:
        super().__init__(spec)
        peak = float(self.peak_rate() or 1000.0)
        top = float(spec.calibrate_max_rate or peak)
        # the first step low (2% of the seed's peak, or of the top when that is lower), wherever the top is:
        # a ladder that climbs far past the peak must still find a slow machine's first rate
        low = float(spec.calibrate_min_rate or self.min_share * min(peak, top))
        rates, r = [], min(low, top)
        while r < top:
            rates.append(r)
            r *= self.ratio
        self.rates = rates + [top]
        self.stopped_at: int | None = None
        self._arrivals: list[Arrival] | None = None

    def handlers(self) -> dict[str, Handler]:
        return {"probe": self._maybe_probe}

    def arrivals(self) -> list[Arrival]:
        if self._arrivals is None:
            out: list[Arrival] = []
            for k, rate in enumerate(self.rates):
                n = max(1, round(rate * self.step_seconds))
                out += [Arrival(k * self.step_seconds + i / rate, "probe", (k, len(out) + i)) for i in range(n)]
            self._arrivals = out
        return self._arrivals

    def bound_seconds(self) -> float:
        return len(self.rates) * self.step_seconds + 15

    def _maybe_probe(self, ctx: Context, a: Arrival) -> None:
        if self.stopped_at is not None and a.data[0] > self.stopped_at:
            return  # a step already failed: what follows would only overload the target
        self.probe(ctx, a)

    def probe(self, ctx: Context, a: Arrival) -> None:
        raise NotImplementedError

    def step_stats(self, history: History, t0: float) -> list[dict[str, Any]]:
        by_step: dict[int, list[Any]] = {}
        for op in history.ops:
            if op.process == "probe" and op.intended_time is not None:
                k = min(len(self.rates) - 1, max(0, int((op.intended_time - t0) / self.step_seconds + 1e-9)))
                by_step.setdefault(k, []).append(op)
        out = []
        for k, rate in enumerate(self.rates):
            ops = by_step.get(k, [])
            due = max(1, round(rate * self.step_seconds))
            on_time = sum(1 for op in ops if op.send_time is not None
                          and op.send_time - op.intended_time <= self.spec.late_threshold)
            lat = sorted(op.latency_from_intended for op in ops if op.done)
            errors = sum(1 for op in ops if op.type == "info")
            p99 = lat[max(0, math.ceil(0.99 * len(lat)) - 1)] if lat else None
            out.append({"rate": round(rate, 1), "due": due, "sent": len(ops), "on_time": on_time,
                        "on_time_share": round(on_time / due, 4), "p99_from_intended": p99,
                        "errors": errors, "done": len(lat)})
        return out

    def step_passes(self, st: dict[str, Any], check_latency: bool) -> bool:
        """On time, and (``check_latency``: the target shares this machine) answered, without
        errors, within the limit. Without it only the generator is measured: a target's errors
        and slowness are the load run's findings, not a reason to offer it less."""
        if st["on_time_share"] < self.on_time_share:
            return False
        if not check_latency:
            return True
        if st["done"] < st["due"] * self.on_time_share or st["errors"] > 0.01 * st["due"]:
            return False
        return st["p99_from_intended"] is not None and st["p99_from_intended"] <= self.latency_limit

    def monitor(self, history: History, now: float | None) -> None:
        if now is None or self.stopped_at is not None:
            return
        t0 = time.time() - now  # the run's first instant, on the wall clock the history keeps
        stats = self.step_stats(history, t0)
        for k, st in enumerate(stats):
            # judge a step once its answers had time to come (its end plus the latency limit, 0.5 s at least)
            if (k + 1) * self.step_seconds + max(0.5, self.latency_limit) > now:
                break
            if not self.step_passes(st, self.spec.calibrate_latency):
                self.stopped_at = k
                break

    def conclude(self, history: History, t0: float) -> dict[str, Any]:
        check_latency = self.spec.calibrate_latency
        stats = self.step_stats(history, t0)
        best = 0.0
        for st in stats:
            if st["sent"] == 0 or not self.step_passes(st, check_latency):
                break
            best = st["rate"]
        return {"scenario": self.name, "rate": best, "top": self.rates[-1], "latency_checked": check_latency,
                "latency_limit": self.latency_limit, "steps": stats}


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
