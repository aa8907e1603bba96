"""The raw-ASGI base every reference target's HTTP layer stands on (no framework: speed):
route matching with 404/405 that say what works, body limits, JSON errors, lifespan, and
:class:`AsgiApp` with the one error ladder."""

from __future__ import annotations

import json
import re
from typing import Any, Awaitable, Callable

from ._errors import ContractError

try:  # a C JSON codec: about a third of the accept path's time was json's
    import orjson

    def _loads(body: bytes) -> Any:
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            return json.loads(body)  # what orjson refuses (ints past 64 bits, NaN) json may read; or says why not

    def _dumps(doc: Any) -> bytes:
        try:
            return orjson.dumps(doc)
        except TypeError:  # past 64-bit ints and the like: the standard codec writes them
            return json.dumps(doc).encode()
except ImportError:  # pragma: no cover - the standard library's
    def _loads(body: bytes) -> Any:
        return json.loads(body)

    def _dumps(doc: Any) -> bytes:
        return json.dumps(doc).encode()

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
MAX_BODY = 64 * 1024


def rfc3339(ts: float) -> str:
    """Epoch seconds -> RFC 3339 in UTC with microseconds: how every contract emits a time."""
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


class HttpError(Exception):
    def __init__(self, status: int, code: str, message: str,
                 headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = headers or []


def json_integer(value: Any) -> Any:
    """A JSON number with an integral value is an integer (JSON Schema's ``integer``: 7.0 is 7).

    Anything else comes back as it came, for the core's validation to refuse with its message."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value


async def lifespan(receive: Receive, send: Send, on_startup: Callable[[], None] = lambda: None,
                   on_shutdown: Callable[[], None] = lambda: None) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            on_startup()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            on_shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return


Route = tuple[str, "re.Pattern[str]", str]  # (method, path pattern under the prefix, handler name)


def route_table(spec: str) -> list[Route]:
    """Routes from a table, one a line: ``METHOD /path/{name}/... handler``. A ``{...}`` is one
    path segment, passed to the handler in order. Every app also gets ``GET /openapi.json``
    and ``GET /health`` (the base's handlers)."""
    routes: list[Route] = []
    for line in spec.strip().splitlines():
        method, path, handler = line.split()
        pattern = re.sub(r"\\{\w+\\}", "([^/]+)", re.escape(path))
        routes.append((method, re.compile(pattern), handler))
    return routes + [("GET", re.compile(r"/openapi\.json"), "openapi"), ("GET", re.compile(r"/health"), "health")]


def resolve_route(routes: list[Route], prefix: str, api: str, method: str,
                  full_path: str) -> tuple[str, tuple[str, ...]]:
    """(handler name, path groups) for a request under ``prefix``; 404 / 405 with what would work."""
    if not full_path.startswith(prefix + "/"):
        raise HttpError(404, "not_found", f"no route {full_path}; the {api} API is under {prefix}/")
    path = full_path[len(prefix):]
    allowed = []
    for verb, pattern, name in routes:
        m = pattern.fullmatch(path)
        if m is None:
            continue
        if verb != method:
            allowed.append(verb)
            continue
        return name, m.groups()
    if allowed:  # RFC 9110 15.5.6: a 405 lists the methods the resource supports
        raise HttpError(405, "method_not_allowed", f"{method} {path}: use {', '.join(allowed)}",
                        [(b"allow", ", ".join(sorted(set(allowed))).encode())])
    raise HttpError(404, "not_found", f"no route {method} {path}")


async def match_route(routes: list[Route], prefix: str, api: str, scope: dict[str, Any], receive: Receive,
                      body_limit: Callable[[str], int] = lambda name: MAX_BODY) -> tuple[str, bytes, tuple[str, ...]]:
    """(handler name, body, path groups) for a request under ``prefix``; 404 / 405 with what would work."""
    method = scope["method"]
    name, groups = resolve_route(routes, prefix, api, method, scope["path"])
    body = await read_body(receive, body_limit(name)) if method in ("PUT", "POST") else b""
    return name, body, groups


async def read_body(receive: Receive, limit: int = MAX_BODY) -> bytes:
    chunks, size = [], 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise HttpError(413, "body_too_large", f"request body over {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def json_object(body: bytes, required: tuple[str, ...]) -> dict[str, Any]:
    try:
        doc = _loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise HttpError(400, "invalid_request", f"the body must be a JSON object; could not parse it: {e}") from None
    if not isinstance(doc, dict):
        raise HttpError(400, "invalid_request", f"the body must be a JSON object; got {type(doc).__name__}")
    missing = [k for k in required if k not in doc]
    if missing:
        raise HttpError(400, "invalid_request", f"missing field(s) {', '.join(missing)}; expected {', '.join(required)}")
    return doc


async def send_json(send: Send, status: int, payload: Any, headers: list[tuple[bytes, bytes]] = ()) -> None:  # type: ignore[assignment]
    body = payload if isinstance(payload, bytes) else _dumps(payload)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


class Request:
    """What a handler gets: the ASGI scope and the body, with the few readers every handler needs."""

    __slots__ = ("scope", "body")

    def __init__(self, scope: dict[str, Any], body: bytes) -> None:
        self.scope, self.body = scope, body

    def json(self, *required: str) -> dict[str, Any]:
        return json_object(self.body, required)

    def header(self, name: bytes) -> str:
        return dict(self.scope["headers"]).get(name, b"").decode("latin-1")

    @property
    def query(self) -> str:
        return self.scope.get("query_string", b"").decode("latin-1")


Reply = tuple  # (status, payload) or (status, payload, headers): payload bytes are sent as they are


class AsgiApp:
    """The raw-ASGI base of every reference target: routing, the error ladder, lifespan, admin auth.

    A subclass sets ``api`` (its name in messages), ``routes`` and ``openapi_path``, and
    writes one ``async def _<route name>(self, req, *path_groups) -> Reply`` per route.
    The error ladder, the same for every case: :class:`HttpError` and a core's
    :class:`ContractError` answer their status in the contract's shape ``{error, message,
    ...extra}`` (with ``Retry-After`` when the refusal says when to come back); anything
    else is a bug, answered 500 ``internal`` in the same shape, never a dropped connection.
    """

    api = "api"
    routes: list[Route] = []
    openapi_path: Any = None
    body_limits: dict[str, int] = {}

    def __init__(self, prefix: str, *, admin_token: str | None = None, threads: int = 8,
                 thread_name: str = "handler") -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.prefix = prefix.rstrip("/")
        self.admin_token = admin_token
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=thread_name)
        self._openapi_bytes = self.openapi_path.read_bytes() if self.openapi_path else b"{}"
        self._routes_seen: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {}

    # -- hooks ---------------------------------------------------------------------------------------

    def on_request(self, scope: dict[str, Any]) -> None:
        """Called for every HTTP request before routing (a target's own counters)."""

    def on_startup(self) -> None:
        pass

    def on_shutdown(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    def health(self) -> dict[str, Any]:
        return {"status": "ok"}

    # -- the machinery ---------------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send, self.on_startup, self.on_shutdown)
            return
        if scope["type"] != "http":
            return
        self.on_request(scope)
        headers: list[tuple[bytes, bytes]] = []
        try:
            reply = await self._dispatch(scope, receive)
            status, payload = reply[0], reply[1]
            headers = list(reply[2]) if len(reply) > 2 else []
        except HttpError as e:
            status, payload, headers = e.status, {"error": e.code, "message": e.message}, e.headers
        except ContractError as e:
            status, payload = e.status, {"error": e.code, "message": e.message, **e.extra}
            if "retry_after" in e.extra:
                headers = [(b"retry-after", str(max(1, round(float(e.extra["retry_after"]) + 0.5))).encode())]
        except Exception as e:  # a bug in the target must still answer in the contract's shape
            status, payload = 500, {"error": "internal", "message": f"{type(e).__name__}: {e}"}
        await send_json(send, status, payload, headers)

    ROUTE_CACHE = 4096  # (method, path) pairs remembered; past it the cache starts over (ids are unbounded)

    async def _dispatch(self, scope: dict[str, Any], receive: Receive) -> Reply:
        path, method = scope["path"], scope["method"]
        if path == "/openapi.json":
            return 200, self._openapi_bytes
        # A run repeats a few paths (one quota's reservations) thousands of times a second: the route
        # they resolve to is remembered rather than matched against every pattern again.
        key = (method, path)
        hit = self._routes_seen.get(key)
        raw = scope.get("raw_path") or b""
        if b"%2f" in raw.lower():  # an id with a '/' in it (sent as %2F): split the path before decoding it
            from urllib.parse import unquote

            name, groups = resolve_route(self.routes, self.prefix, self.api, method, raw.decode("latin-1"))
            hit = name, tuple(unquote(g) for g in groups)
        elif hit is None:
            hit = resolve_route(self.routes, self.prefix, self.api, method, path)  # raises 404 / 405: not kept
            if len(self._routes_seen) >= self.ROUTE_CACHE:
                self._routes_seen.clear()
            self._routes_seen[key] = hit
        name, groups = hit
        body = await read_body(receive, self.body_limits.get(name, MAX_BODY)) if method in ("PUT", "POST") else b""
        return await getattr(self, "_" + name)(Request(scope, body), *groups)

    async def in_pool(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run blocking work (the store, a lock) on the app's threads, off the event loop."""
        import asyncio

        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    def require_admin(self, req: Request, what: str) -> None:
        if self.admin_token is not None and req.header(b"authorization") != f"Bearer {self.admin_token}":
            raise HttpError(401, "unauthorized", f"{what} needs 'Authorization: Bearer <admin token>' "
                                                 f"(the server's --admin-token)")

    # -- the routes every target has ---------------------------------------------------------------------

    async def _openapi(self, req: Request) -> Reply:
        return 200, self._openapi_bytes

    async def _health(self, req: Request) -> Reply:
        return 200, self.health()
