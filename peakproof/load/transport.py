"""The engine's HTTP transport and Locust's statistics, fed in batches.

Only Locust processes load it (gevent, geventhttpclient)."""

from __future__ import annotations

import time
from typing import Any, Callable

import gevent

from ..http import TransportError


class GeventTransport:
    """The engine's HTTP transport (a :class:`peakproof.http.Transport`), reporting to Locust.

    Plain ``http`` goes through :class:`peakproof.load.wire.WireClient` (kept-alive sockets and a
    C parser, about half geventhttpclient's CPU a request); ``https`` through
    geventhttpclient. Locust's statistics are fed in batches (:class:`StatsBatch`). Any HTTP
    answer below 500 is a success to Locust (a sold-out 409 is the system working); 5xx
    and transport errors are failures there too.
    """

    def __init__(self, environment: Any, concurrency: int, timeout: float, source: str | None = None) -> None:
        self.stats = StatsBatch(environment)
        self.source = source
        self.concurrency = concurrency
        self.timeout = timeout
        self._clients: dict[str, Any] = {}

    def _client(self, url: str) -> tuple[Any, str]:
        # Split "scheme://host:port" from the path by hand: URL parsing cost ~30 µs a request.
        cut = url.find("/", url.find("//") + 2)
        origin, path = (url, "/") if cut < 0 else (url[:cut], url[cut:])
        client = self._clients.get(origin)
        if client is None:
            from geventhttpclient.url import URL

            u = URL(origin + "/")
            if u.scheme == "https":
                from geventhttpclient import HTTPClient

                client = _TlsClient(HTTPClient(u.host, u.port, ssl=True, concurrency=self.concurrency,
                                               network_timeout=self.timeout, connection_timeout=self.timeout,
                                               insecure=True))
            else:
                from .wire import WireClient

                client = WireClient(u.host, u.port, self.concurrency, self.timeout, self.source)
            self._clients[origin] = client
        return client, path

    def __call__(self, method: str, url: str, body: bytes | None, headers: dict[str, str], name: str) -> tuple[int, bytes]:
        client, path = self._client(url)
        start = time.perf_counter()
        try:
            status, content = client.request(method, path, body, headers)
        except TransportError as e:
            self.stats.add(method, name, (time.perf_counter() - start) * 1000, 0, e)
            raise
        self.stats.add(method, name, (time.perf_counter() - start) * 1000, len(content),
                       None if status < 500 else f"HTTP {status}")
        return status, content


class _TlsClient:
    """geventhttpclient for ``https`` URLs, with the wire client's interface and outcomes."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def request(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
        try:
            resp = self.client.request(method, path, body=body, headers=headers)
            return resp.status_code, resp.read()
        except Exception as e:  # noqa: BLE001 - every transport failure becomes a TransportError
            text = f"{type(e).__name__}: {e}"
            low = text.lower()
            if isinstance(e, ConnectionRefusedError) or "refused" in low:
                raise TransportError("refused", text) from None
            if isinstance(e, (TimeoutError, gevent.Timeout)) or "timeout" in low or "timed out" in low:
                raise TransportError("timeout", text) from None
            raise TransportError("reset" if "reset" in low or "closed" in low else "error", text) from None


class StatsBatch:
    """Locust's request statistics, fed in batches rather than one ``request`` event a request.

    Firing the event and logging each request cost ~10 µs an arrival; the batch keeps the
    answers in a list and adds them to Locust's entries every ``interval`` s in bulk: the
    same counts, sums, extremes, per-second counts and rounded response-time buckets that
    ``RequestStats.log_request`` keeps (``tests/e2e/test_wire.py`` compares the two). When
    another listener than Locust's own is on the ``request`` event (a plugin), every
    request is fired to it as usual.
    """

    interval = 0.25

    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.rows: list[tuple[str, str, float, int, Any, float]] = []
        self.last_flush = time.monotonic()

    def add(self, method: str, name: str, response_time: float, length: int, error: Any) -> None:
        self.rows.append((method, name, response_time, length, error, time.time()))

    def flush(self) -> None:
        self.last_flush = time.monotonic()
        rows, self.rows = self.rows, []
        if not rows:
            return
        event = self.environment.events.request
        stats = getattr(self.environment, "stats", None)
        if stats is None or len(getattr(event, "_handlers", ())) != 1:
            for method, name, rt, length, error, _ in rows:  # someone else listens: fire as Locust would
                event.fire(request_type=method, name=name, response_time=rt, response_length=length,
                           exception=None if error is None else (error if isinstance(error, BaseException)
                                                                 else RuntimeError(error)), context={})
            return
        bulk_log(stats, rows)


def bulk_log(stats: Any, rows: list[tuple[str, str, float, int, Any, float]]) -> None:
    """Add ``rows`` (method, name, response time in ms, length, error or None, when) to a Locust
    ``RequestStats`` as ``log_request`` (and ``log_error`` for the errors) one by one would."""
    from collections import Counter

    from locust.stats import bucket_response_time

    groups: dict[tuple[str, str], list[tuple[float, int, float]]] = {}
    every: list[tuple[float, int, float]] = []
    for method, name, rt, length, error, at in rows:
        item = (rt, length, at)
        groups.setdefault((name, method), []).append(item)
        every.append(item)
        if error is not None:
            stats.log_error(method, name, error if isinstance(error, BaseException) else RuntimeError(error))
    for key, items in groups.items():
        _bulk_entry(stats.entries[key], items, bucket_response_time, Counter)
    _bulk_entry(stats.total, every, bucket_response_time, Counter)


def _bulk_entry(entry: Any, items: list[tuple[float, int, float]], bucket: Callable[[float], int], counter: Any) -> None:
    last = items[-1][2]  # Locust keeps the time of the last request logged
    if entry.use_response_times_cache and entry.last_request_timestamp and int(last) > int(entry.last_request_timestamp):
        entry._cache_response_times(int(last) - 1)
    rts = [rt for rt, _, _ in items]
    entry.num_requests += len(items)
    for sec, k in counter(int(at) for _, _, at in items).items():
        entry.num_reqs_per_sec[sec] += k
    entry.last_request_timestamp = last
    entry.total_response_time += sum(rts)
    low, high = min(rts), max(rts)
    entry.min_response_time = low if entry.min_response_time is None else min(entry.min_response_time, low)
    entry.max_response_time = max(entry.max_response_time, high)
    for b, k in counter(map(bucket, rts)).items():
        entry.response_times[b] += k
    entry.total_content_length += sum(length for _, length, _ in items)
