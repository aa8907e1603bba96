"""The counter's reference target: a raw ASGI app (served by ``peakproof.targets._lean`` or uvicorn).

    POST /counter/increments {"by": n}  -> 200 {"value": v}   (v: the value this increment left)
    GET  /counter                       -> 200 {"value": v}
    GET  /counter/health                -> 200 {"status": "ok", "policy": ...}

Errors answer as JSON ``{"error": code, "message": text}``: 400 ``invalid_json`` /
``invalid_by``, 404 ``not_found``, 405 ``method_not_allowed`` (with ``Allow``), 413
``body_too_large``, 500 ``internal``. The core holds its own lock, so the app is safe on
any number of threads; under ``racy`` it yields between an increment's snapshot and its
write (``racy_pause`` s), which is where concurrent increments get lost.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from .core import CounterCore, CounterError

PATH = "/counter"


class CounterApp:
    MAX_BODY = 4096

    def __init__(self, core: CounterCore, racy_pause: float = 0.001) -> None:
        self.core = core
        self.racy_pause = racy_pause
        self.routes = {(PATH, "GET"): self.read, (PATH + "/health", "GET"): self.health,
                       (PATH + "/increments", "POST"): self.increment}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        headers: list[tuple[bytes, bytes]] = []
        try:
            body = await self._body(receive)
            path = scope["path"].rstrip("/") or "/"
            method = "GET" if scope["method"] == "HEAD" else scope["method"]
            handler = self.routes.get((path, method))
            if handler is None:
                allowed = sorted(m for p, m in self.routes if p == path)
                if allowed:
                    headers.append((b"allow", ", ".join(allowed).encode()))
                    raise CounterError(405, "method_not_allowed", f"{scope['method']} {path}: use {', '.join(allowed)}")
                raise CounterError(404, "not_found", f"no route {scope['method']} {path}; the routes are: "
                                   + ", ".join(f"{m} {p}" for p, m in self.routes))
            status, doc = 200, await handler(body)
        except CounterError as e:
            status, doc = e.status, {"error": e.code, "message": e.message}
        except Exception as e:  # noqa: BLE001 - our own bug: answered, never a dropped connection
            status, doc = 500, {"error": "internal", "message": f"{type(e).__name__}: {e}"}
        data = json.dumps(doc).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(data)).encode()), *headers]})
        await send({"type": "http.response.body", "body": data})

    async def _body(self, receive: Any) -> bytes:
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.MAX_BODY:
                raise CounterError(413, "body_too_large", f"the body is over {self.MAX_BODY:,} bytes")
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        return b"".join(chunks)

    async def health(self, body: bytes) -> dict[str, Any]:
        return {"status": "ok", "policy": self.core.policy}

    async def read(self, body: bytes) -> dict[str, Any]:
        return {"value": self.core.read()}

    async def increment(self, body: bytes) -> dict[str, Any]:
        try:
            doc = json.loads(body) if body.strip() else None
        except ValueError as e:
            raise CounterError(400, "invalid_json", f"the body is not JSON: {e}") from None
        if not isinstance(doc, dict) or "by" not in doc:
            raise CounterError(400, "invalid_by", 'the body must be a JSON object {"by": n}')
        pending = self.core.begin(doc["by"])
        if pending.base is not None and self.racy_pause > 0:
            await asyncio.sleep(self.racy_pause)  # the racy window: other increments commit meanwhile
        return {"value": self.core.commit(pending)}


def serve_counter(host: str, port: int, policy: str = "locked", http: str = "lean", racy_pause: float = 0.001) -> None:
    """Serve the reference counter until SIGINT or SIGTERM."""
    from peakproof.targets._lean import serve_asgi

    serve_asgi(CounterApp(CounterCore(policy), racy_pause), host, port, http)
