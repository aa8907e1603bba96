"""Run the tickets reference target for real: SQLite store, wall clock, supervisor, uvicorn."""

from __future__ import annotations

import time
from pathlib import Path

from .app import Supervisor, TicketsApp
from .core import Policy, TicketsCore
from .realtime import realtime_core
from .store import SqliteStore


def build_app(db: str | Path, *, policy: Policy = "pessimistic", admin_token: str | None = None,
              hold_seconds: float = 120.0, lease_seconds: float = 2.0, threads: int = 32,
              durability: str = "normal") -> tuple[TicketsApp, Supervisor]:
    def open_core() -> TicketsCore:
        return realtime_core(SqliteStore(db, durability=durability), time.time, policy=policy,
                             lease_seconds=lease_seconds)

    app = TicketsApp(open_core(), admin_token=admin_token, threads=threads, default_hold_seconds=hold_seconds,
                     reopen=open_core)
    supervisor = Supervisor(app.core, health=app.loops)
    app.on_restart.append(lambda core: setattr(supervisor, "core", core))
    return app, supervisor


def serve(host: str, port: int, db: str | Path, *, http: str = "uvicorn", **options: object) -> None:
    """Serve until interrupted. Loopback by default; uvloop + httptools for the hot path."""
    from .._lean import serve_asgi

    app, supervisor = build_app(db, **options)  # type: ignore[arg-type]
    supervisor.start()
    try:
        serve_asgi(app, host, port, http, timeout_keep_alive=30)
    finally:
        supervisor.stop()
