"""A lean HTTP/1.1 server for the reference targets' ASGI apps (``--http lean``).

Why: at the seed's notification peak the accept path is mostly HTTP plumbing. uvicorn is
general (flow-control events, a cycle object and a task per request, header checks,
middleware); the reference apps need little of it: one ASGI ``http`` call per request with
the whole body read first, answers sent as one ``start`` and one ``body`` message. This
server parses with httptools (C), keeps connections alive, answers pipelined requests in
order, and calls the app exactly as uvicorn would, so an app cannot tell the two apart.

What it does not do (the targets do not need it): HTTP/2, WebSockets, upgrades,
streamed response bodies (each ``more_body`` chunk is buffered until the last).
Request bodies over ``max_body`` (default: the app's largest route limit, else 1 MiB) are
refused with 413 before they are buffered; the app still applies its own limit per route.
"""

from __future__ import annotations

import asyncio
import signal
from collections import deque
from http import HTTPStatus
from typing import Any, Callable

import httptools

_REASONS = {s.value: s.phrase.encode() for s in HTTPStatus}
MAX_PIPELINE = 64  # requests read ahead on one connection before reading pauses


def _error(status: int, code: str, message: str, close: bool = True) -> bytes:
    import json

    body = json.dumps({"error": code, "message": message}).encode()
    return (b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n"
            % (status, _REASONS.get(status, b""), len(body), b"connection: close\r\n" if close else b"")) + body


def _start(loop: asyncio.AbstractEventLoop, coro: Any) -> None:
    """Run the app's coroutine at once, up to its first wait, as Python 3.12's eager tasks do: most
    answers (a sold-out 409, a replay, a read) need no wait at all, and a Task a request (its
    creation, its first step scheduled through the loop) was a fifth of such an answer's CPU.
    A coroutine that waits is resumed by its future's callback, each step as a Task's would be."""
    try:
        waited = coro.send(None)
    except StopIteration:
        return
    _wait(loop, coro, waited)


def _wait(loop: asyncio.AbstractEventLoop, coro: Any, waited: Any) -> None:
    if getattr(waited, "_asyncio_future_blocking", None):  # an awaited asyncio future: resume when done
        waited._asyncio_future_blocking = False
        waited.add_done_callback(lambda _: _resume(loop, coro))
    else:  # a bare yield (asyncio.sleep(0)): resume on the loop's next pass
        loop.call_soon(_resume, loop, coro)


def _resume(loop: asyncio.AbstractEventLoop, coro: Any) -> None:
    try:
        waited = coro.send(None)
    except StopIteration:
        return
    _wait(loop, coro, waited)


class _Exchange:
    """One request's answer, filled by the app's ``send``; written in the connection's order."""

    __slots__ = ("head", "body", "done", "keep_alive", "head_only")

    def __init__(self, keep_alive: bool) -> None:
        self.head_only = False
        self.head: bytes = b""
        self.body: list[bytes] = []
        self.done = False
        self.keep_alive = keep_alive


class _Connection(asyncio.Protocol):
    def __init__(self, app: Any, server: "LeanServer") -> None:
        self.app = app
        self.server = server
        self.loop = asyncio.get_event_loop()
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.pending: deque[_Exchange] = deque()
        self.paused = False
        self.closing = False
        self.last_request = False
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._size = 0
        self._too_large = False

    # -- the transport ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server.connections.add(self)
        sock = transport.get_extra_info("sockname")
        peer = transport.get_extra_info("peername")
        self.local = (sock[0], sock[1]) if isinstance(sock, tuple) else None
        self.peer = (peer[0], peer[1]) if isinstance(peer, tuple) else None

    def connection_lost(self, exc: BaseException | None) -> None:
        self.closing = True
        self.server.connections.discard(self)

    def data_received(self, data: bytes) -> None:
        if self.last_request:  # the client said this request was its last: what follows is not read
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(_error(400, "invalid_request", "protocol upgrades are not supported"))
        except httptools.HttpParserError as e:
            self._fail(_error(400, "invalid_request", f"malformed HTTP request: {e}"))

    def _fail(self, answer: bytes) -> None:
        """Answer ``answer`` after the requests already read (in order), then close."""
        if self.closing:
            return
        ex = _Exchange(keep_alive=False)
        ex.head, ex.done = answer, True
        self.pending.append(ex)
        self.last_request = True
        self._flush()

    # -- httptools callbacks -------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._url = b""
        self._headers = []
        self._body = []
        self._size = 0
        self._too_large = False

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        self._headers.append((name, value))
        if name == b"expect" and value.lower() == b"100-continue" and self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > self.server.max_body:
            self._too_large = True
            self._body = []
        elif not self._too_large:
            self._body.append(body)

    def on_message_complete(self) -> None:
        if self.closing:
            return
        keep_alive = self.parser.should_keep_alive()
        if not keep_alive:
            self.last_request = True
        ex = _Exchange(keep_alive)
        self.pending.append(ex)
        if self._too_large:
            ex.head, ex.done, ex.keep_alive = _error(413, "body_too_large",
                                                     f"request body over {self.server.max_body} bytes"), True, False
            self._flush()
            return
        try:
            url = httptools.parse_url(self._url)
        except httptools.HttpParserInvalidURLError:
            ex.head, ex.done = _error(400, "invalid_request", "the request target is not a URL", not keep_alive), True
            self._flush()
            return
        method = self.parser.get_method().decode("ascii")
        path = url.path.decode("utf-8", "replace")
        if "%" in path:
            from urllib.parse import unquote

            path = unquote(path)
        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
                 "http_version": self.parser.get_http_version(), "method": method, "scheme": "http",
                 "path": path, "raw_path": url.path, "query_string": url.query or b"", "root_path": "",
                 "headers": self._headers, "server": self.local, "client": self.peer}
        ex.head_only = method == "HEAD"  # answered with the headers a GET would have, and no body
        _start(self.loop, self._run(scope, b"".join(self._body), ex))
        if len(self.pending) >= MAX_PIPELINE and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    # -- the app -----------------------------------------------------------------------------------------

    async def _run(self, scope: dict[str, Any], body: bytes, ex: _Exchange) -> None:
        sent_body = False

        async def receive() -> dict[str, Any]:
            nonlocal sent_body
            if not sent_body:
                sent_body = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Future()  # a second receive waits for a disconnect that never matters here
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            kind = message["type"]
            if kind == "http.response.start":
                status = message["status"]
                lines = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b""))]
                lines += [b"%s: %s\r\n" % (k, v) for k, v in message.get("headers", ())]
                if not ex.keep_alive:
                    lines.append(b"connection: close\r\n")
                lines.append(b"\r\n")
                ex.head = b"".join(lines)
            elif kind == "http.response.body":
                if not ex.head_only:
                    ex.body.append(message.get("body", b""))
                if not message.get("more_body"):
                    ex.done = True
                    self._flush()

        try:
            await self.app(scope, receive, send)
        except Exception as e:  # noqa: BLE001 - the app's own bug: answered, never a dropped connection
            if not ex.head:
                ex.head = _error(500, "internal", f"{type(e).__name__}: {e}", not ex.keep_alive)
        if not ex.done:
            ex.done = True
            if not ex.head:
                ex.head = _error(500, "internal", "the app sent no answer", not ex.keep_alive)
            self._flush()

    def _flush(self) -> None:
        out = []
        close = False
        while self.pending and self.pending[0].done:
            ex = self.pending.popleft()
            out.append(ex.head)
            out.extend(ex.body)
            if not ex.keep_alive:
                close = True
                self.pending.clear()
                break
        if self.transport is None or self.closing or not out:
            return
        self.transport.write(b"".join(out))
        if close:
            self.closing = True
            self.transport.close()
        elif self.paused and len(self.pending) < MAX_PIPELINE // 2:
            self.paused = False
            self.transport.resume_reading()


class LeanServer:
    def __init__(self, app: Any, max_body: int | None = None) -> None:
        self.app = app
        limits = [getattr(app, "MAX_BODY", 0), *getattr(app, "body_limits", {}).values()]
        self.max_body = max_body if max_body is not None else max(max(limits, default=0), 1 << 20)
        self.connections: set[_Connection] = set()


def run(app: Any, host: str, port: int, *, backlog: int = 4096,
        on_startup: Callable[[], None] | None = None, on_shutdown: Callable[[], None] | None = None) -> None:
    """Serve ``app`` until SIGINT or SIGTERM (uvloop when it is installed)."""
    try:
        import uvloop

        loop = uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is a dependency of the targets
        loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    server = LeanServer(app)
    (on_startup or getattr(app, "on_startup", lambda: None))()
    srv = loop.run_until_complete(loop.create_server(lambda: _Connection(app, server), host, port, backlog=backlog))
    stop = loop.create_future()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    try:
        loop.run_until_complete(stop)
    finally:
        srv.close()
        for c in list(server.connections):
            if c.transport is not None:
                c.transport.close()
        loop.run_until_complete(srv.wait_closed())
        (on_shutdown or getattr(app, "on_shutdown", lambda: None))()
        loop.close()


def serve_asgi(app: Any, host: str, port: int, http: str = "uvicorn", **uvicorn_options: Any) -> None:
    """Serve a reference app with ``http`` = ``uvicorn`` (the default) or ``lean`` (this module)."""
    if http == "lean":
        return run(app, host, port)
    if http != "uvicorn":
        raise ValueError(f"http must be 'uvicorn' or 'lean'; got {http!r}")
    import uvicorn

    uvicorn.run(app, host=host, port=port, loop="uvloop", http="httptools", lifespan="on", access_log=False,
                log_level="warning", backlog=4096, **uvicorn_options)
