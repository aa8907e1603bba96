"""The notifications core served over HTTP, with its real-time adapters.

* The ASGI app accepts requests and answers each once it is durable (group commits into SQLite,
  ``store.GroupCommitStore``), and answers reads from memory.
* The dispatcher thread asks the core for due provider calls, urgent first, and hands
  each to its channel's bulkhead: a separate share of the calls in flight per channel, sized by the seed's
  peak call rates (954.86 / 434.03 / 347.22 per s), so a slow channel cannot stall the
  others. A full bulkhead leaves the notification queued (its priority kept).
* The delivery loop (one thread, an event loop) calls ``POST {provider}/{channel}`` over
  kept-alive connections with an ``Idempotency-Key`` header and maps
  the answer: 2xx ok; 429 / 5xx / a refused connection transient (certainly not
  delivered); a timeout or a reset unknown (maybe delivered: the core retries the same
  channel with the same key); any other 4xx permanent.
"""

from __future__ import annotations

import asyncio
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

    A bulkhead is a channel's share of the calls in flight and two lanes (urgent, reminder)
    its free slots pull from, urgent first, the moment a slot frees: priority holds all the
    way to the provider. The lanes are short (a bulkhead's worth each), so most waiting
    happens in the core's priority queue.

    The calls themselves go out from one thread running an event loop (``delivery``), over
    kept-alive connections (one per call in flight at most): a thread and a blocking
    connection a call in flight cost the target more than accepting the notification did
    (32 threads taking turns at the core's lock and the GIL).
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
        self._host_header = (self._host if self._port == 80 else f"{self._host}:{self._port}").encode()
        self.call_timeout = call_timeout
        sizes = {c: max(2, round(workers * SHARES[c])) for c in CHANNELS}
        self.capacity = sizes
        self.in_flight = {c: 0 for c in CHANNELS}  # handed to the bulkhead: in a lane or being called
        self.outcomes: dict[str, dict[str, int]] = {c: {} for c in CHANNELS}
        self._count = threading.Lock()
        # owned by the delivery loop's thread
        self._lanes: dict[str, dict[str, deque[Call]]] = {c: {"urgent": deque(), "reminder": deque()}
                                                          for c in CHANNELS}
        self._calling = {c: 0 for c in CHANNELS}
        self._idle: list[_ProviderConnection] = []
        self._aloop = _new_loop()
        self._delivery = threading.Thread(target=self._deliver, name="delivery", daemon=True)
        self._delivery.start()

    def _deliver(self) -> None:
        asyncio.set_event_loop(self._aloop)
        self._aloop.run_forever()

    def _close(self) -> None:
        if self._aloop.is_running():
            self._aloop.call_soon_threadsafe(self._aloop.stop)
        self._delivery.join(timeout=5)

    def _room(self, channels: list[str]) -> bool:
        """Room in every bulkhead of a round, taken all at once or not at all (a round refused on
        one channel must not hold slots on the others)."""
        with self._count:
            # as many waiting as being called, no more: a deeper buffer behind the priority decision
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

    def _hand_over(self, calls: list[Call]) -> None:
        """(On the delivery loop.) Into their lanes; each bulkhead with a free slot takes the next."""
        touched = set()
        for call in calls:
            self._lanes[call.channel]["urgent" if call.priority == "urgent" else "reminder"].append(call)
            touched.add(call.channel)
        for channel in touched:
            self._pump(channel)

    def _pump(self, channel: str) -> None:
        lanes = self._lanes[channel]
        while self._calling[channel] < self.capacity[channel] and (lanes["urgent"] or lanes["reminder"]):
            call = (lanes["urgent"] or lanes["reminder"]).popleft()
            self._calling[channel] += 1
            self._aloop.create_task(self._call(call))

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                calls = self.core.due_calls(time.time(), limit=256, room=self._room, release=self._release)
            except Exception as e:  # logged and counted (GET /health); the next turn retries
                self.health.failed("dispatcher", e)
                calls = []
                self._stop.wait(0.05)
            if calls:
                self._aloop.call_soon_threadsafe(self._hand_over, calls)
            else:
                # Nothing handed over. Either nothing is due yet (wait until it is), or what is due was
                # held back by full bulkheads: then only a call ending (or a new notification) changes
                # that, and both wake this loop. Asking again at once would spin on the core's lock,
                # and the calls' outcomes wait for that same lock.
                nxt = self.core.next_due()
                now = time.time()
                wait = 0.05 if nxt is None or nxt <= now else min(0.05, nxt - now)
                self._wake.wait(wait)
                self._wake.clear()

    def _request(self, call: Call) -> bytes:
        body = _dumps({"to": call.address, "idempotency_key": call.idempotency_key, "event_id": call.event_id,
                       "recipient_id": call.recipient_id, "message": call.message})
        return (b"POST %s/%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nIdempotency-Key: %s\r\n"
                b"Content-Length: %d\r\n\r\n" % (self._path.encode(), call.channel.encode(), self._host_header,
                                                  call.idempotency_key.encode(), len(body))) + body

    async def _connect(self) -> "_ProviderConnection":
        _, conn = await asyncio.wait_for(
            self._aloop.create_connection(lambda: _ProviderConnection(self._aloop), self._host, self._port),
            self.call_timeout)
        return conn  # type: ignore[return-value]

    async def _post(self, call: Call) -> str:
        """One provider call; its outcome as the core knows them (ok, transient, permanent, unknown)."""
        data = self._request(call)
        for attempt in (1, 2):
            conn = None
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed:
                    break
                conn = None
            reused = conn is not None
            if conn is None:
                try:
                    conn = await self._connect()
                except (OSError, TimeoutError):  # refused or timed out connecting: certainly not delivered
                    return "transient"
            try:
                code = await conn.exchange(data, self.call_timeout)
            except TimeoutError:
                conn.abort()
                return "unknown"  # sent, no answer: maybe delivered
            except _Disconnected as e:
                if reused and attempt == 1 and not e.answered:
                    continue  # the kept-alive connection had been closed: once more on a new one (same key)
                return "unknown"
            except OSError:
                conn.abort()
                return "unknown"
            if conn.keep_alive and not conn.closed:
                self._idle.append(conn)
            else:
                conn.abort()
            return "ok" if 200 <= code < 300 else "transient" if code == 429 or code >= 500 else "permanent"
        return "unknown"

    async def _call(self, call: Call) -> None:
        outcome = "unknown"
        try:
            outcome = await self._post(call)
        except Exception:  # noqa: BLE001 - whatever happened, the answer is unknown
            outcome = "unknown"
        finally:
            with self._count:
                self.in_flight[call.channel] -= 1
                self.outcomes[call.channel][outcome] = self.outcomes[call.channel].get(outcome, 0) + 1
            try:
                self.core.complete(call, outcome, time.time())  # type: ignore[arg-type]
            except Exception as e:  # noqa: BLE001 - logged and counted; the slot is given back all the same
                self.health.failed("delivery", e)
            finally:
                self._calling[call.channel] -= 1
                self._pump(call.channel)
                self._wake.set()


def _new_loop() -> Any:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is a dependency of the targets
        return asyncio.new_event_loop()


def _dumps(doc: Any) -> bytes:
    from .._asgi import _dumps as dumps

    return dumps(doc)


class _Disconnected(OSError):
    """The provider closed the connection; ``answered``: after some of its answer had come."""

    def __init__(self, answered: bool) -> None:
        super().__init__("the provider closed the connection")
        self.answered = answered


class _ProviderConnection(asyncio.Protocol):
    """One kept-alive connection to the providers (an asyncio protocol), one call at a time."""

    def __init__(self, loop: Any) -> None:
        import httptools

        self.loop = loop
        self.transport: Any = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: Any = None
        self.status = 0
        self.keep_alive = True
        self.closed = False
        self.answered = False  # a byte of the current answer has come

    # the protocol
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        import httptools

        self.answered = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._fail(ConnectionError("not an HTTP/1.1 answer"))
            self.abort()

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: BaseException | None) -> None:
        self.closed = True
        self._fail(_Disconnected(self.answered))

    def pause_writing(self) -> None:
        pass

    def resume_writing(self) -> None:
        pass

    # httptools' callbacks
    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.keep_alive = self.parser.should_keep_alive()

    def on_message_complete(self) -> None:
        w, self.waiter = self.waiter, None
        if w is not None and not w.done():
            w.set_result(self.status)

    # the call
    async def exchange(self, data: bytes, timeout: float) -> int:
        """Send one request and wait for its whole answer's status (TimeoutError past ``timeout``)."""
        if self.closed:
            raise _Disconnected(False)
        self.answered, self.status = False, 0
        self.waiter = fut = self.loop.create_future()
        timer = self.loop.call_later(timeout, self._expire, fut)
        self.transport.write(data)
        try:
            return await fut
        finally:
            timer.cancel()

    def _expire(self, fut: Any) -> None:
        if not fut.done():
            self.waiter = None
            fut.set_exception(TimeoutError())

    def _fail(self, exc: BaseException) -> None:
        w, self.waiter = self.waiter, None
        if w is not None and not w.done():
            w.set_exception(exc)

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


_ROUTES = route_table("""
    PUT   /recipients/{recipient}        put_recipient
    POST  /notifications                 notify
    GET   /notifications/{notification}  get
    GET   /_breakers                     breakers
""")

class NotificationsApp(AsgiApp):
    api, routes, openapi_path = "notifications", _ROUTES, OPENAPI_PATH
    # A notification the contract allows (a 1,000-character title, a 20,000-character body) is up to
    # 12 bytes a character in JSON (an escaped astral character): room for it, so no valid one is refused.
    body_limits = {"notify": 512 * 1024}

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
