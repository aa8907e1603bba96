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
        self._env: dict[str, dict[str, Any]] | None = None  # per origin: what requests reads from the environment
        if session is None:
            session = requests.Session()
            adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=64)  # many greenlets/threads
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            # requests reads the proxies, the CA bundle and ~/.netrc from the environment on every request: a
            # sixth of a URL property run's CPU (os.environ scanned 13,756 times in one). Read once per origin
            # here, and passed with each request: the same settings, as long as the environment stays put.
            session.trust_env = False
            self._env = {}
        self.session = session
        self.timeout = timeout

    def _settings(self, url: str) -> dict[str, Any]:
        if self._env is None:
            return {}
        from urllib.parse import urlsplit

        origin = urlsplit(url)[:2]
        found = self._env.get(origin)  # type: ignore[call-overload]
        if found is None:
            import requests

            env = requests.Session()  # trusts the environment: its own reading of it, once
            merged = env.merge_environment_settings(url, {}, None, None, None)
            found = {"proxies": merged["proxies"], "verify": merged["verify"], "cert": merged["cert"],
                     "auth": requests.utils.get_netrc_auth(url)}
            env.close()
            self._env[origin] = found  # type: ignore[index]
        return found

    def __call__(self, method: str, url: str, body: bytes | None, headers: dict[str, str], name: str) -> tuple[int, bytes]:
        try:
            resp = self.session.request(method, url, data=body, headers=headers, timeout=self.timeout,
                                        **self._settings(url))
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

    ``field``: where the error's code or text sits in the body: a dotted path, or several
    tried in order (``("detail", "non_field_errors", "positions.item")``). A path walks
    through lists (``positions.item`` reads ``{"positions": [{"item": ["text"]}]}``), and a
    list of strings at its end gives each of them: DRF's and Rails' error bodies both work.
    The texts found are matched against ``codes`` (a whole string), then ``prefixes`` (the
    text starts with it: a fixed sentence followed by a number), then ``patterns`` (regular
    expressions, searched). Then ``statuses`` maps an HTTP status; then the first text found
    is kept as it is; then ``http_<status>``. ``message``: the path(s) of the human text
    (default: ``message``, else the first text found).

    :meth:`code` and :meth:`message` are the extension points: a subclass that overrides
    them reads any error body at all.
    """

    def __init__(self, field: str | tuple[str, ...] = "error", codes: dict[str, str] | None = None,
                 statuses: dict[int, str] | None = None, message: str | tuple[str, ...] = "message", *,
                 prefixes: dict[str, str] | None = None, patterns: dict[str, str] | None = None) -> None:
        import re

        self.fields = (field,) if isinstance(field, str) else tuple(field)
        self.field = self.fields[0] if self.fields else ""
        self.message_fields = (message,) if isinstance(message, str) else tuple(message)
        self.message_field = self.message_fields[0] if self.message_fields else ""
        self.codes, self.statuses = dict(codes or {}), dict(statuses or {})
        self.prefixes = dict(prefixes or {})
        try:
            self.patterns = [(re.compile(p), c) for p, c in (patterns or {}).items()]
        except re.error as e:
            raise ValueError(f"ErrorMap patterns: {e.pattern!r} is not a regular expression ({e}); "
                             f"write a Python re pattern, e.g. r'not enough (quota|seats)'") from None
        # the contracts' own shape: no path walk, no lookups (the load's commonest answer: a sold-out 409)
        self._plain = self.fields == ("error",) and not (self.codes or self.statuses or self.prefixes
                                                         or self.patterns)

    def texts(self, doc: Any) -> list[str]:
        """Every string under the code's path(s), in order."""
        out: list[str] = []
        for path in self.fields:
            out += strings(dig_all(doc, path))
        return out

    def code(self, status: int, doc: Any) -> str | None:
        """The contract's code of an error answer (None: no code found; the caller uses ``http_<status>``)."""
        if self._plain:
            raw = doc.get("error") if isinstance(doc, dict) else None
            return raw if isinstance(raw, str) else None
        texts = self.texts(doc)
        for text in texts:
            if text in self.codes:
                return self.codes[text]
        for text in texts:
            for prefix, code in self.prefixes.items():
                if text.startswith(prefix):
                    return code
        for text in texts:
            for pattern, code in self.patterns:
                if pattern.search(text):
                    return code
        if status in self.statuses:
            return self.statuses[status]
        return texts[0] if texts else None

    def message(self, doc: Any, content: bytes) -> str:
        """The human text of an error answer (shown in findings)."""
        if self._plain:
            text = doc.get(self.message_field) if isinstance(doc, dict) else None
        else:
            found = [t for path in self.message_fields for t in strings(dig_all(doc, path))]
            text = found[0] if found else (self.texts(doc) or [None])[0]
        return str(text if text is not None else content[:200])[:300]


CONTRACT_ERRORS = ErrorMap()


def dig(doc: Any, path: str) -> Any:
    """``doc["a"]["b"]`` for ``"a.b"``; None when any step is missing (or ``path`` is empty: ``doc``)."""
    for part in path.split(".") if path else ():
        if not isinstance(doc, dict):
            return None
        doc = doc.get(part)
    return doc


def dig_all(doc: Any, path: str) -> list[Any]:
    """Every value at ``path``, walking through lists on the way (``"positions.item"`` over
    ``{"positions": [{"item": ...}, {"item": ...}]}`` gives both items); [] when none."""
    found = [doc]
    for part in path.split(".") if path else ():
        step: list[Any] = []
        for d in found:
            for x in d if isinstance(d, list) else [d]:
                if isinstance(x, dict) and x.get(part) is not None:
                    step.append(x[part])
        found = step
    return found


def strings(values: list[Any]) -> list[str]:
    """The strings among ``values`` and in the lists among them (nested lists too)."""
    out: list[str] = []
    for v in values:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, list):
            out += strings(v)
    return out


def call(history: History, transport: Transport, f: str, args: dict[str, Any], method: str, url: str,
         body: Any, process: Any, parse: Callable[[Any], Any], *, intended_time: float | None = None,
         headers: dict[str, str] | None = None, name: str | None = None, errors: ErrorMap = CONTRACT_ERRORS) -> Op:
    """Send one request through ``transport``, record it in ``history``, return the completed op."""
    op = history.invoke(process, f, args, intended_time)
    op.send_time = time.time()
    try:
        type_, value, error = exchange(transport, method, url, body, headers, name or f, parse, errors)
    except Exception as e:  # a bug on our side: the outcome is unknown, and it must not stay pending
        history.complete(op, INFO, "client_error", f"{type(e).__name__}: {e}")
        raise
    return history.complete(op, type_, value, error)


Outcome = tuple  # (OK | FAIL | INFO, the value or the code, the service's message or None)


def exchange(transport: Transport, method: str, url: str, body: Any, headers: dict[str, str] | None, name: str,
             parse: Callable[[Any], Any], errors: ErrorMap = CONTRACT_ERRORS) -> Outcome:
    """One request and its outcome, recorded nowhere: (type, value or code, message). The rule of
    :func:`call`, for an operation made of several requests (:class:`peakproof.driver.Operation`)."""
    data = None if body is None else dumps(body)
    hdrs = {**JSON_HEADERS, **headers} if headers else JSON_HEADERS
    try:
        status, content = transport(method, url, data, hdrs, name)
    except TransportError as e:
        if e.kind == "refused":
            return FAIL, "connection_refused", str(e)
        return INFO, e.kind, str(e)
    return outcome(status, content, parse, method, errors)


NO_BODY_ALLOWED = ("PUT", "DELETE")


def classify(history: History, op: Op, status: int, content: bytes, parse: Callable[[Any], Any],
             method: str = "GET", errors: ErrorMap = CONTRACT_ERRORS) -> Op:
    return history.complete(op, *outcome(status, content, parse, method, errors))


def outcome(status: int, content: bytes, parse: Callable[[Any], Any], method: str = "GET",
            errors: ErrorMap = CONTRACT_ERRORS) -> Outcome:
    """An answer as (type, value or code, message): ok, fail or info by the module's rule."""
    try:
        doc = loads(content) if content else None
    except ValueError:
        doc = None
    if 200 <= status < 300:
        if not content.strip() and method in NO_BODY_ALLOWED:
            return OK, {}, None
        try:
            return OK, parse(doc), None
        except (TypeError, ValueError, KeyError) as e:
            return INFO, "bad_response", (f"HTTP {status} with a body not of the contract's shape: {e}; "
                                          f"body {content[:200]!r}")
    code = errors.code(status, doc)
    message = errors.message(doc, content)
    if 400 <= status < 500:
        return FAIL, code or f"http_{status}", message
    if status == 503 and code == "busy":
        return FAIL, "busy", message
    return INFO, code or f"http_{status}", f"HTTP {status}: {message}"


def json_object(doc: Any) -> dict[str, Any]:
    """The smallest response parser: the body must be a JSON object (else the op is info)."""
    if not isinstance(doc, dict):
        raise TypeError(f"expected a JSON object, got {type(doc).__name__}")
    return doc
