"""Correct services on the standard library's ``http.server``, one per case: what a new user's own
small service looks like, and what the harness must PASS.

The design is the reference's (its core, its store, its background loops, through its ASGI app
on an event loop of its own); the HTTP stack is ``http.server.ThreadingHTTPServer`` with its own
habits, each of which HTTP allows and none of which breaks a promise of the design:

* a method the handler does not implement (HEAD, TRACE, PATCH, OPTIONS, ...) is answered
  ``501 Not Implemented`` with an HTML page (RFC 9110 15.6.2), not 405;
* ``Server: BaseHTTP/...`` and ``Date`` headers, HTTP/1.1 kept alive;
* tickets: ids with NUL or a lone surrogate and a quantity of ``7.0`` are refused with a 400, as a
  shop on PostgreSQL (``text`` cannot hold NUL) with a strict integer parser does;
* feed: ``created_at`` as epoch seconds, and a DELETE answered ``{"post_id", "deleted": true}``.

Served as variants (``tests/support/mutants.py``: ``<case>-on-stdlib``): the reference's
``serve_asgi`` is swapped for :func:`serve_stdlib` before ``peakproof serve`` starts it.

With ``lenient=True`` (``<case>-on-stdlib-lenient``) each also accepts one request outside its
contract, as many a correct service does, breaking no promise of the design (contract notes,
Schemathesis's ST201; ``--strict-contract`` fails them):

* tickets: a quota's capacity unbounded but by its 64-bit column (the contract says at most 10^9);
* feed: an empty ``cursor=`` taken as no cursor (``parse_qs``'s default drops blank values);
* notifications: an empty e-mail address accepted, and kept where the recipient lists e-mail.
"""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import unquote

Answer = tuple[int, list[tuple[str, str]], bytes]


class AsgiBridge:
    """An ASGI app on an event loop in a thread of its own; :meth:`call` from any thread."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="asgi-bridge", daemon=True).start()
        self._lifespan_queue: asyncio.Queue[dict[str, Any]] | None = None
        asyncio.run_coroutine_threadsafe(self._startup(), self.loop).result(timeout=30)

    async def _startup(self) -> None:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        started = asyncio.get_running_loop().create_future()
        await queue.put({"type": "lifespan.startup"})

        async def send(message: dict[str, Any]) -> None:
            if message["type"].startswith("lifespan.startup") and not started.done():
                started.set_result(message)

        self._lifespan_queue = queue
        asyncio.ensure_future(self.app({"type": "lifespan", "asgi": {"version": "3.0"}}, queue.get, send))
        try:
            await asyncio.wait_for(started, 10)
        except asyncio.TimeoutError:  # an app without lifespan: nothing to start
            pass

    def call(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> Answer:
        return asyncio.run_coroutine_threadsafe(self._call(method, target, headers, body), self.loop).result(60)

    async def _call(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> Answer:
        path, _, query = target.partition("?")
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
                 "scheme": "http", "path": unquote(path), "raw_path": path.encode("latin-1"),
                 "query_string": query.encode("latin-1"), "root_path": "",
                 "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers],
                 "client": ("127.0.0.1", 0), "server": ("127.0.0.1", 0)}
        sent = False
        status, out_headers, chunks = 500, [], []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                await asyncio.Event().wait()  # no disconnect to report: wait as a server would
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status, out_headers
            if message["type"] == "http.response.start":
                status = message["status"]
                out_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", [])]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, send)
        return status, out_headers, b"".join(chunks)


Rewrite = Callable[[str, str, bytes], "Answer | None"]  # (method, path, body) -> an answer of its own, or None
Reshape = Callable[[str, str, Answer], Answer]  # (method, path, the app's answer) -> the answer sent
Reread = Callable[[str, str], str]  # (method, request target) -> the request target the app is given


def serve_stdlib(app: Any, host: str, port: int, *, refuse: Rewrite | None = None,
                 reshape: Reshape | None = None, reread: Reread | None = None) -> None:
    """Serve ``app`` on ``http.server`` until interrupted (GET, POST, PUT, DELETE; others 501)."""
    bridge = AsgiBridge(app)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # the head and the body go out as two writes: with Nagle on, the body waits for the client's
        # delayed ACK of the head (40 ms an answer on Linux), which made the contract tests 3x slower
        # than against the reference and tells nothing about the answers, which are what is tested
        disable_nagle_algorithm = True

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            path = self.path.partition("?")[0]
            answer = refuse(self.command, path, body) if refuse else None
            if answer is None:
                target = reread(self.command, self.path) if reread else self.path
                answer = bridge.call(self.command, target, list(self.headers.items()), body)
                if reshape:
                    answer = reshape(self.command, path, answer)
            status, headers, content = answer
            self.send_response(status)
            for k, v in headers:
                if k.lower() not in ("content-length", "server", "date", "connection"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_POST = do_PUT = do_DELETE = _handle

        def log_message(self, format: str, *args: Any) -> None:  # quiet, as a service under load should be
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    server.serve_forever()


def _error(status: int, code: str, message: str) -> Answer:
    return status, [("Content-Type", "application/json")], json.dumps({"error": code, "message": message}).encode()


def _unstorable(value: Any) -> bool:
    """Text PostgreSQL cannot hold: NUL, or a lone surrogate (not UTF-8)."""
    return isinstance(value, str) and ("\x00" in value or any(0xD800 <= ord(c) <= 0xDFFF for c in value))


def tickets_refusals(method: str, path: str, body: bytes) -> Answer | None:
    """A shop on PostgreSQL with a strict integer parser: NUL and lone surrogates in ids, and a quantity
    that is a JSON float (``7.0``), are refused with a 400 in the contract's error shape."""
    if any(_unstorable(part) for part in unquote(path, errors="surrogatepass").split("/")):
        return _error(400, "invalid_request", "ids cannot hold NUL or lone surrogates (PostgreSQL text)")
    if method == "POST" and path.endswith("/reservations") and body:
        try:
            doc = json.loads(body)
        except ValueError:
            return None  # the app's own refusal
        if isinstance(doc, dict):
            if isinstance(doc.get("quantity"), float):
                return _error(400, "invalid_request", f"quantity must be an integer; got {doc['quantity']!r}")
            if any(_unstorable(doc.get(k)) for k in ("buyer_id", "request_id")):
                return _error(400, "invalid_request", "ids cannot hold NUL or lone surrogates (PostgreSQL text)")
    return None


def feed_reshape(method: str, path: str, answer: Answer) -> Answer:
    """The feed as its own stack answers: epoch-second times, and a delete's short answer."""
    from datetime import datetime

    status, headers, content = answer
    if not 200 <= status < 300 or not content:
        return answer
    try:
        doc = json.loads(content)
    except ValueError:
        return answer
    if method == "DELETE" and path.startswith("/feed/posts/") and isinstance(doc, dict):
        return status, headers, json.dumps({"post_id": doc.get("post_id"), "deleted": True}).encode()

    def epoch(o: Any) -> Any:
        if isinstance(o, dict):
            return {k: (datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
                        if k == "created_at" and isinstance(v, str) else epoch(v)) for k, v in o.items()}
        if isinstance(o, list):
            return [epoch(v) for v in o]
        return o

    return status, headers, json.dumps(epoch(doc)).encode()


FORMS: dict[str, dict[str, Any]] = {
    "tickets": {"refuse": tickets_refusals},
    "feed": {"reshape": feed_reshape},
    "notifications": {},
}

# -- leniencies: a request outside the contract accepted, no promise of the design broken ----------------

BIGINT = 2 ** 63 - 1  # what a 64-bit integer column holds


def tickets_unbounded_capacity() -> None:
    """A quota's capacity is bounded by its column alone (BIGINT), not by the contract's 10^9:
    ``PUT /quotas/q {"capacity": 1000000001}`` makes a quota of that many. Above the column's
    reach it is still a 400, as the shop's database would refuse it."""
    from peakproof.targets.tickets import core

    core.MAX_CAPACITY = BIGINT  # put_quota reads it at each call


def feed_blank_cursor_is_none(method: str, target: str) -> str:
    """``?cursor=`` (blank) is no cursor, the first page: the query parsed as ``parse_qs`` does by
    default, blank values dropped (the contract's cursor has a pattern an empty one does not match)."""
    path, sep, query = target.partition("?")
    if not sep:
        return target
    kept = [part for part in query.split("&") if part not in ("cursor", "cursor=")]
    return path + ("?" + "&".join(kept) if kept else "")


def notifications_keeps_an_empty_email() -> None:
    """A recipient's ``email`` may be empty (a nullable column; the contract says 1 to 320 characters):
    every other rule is the design's, and the empty address is kept where the recipient lists e-mail
    (a call there goes to ``""``, which the provider answers as it answers any address)."""
    from dataclasses import replace as _replace

    from peakproof.targets.notifications.core import NotificationsCore

    original = NotificationsCore.put_recipient

    def put_recipient(self: NotificationsCore, recipient_id: str, channels: list[str],
                      addresses: dict[str, str]) -> Any:
        if not isinstance(addresses, dict) or addresses.get("email") != "":
            return original(self, recipient_id, channels, addresses)
        r = original(self, recipient_id, channels, {**addresses, "email": "(empty)"})  # the design's other rules
        if "email" in r.addresses:
            r = _replace(r, addresses={**r.addresses, "email": ""})
            self.store.save_recipient(r)
        return r

    NotificationsCore.put_recipient = put_recipient  # type: ignore[method-assign]


LENIENCIES: dict[str, dict[str, Any]] = {  # "patch": run in the served process; the rest: serve_stdlib's forms
    "tickets": {"patch": tickets_unbounded_capacity},
    "feed": {"reread": feed_blank_cursor_is_none},
    "notifications": {"patch": notifications_keeps_an_empty_email},
}


def on_stdlib(case: str, *, lenient: bool = False) -> Callable[[], None]:
    """The variant's patch: ``peakproof serve <case>`` serves on ``http.server`` with the case's forms,
    and with ``lenient`` its leniency too (:data:`LENIENCIES`)."""

    def patch() -> None:
        import peakproof.targets._lean as lean

        forms = dict(FORMS[case])
        if lenient:
            extra = dict(LENIENCIES[case])
            fix = extra.pop("patch", None)
            if fix is not None:
                fix()
            forms.update(extra)

        def serve_asgi(app: Any, host: str, port: int, http: str = "uvicorn", **_: Any) -> None:
            serve_stdlib(app, host, port, **forms)

        lean.serve_asgi = serve_asgi  # the servers import it at call time

    return patch
