"""Case T, tickets: the driver protocol, its in-process and HTTP drivers, the workload.

The checks live beside this module in :mod:`peakproof.cases.tickets_checks` and are
re-exported here. Every driver records every call in its :class:`History` and returns the
completed :class:`Op`: ok (it happened), fail (it certainly did not), info (unknown).
"""

from __future__ import annotations

import importlib
import random
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterator, Protocol, runtime_checkable

from ..clock import VirtualClock
from ..errors import DriverSpecError
from ..history import FAIL, INFO, OK, History, Op
from ..http import RequestsTransport, call
from .tickets_checks import (TICKETS_CHECKS, TicketsAnalysis, Tolerance, check_tickets, expired_hold_is_never_sold,
                             no_oversell, no_valid_rejection, reservation_is_idempotent, stock_is_conserved,
                             units_return_exactly_once)

__all__ = ["TicketsDriver", "InProcessTickets", "HttpTickets", "OpeningWorkload", "replay_opening",
           "load_driver", "concurrent_burst", "interleaved_reservations", "TICKETS_CHECKS", "TicketsAnalysis", "Tolerance", "check_tickets", "no_oversell",
           "stock_is_conserved", "no_valid_rejection", "reservation_is_idempotent",
           "expired_hold_is_never_sold", "units_return_exactly_once"]


@runtime_checkable
class TicketsDriver(Protocol):
    """The operations of Case T. Plug your own class for an API that differs from the contract.

    Each method records one operation in ``history`` and returns it completed. Reservation
    values are dicts with at least reservation_id, quantity, status and ``expires_at`` as
    epoch seconds on the target's clock; quota values have capacity, available, held, sold.
    """

    history: History
    tolerance: Tolerance

    def now(self) -> float: ...
    def advance(self, seconds: float) -> None: ...
    def put_quota(self, quota_id: str, capacity: int, hold_seconds: float, *, process: Any = 0) -> Op: ...
    def read_quota(self, quota_id: str, *, process: Any = 0) -> Op: ...
    def reserve(self, quota_id: str, buyer_id: str, quantity: int, request_id: str, *, process: Any = 0,
                intended_time: float | None = None) -> Op: ...
    def confirm(self, reservation_id: str, *, process: Any = 0) -> Op: ...
    def cancel(self, reservation_id: str, *, process: Any = 0) -> Op: ...
    def get_reservation(self, reservation_id: str, *, process: Any = 0) -> Op: ...


# -- in process ------------------------------------------------------------------------------


class InProcessTickets:
    """Drives a :class:`targets.tickets.TicketsCore` directly, in virtual time by default."""

    tolerance = Tolerance(skew=0.0, release_grace=0.0)

    def __init__(self, core: Any = None, *, policy: str = "pessimistic", clock: VirtualClock | None = None,
                 history: History | None = None, **core_options: Any) -> None:
        from targets.tickets import InMemoryStore, TicketError, TicketsCore  # the target, only in-process

        self.clock = clock or VirtualClock()
        self.core = core or TicketsCore(InMemoryStore(), self.clock, policy=policy, **core_options)  # type: ignore[arg-type]
        self.history = history if history is not None else History(self.core.clock)
        self._error = TicketError

    def now(self) -> float:
        return self.core.clock()

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def _do(self, f: str, args: dict[str, Any], call: Callable[[], Any], process: Any,
            intended_time: float | None = None) -> Op:
        op = self.history.invoke(process, f, args, intended_time)
        try:
            value = call()
        except self._error as e:
            return self.history.complete(op, FAIL if e.status < 500 else INFO, e.code, e.message)
        return self.history.complete(op, OK, value)

    def put_quota(self, quota_id: str, capacity: int, hold_seconds: float = 120.0, *, process: Any = 0) -> Op:
        return self._do("put_quota", {"quota_id": quota_id, "capacity": capacity, "hold_seconds": hold_seconds},
                        lambda: _quota(self.core.put_quota(quota_id, capacity, hold_seconds)), process)

    def read_quota(self, quota_id: str, *, process: Any = 0) -> Op:
        return self._do("read_quota", {"quota_id": quota_id}, lambda: _quota(self.core.get_quota(quota_id)), process)

    def reserve(self, quota_id: str, buyer_id: str, quantity: int, request_id: str, *, process: Any = 0,
                intended_time: float | None = None) -> Op:
        # Written out rather than through _do: this is the opening's hot path.
        history = self.history
        op = history.invoke(process, "reserve", {"quota_id": quota_id, "buyer_id": buyer_id, "quantity": quantity,
                                                 "request_id": request_id}, intended_time)
        try:
            res = self.core.reserve(quota_id, buyer_id, quantity, request_id)[0]
        except self._error as e:
            return history.complete(op, FAIL if e.status < 500 else INFO, e.code, e.message)
        return history.complete(op, OK, _res(res))

    def confirm(self, reservation_id: str, *, process: Any = 0) -> Op:
        return self._do("confirm", {"reservation_id": reservation_id},
                        lambda: _res(self.core.confirm(reservation_id)), process)

    def cancel(self, reservation_id: str, *, process: Any = 0) -> Op:
        return self._do("cancel", {"reservation_id": reservation_id},
                        lambda: _res(self.core.cancel(reservation_id)), process)

    def get_reservation(self, reservation_id: str, *, process: Any = 0) -> Op:
        return self._do("get_reservation", {"reservation_id": reservation_id},
                        lambda: _res(self.core.get_reservation(reservation_id)), process)


def _quota(row: Any) -> dict[str, Any]:
    return {"quota_id": row.quota_id, "capacity": row.capacity, "available": row.available,
            "held": row.held, "sold": row.sold}


def _res(r: Any) -> dict[str, Any]:
    return {"reservation_id": r.reservation_id, "quota_id": r.quota_id, "buyer_id": r.buyer_id,
            "quantity": r.quantity, "status": r.status, "expires_at": r.expires_at}


# -- over HTTP -------------------------------------------------------------------------------

_RES_FIELDS = ("reservation_id", "quantity", "status", "expires_at")
_RES_KEEP = ("reservation_id", "quota_id", "buyer_id", "quantity", "status")
_QUOTA_FIELDS = ("capacity", "available", "held", "sold")
_STATUSES = ("held", "sold", "expired", "cancelled")


class HttpTickets:
    """Drives any server that implements the tickets contract (``targets/tickets/openapi.json``).

    ``session`` is a ``requests.Session`` (or Locust's HttpSession); ``transport`` any
    :class:`peakproof.http.Transport` (the load engine passes Locust's FastHttpSession).
    Outcomes follow :func:`peakproof.http.call`: ok, fail (definite) or info (unknown).
    """

    tolerance = Tolerance()

    def __init__(self, base_url: str, *, session: Any = None, timeout: float = 5.0,
                 admin_token: str | None = None, history: History | None = None, transport: Any = None) -> None:
        self.base = base_url.rstrip("/")
        self.transport = transport or RequestsTransport(session, timeout)
        self.admin_token = admin_token
        self.history = history if history is not None else History(time.time)
        self._admin = {"Authorization": f"Bearer {admin_token}"} if admin_token else None

    def now(self) -> float:
        return time.time()

    def advance(self, seconds: float) -> None:
        time.sleep(seconds)  # a URL runs in real time

    def put_quota(self, quota_id: str, capacity: int, hold_seconds: float = 120.0, *, process: Any = 0) -> Op:
        args = {"quota_id": quota_id, "capacity": capacity, "hold_seconds": hold_seconds}
        return call(self.history, self.transport, "put_quota", args, "PUT", f"{self.base}/quotas/{quota_id}",
                    {"capacity": capacity, "hold_seconds": hold_seconds}, process, parse_quota, headers=self._admin,
                    name="PUT quota")

    def read_quota(self, quota_id: str, *, process: Any = 0) -> Op:
        return call(self.history, self.transport, "read_quota", {"quota_id": quota_id}, "GET",
                    f"{self.base}/quotas/{quota_id}", None, process, parse_quota, name="GET quota")

    def reserve(self, quota_id: str, buyer_id: str, quantity: int, request_id: str, *, process: Any = 0,
                intended_time: float | None = None) -> Op:
        args = {"quota_id": quota_id, "buyer_id": buyer_id, "quantity": quantity, "request_id": request_id}
        body = {"buyer_id": buyer_id, "quantity": quantity, "request_id": request_id}
        return call(self.history, self.transport, "reserve", args, "POST", f"{self.base}/quotas/{quota_id}/reservations",
                    body, process, parse_reservation, intended_time=intended_time, name="POST reserve")

    def confirm(self, reservation_id: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return call(self.history, self.transport, "confirm", {"reservation_id": reservation_id}, "POST",
                    f"{self.base}/reservations/{reservation_id}/confirm", None, process, parse_reservation,
                    intended_time=intended_time, name="POST confirm")

    def cancel(self, reservation_id: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return call(self.history, self.transport, "cancel", {"reservation_id": reservation_id}, "POST",
                    f"{self.base}/reservations/{reservation_id}/cancel", None, process, parse_reservation,
                    intended_time=intended_time, name="POST cancel")

    def get_reservation(self, reservation_id: str, *, process: Any = 0) -> Op:
        return call(self.history, self.transport, "get_reservation", {"reservation_id": reservation_id}, "GET",
                    f"{self.base}/reservations/{reservation_id}", None, process, parse_reservation,
                    name="GET reservation")


def parse_quota(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise TypeError(f"expected a JSON object, got {type(doc).__name__}")
    out = {}
    for k in _QUOTA_FIELDS:
        v = doc[k]
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"{k} must be an integer, got {v!r}")
        out[k] = v
    out["quota_id"] = doc.get("quota_id")
    return out


def parse_reservation(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise TypeError(f"expected a JSON object, got {type(doc).__name__}")
    for k in _RES_FIELDS:
        doc[k]  # noqa: B018  (KeyError names the missing field)
    if not isinstance(doc["reservation_id"], str) or not doc["reservation_id"]:
        raise TypeError(f"reservation_id must be a non-empty string, got {doc['reservation_id']!r}")
    if doc["status"] not in _STATUSES:
        raise ValueError(f"status must be one of {_STATUSES}, got {doc['status']!r}")
    if not isinstance(doc["quantity"], int):
        raise TypeError(f"quantity must be an integer, got {doc['quantity']!r}")
    out = {k: doc.get(k) for k in _RES_KEEP}  # what the checks read; keeps histories small
    out["expires_at"] = parse_time(doc["expires_at"])
    return out


def parse_time(value: Any) -> float:
    """RFC 3339 (the contract) or epoch seconds, to epoch seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str):
        raise TypeError(f"expires_at must be an RFC 3339 string, got {value!r}")
    dt = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    if dt.tzinfo is None:
        raise ValueError(f"expires_at must carry a time zone (RFC 3339), got {value!r}")
    return dt.timestamp()


# -- plugging a user's driver ----------------------------------------------------------------


def load_driver(spec: str, **kwargs: Any) -> TicketsDriver:
    """``package.module:ClassName`` -> an instance built with ``kwargs`` (e.g. base_url)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise DriverSpecError("--driver", "'package.module:ClassName'", spec,
                              "Name the module and the class, e.g. mypkg.drivers:MyTickets.")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise DriverSpecError("--driver", "an importable class", spec, f"Import failed: {e}.") from None
    driver = cls(**kwargs)
    missing = [m for m in ("put_quota", "read_quota", "reserve", "confirm", "cancel", "get_reservation", "history")
               if not hasattr(driver, m)]
    if missing:
        raise DriverSpecError("--driver", "a class with the TicketsDriver methods", spec,
                              f"It lacks {', '.join(missing)}.")
    return driver


# -- the workload ----------------------------------------------------------------------------


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
                             schedule: list[int], *, retry_budget: int = 3) -> tuple[Any, Any]:
    """Reservations of ``quantities`` taken from a queue by ``workers``, stepped by ``schedule``.

    Returns (scheduler, core): ``scheduler.history`` is judged by the tickets checks and
    ``scheduler.render()`` is the interleaving, one line a step.
    """
    from targets.tickets import InMemoryStore, TicketError, TicketsCore
    from targets.tickets.core import Wait

    from ..interleave import Scheduler

    clock = VirtualClock()
    core = TicketsCore(InMemoryStore(), clock, policy=policy, retry_budget=retry_budget,  # type: ignore[arg-type]
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
    sched = Scheduler(workers, queue, classify, is_wait=lambda s: isinstance(s, Wait))
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
