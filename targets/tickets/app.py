"""The tickets core served over HTTP: a raw ASGI app plus its real-time adapters.

Lean on purpose: no framework, because the sold-out path must run close to what a bare
ASGI app reaches (the opening sends 20,000 requests/s and 196,429 of them are refused).
That path, and replays, are decided on the event loop without touching the quota row;
everything that reads or writes the row runs on a thread pool, so concurrency is real and
the locking policy, not the event loop, is what keeps the counts right.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Callable

from .._asgi import AsgiApp, json_integer, route_table, Reply, Request, rfc3339
from .._background import BackgroundLoop, LoopHealth
from .core import FAULTS, InvalidRequest, Reservation, TicketsCore

OPENAPI_PATH = Path(__file__).with_name("openapi.json")

Scope = dict[str, Any]

_ROUTES = route_table("""
    PUT   /quotas/{quota}                       put_quota
    GET   /quotas/{quota}                       get_quota
    POST  /quotas/{quota}/reservations          reserve
    GET   /quotas/{quota}/stats                 quota_stats
    POST  /reservations/{reservation}/confirm   confirm
    POST  /reservations/{reservation}/cancel    cancel
    GET   /reservations/{reservation}           get_reservation
    GET   /_arrivals                            arrivals
    POST  /_nemesis                             nemesis
""")


def reservation_json(r: Reservation) -> dict[str, Any]:
    return {"reservation_id": r.reservation_id, "quota_id": r.quota_id, "buyer_id": r.buyer_id,
            "request_id": r.request_id, "quantity": r.quantity, "status": r.status,
            "expires_at": rfc3339(r.expires_at)}


class TicketsApp(AsgiApp):
    """ASGI application for one :class:`TicketsCore`, mounted under ``prefix``."""

    api, routes, openapi_path = "tickets", _ROUTES, OPENAPI_PATH

    def __init__(self, core: TicketsCore, *, admin_token: str | None = None, prefix: str = "/tickets",
                 threads: int = 32, default_hold_seconds: float = 120.0,
                 reopen: Callable[[], TicketsCore] | None = None) -> None:
        super().__init__(prefix, admin_token=admin_token, threads=threads, thread_name="tickets")
        self.core = core
        self.reopen = reopen  # a new core over the same database: what a restarted process would load
        self.on_restart: list[Callable[[TicketsCore], None]] = []
        self.restarts = 0
        self.default_hold_seconds = default_hold_seconds
        self.loops = LoopHealth()  # the background loops' errors, shown by GET /health
        self.requests_seen = 0  # independent arrival counter (target side)
        self.arrivals_by_second: dict[int, int] = {}  # wall-clock second -> requests received
        self.arrivals_by_peer: dict[str, int] = {}  # the client's address -> requests received
        self._batcher = ReservationQueue(self)

    def on_request(self, scope: Scope) -> None:
        self.requests_seen += 1
        sec = int(time.time())
        self.arrivals_by_second[sec] = self.arrivals_by_second.get(sec, 0) + 1
        client = scope.get("client")
        peer = client[0] if client else "?"
        self.arrivals_by_peer[peer] = self.arrivals_by_peer.get(peer, 0) + 1

    def on_shutdown(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)

    def health(self) -> dict[str, Any]:
        return {"status": "ok", "policy": self.core.policy, **self.loops.snapshot()}

    # -- handlers ------------------------------------------------------------------------

    async def _put_quota(self, req: Request, quota_id: str) -> Reply:
        self.require_admin(req, "PUT /quotas")
        doc = req.json("capacity")
        hold = doc.get("hold_seconds", self.default_hold_seconds)
        row = await self.in_pool(self.core.put_quota, quota_id, json_integer(doc["capacity"]), hold)
        return 200, _quota_json(row)

    async def _get_quota(self, req: Request, quota_id: str) -> Reply:
        return 200, _quota_json(await self.in_pool(self.core.get_quota, quota_id))

    async def _quota_stats(self, req: Request, quota_id: str) -> Reply:
        # Not part of the contract: the reference target's own counters, for the harness.
        return 200, {"quota_id": quota_id, "lock_acquisitions": self.core.lock_acquisitions(quota_id),
                     "row_reads": self.core.row_reads(quota_id),
                     "fast_rejections": self.core.stats.fast_rejections,
                     "conflicts": self.core.stats.conflicts, "requests_seen": self.requests_seen}

    async def _reserve(self, req: Request, quota_id: str) -> Reply:
        doc = req.json("buyer_id", "quantity", "request_id")
        quantity = json_integer(doc["quantity"])
        args = (quota_id, doc["buyer_id"], quantity, doc["request_id"])
        # Decided on the event loop when possible (sold out, replay, bad input: no lock,
        # no row); anything that may block (the row, expiring due holds) goes to a thread.
        replay = self.core.reserve_fast(*args, may_block=False)
        if replay is not None:
            return 200, reservation_json(replay)
        if self.core.policy == "pessimistic":
            outcome = await self._batcher.submit(quota_id, (doc["buyer_id"], quantity, doc["request_id"]))
            if isinstance(outcome, BaseException):  # a TicketError answers 4xx/503; anything else is a 500
                raise outcome
            res, created = outcome
        else:  # the seed's alternatives decide one request per thread, races and all
            res, created = await self.in_pool(self.core.reserve, *args)
        return (201 if created else 200), reservation_json(res)

    async def _confirm(self, req: Request, rid: str) -> Reply:
        return 200, reservation_json(await self.in_pool(self.core.confirm, rid))

    async def _cancel(self, req: Request, rid: str) -> Reply:
        return 200, reservation_json(await self.in_pool(self.core.cancel, rid))

    async def _get_reservation(self, req: Request, rid: str) -> Reply:
        return 200, reservation_json(await self.in_pool(self.core.get_reservation, rid))

    async def _nemesis(self, req: Request) -> Reply:
        """Not part of the contract: the reference's fault hook, for the harness's nemesis.

        ``{"fault": "stall", "seconds": s}``: the next lock holder stalls s seconds between its read
        and its write (``"on": "reserve"``, ``"confirm"``, ``"cancel"`` or ``"expire"``: the next holder
        doing that); ``{"fault": "die"}``: it dies there (no write, no release: the lease frees the
        row); ``{"fault": "restart"}``: the process's memory is dropped and rebuilt from its database
        (the socket stays), and work in flight dies before it writes."""
        self.require_admin(req, "POST /_nemesis")
        doc = req.json("fault")
        fault = doc["fault"]
        if fault == "restart":
            if self.reopen is None:
                raise InvalidRequest("this target was built without a database to restart from")
            old = self.core
            new = await self.in_pool(self.reopen)  # reads every quota and held reservation back
            old.halt()
            self.core = new
            for hook in self.on_restart:
                hook(new)
            self.restarts += 1
            return 200, {"fault": "restart", "restarts": self.restarts,
                         "quotas_loaded": len(new.store.load_quotas())}
        if fault not in FAULTS:
            raise InvalidRequest(f"fault must be one of {', '.join(FAULTS + ('restart',))}; got {fault!r:.60}")
        self.core.arm_fault(fault, doc.get("seconds", 0.0), doc.get("on"))
        return 200, {"fault": fault, "seconds": doc.get("seconds", 0.0), "on": doc.get("on"),
                     "lease_seconds": self.core.lease_seconds}

    async def _arrivals(self, req: Request) -> Reply:
        # Not part of the contract: requests received per wall-clock second, counted by the
        # target itself, so the harness's offered load can be checked independently.
        return 200, {"total": self.requests_seen, "by_second": {str(k): v for k, v in self.arrivals_by_second.items()},
                     "by_peer": self.arrivals_by_peer}



def _quota_json(row: Any) -> dict[str, Any]:
    return {"quota_id": row.quota_id, "capacity": row.capacity, "available": row.available,
            "held": row.held, "sold": row.sold, "hold_seconds": row.hold_seconds}


class ReservationQueue:
    """The queue in front of the quota row (the seed's queue-based load levelling).

    Requests that need the row wait here; one drain at a time takes everything queued
    for a quota and decides it under one lock and one transaction
    (:meth:`TicketsCore.reserve_many`). While a batch is in the database the next one
    gathers, so at sell-out the row sees a few transactions, not thousands.
    """

    max_batch = 512

    def __init__(self, app: "TicketsApp") -> None:
        self.app = app
        self.pending: dict[str, list[tuple[tuple[str, int, str], asyncio.Future[Any]]]] = {}
        self.draining = False

    async def submit(self, quota_id: str, request: tuple[str, int, str]) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending.setdefault(quota_id, []).append((request, fut))
        if not self.draining:
            self.draining = True
            asyncio.get_running_loop().create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        try:
            while self.pending:
                quota_id = next(iter(self.pending))
                queue = self.pending[quota_id]
                batch, rest = queue[:self.max_batch], queue[self.max_batch:]
                if rest:
                    self.pending[quota_id] = rest
                else:
                    del self.pending[quota_id]
                decided = asyncio.get_running_loop().create_task(self._decide(quota_id, batch))
                # A holder that stalls past its lease must not hold up the queue behind it: the
                # next batch goes on, takes the row when the lease runs out, and the stalled one's
                # write is fenced off. Its waiters still get its own answer.
                await asyncio.wait({decided}, timeout=self.app.core.lease_seconds)
        finally:
            self.draining = False

    async def _decide(self, quota_id: str, batch: list[tuple[tuple[str, int, str], asyncio.Future[Any]]]) -> None:
        try:
            results = await self.app.in_pool(self.app.core.reserve_many, quota_id, [r for r, _ in batch])
        except Exception as e:  # noqa: BLE001 - every waiter gets the failure
            results = [e] * len(batch)
        for (_, fut), outcome in zip(batch, results):
            if not fut.done():
                fut.set_result(outcome)


class Supervisor(BackgroundLoop):
    """Releases expired holds in real time (the seed's scheduler-agent-supervisor)."""

    def __init__(self, core: TicketsCore, interval: float = 0.1, health: LoopHealth | None = None) -> None:
        super().__init__("tickets-supervisor", 1, health)
        self.core = core
        self.interval = interval

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.core.release_expired()
            except Exception as e:  # logged and counted (GET /health); the next round retries
                self.health.failed("expiry-supervisor", e)
                time.sleep(self.interval)
