"""An example staging ticket shop whose HTTP API is NOT peakproof's tickets contract.

It stands in for "a real company's" service in the driver example: the semantics are the
reference design's (targets/tickets/core.py: a capped inventory, holds of 1..10 seats that
lapse after a hold window, idempotent holds, purchase and cancel), but the shape differs on
purpose (paths, field names, a +03:00 clock, ISO 8601 durations, 410 for sold out,
``{"problem": ...}`` errors), so a peakproof user has to write a driver to adapt it.

    python examples/tickets/service.py [--port 0] [--api-key KEY] [--racy]

``--racy`` is the broken variant: a hold checks the free count under the lock but writes
the new count outside it, so concurrent holds oversell. Standard library only; binds
127.0.0.1 only. In-process use: ``server, url = serve(); ...; server.shutdown()``.
"""

from __future__ import annotations

import argparse
import heapq
import hmac
import json
import re
import signal
import sys
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

BASE = "/api/v2"
MAX_COUNT = 10  # the reference's DEFAULT_MAX_PER_REQUEST
MAX_HOLD_SECONDS = 86_400.0  # the reference accepts hold windows in (0, 86400]
MAX_ID = 200  # ids (event, customer, idempotency key) are 1..200 characters, as in the reference
MAX_BODY = 64 * 1024
TZ = timezone(timedelta(hours=3))  # the company's clock; peakproof's contract speaks UTC
_DURATION = re.compile(r"P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?")


class Problem(Exception):
    def __init__(self, status: int, type_: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.type, self.detail = status, type_, detail


def parse_duration(text: object) -> float:
    """ISO 8601 duration (PT120S, PT0.5S, PT2M, P1D...) to seconds."""
    m = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if m is None or not any(m.groups()) or text.endswith("T"):
        raise Problem(422, "invalid", f"hold_for must be an ISO 8601 duration like PT120S; got {text!r:.60}")
    d, h, mi, s = (float(g or 0) for g in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + s


def _text(doc: dict, name: str) -> str:
    v = doc.get(name)
    if type(v) is not str or not 0 < len(v) <= MAX_ID:
        raise Problem(422, "invalid", f"{name} must be a string of 1 to {MAX_ID} characters")
    return v


class Event:
    """One event's inventory: counters kept in step with its holds, under Shop.lock."""

    def __init__(self, name: str, seats: int, hold_for: float) -> None:
        self.name, self.total, self.hold_for = name, seats, hold_for
        self.free, self.on_hold, self.purchased = seats, 0, 0
        self.holds: dict[str, dict] = {}  # id -> hold
        self.by_key: dict[tuple[str, str], dict] = {}  # (customer, idempotency key) -> hold
        self.expiries: list[tuple[float, str]] = []  # heap: lapses are found in O(log n), not by a scan


class Shop:
    """All state, behind one lock: every check and the write it justifies happen together."""

    def __init__(self, racy: bool = False, clock=time.time) -> None:
        self.racy, self.clock = racy, clock
        self.lock = threading.Lock()
        self.events: dict[str, Event] = {}
        self.holds: dict[str, dict] = {}

    # Caller holds the lock. Lapsed holds go back to free here, lazily, before anything reads.
    def _expire(self, ev: Event, now: float) -> None:
        while ev.expiries and ev.expiries[0][0] <= now:
            hold = ev.holds.get(heapq.heappop(ev.expiries)[1])
            if hold is not None and hold["state"] == "ON_HOLD":
                hold["state"] = "RELEASED"
                ev.on_hold -= hold["count"]
                ev.free += hold["count"]

    def _event(self, name: str) -> Event:
        ev = self.events.get(name)
        if ev is None:
            raise Problem(404, "no-such-event", f"no event {name!r}; create it with PUT {BASE}/events/{{event}}/inventory")
        return ev

    def _hold(self, hold_id: str) -> tuple[Event, dict]:
        hold = self.holds.get(hold_id)
        if hold is None:
            raise Problem(404, "no-such-hold", f"no hold {hold_id!r}")
        ev = hold["ev"]  # its own event object: a racy write may land after a reset
        self._expire(ev, self.clock())
        return ev, hold

    @staticmethod
    def inventory(ev: Event) -> dict:
        return {"event": ev.name, "total": ev.total, "free": ev.free, "on_hold": ev.on_hold, "purchased": ev.purchased}

    def put_inventory(self, name: str, doc: dict) -> dict:
        seats, hold_for = doc.get("seats"), parse_duration(doc.get("hold_for", "PT120S"))
        if type(seats) is not int or seats < 0:
            raise Problem(422, "invalid", f"seats must be an integer >= 0; got {seats!r:.60}")
        if not 0 < hold_for <= MAX_HOLD_SECONDS:
            raise Problem(422, "invalid", "hold_for must be more than 0 and at most P1D")
        if not 0 < len(name) <= MAX_ID:
            raise Problem(422, "invalid", f"an event id is 1 to {MAX_ID} characters")
        with self.lock:
            old = self.events.get(name)
            for hold_id in old.holds if old else ():  # a reset forgets the event's holds
                self.holds.pop(hold_id, None)
            ev = self.events[name] = Event(name, seats, hold_for)
            return self.inventory(ev)

    def get_inventory(self, name: str) -> dict:
        with self.lock:
            ev = self._event(name)
            self._expire(ev, self.clock())
            return self.inventory(ev)

    def hold(self, name: str, doc: dict) -> tuple[dict, bool]:
        """Returns (HOLD document, created); created False is a replay of the same key."""
        count = doc.get("count")
        if type(count) is not int or not 1 <= count <= MAX_COUNT:  # type(): True is not a count
            raise Problem(422, "invalid", f"count must be an integer from 1 to {MAX_COUNT}; got {count!r:.60}")
        customer, key = _text(doc, "customer"), _text(doc, "idempotency_key")
        with self.lock:
            ev = self._event(name)
            now = self.clock()
            self._expire(ev, now)
            prior = ev.by_key.get((customer, key))
            if prior is not None:  # checked before stock: a retry after the sell-out still gets its hold
                if prior["count"] != count:
                    raise Problem(422, "idempotency-key-reused",
                                  f"idempotency_key {key!r} was used for count {prior['count']}; got {count}")
                return self.view(prior), False
            free = ev.free
            if free < count:
                raise Problem(410, "sold-out", f"only {free} seats free; asked {count}")
            if not self.racy:
                return self.view(self._write_hold(ev, free, customer, key, count, now)), True
        # --racy: the write happens outside the lock, from a stale read (a lost update);
        # the sleep widens the window so concurrent holds all see the same free count.
        time.sleep(0.001)
        return self.view(self._write_hold(ev, free, customer, key, count, now)), True

    def _write_hold(self, ev: Event, free: int, customer: str, key: str, count: int, now: float) -> dict:
        hold = {"id": uuid.uuid4().hex, "event": ev.name, "customer": customer, "count": count,
                "state": "ON_HOLD", "expires_at": now + ev.hold_for, "ev": ev}
        ev.free = free - count
        ev.on_hold += count
        ev.holds[hold["id"]] = ev.by_key[(customer, key)] = self.holds[hold["id"]] = hold
        heapq.heappush(ev.expiries, (hold["expires_at"], hold["id"]))
        return hold

    def purchase(self, hold_id: str) -> dict:
        with self.lock:
            ev, hold = self._hold(hold_id)
            state = hold["state"]
            if state == "ON_HOLD":  # live: _hold() just released it if its window had passed
                hold["state"] = "PURCHASED"
                ev.on_hold -= hold["count"]
                ev.purchased += hold["count"]
            elif state == "RELEASED":
                raise Problem(409, "hold-expired", f"hold {hold_id} expired at {_stamp(hold['expires_at'])}")
            elif state == "CANCELLED":
                raise Problem(409, "hold-cancelled", f"hold {hold_id} was cancelled")
            return self.view(hold)  # PURCHASED again is a replay, as in the reference

    def cancel(self, hold_id: str) -> dict:
        """As the reference: a live hold or a purchase can be cancelled (seats go back once)."""
        with self.lock:
            ev, hold = self._hold(hold_id)
            state = hold["state"]
            if state in ("ON_HOLD", "PURCHASED"):
                hold["state"] = "CANCELLED"
                if state == "ON_HOLD":
                    ev.on_hold -= hold["count"]
                else:
                    ev.purchased -= hold["count"]
                ev.free += hold["count"]
            elif state == "RELEASED":
                raise Problem(409, "hold-expired", f"hold {hold_id} expired; nothing to cancel")
            return self.view(hold)  # CANCELLED again is a replay

    def get_hold(self, hold_id: str) -> dict:
        with self.lock:
            return self.view(self._hold(hold_id)[1])

    def view(self, hold: dict) -> dict:
        """The HOLD document, built under the lock so it is the state this request left."""
        out = {k: hold[k] for k in ("id", "event", "customer", "count", "state")}
        if out["state"] == "ON_HOLD" and hold["expires_at"] <= self.clock():
            out["state"] = "RELEASED"  # past its window, even if nothing has swept it yet
        out["expires"] = _stamp(hold["expires_at"])
        return out


def _stamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, TZ).isoformat(timespec="microseconds")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every answer carries Content-Length
    disable_nagle_algorithm = True  # head and body leave in two writes: no 40 ms wait for a delayed ACK
    server_version = "TicketShop/2"

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per request would cost more than the request under load

    def do_GET(self) -> None: self._dispatch("GET")
    def do_PUT(self) -> None: self._dispatch("PUT")
    def do_POST(self) -> None: self._dispatch("POST")
    def do_DELETE(self) -> None: self._dispatch("DELETE")
    def do_PATCH(self) -> None: self._dispatch("PATCH")  # a JSON 405/404, not http.server's HTML 501

    def _dispatch(self, method: str) -> None:
        try:
            status, doc = self._route(method)
        except Problem as p:
            status, doc = p.status, {"problem": {"type": p.type, "detail": p.detail}}
        except Exception as e:  # a bug answers 500 and the connection stays usable
            status, doc = 500, {"problem": {"type": "internal", "detail": f"{type(e).__name__}: {e}"}}
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if status == 405:
            self.send_header("Allow", self._allow)
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> dict:
        self._body_read = True
        try:
            doc = json.loads(self.rfile.read(self._length) or b"null")
        except ValueError:  # also bad UTF-8
            raise Problem(422, "invalid", "the body must be a JSON object") from None
        if not isinstance(doc, dict):
            raise Problem(422, "invalid", "the body must be a JSON object")
        return doc

    def _route(self, method: str) -> tuple[int, dict]:
        self._body_read = False
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            raise Problem(411, "length-required", "send a Content-Length, not a chunked body")
        try:
            self._length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self._length = -1
        if not 0 <= self._length <= MAX_BODY:
            self.close_connection = True  # the unread body would be parsed as the next request
            raise Problem(413, "too-large", f"a body is 0 to {MAX_BODY} bytes, with a valid Content-Length")
        try:
            return self._answer(method)
        finally:
            if not self._body_read and self._length:
                self.rfile.read(self._length)  # drain what was not read, or keep-alive desyncs

    def _answer(self, method: str) -> tuple[int, dict]:
        shop: Shop = self.server.shop  # type: ignore[attr-defined]
        path = urlsplit(self.path).path
        if not (path + "/").startswith(BASE + "/"):
            raise Problem(404, "no-such-route", f"no route {path!r}")
        parts = [unquote(p) for p in path[len(BASE):].strip("/").split("/")]  # %2F stays in its id
        shape = tuple("*" if i % 2 else p for i, p in enumerate(parts))
        routes = {("events", "*", "inventory"): "GET PUT", ("events", "*", "holds"): "POST",
                  ("holds", "*"): "GET DELETE", ("holds", "*", "purchase"): "POST"}
        if shape not in routes or "" in parts:
            raise Problem(404, "no-such-route", f"no route {path!r}")
        if method not in routes[shape].split():
            self._allow = ", ".join(routes[shape].split())
            raise Problem(405, "method-not-allowed", f"{path} accepts {self._allow}")
        ident = parts[1]
        if shape[0] == "events":
            if method == "PUT":
                key = self.server.api_key  # type: ignore[attr-defined]
                if key is not None and not hmac.compare_digest(self.headers.get("X-Api-Key", "").encode(), key.encode()):
                    raise Problem(401, "unauthorized", "PUT inventory needs the X-Api-Key header")
                return 201, shop.put_inventory(ident, self._body())
            if method == "GET":
                return 200, shop.get_inventory(ident)
            hold, created = shop.hold(ident, self._body())
            return (201 if created else 200), {"hold": hold}
        act = {"GET": shop.get_hold, "DELETE": shop.cancel, "POST": shop.purchase}[method]
        return 200, {"hold": act(ident)}


class Server(ThreadingHTTPServer):
    daemon_threads = True  # open keep-alive connections must not block exit
    request_queue_size = 1024  # socketserver's default backlog of 5 resets connections at an opening

    def handle_error(self, request, client_address) -> None:  # type: ignore[no-untyped-def]
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client hanging up is no bug
            super().handle_error(request, client_address)


def serve(port: int = 0, api_key: str | None = None, racy: bool = False) -> tuple[Server, str]:
    """Start the shop on 127.0.0.1 in a daemon thread; ``server.shutdown()`` stops it."""
    server = Server(("127.0.0.1", port), Handler)  # bound and listening on return
    server.shop, server.api_key = Shop(racy=racy), api_key  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, name="ticket-shop", daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}{BASE}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port")
    ap.add_argument("--api-key", default=None, help="required as X-Api-Key on PUT inventory")
    ap.add_argument("--racy", action="store_true", help="the broken variant: holds oversell")
    args = ap.parse_args(argv)
    stop = threading.Event()
    # serve_forever runs on its own thread: shutdown() from a handler on the same thread would deadlock.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server, url = serve(args.port, args.api_key, args.racy)
    print(f"listening on {url}", flush=True)
    while not stop.wait(0.5):  # a timed wait lets the signal handler run promptly
        pass
    server.shutdown()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
