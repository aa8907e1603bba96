"""A tickets-contract target that freezes for 1 s every 5 s (a GC pause, a failover), for tests.

Every quota is sold out: POST reservations answers 409 at once, except during the
freeze, when every request waits for the freeze to end. Run:
``python -m tests.support.stall_target PORT [PERIOD] [STALL]``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

PERIOD, STALL = 5.0, 1.0


async def app(scope, receive, send):  # noqa: ANN001 - a bare ASGI callable
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    while (await receive()).get("more_body"):
        pass
    phase = time.time() % PERIOD
    if phase < STALL:
        await asyncio.sleep(STALL - phase)
    path, method = scope["path"], scope["method"]
    if method == "PUT" and "/quotas/" in path:
        status, body = 200, {"quota_id": path.rsplit("/", 1)[-1], "capacity": 0, "available": 0, "held": 0, "sold": 0}
    elif method == "GET" and path.endswith("/health"):
        status, body = 200, {"status": "ok"}
    elif method == "GET" and "/quotas/" in path:
        status, body = 200, {"quota_id": path.rsplit("/", 1)[-1], "capacity": 0, "available": 0, "held": 0, "sold": 0}
    else:
        status, body = 409, {"error": "sold_out", "message": "sold out", "available": 0}
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


if __name__ == "__main__":
    import uvicorn

    if len(sys.argv) > 2:
        PERIOD = float(sys.argv[2])
    if len(sys.argv) > 3:
        STALL = float(sys.argv[3])
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
