"""Run the feed reference target for real: SQLite post store, wall clock, fan-out consumers, uvicorn."""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path

from .app import FanoutConsumers, FeedApp
from .core import FeedCore
from .store import SqliteFeedStore


# The seed's hybrid threshold at full scale: window x spare capacity = 169,691 followers. A target
# is configured, not computed: peakproof's port of the seed's model computes the figure
# (peakproof.models.feed), ``peakproof serve feed`` passes it, and a test checks the two agree.
SEED_THRESHOLD = 169_691


def build_app(db: str | Path, *, policy: str = "hybrid", threshold: int | None = None, inbox_cap: int = 400,
              shards: int = 4, consumers: int = 4, rate: float | None = None, max_backlog: int | None = None,
              admin_token: str | None = None, window: float = 60.0, durability: str = "normal") -> FeedApp:
    store = SqliteFeedStore(db, durability=durability)
    core = FeedCore(time.time, policy=policy, threshold=SEED_THRESHOLD if threshold is None else threshold,
                    inbox_cap=inbox_cap, shards=shards, store=store, max_backlog=max_backlog)
    t0 = time.monotonic()
    loaded = core.restore()
    gc.freeze()  # what was restored lives as long as the process: keep it out of every collection
    if loaded:
        print(f"peakproof: feed restored {loaded:,} posts and {sum(map(len, core.following.values())):,} follows "
              f"from {db}; inboxes rebuilt in {time.monotonic() - t0:.2f} s", file=sys.stderr, flush=True)
    pool = FanoutConsumers(core, consumers=consumers, rate=rate).start()
    return FeedApp(core, pool, admin_token=admin_token, window=window)


def serve(host: str, port: int, db: str | Path, *, http: str = "uvicorn", **options: object) -> None:
    from .._lean import serve_asgi

    app = build_app(db, **options)  # type: ignore[arg-type]
    serve_asgi(app, host, port, http, timeout_keep_alive=30)
