"""The open-model load engine on Locust: scenarios, the dispatcher user, the shape, verdicts.

Locust is closed-loop (users wait for answers), so a slow target lowers the offered load
and hides its own latency. Here one dispatcher per Locust process walks a precomputed
arrival schedule and sends each request at its intended instant from a bounded pool of
greenlets; latency is recorded from the intended instant and from the actual send, and
arrivals the pool could not send in time are counted (late, dropped), never silently
skipped. Under ``--processes N`` or ``--master/--worker`` the schedule is split across
workers (every N-th arrival) and their histories are merged on the master, which judges.

``locust -f loadtests/ --headless --host URL --scenario NAME`` runs exactly one scenario,
chosen by name; there is exactly one shape class (this module's), whatever files
``loadtests/`` holds. This module imports locust and gevent: only Locust processes load it.
"""

from __future__ import annotations

import heapq
import math
import random
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, NamedTuple

import gevent
import gevent.event
from locust import LoadTestShape, User, events, task
from locust.runners import MasterRunner, WorkerRunner

from .checks import CheckResult
from .errors import TargetError, UsageError
from .history import History, merge_histories, op_to_wire
from .http import TransportError
from .offered import LoadCounters, LoadSettings, judge_offered_load, load_charts, undecide_when_behind
from .report import Chart, RunReport, write_report
from .slo import parse_thresholds, with_error_budget


class Arrival(NamedTuple):
    t: float  # intended offset from the run's start, s
    kind: str
    data: Any


class Scenario:
    """A named load scenario. Subclass, set ``name``, and decorate with :func:`scenario`."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    default_slos: ClassVar[list[str]] = []

    def __init__(self, options: Any, host: str) -> None:
        self.options = options
        self.host = host.rstrip("/")

    # master / local runner
    def setup(self) -> dict[str, Any]:
        """Prepare the target; returns what every worker must know (sent to them)."""
        return {}

    def monitor(self, history: History) -> None:
        """Called every ``monitor_interval`` s on the master / local runner while the run goes on."""

    monitor_interval: ClassVar[float] = 0.25

    def finish(self, history: History) -> None:
        """After every worker is done: final reads for the verdict."""

    def judge(self, history: History) -> tuple[list[CheckResult], list[Chart], dict[str, Any]]:
        """Invariants, the case's own charts and details."""
        return [], [], {}

    # every process that dispatches
    def adopt(self, shared: dict[str, Any]) -> None:
        """Take what ``setup`` returned (workers run setup's result, not setup)."""

    def arrivals(self) -> list[Arrival]:
        raise NotImplementedError

    def make_driver(self, history: History, transport: Any) -> Any:
        raise NotImplementedError

    def perform(self, ctx: "DispatchContext", arrival: Arrival) -> None:
        raise NotImplementedError

    def bound_seconds(self) -> float:
        """An upper bound on the run's length; the run stops then whatever happens."""
        return max(a.t for a in self.arrivals()) + 60

    def params(self) -> dict[str, Any]:
        return {}

    def peak_rate(self) -> float | None:
        """The curve's peak arrivals/s at the seed's full scale (for the capacity sentence)."""
        return None


class Calibration(Scenario):
    """Steps of rising constant rate (each ``step_seconds``): which rate does this machine's
    generator, on one process, still offer on time, and (``--calibrate-latency``) does the
    target still answer within ``latency_limit``? Stops sending at the first step that
    fails. Writes its figures as JSON to ``--calibration-out`` instead of a report.

    A case subclasses it with ``probe`` (one cheap, representative request) and ``setup``.
    """

    calibration: ClassVar[bool] = True
    step_seconds: ClassVar[float] = 0.5
    ratio: ClassVar[float] = 1.4
    min_share: ClassVar[float] = 0.02  # the first step's rate, as a share of the top
    latency_limit: ClassVar[float] = 0.1
    on_time_share: ClassVar[float] = 0.98

    def __init__(self, options: Any, host: str) -> None:
        super().__init__(options, host)
        top = float(getattr(options, "calibrate_max_rate", None) or self.peak_rate() or 1000.0)
        rates, r = [], top * self.min_share
        while r < top:
            rates.append(r)
            r *= self.ratio
        self.rates = rates + [top]
        self.stopped_at: int | None = None
        self._arrivals: list[Arrival] | None = None

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

    def perform(self, ctx: "DispatchContext", a: Arrival) -> None:
        if self.stopped_at is not None and a.data[0] > self.stopped_at:
            return  # a step already failed: what follows would only overload the target
        self.probe(ctx, a)

    def probe(self, ctx: "DispatchContext", a: Arrival) -> None:
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
                          and op.send_time - op.intended_time <= self.options.late_threshold)
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

    def monitor(self, history: History) -> None:
        eng = ENGINE
        if eng is None or not eng.started_wall or self.stopped_at is not None:
            return
        now = time.time() - eng.started_wall
        stats = self.step_stats(history, eng.started_wall)
        check_latency = bool(getattr(self.options, "calibrate_latency", False))
        for k, st in enumerate(stats):
            # judge a step once its answers had time to come (its end plus the latency limit, 0.5 s at least)
            if (k + 1) * self.step_seconds + max(0.5, self.latency_limit) > now:
                break
            if not self.step_passes(st, check_latency):
                self.stopped_at = k
                break

    def conclude(self, history: History, t0: float) -> dict[str, Any]:
        check_latency = bool(getattr(self.options, "calibrate_latency", False))
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
    if not cls.name:
        raise UsageError("scenario class", "a non-empty 'name'", cls.__name__)
    SCENARIOS[cls.name] = cls
    return cls


# The options live in .loadopts (imported for its listener on Locust's parser).
from . import loadopts  # noqa: E402,F401  (imported for its listener)


# -- engine state, one per process --------------------------------------------------------------


@dataclass
class Engine:
    environment: Any
    scenario: Scenario
    history: History = field(default_factory=lambda: History(time.time))
    shared: dict[str, Any] | None = None
    started_wall: float = 0.0
    started_mono: float = 0.0
    share: tuple[int, int] | None = None  # (index, count) of this worker
    done: bool = False  # this process's dispatcher finished
    finished: bool = False  # master/local: everything judged
    worker_parts: list[list[Any]] = field(default_factory=list)
    workers_done: int = 0
    counters: dict[str, int] = field(default_factory=lambda: {"due": 0, "sent": 0, "late": 0, "dropped": 0,
                                                                 "pool_full": 0, "late_by_pool": 0,
                                                                 "late_by_pool_busy": 0})
    dropped_by_second: dict[int, int] = field(default_factory=dict)
    report_path: str | None = None
    # (kind, text): "target" (it refused, answered 500 or garbage: a finding) or "harness" (our bug)
    setup_error: tuple[str, str] | None = None
    harness_errors: list[str] = field(default_factory=list)  # tracebacks from perform / monitor
    setup_done: bool = False  # the scenario's bound counts from here (a big graph's setup takes a while)

    @property
    def is_master(self) -> bool:
        return isinstance(self.environment.runner, MasterRunner)

    @property
    def is_worker(self) -> bool:
        return isinstance(self.environment.runner, WorkerRunner)


ENGINE: Engine | None = None


OWN_OPTIONS: dict[str, Any] = {}  # options that belong to this process, not to the run (a worker's address)
_ENVIRONMENT: list[Any] = []  # this process's Locust environment (a worker builds its engine from the plan)
LAST: dict[str, Any] = {}  # the last run's verdict, for the web UI: outcome, reasons, lines, report


@events.init.add_listener
def _init(environment: Any, **_: Any) -> None:
    global ENGINE
    opts = environment.parsed_options
    if opts is None:
        return
    runner = environment.runner
    _ENVIRONMENT.append(environment)
    # this process's own: Locust overwrites a worker's options with the master's at each spawn
    OWN_OPTIONS["source_address"] = getattr(opts, "source_address", None)
    if isinstance(runner, MasterRunner):
        runner.register_message("peakproof_ops", _on_ops)
        runner.register_message("peakproof_done", _on_done)
    elif isinstance(runner, WorkerRunner):
        runner.register_message("peakproof_plan", _on_plan)
    from . import webui

    webui.install(environment, lambda: ENGINE, LAST)
    name = opts.scenario
    if not name and (isinstance(runner, WorkerRunner) or not opts.headless):
        return  # the web UI's start form names it (a worker: the master's plan does)
    if not _check_options(opts):
        sys.exit(2)
    ENGINE = Engine(environment, SCENARIOS[name](opts, environment.host or ""))


def _check_options(opts: Any) -> bool:
    """The scenario exists and the SLOs parse; else say why on stderr."""
    name = opts.scenario
    if name not in SCENARIOS:
        listing = "\n".join(f"  {n}: {SCENARIOS[n].description}" for n in sorted(SCENARIOS))
        sys.stderr.write(f"peakproof: --scenario: expected one of the scenarios below; got {name!r}.\n"
                         f"{listing}\nName one with --scenario NAME (or PEAKPROOF_SCENARIO).\n")
        return False
    try:
        parse_thresholds(opts.slo or [])
    except UsageError as e:
        sys.stderr.write(f"peakproof: {e}\n")
        return False
    return True


def _engine_for_this_start(environment: Any) -> Engine | None:
    """The engine of the run starting now: the one made at start-up (headless), or, from the web UI,
    one made from the start form (a new one for each run started there)."""
    global ENGINE
    opts = environment.parsed_options
    if ENGINE is not None and not ENGINE.finished and ENGINE.scenario.name == opts.scenario:
        return ENGINE
    if not _check_options(opts):
        LAST.clear()
        LAST.update(outcome="NOT STARTED", reasons=[f"--scenario: choose one of {', '.join(sorted(SCENARIOS))} "
                                                   f"(got {opts.scenario!r})"])
        return None  # the shape's tick gets no engine and ends the run at once
    LAST.clear()
    ENGINE = Engine(environment, SCENARIOS[opts.scenario](opts, environment.host or ""))
    return ENGINE


@events.test_start.add_listener
def _test_start(environment: Any, **_: Any) -> None:
    if isinstance(environment.runner, WorkerRunner):
        return
    eng = _engine_for_this_start(environment)
    if eng is None:
        return
    eng.started_wall, eng.started_mono = time.time(), time.monotonic()
    try:
        eng.shared = eng.scenario.setup()
        eng.scenario.adopt(eng.shared)
        eng.setup_done = True
        eng.started_wall = time.time()  # the run starts after its setup (the master adds a lead below)
    except (Exception, SystemExit) as e:  # report it, send nothing, stop
        if isinstance(e, TargetError):  # the target refused, answered 500 or garbage: a finding
            eng.setup_error = ("target", str(e))
        elif isinstance(e, SystemExit):
            eng.setup_error = ("target", str(e.code))
        elif isinstance(e, UsageError):  # the options cannot run this scenario: say which
            eng.setup_error = ("harness", str(e))
        else:  # our own bug: the run cannot say anything about the target
            eng.setup_error = ("harness", traceback.format_exc())
        sys.stderr.write(f"peakproof: {eng.scenario.name}: setup failed: {eng.setup_error[1]}\n")
        eng.shared = {}
        eng.done = True
        if eng.is_master:  # workers wait for a plan; tell them there is nothing to send
            environment.runner.send_message("peakproof_plan", {"count": 0, "shared": {}, "t0": time.time()})
        gevent.spawn(_monitor_loop, eng)
        return
    if eng.is_master:
        # Workers start their users a little after this message: give the schedule a lead
        # so that its first instant is still ahead of every worker (else it starts late).
        eng.started_wall = time.time() + 1.0
        n = max(1, environment.runner.worker_count)
        environment.runner.send_message("peakproof_plan", {"count": n, "shared": eng.shared,
                                                          "t0": eng.started_wall, "scenario": eng.scenario.name,
                                                          "options": _options_of(environment.parsed_options),
                                                          "host": environment.host})
    else:
        eng.share = (0, 1)
    gevent.spawn(_monitor_loop, eng)


@events.test_stop.add_listener
def _test_stop(environment: Any, **_: Any) -> None:
    eng = ENGINE
    if eng is not None and not eng.is_worker and not eng.finished and eng.started_wall:
        _finish(eng)  # stopped early (bound reached, Ctrl-C): judge what was recorded


def _options_of(opts: Any) -> dict[str, Any]:
    from .loadopts import OPTIONS

    return {k: getattr(opts, k) for k in OPTIONS if hasattr(opts, k) and k != "source_address"}


def _on_plan(msg: Any, **_: Any) -> None:
    global ENGINE
    name = msg.data.get("scenario")
    if name and (ENGINE is None or ENGINE.finished or ENGINE.scenario.name != name):
        # the master chose the scenario (its start form or its command line): run that, with its options
        env = _ENVIRONMENT[-1]
        for k, v in (msg.data.get("options") or {}).items():
            setattr(env.parsed_options, k, v)
        env.host = env.host or msg.data.get("host")
        ENGINE = Engine(env, SCENARIOS[name](env.parsed_options, env.host or ""))
    eng = ENGINE
    assert eng is not None
    if msg.data["count"] == 0:  # the master's setup failed: nothing to send
        eng.done = True
        if eng.is_worker:
            _send_history(eng)
        return
    eng.shared = msg.data["shared"]
    eng.scenario.adopt(eng.shared)
    eng.share = (eng.environment.runner.worker_index, msg.data["count"])
    eng.started_wall = msg.data["t0"]


def _on_ops(msg: Any, **_: Any) -> None:
    assert ENGINE is not None
    ENGINE.worker_parts.append(msg.data["ops"])


def _on_done(msg: Any, **_: Any) -> None:
    eng = ENGINE
    assert eng is not None
    for k, v in msg.data["counters"].items():
        eng.counters[k] = max(eng.counters.get(k, 0), v) if k.endswith("_max") else eng.counters.get(k, 0) + v
    for sec, v in msg.data["dropped_by_second"].items():
        eng.dropped_by_second[int(sec)] = eng.dropped_by_second.get(int(sec), 0) + v
    eng.harness_errors.extend(msg.data.get("harness_errors", []))
    eng.workers_done += 1


def _monitor_loop(eng: Engine) -> None:
    while not eng.finished:
        try:
            eng.scenario.monitor(eng.history)
        except Exception as e:  # the target's failures are recorded by the driver; this is our bug
            _harness_error(eng, f"{eng.scenario.name}.monitor", e)
        gevent.sleep(eng.scenario.monitor_interval)


def _harness_error(eng: Engine, where: str, e: BaseException) -> None:
    """An exception in the harness's own code: never kills the run, always makes it INCONCLUSIVE."""
    text = f"{where} raised {type(e).__name__}: {e}\n{traceback.format_exc()}"
    if len(eng.harness_errors) < 20:  # the first few in full; the count says the rest
        eng.harness_errors.append(text)
    eng.counters["harness_errors"] = eng.counters.get("harness_errors", 0) + 1
    sys.stderr.write(f"peakproof: {where}: {type(e).__name__}: {e}\n")


# -- the dispatcher ------------------------------------------------------------------------------


class DispatchContext:
    """What a scenario's ``perform`` gets: its driver, a seeded Random, and ``later``."""

    def __init__(self, driver: Any, rnd: random.Random, t0_wall: float, t0_mono: float,
                 later: Callable[[float, str, Any], None]) -> None:
        self.driver = driver
        self.random = rnd
        self.t0_wall = t0_wall
        self.t0_mono = t0_mono
        self._later = later

    def later(self, delay: float, kind: str, data: Any) -> None:
        """Schedule a follow-up arrival ``delay`` s after now (an intended instant, like any other)."""
        self._later(delay, kind, data)

    def intended(self, t: float) -> float:
        return self.t0_wall + t


class GeventTransport:
    """The engine's HTTP transport (a :class:`peakproof.http.Transport`), reporting to Locust.

    Plain ``http`` goes through :class:`peakproof.wire.WireClient` (kept-alive sockets and a
    C parser, about half geventhttpclient's CPU a request); ``https`` through
    geventhttpclient. Locust's statistics are fed in batches (:class:`StatsBatch`). Any HTTP
    answer below 500 is a success to Locust (a sold-out 409 is the system working); 5xx
    and transport errors are failures there too.
    """

    def __init__(self, environment: Any, concurrency: int, timeout: float, source: str | None = None) -> None:
        self.stats = StatsBatch(environment)
        self.source = source
        self.concurrency = concurrency
        self.timeout = timeout
        self._clients: dict[str, Any] = {}

    def _client(self, url: str) -> tuple[Any, str]:
        # Split "scheme://host:port" from the path by hand: URL parsing cost ~30 µs a request.
        cut = url.find("/", url.find("//") + 2)
        origin, path = (url, "/") if cut < 0 else (url[:cut], url[cut:])
        client = self._clients.get(origin)
        if client is None:
            from geventhttpclient.url import URL

            u = URL(origin + "/")
            if u.scheme == "https":
                from geventhttpclient import HTTPClient

                client = _TlsClient(HTTPClient(u.host, u.port, ssl=True, concurrency=self.concurrency,
                                               network_timeout=self.timeout, connection_timeout=self.timeout,
                                               insecure=True))
            else:
                from .wire import WireClient

                client = WireClient(u.host, u.port, self.concurrency, self.timeout, self.source)
            self._clients[origin] = client
        return client, path

    def __call__(self, method: str, url: str, body: bytes | None, headers: dict[str, str], name: str) -> tuple[int, bytes]:
        client, path = self._client(url)
        start = time.perf_counter()
        try:
            status, content = client.request(method, path, body, headers)
        except TransportError as e:
            self.stats.add(method, name, (time.perf_counter() - start) * 1000, 0, e)
            raise
        self.stats.add(method, name, (time.perf_counter() - start) * 1000, len(content),
                       None if status < 500 else f"HTTP {status}")
        return status, content


class _TlsClient:
    """geventhttpclient for ``https`` URLs, with the wire client's interface and outcomes."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def request(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
        try:
            resp = self.client.request(method, path, body=body, headers=headers)
            return resp.status_code, resp.read()
        except Exception as e:  # noqa: BLE001 - every transport failure becomes a TransportError
            text = f"{type(e).__name__}: {e}"
            low = text.lower()
            if isinstance(e, ConnectionRefusedError) or "refused" in low:
                raise TransportError("refused", text) from None
            if isinstance(e, (TimeoutError, gevent.Timeout)) or "timeout" in low or "timed out" in low:
                raise TransportError("timeout", text) from None
            raise TransportError("reset" if "reset" in low or "closed" in low else "error", text) from None


class StatsBatch:
    """Locust's request statistics, fed in batches rather than one ``request`` event a request.

    Firing the event and logging each request cost ~10 µs an arrival; the batch keeps the
    answers in a list and adds them to Locust's entries every ``interval`` s in bulk: the
    same counts, sums, extremes, per-second counts and rounded response-time buckets that
    ``RequestStats.log_request`` keeps (``tests/test_wire.py`` compares the two). When
    another listener than Locust's own is on the ``request`` event (a plugin), every
    request is fired to it as usual.
    """

    interval = 0.25

    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.rows: list[tuple[str, str, float, int, Any, float]] = []
        self.last_flush = time.monotonic()

    def add(self, method: str, name: str, response_time: float, length: int, error: Any) -> None:
        self.rows.append((method, name, response_time, length, error, time.time()))

    def flush(self) -> None:
        self.last_flush = time.monotonic()
        rows, self.rows = self.rows, []
        if not rows:
            return
        event = self.environment.events.request
        stats = getattr(self.environment, "stats", None)
        if stats is None or len(getattr(event, "_handlers", ())) != 1:
            for method, name, rt, length, error, _ in rows:  # someone else listens: fire as Locust would
                event.fire(request_type=method, name=name, response_time=rt, response_length=length,
                           exception=None if error is None else (error if isinstance(error, BaseException)
                                                                 else RuntimeError(error)), context={})
            return
        bulk_log(stats, rows)


def bulk_log(stats: Any, rows: list[tuple[str, str, float, int, Any, float]]) -> None:
    """Add ``rows`` (method, name, response time in ms, length, error or None, when) to a Locust
    ``RequestStats`` as ``log_request`` (and ``log_error`` for the errors) one by one would."""
    from collections import Counter

    from locust.stats import bucket_response_time

    groups: dict[tuple[str, str], list[tuple[float, int, float]]] = {}
    every: list[tuple[float, int, float]] = []
    for method, name, rt, length, error, at in rows:
        item = (rt, length, at)
        groups.setdefault((name, method), []).append(item)
        every.append(item)
        if error is not None:
            stats.log_error(method, name, error if isinstance(error, BaseException) else RuntimeError(error))
    for key, items in groups.items():
        _bulk_entry(stats.entries[key], items, bucket_response_time, Counter)
    _bulk_entry(stats.total, every, bucket_response_time, Counter)


def _bulk_entry(entry: Any, items: list[tuple[float, int, float]], bucket: Callable[[float], int], counter: Any) -> None:
    last = items[-1][2]  # Locust keeps the time of the last request logged
    if entry.use_response_times_cache and entry.last_request_timestamp and int(last) > int(entry.last_request_timestamp):
        entry._cache_response_times(int(last) - 1)
    rts = [rt for rt, _, _ in items]
    entry.num_requests += len(items)
    for sec, k in counter(int(at) for _, _, at in items).items():
        entry.num_reqs_per_sec[sec] += k
    entry.last_request_timestamp = last
    entry.total_response_time += sum(rts)
    low, high = min(rts), max(rts)
    entry.min_response_time = low if entry.min_response_time is None else min(entry.min_response_time, low)
    entry.max_response_time = max(entry.max_response_time, high)
    for b, k in counter(map(bucket, rts)).items():
        entry.response_times[b] += k
    entry.total_content_length += sum(length for _, length, _ in items)


class OpenModelUser(User):
    """One per Locust process: walks this process's share of the arrival schedule."""

    @task
    def dispatch(self) -> None:
        eng = ENGINE
        if eng is None or eng.done:
            gevent.sleep(0.2)
            return
        deadline = time.monotonic() + 30
        while eng.share is None:  # a worker waits for the master's plan
            if time.monotonic() > deadline:
                sys.stderr.write("peakproof: no plan from the master within 30 s; this worker sends nothing\n")
                eng.done = True
                return
            gevent.sleep(0.05)
        try:
            _dispatch(eng)
        finally:
            eng.done = True
            if eng.is_worker:
                _send_history(eng)


def _dispatch(eng: Engine) -> None:
    opts = eng.environment.parsed_options
    index, count = eng.share  # type: ignore[misc]
    sc = eng.scenario
    schedule = sc.arrivals()[index::count]
    transport = GeventTransport(eng.environment, max(1, min(opts.connections, opts.pool_size)), opts.request_timeout,
                                OWN_OPTIONS.get("source_address"))
    driver = sc.make_driver(eng.history, transport)
    rnd = random.Random(opts.seed * 1009 + index)
    pool = Slots(max(1, opts.pool_size))
    # Align to the run's start: workers got the master's t0 (same machine, same clock).
    if not eng.is_worker:
        eng.started_wall = time.time()  # a local run starts when its dispatcher does
    t0_wall = eng.started_wall
    t0_mono = time.monotonic() - (time.time() - t0_wall)
    followups: list[tuple[float, int, str, Any]] = []
    seq = 0
    pool_wait_end = float("-inf")  # when the dispatcher last stopped waiting for a free slot

    def later(delay: float, kind: str, data: Any) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(followups, (time.monotonic() - t0_mono + delay, seq, kind, data))

    ctx = DispatchContext(driver, rnd, t0_wall, t0_mono, later)
    progress = _Progress(eng, len(schedule))
    waits: list[tuple[float, float]] = []  # (start, end) of each wait for a free slot, run time
    cpu = CpuWatch()
    gevent.spawn_raw(cpu.run)
    i, n = 0, len(schedule)
    counters = eng.counters
    max_late = opts.max_lateness
    bound = min(opts.max_run_seconds, sc.bound_seconds())
    while i < n or followups or pool.busy:
        now = time.monotonic() - t0_mono
        if now > bound:
            sys.stderr.write(f"peakproof: the run reached its bound of {bound:.0f} s; stopping\n")
            break
        progress.tick(now, i)
        if time.monotonic() - transport.stats.last_flush > StatsBatch.interval:
            transport.stats.flush()  # Locust's statistics, a batch at a time
        due: list[Arrival] = []
        while i < n and schedule[i].t <= now:
            due.append(schedule[i])
            i += 1
        while followups and followups[0][0] <= now:
            t, _, kind, data = heapq.heappop(followups)
            due.append(Arrival(t, kind, data))
        for a in due:
            counters["due"] += 1
            if pool.full():
                counters["pool_full"] += 1
                wait_start = time.monotonic() - t0_mono
                pool.wait_available(timeout=max(0.0, a.t + max_late - (time.monotonic() - t0_mono)))
                pool_wait_end = time.monotonic() - t0_mono
                # the wait covers this arrival's instant unless the dispatcher was already behind it
                waits.append((a.t if wait_start - a.t <= opts.late_threshold else wait_start, pool_wait_end))
            lateness = time.monotonic() - t0_mono - a.t
            if lateness > opts.late_threshold and a.t <= pool_wait_end:
                # the dispatcher sat waiting for answers while this one fell due: the target's latency,
                # unless this process's own loop was too busy to read the answers that had come
                counters["late_by_pool"] += 1
                if not _fell_due_in(waits, a.t):
                    counters["late_by_pool_busy"] += 1  # late already: the generator was behind when it fell due
            if lateness > max_late or pool.full():
                counters["dropped"] += 1
                sec = int(a.t)
                eng.dropped_by_second[sec] = eng.dropped_by_second.get(sec, 0) + 1
                continue
            counters["sent"] += 1
            if lateness > opts.late_threshold:
                counters["late"] += 1
            pool.spawn(_perform, eng, ctx, a)
        nxt = min(schedule[i].t if i < n else float("inf"), followups[0][0] if followups else float("inf"))
        if nxt == float("inf"):
            gevent.sleep(0.01)  # requests in flight may still schedule follow-ups
        else:
            gevent.sleep(max(0.0, min(0.05, nxt - (time.monotonic() - t0_mono))))
    pool.join(timeout=opts.request_timeout + 1)
    transport.stats.flush()
    cpu.stopped = True
    counters["cpu_percent_max"] = max(counters.get("cpu_percent_max", 0), cpu.percent())
    progress.tick(time.monotonic() - t0_mono, i, final=True)


class CpuWatch:
    """How much of the CPU it could get this process used while dispatching, in %.

    When the pool of in-flight requests fills, either the target is slow to answer or this
    process is too busy to read the answers that came (they wait in its socket buffers). The
    second shows as a process using all the CPU it can get: its CPU time over wall time,
    divided by the share of a core a short busy probe gets (1.0 on a quiet core, about 0.5
    beside a busy neighbour, so a starved generator is seen as saturated too).
    """

    interval = 0.2
    probe = 0.001  # s of CPU burnt per probe: 0.5% of a core

    def __init__(self) -> None:
        self.cpu0, self.wall0 = time.process_time(), time.monotonic()
        self.available: list[float] = []
        self.stopped = False

    def run(self) -> None:
        while not self.stopped:
            gevent.sleep(self.interval)
            wall, cpu = time.perf_counter(), time.process_time()
            while time.process_time() - cpu < self.probe:
                pass
            self.available.append(min(1.0, (time.process_time() - cpu) / max(1e-9, time.perf_counter() - wall)))

    def percent(self) -> int:
        used = (time.process_time() - self.cpu0) / max(1e-9, time.monotonic() - self.wall0)
        available = sum(self.available) / len(self.available) if self.available else 1.0
        return round(100 * min(1.0, used / max(0.05, available)))


class Slots:
    """A bound on the arrivals in flight, each in a raw greenlet: what ``gevent.pool.Pool`` gives
    the dispatcher (full, wait for a slot, join) at a third of its cost a spawn (no Greenlet
    object, no links, no set of members)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.busy = 0
        self._room = gevent.event.Event()  # set when a slot frees while the dispatcher waits for one
        self._idle = gevent.event.Event()  # set when the last one ends while someone joins
        self.waiting = False

    def full(self) -> bool:
        return self.busy >= self.size

    def spawn(self, fn: Callable[..., None], *args: Any) -> None:
        self.busy += 1
        gevent.spawn_raw(self._run, fn, args)

    def _run(self, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        try:
            fn(*args)
        finally:
            self.busy -= 1
            if self.waiting:
                self._room.set()
                if not self.busy:
                    self._idle.set()

    def wait_available(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.full() and deadline > time.monotonic():
            self._wait(self._room, deadline - time.monotonic())

    def join(self, timeout: float) -> None:
        if self.busy:
            self._wait(self._idle, timeout)

    def _wait(self, event: Any, timeout: float) -> None:
        event.clear()
        self.waiting = True  # only then do the greenlets that end set the events
        try:
            event.wait(timeout)
        finally:
            self.waiting = False


def _fell_due_in(waits: list[tuple[float, float]], t: float) -> bool:
    """Did instant ``t`` fall inside a wait for a free slot (the pool full of unanswered requests)?"""
    import bisect

    k = bisect.bisect_right(waits, (t, float("inf"))) - 1
    return k >= 0 and waits[k][0] <= t <= waits[k][1]


def _perform(eng: Engine, ctx: DispatchContext, a: Arrival) -> None:
    try:
        eng.scenario.perform(ctx, a)
    except Exception as e:  # a scenario bug must show, never stop the dispatcher: INCONCLUSIVE
        _harness_error(eng, f"{eng.scenario.name}.perform({a.kind})", e)


class _Progress:
    """A line every 2 s on a terminal; silent when output is not one."""

    def __init__(self, eng: Engine, total: int) -> None:
        self.eng, self.total, self.next = eng, total, 0.0
        self.tty = sys.stderr.isatty()

    def tick(self, now: float, dispatched: int, final: bool = False) -> None:
        if not self.tty or (now < self.next and not final):
            return
        self.next = now + 2
        c = self.eng.history.counts()
        k = self.eng.counters
        sys.stderr.write(f"\rpeakproof {self.eng.scenario.name}: {now:6.1f} s  scheduled {dispatched:,}/{self.total:,}"
                         f"  sent {k['sent']:,}  late {k['late']:,}  dropped {k['dropped']:,}  ok {c['ok']:,}"
                         f"  fail {c['fail']:,}  info {c['info']:,}  in flight {c['invoke']:,}   "
                         + ("\n" if final else ""))
        sys.stderr.flush()


def _send_history(eng: Engine) -> None:
    runner = eng.environment.runner
    wire = [op_to_wire(op) for op in eng.history.ops]
    for start in range(0, len(wire), 5000):
        runner.send_message("peakproof_ops", {"ops": wire[start:start + 5000]})
    runner.send_message("peakproof_done", {"counters": eng.counters, "harness_errors": eng.harness_errors,
                                           "dropped_by_second": {str(k): v for k, v in eng.dropped_by_second.items()}})


# -- the shape: one per run, whatever files loadtests/ holds ------------------------------------


class ScenarioShape(LoadTestShape):
    """One dispatcher per process for as long as the scenario runs; then stop."""

    def tick(self) -> tuple[int, float] | None:
        eng = ENGINE
        runner = self.runner
        if not isinstance(runner, WorkerRunner) and (eng is None or (eng.finished and self.get_run_time() < 1)):
            eng = _engine_for_this_start(runner.environment)  # a run started from the web UI's form
        if eng is None:
            return None
        workers = runner.worker_count if isinstance(runner, MasterRunner) else 1
        hard = eng.environment.parsed_options.max_run_seconds
        # the scenario's own bound counts from the end of its setup; --max-run-seconds from the start
        since_setup = time.time() - eng.started_wall if eng.setup_done else 0.0
        if eng.finished or self.get_run_time() > hard or since_setup > eng.scenario.bound_seconds() + 30:
            return None
        if isinstance(runner, MasterRunner):
            if eng.workers_done >= workers > 0:
                _finish(eng)
                return None
        elif eng.done:
            _finish(eng)
            return None
        return max(1, workers), max(1, workers) * 10


def _finish(eng: Engine) -> None:
    if eng.finished:
        return
    if eng.is_master:
        gevent.sleep(0.5)  # the last op chunks travel with the done message
    if eng.setup_error is None:
        eng.scenario.finish(eng.history)
    eng.finished = True
    _judge(eng)


def _judge(eng: Engine) -> None:
    opts = eng.environment.parsed_options
    sc = eng.scenario
    parts: list[Any] = [eng.history.ops] + eng.worker_parts
    history = merge_histories(parts, time.time) if eng.is_master else eng.history
    if isinstance(sc, Calibration):
        _conclude_calibration(eng, sc, history)
        return
    harness_errors = list(eng.harness_errors)
    slo_texts = with_error_budget(opts.slo or sc.default_slos)
    checks: list[CheckResult] = []
    charts: list[Chart] = []
    details: dict[str, Any] = {}
    slos: list[CheckResult] = []
    load: list[CheckResult] = []
    load_charts: list[Chart] = []
    load_details: dict[str, Any] = {}
    if eng.setup_error is not None:
        kind, text = eng.setup_error
        if kind == "target":
            checks = [CheckResult("target_setup_succeeded", False, {}, f"the scenario could not prepare the target "
                                  f"{sc.host}: {text}", note="nothing was sent; fix the target or the URL")]
        else:
            harness_errors.append(f"the scenario's setup raised (a harness error, not the target's):\n{text}")
        load = [CheckResult("offered_load_matches_curve", "unknown", {}, note="no load was offered: setup failed",
                            chances=0, chance_kind="due arrivals")]
    else:
        try:
            checks, charts, details = sc.judge(history)
        except Exception:  # a checker bug: the run says nothing about the target
            harness_errors.append(f"{sc.name}.judge raised:\n{traceback.format_exc()}")
        thresholds = parse_thresholds(slo_texts)
        slos = [t.judge(history.ops) for t in thresholds]
        load, load_charts, load_details = _offered_load(eng, history, thresholds)
        slos = undecide_when_behind(slos, load[0])
    finished = time.time()
    _draw_faults(load_charts + charts, history, eng.started_wall)
    locust_html = getattr(opts, "html_file", None)
    if locust_html:  # a link relative to the report, which lives in --report-dir
        import os

        locust_html = os.path.relpath(os.path.abspath(locust_html), os.path.abspath(opts.report_dir))
    report = RunReport(sc.name, sc.host, eng.started_wall, finished,
                       {**sc.params(), "scale": opts.scale, "time_scale": opts.time_scale, "spacing": opts.spacing,
                        "seed": opts.seed, "pool_size": opts.pool_size, "processes": _process_count(eng),
                        "slos": ", ".join(slo_texts),
                        "calibrated rate (arrivals/s per process)": opts.calibrated_rate or "not measured"},
                       checks, slos, load, load_charts + charts, {**load_details, **details},
                       locust_html=locust_html, harness_errors=harness_errors)
    path = write_report(report, opts.report_dir)
    eng.report_path = str(path)
    if opts.save_history:
        history.dump(path.with_suffix(".history.jsonl"))
    eng.environment.process_exit_code = report.outcome.exit_code
    print(_summary(report, path), flush=True)
    judged = report.judged
    LAST.update(outcome=str(judged.outcome), reasons=list(judged.reasons), report=str(path),
                lines=[r.line().splitlines()[0] for group in (report.load, report.checks, report.slos) for r in group])


def _conclude_calibration(eng: Engine, sc: Calibration, history: History) -> None:
    import json

    if eng.setup_error is not None:
        doc: dict[str, Any] = {"scenario": sc.name, "rate": 0.0, "error": eng.setup_error[1]}
    else:
        doc = sc.conclude(history, eng.started_wall)
    doc["harness_errors"] = eng.harness_errors
    out = eng.environment.parsed_options.calibration_out
    text = json.dumps(doc, indent=1, default=str)
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            fh.write(text)
    print(f"peakproof {sc.name}: {doc.get('rate', 0):,.0f} arrivals/s on time on one process"
          + (f" (setup failed: {doc['error']})" if "error" in doc else ""), flush=True)
    eng.environment.process_exit_code = 0 if doc.get("rate") else 2


def _process_count(eng: Engine) -> int:
    runner = eng.environment.runner
    return runner.worker_count if isinstance(runner, MasterRunner) else 1


def _summary(report: RunReport, path: Any) -> str:
    judged = report.judged
    lines = [f"\npeakproof {report.scenario}: {judged.outcome}  (report: {path})"]
    lines += [f"  why: {reason}" for reason in judged.reasons[:6]]
    for group in (report.load, report.checks, report.slos):
        for r in group:
            lines.append("  " + r.line())
    return "\n".join(lines)


def _draw_faults(charts: list[Chart], history: History, t0: float) -> None:
    """Every fault the nemesis put in force, drawn on every chart over run time (fault windows)."""
    from . import nemesis

    spans = [(w["start"], w["end"], w["fault"] + (f" {_brief(w['params'])}" if w["params"] else ""))
             for w in nemesis.windows(history.ops, t0)]
    for chart in charts:
        if chart.x_label.startswith("seconds since"):
            chart.faults = spans


def _brief(params: dict[str, Any]) -> str:
    text = ", ".join(f"{k}={v}" for k, v in params.items())
    return text if len(text) <= 60 else text[:57] + "..."


def _offered_load(eng: Engine, history: History, thresholds: list[Any] = ()) -> tuple[list[CheckResult], list[Chart], dict[str, Any]]:
    """Did the run offer the curve? Target vs achieved sends per second, late and dropped."""
    opts = eng.environment.parsed_options
    sc = eng.scenario
    t0 = eng.started_wall
    planned = [a.t for a in sc.arrivals()]
    c = eng.counters
    counters = LoadCounters(c["due"], c["sent"], c["late"], c["dropped"], c["pool_full"], eng.dropped_by_second,
                            c.get("late_by_pool", 0), c.get("late_by_pool_busy", 0), c.get("cpu_percent_max", 0))
    settings = LoadSettings(opts.late_threshold, opts.max_lateness, opts.offered_tolerance, opts.pool_size,
                            _process_count(eng), opts.calibrated_rate, sc.peak_rate())
    sends = [op.send_time - t0 for op in history.ops if op.send_time is not None and op.intended_time is not None]
    result = judge_offered_load(counters, planned, sends, settings)
    charts = load_charts(planned, history.ops, t0, eng.dropped_by_second, thresholds)
    limit_ms = opts.late_threshold * 1000
    details = {"offered load": {"planned arrivals (curve)": len(planned), "due (incl. follow-ups)": c["due"],
                                "sent": c["sent"], f"sent > {limit_ms:g} ms late": c["late"], "dropped": c["dropped"],
                                "arrivals that found the pool full": c["pool_full"],
                                "late or dropped while the pool was full": c.get("late_by_pool", 0),
                                "... of them already late when they fell due (the generator behind, not the pool)":
                                    c.get("late_by_pool_busy", 0),
                                "generator CPU, busiest process (% of a core while dispatching)":
                                    c.get("cpu_percent_max", 0),
                                "max lateness before drop (s)": opts.max_lateness}}
    return [result], charts, details
