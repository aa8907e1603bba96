"""The notifications core served over HTTP, with its real-time adapters.

* The ASGI app accepts requests and answers each once it is durable (group commits into SQLite,
  ``store.GroupCommitStore``), and answers reads from memory.
* The dispatcher thread asks the core for due provider calls, urgent first, and hands
  each to its channel's bulkhead: a separate worker pool per channel, sized by the seed's
  peak call rates (954.86 / 434.03 / 347.22 per s), so a slow channel cannot stall the
  others. A full bulkhead leaves the notification queued (its priority kept).
* A worker calls ``POST {provider}/{channel}`` (http.client, a kept-alive connection per worker)
  with an ``Idempotency-Key`` header and maps
  the answer: 2xx ok; 429 / 5xx / a refused connection transient (certainly not
  delivered); a timeout or a reset unknown (maybe delivered: the core retries the same
  channel with the same key); any other 4xx permanent.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import deque
from urllib.parse import urlsplit
from pathlib import Path
from typing import Any

from .._asgi import AsgiApp, route_table, Reply, Request, rfc3339
from .._background import BackgroundLoop
from .core import CHANNELS, Call, NotificationsCore

OPENAPI_PATH = Path(__file__).with_name("openapi.json")
SHARES = {"push": 0.55, "sms": 0.25, "email": 0.20}  # BI4: bulkheads sized by peak call share


def notification_json(n: Any) -> dict[str, Any]:
    return {"notification_id": n.notification_id, "event_id": n.event_id, "recipient_id": n.recipient_id,
            "priority": n.priority, "status": n.status, "channel": n.channel, "accepted_at": rfc3339(n.accepted_at),
            "delivered_at": None if n.delivered_at is None else rfc3339(n.delivered_at),
            "attempts": [{"channel": a.channel, "outcome": a.outcome, "at": rfc3339(a.at)} for a in n.attempts]}


class Dispatcher(BackgroundLoop):
    """Moves due calls from the core to the channels' bulkheads and their outcomes back.

    A bulkhead is a channel's workers and two lanes (urgent, reminder) they pull from, urgent
    first, the moment they are free: priority holds all the way to the provider. The lanes are
    short (a worker's worth each), so most waiting happens in the core's priority queue.
    """

    def __init__(self, core: NotificationsCore, provider_url: str, *, workers: int = 32,
                 call_timeout: float = 2.0) -> None:
        super().__init__("dispatcher")
        self.core = core
        self.provider_url = provider_url.rstrip("/")
        parts = urlsplit(self.provider_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"the provider URL must be http://host[:port][/path]; got {provider_url!r}")
        self._host, self._port, self._path = parts.hostname, parts.port or 80, parts.path.rstrip("/")
        self.call_timeout = call_timeout
        sizes = {c: max(2, round(workers * SHARES[c])) for c in CHANNELS}
        self.capacity = sizes
        self.in_flight = {c: 0 for c in CHANNELS}  # handed to the bulkhead: in a lane or on a worker
        self.outcomes: dict[str, dict[str, int]] = {c: {} for c in CHANNELS}
        self._count = threading.Lock()
        self._local = threading.local()
        self._lanes: dict[str, dict[str, deque[Call]]] = {c: {"urgent": deque(), "reminder": deque()}
                                                          for c in CHANNELS}
        self._ready = {c: threading.Condition(self._count) for c in CHANNELS}
        self._workers = [threading.Thread(target=self._work, args=(c,), name=f"bulkhead-{c}-{i}", daemon=True)
                         for c in CHANNELS for i in range(sizes[c])]
        for t in self._workers:
            t.start()

    def _close(self) -> None:
        with self._count:
            for cond in self._ready.values():
                cond.notify_all()

    def _room(self, channels: list[str]) -> bool:
        """Room in every bulkhead of a round, taken all at once or not at all (a round refused on
        one channel must not hold slots on the others)."""
        with self._count:
            # as many waiting as running, no more: a deeper buffer behind the priority decision
            # would make an urgent call wait behind every reminder already handed over
            if any(self.in_flight[c] >= self.capacity[c] * 2 for c in channels):
                return False
            for c in channels:
                self.in_flight[c] += 1
            return True

    def _release(self, channels: list[str]) -> None:
        with self._count:
            for c in channels:
                self.in_flight[c] -= 1

    def _hand_over(self, call: Call) -> None:
        with self._count:
            self._lanes[call.channel]["urgent" if call.priority == "urgent" else "reminder"].append(call)
            self._ready[call.channel].notify()

    def _work(self, channel: str) -> None:
        lanes, ready = self._lanes[channel], self._ready[channel]
        while not self._stop.is_set():
            with self._count:
                while not (lanes["urgent"] or lanes["reminder"]) and not self._stop.is_set():
                    ready.wait(0.5)
                if self._stop.is_set():
                    return
                call = (lanes["urgent"] or lanes["reminder"]).popleft()
            self._call(call)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                calls = self.core.due_calls(time.time(), limit=256, room=self._room, release=self._release)
            except Exception as e:  # logged and counted (GET /health); the next turn retries
                self.health.failed("dispatcher", e)
                calls = []
                self._stop.wait(0.05)
            for call in calls:
                self._hand_over(call)
            if not calls:
                nxt = self.core.next_due()
                wait = 0.05 if nxt is None else min(0.05, max(0.0, nxt - time.time()))
                self._wake.wait(wait)
                self._wake.clear()

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:  # one kept-alive connection per bulkhead worker
            conn = self._local.conn = http.client.HTTPConnection(self._host, self._port, timeout=self.call_timeout)
        return conn

    def _post(self, call: Call) -> str:
        """One provider call; its outcome as the core knows them (ok, transient, permanent, unknown)."""
        body = json.dumps({"to": call.address, "idempotency_key": call.idempotency_key, "event_id": call.event_id,
                           "recipient_id": call.recipient_id, "message": call.message}).encode()
        headers = {"Content-Type": "application/json", "Idempotency-Key": call.idempotency_key}
        for attempt in (1, 2):
            conn = self._connection()
            reused = conn.sock is not None
            if not reused:
                try:
                    conn.connect()
                except OSError:  # refused or timed out connecting: certainly not delivered
                    conn.close()
                    return "transient"
            try:
                conn.request("POST", f"{self._path}/{call.channel}", body, headers)
                resp = conn.getresponse()
                resp.read()
                code = resp.status
                return "ok" if 200 <= code < 300 else "transient" if code == 429 or code >= 500 else "permanent"
            except TimeoutError:
                conn.close()
                return "unknown"  # sent, no answer: maybe delivered
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                conn.close()
                if reused and attempt == 1:
                    continue  # the kept-alive connection had been closed: once more on a new one (same key)
                return "unknown"
            except (OSError, http.client.HTTPException):
                conn.close()
                return "unknown"
        return "unknown"

    def _call(self, call: Call) -> None:
        outcome = "unknown"
        try:
            outcome = self._post(call)
        except Exception:  # noqa: BLE001 - whatever happened, the answer is unknown
            outcome = "unknown"
        finally:
            with self._count:
                self.in_flight[call.channel] -= 1
                self.outcomes[call.channel][outcome] = self.outcomes[call.channel].get(outcome, 0) + 1
            try:
                self.core.complete(call, outcome, time.time())  # type: ignore[arg-type]
            finally:
                self._wake.set()


_ROUTES = route_table("""
    PUT   /recipients/{recipient}        put_recipient
    POST  /notifications                 notify
    GET   /notifications/{notification}  get
    GET   /_breakers                     breakers
""")

class NotificationsApp(AsgiApp):
    api, routes, openapi_path = "notifications", _ROUTES, OPENAPI_PATH

    def __init__(self, core: NotificationsCore, dispatcher: Dispatcher, *, prefix: str = "/notifications",
                 threads: int = 16) -> None:
        super().__init__(prefix, threads=threads, thread_name="notifications")
        self.core, self.dispatcher = core, dispatcher
        self._batch: tuple[Any, Any] | None = None  # the group commit being waited for, and its loop future
        # in memory, accepting is microseconds of work: no thread hop (the old SQLite path still needs one)
        self._inline = hasattr(core.store, "barrier")

    def on_shutdown(self) -> None:
        self.dispatcher.stop()

    def health(self) -> dict[str, Any]:
        return {"status": "ok", "policy": self.core.policy, **self.dispatcher.health.snapshot()}

    async def _put_recipient(self, req: Request, recipient_id: str) -> Reply:
        doc = req.json("channels")
        r = await self.in_pool(self.core.put_recipient, recipient_id, doc["channels"],
                            {k: doc[k] for k in ("push_token", "phone", "email") if k in doc})
        await self.until_durable()
        return 200, {"recipient_id": r.recipient_id, "channels": list(r.channels)}

    async def until_durable(self) -> None:
        """Answer only once what was written is committed (a group commit: one transaction per batch)."""
        barrier = getattr(self.core.store, "barrier", None)
        if barrier is not None:
            import asyncio

            done = barrier()
            if done.done():
                return done.result()
            if self._batch is None or self._batch[0] is not done:  # one loop future per batch, not per request
                self._batch = (done, asyncio.wrap_future(done))
            await asyncio.shield(self._batch[1])

    async def _notify(self, req: Request) -> Reply:
        doc = req.json("event_id", "recipient_id", "priority")
        args = (doc["event_id"], doc["recipient_id"], doc["priority"], doc.get("title", ""), doc.get("body", ""))
        n, created = self.core.accept(*args) if self._inline else await self.in_pool(self.core.accept, *args)
        await self.until_durable()  # a replay too: the first acceptance may still be in the batch being committed
        if created:
            self.dispatcher.wake()
        return (202 if created else 200), notification_json(n)

    async def _get(self, req: Request, notification_id: str) -> Reply:
        n = self.core.get(notification_id) if self._inline else await self.in_pool(self.core.get, notification_id)
        return 200, notification_json(n)

    async def _breakers(self, req: Request) -> Reply:
        # Not part of the contract: the reference target's breakers and bulkheads, for reports.
        return 200, {c: {"state": b.state, "opened": b.opened, "transitions": b.transitions[-200:],
                         "in_flight": self.dispatcher.in_flight[c], "outcomes": self.dispatcher.outcomes[c]}
                     for c, b in self.core.breakers.items()} | {"backlog": self.core.backlog()}
