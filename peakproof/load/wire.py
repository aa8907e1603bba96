"""The load engine's HTTP/1.1 client: kept-alive gevent sockets and httptools' C parser.

Why not geventhttpclient (Locust's FastHttpUser client): a request there builds a header
object, a response object and a parser per call, about half of the engine's CPU per
arrival. Here a connection owns one parser for its whole life, a request is one
``sendall`` of bytes built with one format, and a response is read into the connection's
own fields (status, body, keep-alive). What the engine needs and nothing more: no
redirects, cookies, proxies or TLS (an ``https`` URL goes to the slower client).

Outcomes follow :class:`peakproof.http.TransportError`: refused (nothing was sent),
timeout, reset (the connection broke: the outcome is unknown), error (garbage on the wire).
"""

from __future__ import annotations

import socket
import time
from typing import Any

import gevent
import gevent.lock
import gevent.select
import gevent.socket
import httptools

from ..http import TransportError

REAP_EVERY = 0.1  # s: how often requests past their timeout are ended
IDLE_CHECK_SECONDS = 1.0
READ_BUFFER = 65536  # a connection idle longer is checked for a close from the server before reuse


class _Conn:
    """One kept-alive connection: its socket, its parser, and the answer being read."""

    __slots__ = ("sock", "parser", "status", "body", "complete", "keep_alive", "idle_since", "deadline", "waiter")

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.body: list[bytes] = []
        self.complete = False
        self.keep_alive = True
        self.idle_since = 0.0
        self.deadline = 0.0  # monotonic time by which the answer must have come (the reaper's)
        self.waiter: Any = None  # the greenlet waiting for the answer

    # httptools' callbacks
    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.keep_alive = self.parser.should_keep_alive()

    def on_body(self, data: bytes) -> None:
        self.body.append(data)

    def on_message_complete(self) -> None:
        self.complete = True

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class WireClient:
    """Up to ``concurrency`` kept-alive connections to one origin (``host``, ``port``)."""

    def __init__(self, host: str, port: int, concurrency: int, timeout: float, source: str | None = None) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.source = (source, 0) if source else None  # the local address to connect from
        self.host_header = host if port == 80 else f"{host}:{port}"
        self.idle: list[_Conn] = []  # LIFO: the warmest connection first
        self.slots = gevent.lock.Semaphore(max(1, concurrency))
        # Request heads by content: (method, path, the header pairs). Never by id(headers): the callers
        # build a dict a request, and a freed dict's id is handed to the next one, whose values differ
        # (a stale Idempotency-Key sent with another request: the bug this key exists to prevent).
        self._heads: dict[tuple[Any, ...], bytes] = {}
        # Timeouts: one reaper for all requests in flight rather than a timer per wait (a gevent
        # Timeout a read cost ~10% of the engine's CPU). Precision: REAP_EVERY.
        self.in_flight: set[_Conn] = set()
        self._reaper: Any = None
        # One read buffer for all the client's connections: a greenlet reads, then feeds the parser,
        # with no switch in between, so no two reads share it at once.
        self._view = memoryview(bytearray(READ_BUFFER))

    def head(self, method: str, path: str, headers: dict[str, str]) -> bytes:
        """The request line and headers, built once per (method, path, header names and values) and cached."""
        key = (method, path, *headers.items())
        head = self._heads.get(key)
        if head is None:
            lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host_header}"]
            lines += [f"{k}: {v}" for k, v in headers.items() if k.lower() not in ("host", "content-length")]
            head = ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")
            if len(self._heads) < 4096:  # paths that vary per request (ids) are not worth keeping
                self._heads[key] = head
        return head

    def _connect(self) -> _Conn:
        try:
            sock = gevent.socket.create_connection((self.host, self.port), timeout=self.timeout,
                                                   source_address=self.source)
        except ConnectionRefusedError as e:
            raise TransportError("refused", f"connection refused by {self.host}:{self.port}: {e}") from None
        except socket.timeout:
            raise TransportError("refused", f"could not connect to {self.host}:{self.port} within {self.timeout} s") from None
        except OSError as e:
            raise TransportError("refused", f"could not connect to {self.host}:{self.port}: {e}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)  # reads wait without a timer; the reaper enforces self.timeout
        return _Conn(sock)

    def _reap(self) -> None:
        while True:
            gevent.sleep(REAP_EVERY)
            now = time.monotonic()
            for conn in [c for c in self.in_flight if c.deadline < now]:
                if conn.waiter is not None:
                    # thrown from the hub (as gevent's own timeouts are), and only if still waiting then
                    gevent.get_hub().loop.run_callback(_expire, conn, conn.waiter)
            if not self.in_flight and not self.idle:
                self._reaper = None
                return

    def _take(self) -> _Conn:
        while self.idle:
            conn = self.idle.pop()
            if time.monotonic() - conn.idle_since > IDLE_CHECK_SECONDS and _closed_by_peer(conn.sock):
                conn.close()  # the server's keep-alive timeout: not a finding, just a new connection
                continue
            return conn
        return self._connect()

    def request(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
        data = self.head(method, path, headers) + (b"%d\r\n\r\n" % len(body) + body if body else b"0\r\n\r\n")
        self.slots.acquire()
        conn = None
        try:
            conn = self._take()
            conn.status, conn.complete, conn.keep_alive = 0, False, True
            conn.body = []
            conn.deadline, conn.waiter = time.monotonic() + self.timeout, gevent.getcurrent()
            self.in_flight.add(conn)
            if self._reaper is None:
                self._reaper = gevent.spawn_raw(self._reap)
            sock, parser = conn.sock, conn.parser
            raw = sock._sock  # gevent's non-blocking socket underneath: no wrapper a call
            try:
                sent = raw.send(data)  # a request fits the send buffer at once, almost always
            except BlockingIOError:
                sent = 0
            if sent < len(data):
                sock.sendall(data[sent:])
            view = self._view
            while not conn.complete:
                sock._wait(sock._read_event)  # the answer is never there yet: wait first, then read
                try:
                    # into the client's one buffer: recv(65536) allocated 64 KiB a call, an mmap and a
                    # munmap each time (two system calls a request, as many as the send and the read)
                    got = raw.recv_into(view)
                except BlockingIOError:
                    continue
                if not got:
                    if conn.status and not conn.keep_alive:  # a body delimited by the close
                        conn.complete = True
                        break
                    raise TransportError("reset", "the server closed the connection before a whole answer")
                parser.feed_data(view[:got])  # the parser copies what it keeps (the body) as bytes
            self.in_flight.discard(conn)
            conn.waiter = None
            status, content = conn.status, b"".join(conn.body)
            if conn.keep_alive:
                conn.idle_since = time.monotonic()
                self.idle.append(conn)
            else:
                conn.close()
            conn = None
            return status, content
        except TransportError:
            raise
        except (socket.timeout, _Expired):
            raise TransportError("timeout", f"no answer within {self.timeout} s") from None
        except httptools.HttpParserError as e:
            raise TransportError("error", f"not an HTTP/1.1 answer: {e}") from None
        except OSError as e:
            raise TransportError("reset", f"{type(e).__name__}: {e}") from None
        finally:
            if conn is not None:
                self.in_flight.discard(conn)
                conn.waiter = None
                conn.close()
            self.slots.release()


class _Expired(Exception):
    """Thrown by the reaper into a request's greenlet past its deadline."""


def _expire(conn: _Conn, waiter: Any) -> None:
    if conn.waiter is waiter and conn.deadline < time.monotonic():  # not answered meanwhile
        conn.waiter = None
        waiter.throw(_Expired())


def _closed_by_peer(sock: Any) -> bool:
    """Readable while no request is out: the server closed it (or sent garbage); either way, drop it."""
    try:
        readable, _, _ = gevent.select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
