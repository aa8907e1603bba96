"""Run the notifications reference target for real: SQLite, wall clock, dispatcher, bulkheads, uvicorn."""

from __future__ import annotations

import time
from pathlib import Path

from .app import Dispatcher, NotificationsApp
from .core import BreakerConfig, NotificationsCore
from .store import GroupCommitStore, SqliteStore


def build_app(db: str | Path, provider_url: str, *, policy: str = "cascade", backoff: float = 30.0,
              workers: int = 32, call_timeout: float = 2.0, breaker_cool_down: float = 10.0, budget: int = 3,
              breaker_window: int = 200, breaker_failures: int = 24, commit: str = "group",
              durability: str = "normal", dispatch: bool = True) -> NotificationsApp:
    """``commit``: "group" (one transaction per batch of writes, reads from memory: the design) or
    "each" (one SQLite transaction per write, reads from SQLite: the old path, for the benchmark)."""
    store = GroupCommitStore(db, durability=durability) if commit == "group" else SqliteStore(db)
    core = NotificationsCore(store, time.time, policy=policy, backoff=backoff, budget=budget,
                             breaker=BreakerConfig(breaker_window, breaker_failures, breaker_cool_down))
    dispatcher = Dispatcher(core, provider_url, workers=workers, call_timeout=call_timeout)
    if dispatch:  # off only to benchmark the accept path alone
        dispatcher.start()
    return NotificationsApp(core, dispatcher)


def serve(host: str, port: int, db: str | Path, provider_url: str, *, http: str = "uvicorn",
          **options: object) -> None:
    import sys

    from .._lean import serve_asgi

    # The event loop shares the GIL with the committer and the bulkhead workers: hand it over
    # every 0.5 ms rather than 5 ms, or requests queue behind a worker's time slice.
    sys.setswitchinterval(0.0005)
    app = build_app(db, provider_url, **options)  # type: ignore[arg-type]
    serve_asgi(app, host, port, http)
