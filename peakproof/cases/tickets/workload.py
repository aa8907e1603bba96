"""Case T, tickets: the opening workload and the ways the properties drive it.

* :class:`OpeningWorkload`: the seed's opening (BS1-BS3) as arrivals;
* :func:`replay_opening`: that opening in virtual time against the in-process target;
* :func:`concurrent_burst`: many threads at once around sell-out (any driver, any URL);
* :func:`interleaved_reservations`: concurrent reservations stepped by a chosen schedule.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from peakproof.clock import VirtualClock
from peakproof.history import FAIL, INFO, OK, History
from .driver import InProcessTickets, TicketsDriver, _quota, _res


@dataclass(frozen=True)
class OpeningWorkload:
    """The opening of Case T (BS1-BS3): ``requests`` reservations uniformly over ``seconds``."""

    quota: int = 5_000
    requests: int = 200_000
    seconds: float = 10.0
    p_single: float = 0.6  # BS3: 60% ask 1, 40% ask 2 (mean 1.4)
    hold_seconds: float = 120.0
    seed: int = 20260730

    @property
    def rate(self) -> float:
        return self.requests / self.seconds

    def describe(self) -> dict[str, Any]:
        return {"quota": self.quota, "requests": self.requests, "seconds": self.seconds, "requests/s": self.rate,
                "share asking for 1 ticket": self.p_single, "hold (s)": self.hold_seconds, "seed": self.seed}

    def arrivals(self) -> Iterator[tuple[float, str, int, str]]:
        """(intended time, buyer id, quantity, request id), in order of arrival."""
        rnd = random.Random(self.seed)
        buyers = buyer_names(min(self.requests, 5_000), self.seed)
        step = self.seconds / self.requests
        for i in range(self.requests):
            qty = 1 if rnd.random() < self.p_single else 2
            yield i * step, f"{buyers[i % len(buyers)]}-{i}", qty, f"r{i}"


def buyer_names(n: int, seed: int) -> list[str]:
    """Realistic buyer handles from faker (Turkish and English locales), reproducible."""
    from faker import Faker

    fake = Faker(["tr_TR", "en_US"])
    fake.seed_instance(seed)
    return [fake.user_name() for _ in range(n)]


def replay_opening(driver: InProcessTickets, workload: OpeningWorkload = OpeningWorkload(),
                   quota_id: str | None = None) -> tuple[str, History]:
    """Replay the opening against an in-process target in virtual time; returns the history."""
    quota_id = quota_id or f"opening-{uuid.uuid4().hex[:8]}"
    driver.put_quota(quota_id, workload.quota, workload.hold_seconds)
    clock = driver.clock
    reserve = driver.reserve
    for t, buyer, qty, rid in workload.arrivals():
        clock.set(t)
        reserve(quota_id, buyer, qty, rid, intended_time=t)
    driver.read_quota(quota_id)
    return quota_id, driver.history


def concurrent_burst(make_driver: Callable[[History], TicketsDriver], *, capacity: int, requests: int,
                     threads: int = 16, hold_seconds: float = 120.0, seed: int = 20260730,
                     quota_id: str | None = None, p_single: float = 0.6, replay_share: float = 0.02,
                     deadline_seconds: float = 120.0) -> tuple[str, History]:
    """Many threads reserve at once around sell-out; returns the shared history.

    ``make_driver(history)`` builds one driver per thread (one HTTP connection each) that
    records into the shared history. A small share of requests are client retries that
    reuse a request id. Bounded: stops after ``requests`` or ``deadline_seconds``.
    """
    import threading

    quota_id = quota_id or f"burst-{uuid.uuid4().hex[:8]}"
    setup = make_driver(History(time.time))
    history = setup.history
    setup.put_quota(quota_id, capacity, hold_seconds)
    rnd = random.Random(seed)
    plan = []
    for i in range(requests):
        qty = 1 if rnd.random() < p_single else 2
        if plan and rnd.random() < replay_share:
            plan.append(plan[rnd.randrange(len(plan))])  # a retry: same buyer, same request id
        else:
            plan.append((f"buyer-{i}", qty, f"{seed}-{i}"))
    next_index = iter(range(len(plan)))
    stop_at = time.monotonic() + deadline_seconds
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        drv = make_driver(history)
        try:
            for i in next_index:  # shared iterator: each index taken once across threads
                if time.monotonic() > stop_at:
                    return
                buyer, qty, rid = plan[i]
                drv.reserve(quota_id, buyer, qty, rid, process=worker)
        except BaseException as e:  # surfaced after join, never a silent hang
            errors.append(e)

    pool = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(deadline_seconds + 30)
    if errors:
        raise errors[0]
    setup.read_quota(quota_id)
    return quota_id, history


def interleaved_reservations(policy: str, capacity: int, quantities: list[int], workers: int,
                             schedule: list[Any], *, retry_budget: int = 3,
                             make_core: Callable[..., Any] | None = None) -> tuple[Any, Any]:
    """Reservations of ``quantities`` taken from a queue by ``workers``, stepped by ``schedule``.

    The schedule's entries are worker numbers, and may carry the nemesis
    (``peakproof.interleave.LAPSE``: the virtual clock jumps past the lease; ``kill(n)``: a
    worker dies where it stands, its lock kept). ``make_core`` builds the core from
    ``TicketsCore``'s arguments (a quality test's broken one). Returns (scheduler, core):
    ``scheduler.history`` is judged by the tickets checks and ``scheduler.render()`` is the
    interleaving, one line a step.
    """
    from peakproof.targets.tickets import InMemoryStore, TicketError, TicketsCore
    from peakproof.targets.tickets.core import Wait

    from peakproof.interleave import Scheduler

    clock = VirtualClock()
    core = (make_core or TicketsCore)(InMemoryStore(), clock, policy=policy, retry_budget=retry_budget,
                                      id_factory=_counter_ids())
    hold = 86_400.0  # the step counter is the history's clock; holds must not lapse mid-run

    def reserve_task(buyer: str, qty: int, rid: str) -> Callable[[], Any]:
        def task() -> Any:
            replay = core.reserve_fast("q", buyer, qty, rid)  # runs inside the first step
            if replay is not None:
                return _res(replay)
            res, _created = yield from core.reserve_steps("q", buyer, qty, rid)
            return _res(res)
        return task

    def classify(exc: BaseException) -> tuple[str, Any] | None:
        if isinstance(exc, TicketError):
            return (FAIL if exc.status < 500 else INFO), exc.code
        return None

    queue = [("reserve", {"quota_id": "q", "buyer_id": f"b{i}", "quantity": q, "request_id": f"r{i}"},
              reserve_task(f"b{i}", q, f"r{i}")) for i, q in enumerate(quantities)]
    sched = Scheduler(workers, queue, classify, is_wait=lambda s: isinstance(s, Wait),
                      lapse=lambda: clock.advance(core.lease_seconds * 1.01))
    h = sched.history
    setup = h.invoke("setup", "put_quota", {"quota_id": "q", "capacity": capacity, "hold_seconds": hold})
    h.complete(setup, OK, _quota(core.put_quota("q", capacity, hold)))
    sched.run(schedule)
    read = h.invoke("setup", "read_quota", {"quota_id": "q"})
    h.complete(read, OK, _quota(core.get_quota("q")))
    return sched, core


def _counter_ids() -> Callable[[], str]:
    counter = iter(range(1, 1 << 62))
    return lambda: f"res-{next(counter)}"
