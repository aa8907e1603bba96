"""The feed core served over HTTP, with its real-time adapter: the fan-out consumers.

* The ASGI app answers the contract under ``/feed`` (see ``openapi.json``). Reads and small
  writes run on the event loop (in-memory work, one short SQLite write for a publish);
  the bulk ``/admin/graph`` runs on a thread.
* ``FanoutConsumers``: competing consumer threads that drain the fan-out queue in batches,
  at most ``rate`` inbox writes/s in all when a rate is set (the seed's capacity: 3x the
  steady fan-out). A slowed consumer is this rate turned down (``POST /_admin/fanout``).
* Backpressure, two signals on ``POST /posts``:
  - accepted but degraded: 201 with header ``Feed-Backpressure: lag=<s>; window=<s>`` and
    ``"fanout": {"backlog", "expected_lag_s", "within_window": false}`` when the backlog
    at the consumers' drain rate would take longer than the G2 window: the post is stored
    and will show, late (the seed: a slow consumer means drifting freshness, not errors);
  - refused: 429 with ``Retry-After`` when the queue is at its capacity (``max_backlog``
    inbox writes): nothing was stored, publish again later.
* ``GET /_stats`` and ``POST /_admin/fanout`` are the reference target's own (not in the
  contract): backlog, freshness, counters; consumer rate, threshold, shards down.
"""

from __future__ import annotations

import gc
import re
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from .._asgi import AsgiApp, route_table, Reply, Request, rfc3339
from .._background import BackgroundLoop, LoopHealth
from .core import FeedCore, InvalidRequest, Post

OPENAPI_PATH = Path(__file__).with_name("openapi.json")
GRAPH_BODY_LIMIT = 64 * 1024 * 1024  # bulk follows: about 2 million pairs a request


def post_json(p: Post) -> dict[str, Any]:
    return {"post_id": p.post_id, "author_id": p.author_id, "text": p.text, "created_at": rfc3339(p.created_at)}


# The cursor is opaque to clients, and its shape is in the contract (its ``pattern``): the
# created time's exact decimal expansion (Decimal(float) round-trips every float, and never takes
# an exponent), '_', the post id. Every string of that shape decodes, every other is refused.
# The post id's part is URL-unreserved characters (what the reference's ids are made of), spelled
# out: a class like \S means other things in Python's re and in JSON Schema's ECMA-262 dialect.
CURSOR_PATTERN = r"-?[0-9]{1,400}(\.[0-9]{1,1100})?_[0-9A-Za-z._~-]{1,200}"
_CURSOR = re.compile(CURSOR_PATTERN)


def encode_cursor(key: tuple[float, str]) -> str:
    return f"{Decimal(key[0]):f}_{key[1]}"


def decode_cursor(text: str) -> tuple[float, str]:
    if _CURSOR.fullmatch(text) is None:
        raise InvalidRequest(f"cursor must be a next_cursor this server returned (CREATED_POSTID); got {text[:80]!r}")
    at, _, post_id = text.partition("_")
    return float(at), post_id


class FanoutConsumers(BackgroundLoop):
    """Competing consumers of the fan-out queue, sharing one rate limit (token bucket)."""

    def __init__(self, core: FeedCore, *, consumers: int = 4, rate: float | None = None, batch: int = 256,
                 health: LoopHealth | None = None) -> None:
        super().__init__("fanout", consumers, health)
        self.core, self.batch = core, batch
        self.consumers = consumers
        self.rate: float | None = None
        self._tokens, self._refilled = 0.0, time.monotonic()
        self._bucket = threading.Lock()
        self._done_window: list[tuple[float, int]] = []  # (monotonic, writes) for the measured drain rate
        self.set_rate(rate)

    def set_rate(self, rate: float | None) -> None:
        if rate is not None and not rate > 0:
            raise InvalidRequest(f"rate must be > 0 inbox writes/s (or null for unbounded); got {rate!r}")
        with self._bucket:
            self.rate = rate
            self._tokens = 0.0
            self._refilled = time.monotonic()
        self.core.drain_rate = rate

    def _take(self) -> int:
        """How many writes this consumer may do now (0: wait for tokens)."""
        if self.rate is None:
            return self.batch
        with self._bucket:
            now = time.monotonic()
            # at most a tenth of a second of burst, so a slowed consumer really is slow
            self._tokens = min(self.rate * 0.1 + 1, self._tokens + (now - self._refilled) * self.rate)
            self._refilled = now
            n = min(self.batch, int(self._tokens))
            self._tokens -= n
            return n

    def _give_back(self, n: int) -> None:
        if self.rate is not None and n > 0:
            with self._bucket:
                self._tokens += n

    def _loop(self) -> None:
        while not self._stop.is_set():
            allowed = self._take()
            if allowed == 0:
                time.sleep(max(0.001, 1.0 / self.rate) if self.rate else 0.001)
                continue
            try:
                done = self.core.fanout(allowed)
            except Exception as e:  # logged, counted in /_stats; the job is retried, then dead-lettered
                self.health.failed("fanout-consumer", e)
                done = 0
            self._give_back(allowed - done)
            if done:
                self._note(done)
            else:
                self._wake.wait(0.05)
                self._wake.clear()

    def _note(self, done: int) -> None:
        if self.rate is not None:
            return
        now = time.monotonic()
        with self._bucket:
            self._done_window.append((now, done))
            while self._done_window and self._done_window[0][0] < now - 1.0:
                self._done_window.pop(0)
            span = max(0.05, now - self._done_window[0][0])
            self.core.drain_rate = sum(n for _, n in self._done_window) / span


_ROUTES = route_table("""
    PUT     /users/{user}/following/{followee}   follow
    DELETE  /users/{user}/following/{followee}   unfollow
    POST    /posts                               publish
    DELETE  /posts/{post}                        delete
    GET     /users/{user}/feed                   read
    POST    /admin/graph                         graph
    GET     /_stats                              stats
    POST    /_admin/fanout                       admin_fanout
""")

class FeedApp(AsgiApp):
    api, routes, openapi_path = "feed", _ROUTES, OPENAPI_PATH
    body_limits = {"graph": GRAPH_BODY_LIMIT}

    def __init__(self, core: FeedCore, consumers: FanoutConsumers, *, prefix: str = "/feed",
                 admin_token: str | None = None, window: float = 60.0) -> None:
        super().__init__(prefix, admin_token=admin_token, threads=2, thread_name="feed-bulk")
        self.core, self.consumers = core, consumers
        self.window = window

    def on_shutdown(self) -> None:
        self.consumers.stop()

    def health(self) -> dict[str, Any]:
        return {"status": "ok", "policy": self.core.policy}

    # -- the contract ------------------------------------------------------------------------------

    async def _follow(self, req: Request, user: str, followee: str) -> Reply:
        self.core.follow(user, followee)
        return 200, {"user_id": user, "followee_id": followee, "following": True}

    async def _unfollow(self, req: Request, user: str, followee: str) -> Reply:
        self.core.unfollow(user, followee)
        return 200, {"user_id": user, "followee_id": followee, "following": False}

    async def _publish(self, req: Request) -> Reply:
        doc = req.json("author_id", "text")
        post = self.core.publish(doc["author_id"], doc["text"])
        self.consumers.wake()
        lag = self.core.expected_lag()
        late = lag is not None and lag > self.window
        payload = {**post_json(post), "fanout": {"fanned_out": post.fanned_out, "backlog": self.core.backlog(),
                                                 "expected_lag_s": None if lag is None else round(lag, 3),
                                                 "within_window": not late}}
        headers = [(b"feed-backpressure", f"lag={lag:.3f}; window={self.window:g}".encode())] if late else []
        return 201, payload, headers

    async def _delete(self, req: Request, post_id: str) -> Reply:
        post = self.core.delete(post_id)
        return 200, {**post_json(post), "deleted": True}

    async def _read(self, req: Request, user: str) -> Reply:
        q = parse_qs(req.query, keep_blank_values=True)  # "cursor=" is a cursor, and not one this server gave
        raw_limit = q.get("limit", ["20"])[-1]
        try:
            limit = int(raw_limit)
        except ValueError:
            raise InvalidRequest(f"limit must be an integer from 1 to 100; got {raw_limit[:20]!r}") from None
        cursor = decode_cursor(q["cursor"][-1]) if "cursor" in q else None
        items, nxt, how = self.core.read_view(user, limit, cursor)
        page = {"items": [post_json(p) for p in items], "next_cursor": encode_cursor(nxt) if nxt else None,
                # not in the contract: what the harness's checks can use when a target tells them
                "backlog": self.core.backlog(), "degraded": how["degraded"], "sources": how["sources"]}
        if how["inbox_size"] is not None:  # the pull design has no inboxes: nothing to report
            page["inbox_size"] = how["inbox_size"]
        return 200, page

    async def _graph(self, req: Request) -> Reply:
        self.require_admin(req, "POST /admin/graph")
        doc = req.json("follows")
        follows = doc["follows"]
        if not isinstance(follows, list) or not all(isinstance(p, list) and len(p) == 2 for p in follows):
            raise InvalidRequest("follows must be a list of [user_id, followee_id] pairs; "
                                 f"got {str(follows)[:80]}")
        pairs = [(p[0], p[1]) for p in follows]
        added = await self.in_pool(self.core.follow_many, pairs)
        # A big graph is millions of long-lived objects: move them out of the collector's sight,
        # else every full collection walks them all and stalls reads for hundreds of ms.
        gc.freeze()
        return 200, {"received": len(pairs), "added": added}

    # -- the reference target's own ------------------------------------------------------------------

    async def _stats(self, req: Request) -> Reply:
        c, s = self.core, self.core.stats
        oldest = c.oldest_pending()
        now = time.time()
        return 200, {"now": now, "backlog": c.backlog(), "jobs": len(c.queue),
                     "oldest_pending_age_s": None if oldest is None else now - oldest,
                     "expected_lag_s": c.expected_lag(), "drain_rate": c.drain_rate, "rate": self.consumers.rate,
                     "consumers": self.consumers.consumers, "threshold": c.threshold, "policy": c.policy,
                     "inbox_cap": c.inbox_cap, "window": self.window, "shards": c.shards, "down": sorted(c.down),
                     "posts": s.posts, "fanned_posts": s.fanned_posts, "inbox_writes": s.inbox_writes,
                     "reads": s.reads, "degraded_reads": s.degraded_reads, "pulled_sources": s.pulled_sources,
                     "users_following": len(c.following), "pull_authors": len(c.pull_authors),
                     "dead_lettered_jobs": len(c.dead_letters), "dead_letters": c.dead_letters[-20:],
                     **self.consumers.health.snapshot()}

    async def _admin_fanout(self, req: Request) -> Reply:
        self.require_admin(req, "POST /_admin/fanout")
        doc = req.json()
        if "rate" in doc:
            self.consumers.set_rate(doc["rate"])
        if "threshold" in doc:
            self.core.set_threshold(doc["threshold"])
        if "shards_down" in doc:
            down = doc["shards_down"]
            if not isinstance(down, list) or not all(type(x) is int and 0 <= x < self.core.shards for x in down):
                raise InvalidRequest(f"shards_down must be a list of shard numbers from 0 to {self.core.shards - 1}; "
                                     f"got {down!r:.60}")
            for shard in range(self.core.shards):
                self.core.set_shard_down(shard, shard in down)
        if "max_backlog" in doc:
            cap = doc["max_backlog"]
            if cap is not None and (type(cap) is not int or cap < 1):
                raise InvalidRequest(f"max_backlog must be an integer >= 1 (or null: unbounded); got {cap!r:.60}")
            self.core.max_backlog = cap
        return await self._stats(req)
