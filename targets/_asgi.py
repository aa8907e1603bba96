"""The few raw-ASGI pieces every reference target's HTTP layer needs (no framework: speed)."""

from __future__ import annotations

import json
from re import Pattern
from typing import Any, Awaitable, Callable

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
MAX_BODY = 64 * 1024


class HttpError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


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


Route = tuple[str, "Pattern[str]", str]  # (method, path pattern under the prefix, handler name)


async def match_route(routes: list[Route], prefix: str, api: str, scope: dict[str, Any], receive: Receive,
                      body_limit: Callable[[str], int] = lambda name: MAX_BODY) -> tuple[str, bytes, tuple[str, ...]]:
    """(handler name, body, path groups) for a request under ``prefix``; 404 / 405 with what would work."""
    path, method = scope["path"], scope["method"]
    if not path.startswith(prefix + "/"):
        raise HttpError(404, "not_found", f"no route {path}; the {api} API is under {prefix}/")
    path = path[len(prefix):]
    allowed = []
    for verb, pattern, name in routes:
        m = pattern.fullmatch(path)
        if m is None:
            continue
        if verb != method:
            allowed.append(verb)
            continue
        body = await read_body(receive, body_limit(name)) if method in ("PUT", "POST") else b""
        return name, body, m.groups()
    if allowed:
        raise HttpError(405, "method_not_allowed", f"{method} {path}: use {', '.join(allowed)}")
    raise HttpError(404, "not_found", f"no route {method} {path}")


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
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise HttpError(400, "invalid_request", f"the body must be a JSON object; could not parse it: {e}") from None
    if not isinstance(doc, dict):
        raise HttpError(400, "invalid_request", f"the body must be a JSON object; got {type(doc).__name__}")
    missing = [k for k in required if k not in doc]
    if missing:
        raise HttpError(400, "invalid_request", f"missing field(s) {', '.join(missing)}; expected {', '.join(required)}")
    return doc


async def send_json(send: Send, status: int, payload: Any, headers: list[tuple[bytes, bytes]] = ()) -> None:  # type: ignore[assignment]
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})
