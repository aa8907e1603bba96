"""An example ticket shop in the shape of a Django REST Framework API (pretix's, say): NOT
peakproof's tickets contract, and shaped like the services real teams run.

* ``Authorization: Token <token>`` on every call (``--token`` for buyers, ``--admin-token``
  for creating and resetting events); 401 / 403 with ``{"detail": ...}`` otherwise.
* Events get ids the shop allocates (``POST /api/v1/events/`` -> ``{"id": 17, ...}``), found
  again by slug (``GET /api/v1/events/?slug=...``, a paginated list); orders get codes the shop
  allocates (``"K3XQ9"``).
* Errors as DRF writes them: ``{"detail": "Not found."}``, or per field, nested in lists:
  ``{"positions": [{"item": ["There is not enough quota available ..."]}]}``.
* ``X-Idempotency-Key``: a repeated key (with the same request) replays the stored answer,
  status and body, refusals included (Stripe's convention); the same key for another request
  is refused (409).
* Lapsed orders are released by an expiry job that runs every 2 seconds: until it has run, a
  lapsed order can still be paid (its seats still count as held). The shop documents it:
  "unpaid orders are released within 3 seconds of their expiry" (``--release-lag 3`` to
  peakproof).

    python examples/drfshop/service.py [--port 0] [--token T] [--admin-token A]

Standard library only; binds 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import hmac
import json
import secrets
import signal
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

BASE = "/api/v1"
MAX_COUNT = 10
MAX_BODY = 64 * 1024
EXPIRY_JOB_EVERY = 2.0  # s between runs of the job that releases lapsed orders
TZ = timezone(timedelta(hours=1))  # the shop's clock (Europe/Berlin in winter)
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ3789"
STATUS = {"pending": "n", "paid": "p", "expired": "e", "canceled": "c"}


class APIError(Exception):
    def __init__(self, status: int, doc: dict) -> None:
        super().__init__(json.dumps(doc))
        self.status, self.doc = status, doc


def detail(status: int, text: str) -> APIError:
    return APIError(status, {"detail": text})


def field_error(field: str, text: str, nested: str | None = None) -> APIError:
    return APIError(400, {field: [{nested: [text]}]} if nested else {field: [text]})


class Event:
    def __init__(self, id_: int, slug: str, size: int, hold_seconds: float) -> None:
        self.id, self.slug, self.size, self.hold_seconds = id_, slug, size, hold_seconds
        self.pending = self.paid = 0
        self.orders: dict[str, dict] = {}

    @property
    def available(self) -> int:
        return self.size - self.pending - self.paid

    def doc(self) -> dict:
        return {"id": self.id, "slug": self.slug, "hold_seconds": self.hold_seconds,
                "quota": {"size": self.size, "available": self.available, "pending": self.pending, "paid": self.paid}}


class Shop:
    """All state behind one lock; the expiry job is the only thing that releases a lapsed order."""

    def __init__(self, clock=time.time) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.events: dict[int, Event] = {}
        self.by_slug: dict[str, Event] = {}
        self.next_id = 1
        self.idempotent: dict[tuple[str, str], tuple[str, int, dict]] = {}  # (token, key) -> (request, status, doc)

    # -- the expiry job --------------------------------------------------------------------------
    def release_lapsed(self) -> int:
        now, released = self.clock(), 0
        with self.lock:
            for ev in self.events.values():
                for order in ev.orders.values():
                    if order["status"] == "n" and order["expires_at"] <= now:
                        order["status"] = "e"
                        ev.pending -= order["count"]
                        released += 1
        return released

    # -- events ----------------------------------------------------------------------------------
    def _event(self, id_: str) -> Event:
        ev = self.events.get(int(id_)) if id_.isdigit() else None
        if ev is None:
            raise detail(404, "Not found.")
        return ev

    @staticmethod
    def _settings(doc: dict) -> tuple[int, float]:
        size, hold = doc.get("quota"), doc.get("hold_seconds", 900)
        if type(size) is not int or size < 0:
            raise field_error("quota", "A valid integer is required." if type(size) is not int else
                              "Ensure this value is greater than or equal to 0.")
        if not isinstance(hold, (int, float)) or isinstance(hold, bool) or not 0 < hold <= 86_400:
            raise field_error("hold_seconds", "Ensure this value is between 0 and 86400.")
        return size, float(hold)

    def create_event(self, doc: dict) -> dict:
        slug = doc.get("slug")
        if not isinstance(slug, str) or not 0 < len(slug) <= 200:
            raise field_error("slug", "This field is required." if slug is None else
                              "Ensure this field has no more than 200 characters.")
        size, hold = self._settings(doc)
        with self.lock:
            if slug in self.by_slug:
                raise field_error("slug", "event with this slug already exists.")
            ev = Event(self.next_id, slug, size, hold)
            self.next_id += 1
            self.events[ev.id] = self.by_slug[slug] = ev
            return ev.doc()

    def reset_event(self, id_: str, doc: dict) -> dict:
        size, hold = self._settings(doc)
        with self.lock:
            old = self._event(id_)
            ev = self.events[old.id] = self.by_slug[old.slug] = Event(old.id, old.slug, size, hold)
            return ev.doc()

    def list_events(self, slug: str | None) -> dict:
        with self.lock:
            found = [e.doc() for e in self.events.values() if slug is None or e.slug == slug]
        return {"count": len(found), "next": None, "previous": None, "results": found}

    def get_event(self, id_: str) -> dict:
        with self.lock:
            return self._event(id_).doc()

    # -- orders ----------------------------------------------------------------------------------
    def create_order(self, id_: str, doc: dict) -> dict:
        email = doc.get("email")
        if not isinstance(email, str) or not 0 < len(email) <= 200:
            raise field_error("email", "This field is required." if email is None else "Enter a valid value.")
        positions = doc.get("positions")
        if not isinstance(positions, list) or len(positions) != 1 or not isinstance(positions[0], dict):
            raise field_error("positions", "Exactly one position is supported.")
        count = positions[0].get("count")
        if type(count) is not int:
            raise field_error("positions", "A valid integer is required.", "count")
        if not 1 <= count <= MAX_COUNT:
            raise field_error("positions", f"Ensure this value is {'greater' if count < 1 else 'less'} than or "
                                           f"equal to {1 if count < 1 else MAX_COUNT}.", "count")
        with self.lock:
            ev = self._event(id_)
            free = ev.available
            if free < count:
                raise field_error("positions", f"There is not enough quota available on quota 'Admission' to "
                                               f"perform the operation ({free} left).", "item")
            return self._write(ev, email, count)

    def _write(self, ev: Event, email: str, count: int) -> dict:
        now = self.clock()
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(5))
        while code in ev.orders:
            code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(5))
        ev.pending += count
        order = ev.orders[code] = {"code": code, "event": ev.id, "email": email, "status": "n", "count": count,
                                   "created": now, "expires_at": now + ev.hold_seconds}
        return self.view(order)

    def _order(self, id_: str, code: str) -> tuple[Event, dict]:
        ev = self._event(id_)
        order = ev.orders.get(code)
        if order is None:
            raise detail(404, "Not found.")
        return ev, order

    def get_order(self, id_: str, code: str) -> dict:
        with self.lock:
            return self.view(self._order(id_, code)[1])

    def mark_paid(self, id_: str, code: str) -> dict:
        with self.lock:
            ev, order = self._order(id_, code)
            if order["status"] == "e":
                raise detail(400, "The order has expired and cannot be paid.")
            if order["status"] == "c":
                raise detail(400, "The order has been canceled.")
            if order["status"] == "n":  # lapsed but not yet released by the job: still payable (documented)
                order["status"] = "p"
                ev.pending -= order["count"]
                ev.paid += order["count"]
            return self.view(order)

    def mark_canceled(self, id_: str, code: str) -> dict:
        with self.lock:
            ev, order = self._order(id_, code)
            if order["status"] == "e":
                raise detail(400, "The order has expired.")
            if order["status"] in ("n", "p"):
                if order["status"] == "n":
                    ev.pending -= order["count"]
                else:
                    ev.paid -= order["count"]
                order["status"] = "c"
            return self.view(order)

    @staticmethod
    def view(order: dict) -> dict:
        return {"code": order["code"], "event": order["event"], "email": order["email"], "status": order["status"],
                "positions": [{"item": "admission", "count": order["count"]}],
                "datetime": _stamp(order["created"]), "expires": _stamp(order["expires_at"])}


def _stamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, TZ).isoformat(timespec="microseconds")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # head and body leave in two writes: no 40 ms wait for a delayed ACK
    server_version = "WSGIServer/0.2 CPython"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None: self._dispatch("GET")
    def do_POST(self) -> None: self._dispatch("POST")
    def do_PUT(self) -> None: self._dispatch("PUT")
    def do_PATCH(self) -> None: self._dispatch("PATCH")
    def do_DELETE(self) -> None: self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        raw = b""
        if 0 <= length <= MAX_BODY:
            raw = self.rfile.read(length) if length else b""
        else:
            self.close_connection = True
        try:
            if not 0 <= length <= MAX_BODY:
                raise detail(413, "Request body too large.")
            status, doc = self._answer(method, raw)
        except APIError as e:
            status, doc = e.status, e.doc
        except Exception as e:  # a bug answers 500 (DRF's debug page would be HTML; this is JSON)
            status, doc = 500, {"detail": f"Server error: {type(e).__name__}"}
        self._send(status, doc)

    def _send(self, status: int, doc: dict) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Vary", "Accept, Authorization")
        self.end_headers()
        self.wfile.write(body)

    def _token(self, admin: bool) -> str:
        auth = self.headers.get("Authorization", "")
        if not auth:
            raise detail(401, "Authentication credentials were not provided.")
        scheme, _, token = auth.partition(" ")
        tokens = self.server.tokens  # type: ignore[attr-defined]
        valid = scheme == "Token" and any(hmac.compare_digest(token.encode(), t.encode()) for t in tokens.values())
        if not valid:
            raise detail(401, "Invalid token.")
        if admin and not hmac.compare_digest(token.encode(), tokens["admin"].encode()):
            raise detail(403, "You do not have permission to perform this action.")
        return token

    def _answer(self, method: str, raw: bytes) -> tuple[int, dict]:
        shop: Shop = self.server.shop  # type: ignore[attr-defined]
        url = urlsplit(self.path)
        path = url.path
        if not path.startswith(BASE + "/") or not path.endswith("/"):
            raise detail(404, "Not found.")
        parts = path[len(BASE) + 1:-1].split("/")
        shape = tuple("*" if i % 2 else p for i, p in enumerate(parts))
        routes = {("events",): "GET POST", ("events", "*"): "GET", ("events", "*", "reset"): "POST",
                  ("events", "*", "orders"): "POST", ("events", "*", "orders", "*"): "GET",
                  ("events", "*", "orders", "*", "mark_paid"): "POST",
                  ("events", "*", "orders", "*", "mark_canceled"): "POST"}
        if shape not in routes:
            raise detail(404, "Not found.")
        admin = shape in (("events",), ("events", "*", "reset")) and method == "POST"
        token = self._token(admin)
        if method not in routes[shape].split():
            raise detail(405, f'Method "{method}" not allowed.')
        doc: dict = {}
        if method == "POST":
            try:
                doc = json.loads(raw or b"{}")
            except ValueError as e:
                raise detail(400, f"JSON parse error - {e}") from None
            if not isinstance(doc, dict):
                raise APIError(400, {"non_field_errors": ["Invalid data. Expected a dictionary, but got list."]})
        if shape == ("events",):
            if method == "GET":
                return 200, shop.list_events(parse_qs(url.query).get("slug", [None])[0])
            return 201, shop.create_event(doc)
        if shape == ("events", "*"):
            return 200, shop.get_event(parts[1])
        if shape == ("events", "*", "reset"):
            return 200, shop.reset_event(parts[1], doc)
        if shape == ("events", "*", "orders"):
            return self._idempotent(token, raw, lambda: (201, shop.create_order(parts[1], doc)))
        if len(parts) == 4:
            return 200, shop.get_order(parts[1], parts[3])
        act = shop.mark_paid if parts[4] == "mark_paid" else shop.mark_canceled
        return 200, act(parts[1], parts[3])

    def _idempotent(self, token: str, raw: bytes, answer) -> tuple[int, dict]:  # type: ignore[no-untyped-def]
        """The first answer for a key is every retry's answer, refusals included; another request
        under a used key is refused. (A request in flight under the same key waits for the first.)"""
        key = self.headers.get("X-Idempotency-Key")
        if not key:
            return answer()
        store = self.server.shop.idempotent  # type: ignore[attr-defined]
        request = f"{self.command} {self.path} {raw!r}"
        with self.server.key_locks.setdefault((token, key), threading.Lock()):  # type: ignore[attr-defined]
            stored = store.get((token, key))
            if stored is not None:
                if stored[0] != request:
                    raise detail(409, "Idempotency key was used for a different request.")
                return stored[1], stored[2]
            try:
                status, doc = answer()
            except APIError as e:
                if e.status >= 500:
                    raise
                status, doc = e.status, e.doc
            store[(token, key)] = (request, status, doc)
            return status, doc


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024

    def handle_error(self, request, client_address) -> None:  # type: ignore[no-untyped-def]
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def serve(port: int = 0, token: str = "buyer-token",
          admin_token: str = "admin-token") -> tuple[Server, str, threading.Event]:
    """Start the shop and its expiry job on 127.0.0.1; returns (server, base URL, stop event)."""
    server = Server(("127.0.0.1", port), Handler)
    server.shop = Shop()  # type: ignore[attr-defined]
    server.tokens = {"buyer": token, "admin": admin_token}  # type: ignore[attr-defined]
    server.key_locks = {}  # type: ignore[attr-defined]
    stop = threading.Event()

    def expiry_job() -> None:
        while not stop.wait(EXPIRY_JOB_EVERY):
            server.shop.release_lapsed()  # type: ignore[attr-defined]

    threading.Thread(target=expiry_job, name="expiry-job", daemon=True).start()
    threading.Thread(target=server.serve_forever, name="drf-shop", daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}{BASE}", stop


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port")
    ap.add_argument("--token", default="buyer-token", help="the buyers' API token")
    ap.add_argument("--admin-token", default="admin-token", help="the token that may create and reset events")
    args = ap.parse_args(argv)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    server, url, stop = serve(args.port, args.token, args.admin_token)
    print(f"listening on {url}", flush=True)
    while not done.wait(0.5):
        pass
    stop.set()
    server.shutdown()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
