"""The few raw-ASGI pieces every reference target's HTTP layer needs (no framework: speed)."""

from __future__ import annotations

import json
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
