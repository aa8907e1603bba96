"""The dispatcher: one per generator process, it walks this process's share of the arrival
schedule and sends each arrival at its intended instant from a bounded pool of raw greenlets
(:class:`Slots`), counting what it could not send on time and why; :class:`CpuWatch` tells a
busy generator from a slow target. Only Locust processes load it (gevent).
"""

from __future__ import annotations

import bisect
import heapq
import random
import sys
import time
import traceback
from typing import Any, Callable

import gevent
import gevent.event

from .scenario import Arrival
from .transport import GeventTransport, StatsBatch


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


def dispatch(eng: Any) -> None:
    """Send this process's share of ``eng.scenario``'s arrivals, each at its instant (``eng``: the
    process's :class:`peakproof.load.engine.Engine`: its spec, history, counters and share)."""
    opts = eng.spec
    index, count = eng.share
    sc = eng.scenario
    schedule = sc.arrivals()[index::count]
    transport = GeventTransport(eng.environment, max(1, min(opts.connections, opts.pool_size)), opts.request_timeout,
                                eng.source_address)
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
        if i < n and sc.schedule_over():
            i = n  # the rest would change nothing (a calibration's ladder that stopped): end with what is in flight
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
            pool.spawn(perform, eng, ctx, a)
        nxt = min(schedule[i].t if i < n else float("inf"), followups[0][0] if followups else float("inf"))
        if nxt == float("inf"):
            gevent.sleep(0.01)  # requests in flight may still schedule follow-ups
        else:
            gevent.sleep(max(0.0, min(0.05, nxt - (time.monotonic() - t0_mono))))
    pool.join(timeout=opts.request_timeout + 1)
    pool.close()
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
        # Greenlets that finished an arrival wait here for the next one. A new greenlet an arrival
        # cost two system calls (CPython 3.11 maps a 16 KiB frame stack for each greenlet and unmaps
        # it when the greenlet ends: as many calls as the request's send and read).
        self._parked: list[Any] = []
        self._loop = gevent.get_hub().loop

    def full(self) -> bool:
        return self.busy >= self.size

    def spawn(self, fn: Callable[..., None], *args: Any) -> None:
        self.busy += 1
        if self._parked:
            self._loop.run_callback(self._parked.pop().switch, (fn, args))  # a Waiter is switched from the hub
        else:
            gevent.spawn_raw(self._work, fn, args)

    def _work(self, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        from gevent.hub import Waiter

        job: tuple[Callable[..., None], tuple[Any, ...]] | None = (fn, args)
        while job is not None:
            try:
                job[0](*job[1])
            finally:
                self.busy -= 1
                if self.waiting:
                    self._room.set()
                    if not self.busy:
                        self._idle.set()
            waiter = Waiter()
            self._parked.append(waiter)
            job = waiter.get()

    def close(self) -> None:
        """Let the parked greenlets end (the run is over)."""
        parked, self._parked = self._parked, []
        for waiter in parked:
            self._loop.run_callback(waiter.switch, None)

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
    k = bisect.bisect_right(waits, (t, float("inf"))) - 1
    return k >= 0 and waits[k][0] <= t <= waits[k][1]


def perform(eng: Any, ctx: DispatchContext, a: Arrival) -> None:
    try:
        eng.scenario.perform(ctx, a)
    except Exception as e:  # a scenario bug must show, never stop the dispatcher: INCONCLUSIVE
        harness_error(eng, f"{eng.scenario.name}.perform({a.kind})", e)


def harness_error(eng: Any, where: str, e: BaseException) -> None:
    """An exception in the harness's own code: never kills the run, always makes it INCONCLUSIVE."""
    text = f"{where} raised {type(e).__name__}: {e}\n{traceback.format_exc()}"
    if len(eng.harness_errors) < 20:  # the first few in full; the count says the rest
        eng.harness_errors.append(text)
    eng.counters["harness_errors"] = eng.counters.get("harness_errors", 0) + 1
    sys.stderr.write(f"peakproof: {where}: {type(e).__name__}: {e}\n")


class _Progress:
    """A line every 2 s on a terminal; silent when output is not one."""

    def __init__(self, eng: Any, total: int) -> None:
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
