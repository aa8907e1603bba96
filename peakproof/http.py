"""HTTP plumbing every case's driver shares: transports and the ok / fail / info rule.

A transport sends one request and returns (status, body bytes) or raises
:class:`TransportError`. ``RequestsTransport`` wraps a ``requests.Session`` (properties,
CLI, bursts); the load engine has its own over gevent (``GeventTransport`` in
:mod:`peakproof.load`). :func:`call` records the operation and classifies it:

* 2xx with a body the case's parser accepts: ok; a PUT or DELETE may answer any 2xx with
  no body at all (201 Created, 204 No Content: HTTP allows both), which is ok with ``{}``;
* 4xx with an ``error`` code, a refused connection (nothing was sent), or 503 ``busy``
  (the contracts say nothing changed): fail;
* timeout, reset, any other 5xx, an unparsable or wrong-shaped body: info.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Protocol

from .codec import dumps, loads
from .history import FAIL, INFO, OK, History, Op


class TransportError(Exception):
    """``kind``: refused (nothing was sent: a definite failure), timeout, reset or error."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Transport(Protocol):
    def __call__(self, method: str, url: str, body: bytes | None, headers: dict[str, str], name: str) -> tuple[int, bytes]: ...


class RequestsTransport:
    """A ``requests.Session`` (or Locust's HttpSession, a subclass) with a timeout on every request."""

    def __init__(self, session: Any = None, timeout: float = 5.0) -> None:
        import requests

        self._exc = requests.exceptions
        if session is None:
            session = requests.Session()
            adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=64)  # many greenlets/threads
            session.mount("http://", adapter)
            session.mount("https://", adapter)
        self.session = session
        self.timeout = timeout

    def __call__(self, method: str, url: str, body: bytes | None, headers: dict[str, str], name: str) -> tuple[int, bytes]:
        try:
            resp = self.session.request(method, url, data=body, headers=headers, timeout=self.timeout)
        except self._exc.ConnectTimeout as e:
            raise TransportError("refused", f"could not connect within {self.timeout} s: {e}") from None
        except self._exc.ConnectionError as e:
            text = str(e)
            refused = "refused" in text.lower() or "NewConnectionError" in text
            raise TransportError("refused" if refused else "reset", text[:300]) from None
        except self._exc.Timeout as e:
            raise TransportError("timeout", f"no answer within {self.timeout} s: {e}"[:300]) from None
        except self._exc.RequestException as e:
            raise TransportError("error", str(e)[:300]) from None
        return resp.status_code, resp.content


class HttpClientTransport:
    """The standard library's ``http.client``, one kept-alive connection per thread: a third of
    ``requests``' cost a call, for many threads hammering one loopback target (the bursts).
    No proxies, no redirects, no cookies: for a URL that needs them, use RequestsTransport."""

    def __init__(self, timeout: float = 5.0) -> None:
        import threading

        self.timeout = timeout
        self._local = threading.local()

    def _conn(self, url: str) -> tuple[Any, str]:
        from http.client import HTTPConnection, HTTPSConnection
        from urllib.parse import urlsplit

        u = urlsplit(url)
        key = (u.scheme, u.netloc)
        conns = self._local.__dict__.setdefault("conns", {})
        conn = conns.get(key)
        if conn is None:
            cls = HTTPSConnection if u.scheme == "https" else HTTPConnection
            conn = conns[key] = cls(u.netloc, timeout=self.timeout)
        return conn, (u.path or "/") + (f"?{u.query}" if u.query else "")

    def __call__(self, method: str, url: str, body: bytes | None, headers: dict[str, str], name: str) -> tuple[int, bytes]:
        import socket
        from http.client import HTTPException

        conn, path = self._conn(url)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        except ConnectionRefusedError as e:
            conn.close()
            raise TransportError("refused", f"connection refused: {e}") from None
        except socket.timeout as e:
            conn.close()
            raise TransportError("timeout", f"no answer within {self.timeout} s: {e}") from None
        except (OSError, HTTPException) as e:  # reset, closed keep-alive, a broken answer: the outcome is unknown
            conn.close()
            raise TransportError("reset", f"{type(e).__name__}: {e}"[:300]) from None


JSON_HEADERS = {"Content-Type": "application/json"}


class ErrorMap:
    """How a service's error answers read as the contract's codes (the codes the checks know).

    ``field``: the dotted path of the error's code in the body (the contracts: ``error``);
    ``codes``: the service's code -> the contract's; ``statuses``: an HTTP status -> the
    contract's code, for answers whose body names no code we know; ``message``: the dotted
    path of the human text. An unmapped 4xx keeps the service's code (or ``http_<status>``).
    """

    def __init__(self, field: str = "error", codes: dict[str, str] | None = None,
                 statuses: dict[int, str] | None = None, message: str = "message") -> None:
        self.field, self.message_field = field, message
        self.codes, self.statuses = dict(codes or {}), dict(statuses or {})
        self._plain = field == "error" and not self.codes and not self.statuses  # the contracts' own shape

    def code(self, status: int, doc: Any) -> str | None:
        if self._plain:  # the load's commonest answer (a sold-out 409): no path walk, no lookups
            raw = doc.get("error") if isinstance(doc, dict) else None
            return raw if isinstance(raw, str) else None
        raw = dig(doc, self.field)
        if isinstance(raw, str) and raw in self.codes:
            return self.codes[raw]
        if status in self.statuses:
            return self.statuses[status]
        return raw if isinstance(raw, str) else None

    def message(self, doc: Any, content: bytes) -> str:
        text = doc.get(self.message_field) if self._plain and isinstance(doc, dict) else dig(doc, self.message_field)
        return str(text if text is not None else content[:200])[:300]


CONTRACT_ERRORS = ErrorMap()


def dig(doc: Any, path: str) -> Any:
    """``doc["a"]["b"]`` for ``"a.b"``; None when any step is missing (or ``path`` is empty: ``doc``)."""
    for part in path.split(".") if path else ():
        if not isinstance(doc, dict):
            return None
        doc = doc.get(part)
    return doc


def call(history: History, transport: Transport, f: str, args: dict[str, Any], method: str, url: str,
         body: Any, process: Any, parse: Callable[[Any], Any], *, intended_time: float | None = None,
         headers: dict[str, str] | None = None, name: str | None = None, errors: ErrorMap = CONTRACT_ERRORS) -> Op:
    """Send one request through ``transport``, record it in ``history``, return the completed op."""
    op = history.invoke(process, f, args, intended_time)
    data = None if body is None else dumps(body)
    hdrs = {**JSON_HEADERS, **headers} if headers else JSON_HEADERS
    op.send_time = time.time()
    try:
        status, content = transport(method, url, data, hdrs, name or f)
    except TransportError as e:
        if e.kind == "refused":
            return history.complete(op, FAIL, "connection_refused", str(e))
        return history.complete(op, INFO, e.kind, str(e))
    except Exception as e:  # a bug on our side: the outcome is unknown, and it must not stay pending
        history.complete(op, INFO, "client_error", f"{type(e).__name__}: {e}")
        raise
    return classify(history, op, status, content, parse, method, errors)


NO_BODY_ALLOWED = ("PUT", "DELETE")


def classify(history: History, op: Op, status: int, content: bytes, parse: Callable[[Any], Any],
             method: str = "GET", errors: ErrorMap = CONTRACT_ERRORS) -> Op:
    try:
        doc = loads(content) if content else None
    except ValueError:
        doc = None
    if 200 <= status < 300:
        if not content.strip() and method in NO_BODY_ALLOWED:
            return history.complete(op, OK, {})
        try:
            return history.complete(op, OK, parse(doc))
        except (TypeError, ValueError, KeyError) as e:
            return history.complete(op, INFO, "bad_response",
                                    f"HTTP {status} with a body not of the contract's shape: {e}; "
                                    f"body {content[:200]!r}")
    code = errors.code(status, doc)
    message = errors.message(doc, content)
    if 400 <= status < 500:
        return history.complete(op, FAIL, code or f"http_{status}", message)
    if status == 503 and code == "busy":
        return history.complete(op, FAIL, "busy", message)
    return history.complete(op, INFO, code or f"http_{status}", f"HTTP {status}: {message}")


def json_object(doc: Any) -> dict[str, Any]:
    """The smallest response parser: the body must be a JSON object (else the op is info)."""
    if not isinstance(doc, dict):
        raise TypeError(f"expected a JSON object, got {type(doc).__name__}")
    return doc
