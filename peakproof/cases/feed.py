"""Case F, news feed: the drivers (in process, in virtual time; over HTTP, any URL).

Both record the same operations (follow, unfollow, publish, delete, read) into a
history the checks in :mod:`peakproof.cases.feed_checks` judge. In process, fan-out
progresses only when told (``fanout``); over HTTP it is the target's business, and
``fanout`` waits for the reference target's backlog to drain when it reports one.
"""

from __future__ import annotations

import time
from typing import Any, Callable
from urllib.parse import quote

from ..clock import VirtualClock
from ..errors import TargetError
from ..history import FAIL, INFO, OK, History, Op
from ..http import json_object
from .feed_checks import FEED_CHECKS, FeedAnalysis, check_feed

__all__ = ["InProcessFeed", "HttpFeed", "FEED_CHECKS", "FeedAnalysis", "check_feed"]


class InProcessFeed:
    def __init__(self, *, policy: str = "hybrid", threshold: int = 169_691, inbox_cap: int = 400,
                 core: Any = None, history: History | None = None) -> None:
        from targets.feed import FeedCore, FeedError

        self.clock = VirtualClock()
        self.core = core or FeedCore(self.clock, policy=policy, threshold=threshold, inbox_cap=inbox_cap)
        self.history = history if history is not None else History(self.clock)
        self._error = FeedError

    def _do(self, f: str, args: dict[str, Any], fn: Callable[[], Any], process: Any) -> Op:
        op = self.history.invoke(process, f, args)
        try:
            value = fn()
        except self._error as e:
            return self.history.complete(op, FAIL if e.status < 500 else INFO, e.code, e.message)
        return self.history.complete(op, OK, value)

    def follow(self, user: str, followee: str, *, process: Any = 0) -> Op:
        return self._do("follow", {"user_id": user, "followee_id": followee},
                        lambda: self.core.follow(user, followee), process)

    def unfollow(self, user: str, followee: str, *, process: Any = 0) -> Op:
        return self._do("unfollow", {"user_id": user, "followee_id": followee},
                        lambda: self.core.unfollow(user, followee), process)

    def publish(self, author: str, text: str, *, process: Any = 0) -> Op:
        return self._do("publish", {"author_id": author, "text": text},
                        lambda: post_json(self.core.publish(author, text)), process)

    def delete(self, post_id: str, *, process: Any = 0) -> Op:
        return self._do("delete", {"post_id": post_id}, lambda: post_json(self.core.delete(post_id)), process)

    def read(self, user: str, limit: int = 20, cursor: tuple[float, str] | None = None, *, process: Any = 0) -> Op:
        def go() -> dict[str, Any]:
            items, nxt, _ = self.core.read_view(user, limit, cursor)
            return {"items": [post_json(p) for p in items], "next_cursor": list(nxt) if nxt else None,
                    "backlog": self.core.backlog(), "inbox_size": len(self.core.inboxes.get(user, []))}

        return self._do("read", {"user_id": user, "limit": limit, "cursor": list(cursor) if cursor else None}, go,
                        process)

    def fanout(self, max_writes: int | None = None) -> int:
        return self.core.fanout(max_writes)

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)


def post_json(p: Any) -> dict[str, Any]:
    return {"post_id": p.post_id, "author_id": p.author_id, "text": p.text, "created_at": p.created_at}


class HttpFeed:
    """Drives any server that implements the feed contract (``targets/feed/openapi.json``)."""

    def __init__(self, base_url: str, *, session: Any = None, timeout: float = 5.0, history: History | None = None,
                 transport: Any = None, admin_token: str | None = None) -> None:
        from ..http import RequestsTransport

        self.base = base_url.rstrip("/")
        self.transport = transport or RequestsTransport(session, timeout)
        self.history = history if history is not None else History(time.time)
        self.admin_token = admin_token

    def _call(self, f: str, args: dict[str, Any], method: str, path: str, body: Any, process: Any,
              parse: Callable[[Any], Any], name: str, intended_time: float | None = None,
              headers: dict[str, str] | None = None) -> Op:
        from ..http import call

        return call(self.history, self.transport, f, args, method, self.base + path, body, process, parse,
                    intended_time=intended_time, name=name, headers=headers)

    def follow(self, user: str, followee: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return self._call("follow", {"user_id": user, "followee_id": followee}, "PUT",
                          f"/users/{quote(user, safe='')}/following/{quote(followee, safe='')}", None, process,
                          json_object, "PUT follow", intended_time)

    def unfollow(self, user: str, followee: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return self._call("unfollow", {"user_id": user, "followee_id": followee}, "DELETE",
                          f"/users/{quote(user, safe='')}/following/{quote(followee, safe='')}", None, process,
                          json_object, "DELETE follow", intended_time)

    def publish(self, author: str, text: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return self._call("publish", {"author_id": author, "text": text}, "POST", "/posts",
                          {"author_id": author, "text": text}, process, _post, "POST post", intended_time)

    def delete(self, post_id: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return self._call("delete", {"post_id": post_id}, "DELETE", f"/posts/{quote(post_id, safe='')}", None,
                          process, json_object, "DELETE post", intended_time)

    def read(self, user: str, limit: int = 20, cursor: Any = None, *, process: Any = 0,
             intended_time: float | None = None, name: str | None = None) -> Op:
        query = f"?limit={limit}" + (f"&cursor={quote(str(cursor), safe='')}" if cursor is not None else "")
        return self._call("read", {"user_id": user, "limit": limit, "cursor": cursor}, "GET",
                          f"/users/{quote(user, safe='')}/feed{query}", None, process, _page,
                          name or ("GET feed (first page)" if cursor is None else "GET feed (next page)"),
                          intended_time)

    def add_follows(self, pairs: list[tuple[str, str]], *, chunk: int = 200_000, process: Any = "graph") -> int:
        """Bulk follows through ``POST /admin/graph``, recorded as one ``follow_many`` op; returns those added.

        A failure raises :class:`TargetError` (a load test cannot go on without its graph).
        """
        import requests

        headers = {"Authorization": f"Bearer {self.admin_token}"} if self.admin_token else {}
        op = self.history.invoke(process, "follow_many", {"pairs": pairs})
        added = 0
        for start in range(0, len(pairs), chunk):
            part = [list(p) for p in pairs[start:start + chunk]]
            try:
                resp = requests.post(f"{self.base}/admin/graph", json={"follows": part}, headers=headers, timeout=300)
                doc = resp.json() if resp.status_code == 200 else None
            except (requests.RequestException, ValueError) as e:
                self.history.complete(op, INFO, "error", str(e)[:300])
                raise TargetError(f"POST {self.base}/admin/graph failed: {e}") from None
            if not isinstance(doc, dict):
                self.history.complete(op, INFO, f"http_{resp.status_code}", resp.text[:300])
                raise TargetError(f"POST {self.base}/admin/graph answered {resp.status_code}: {resp.text[:300]} "
                                  f"(expected 200 with {{'added': n}}; an admin token goes in --admin-token)")
            added += int(doc.get("added", 0))
        self.history.complete(op, OK, {"added": added})
        return added

    def stats(self) -> dict[str, Any] | None:
        """The reference target's ``/_stats`` (None from a target without it)."""
        import requests

        try:
            resp = requests.get(f"{self.base}/_stats", timeout=5)
            doc = resp.json() if resp.status_code == 200 else None
        except (requests.RequestException, ValueError):
            return None
        return doc if isinstance(doc, dict) and "backlog" in doc else None

    def admin(self, **settings: Any) -> dict[str, Any] | None:
        """Reference target only: ``POST /_admin/fanout`` (rate, threshold, shards_down, max_backlog)."""
        import requests

        headers = {"Authorization": f"Bearer {self.admin_token}"} if self.admin_token else {}
        try:
            resp = requests.post(f"{self.base}/_admin/fanout", json=settings, headers=headers, timeout=10)
        except requests.RequestException:
            return None
        return resp.json() if resp.status_code == 200 else None

    def fanout(self, max_writes: int | None = None, timeout: float = 5.0) -> int:
        """Over HTTP fan-out is the target's: wait (bounded) until it reports an empty backlog."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.stats()
            if st is None or st.get("backlog") == 0:
                return 0
            time.sleep(0.01)
        return 0

    def advance(self, seconds: float) -> None:
        time.sleep(seconds)


def _post(doc: Any) -> dict[str, Any]:
    doc = json_object(doc)
    for k in ("post_id", "author_id", "created_at"):
        if k not in doc:
            raise KeyError(f"the post has no {k!r}")
    if not isinstance(doc["created_at"], (int, float)) or isinstance(doc["created_at"], bool):
        raise TypeError(f"created_at must be a number (s since the epoch); got {doc['created_at']!r:.40}")
    return doc


def _page(doc: Any) -> dict[str, Any]:
    doc = json_object(doc)
    if not isinstance(doc.get("items"), list) or "next_cursor" not in doc:
        raise KeyError("a feed page must have 'items' (a list) and 'next_cursor'")
    for item in doc["items"]:
        _post(item)
    return doc


# -- the peak workload ------------------------------------------------------------------------------


class FeedWorkload:
    """Case F's peak at a scaled user count, in compressed time.

    * ``users`` = 1,000,000 x ``scale``; every account's follower count is drawn by the
      seed's own generator (MINSTD, Pareto base 33, exponent 1.16, capped at users - 1),
      and its followers uniformly among the others: follows proportional to popularity.
    * Rates are the seed's per-user rates (VH2, VH3 at the VH4 peak: 6.94 posts/s and
      277.78 reads/s per million users) times ``time_scale``; the G2 window is 60 s /
      ``time_scale``. Compressing time this way keeps the seed's arithmetic: the threshold
      (window x spare capacity) is unchanged and the slowed-consumer breach times divide
      by ``time_scale``.
    * The threshold, the consumer capacity (3x steady) and the slowed-consumer table come
      from the ported model (``peakproof.models.feed``) run at ``users``.
    * Beside them, ``newcomers`` (1% more users, ``n0``, ``n1``, ...) who follow
      ``NEWCOMER_FOLLOWS`` accounts well below the threshold and post like everyone: at a
      scaled-down user count nearly everyone follows an account above the threshold, and
      the report compares read latency with and without such accounts.
    """

    NEWCOMER_SHARE = 0.01
    NEWCOMER_FOLLOWS = 20

    def __init__(self, scale: float, time_scale: float = 1.0, seed: int = 20260730, prefix: str = "") -> None:
        from ..models.feed import FeedParams, compute, followers

        if not 2 <= round(1_000_000 * scale):
            raise ValueError(f"scale must give at least 2 users (scale x 1,000,000); got {scale}")
        self.users = round(1_000_000 * scale)
        self.newcomers = max(1, round(self.users * self.NEWCOMER_SHARE))
        self.population = self.users + self.newcomers  # who reads and posts
        self.time_scale, self.seed, self.prefix = time_scale, seed, prefix
        base = compute(FeedParams(users=self.users, seed=seed))
        full = compute()  # full scale: the seed's own table
        seed_model = full["hybrid"]
        self.seed_mean_followers = full["fan_out_models"]["followers"]["mean"]
        h, k = base["fan_out_models"], base["hybrid"]
        self.window = 60.0 / time_scale
        self.post_rate = h["peak_posts_per_s"] * time_scale
        self.read_rate = h["peak_feed_requests_per_s"] * time_scale
        self.threshold = int(k["threshold"])
        self.steady = k["steady_fan_out"] * time_scale  # inbox writes/s with no threshold
        self.capacity = k["capacity"] * time_scale  # 3x steady: the consumers' rate
        chosen = next(r for r in k["rows"] if r["threshold"] == k["threshold"])
        self.write_work = chosen["write_work"] * time_scale  # writes/s of the posts below the threshold
        # the seed's slowed consumers as shares of its write work (1,200 / 1,000 / 700 of 1,247.71)
        seed_work = next(r for r in seed_model["rows"] if r["threshold"] == seed_model["threshold"])["write_work"]
        self.seed_slowed = [{**b, "share_of_write_work": b["consumer_rate"] / seed_work}
                            for b in seed_model["slowed_consumer"]]
        f, _ = followers(FeedParams(users=self.users, seed=seed))
        self.followers = [int(x) for x in f]
        self.model = base

    def user(self, i: int) -> str:
        return f"{self.prefix}u{i}" if i < self.users else f"{self.prefix}n{i - self.users}"

    def slowed(self, share: float) -> dict[str, float]:
        """A consumer at ``share`` of the write work: rate and the seed's arithmetic for the G2 breach."""
        rate = self.write_work * share
        growth = self.write_work - rate
        return {"rate": rate, "backlog_per_s": growth,
                "g2_breached_after_s": self.window * rate / growth if growth > 0 else float("inf")}

    def graph(self) -> tuple[list[tuple[str, str]], list[int]]:
        """(follow pairs (follower, account); how many above-threshold accounts each of the population
        follows). The seed users' pairs come first, then the newcomers'."""
        import numpy as np

        rng = np.random.default_rng(self.seed)
        n = self.users
        pairs: list[tuple[str, str]] = []
        above = [0] * self.population
        names = [self.user(i) for i in range(n)]
        for account, count in enumerate(self.followers):
            if count <= 0:
                continue
            chosen = rng.choice(n - 1, size=min(count, n - 1), replace=False)
            chosen = chosen + (chosen >= account)  # skip the account itself
            name = names[account]
            pairs.extend((names[int(u)], name) for u in chosen)
            if count > self.threshold:
                for u in chosen:
                    above[int(u)] += 1
        small = [i for i, c in enumerate(self.followers) if 0 < c <= self.threshold // 2] or [0]
        for j in range(self.newcomers):
            for account in rng.choice(len(small), size=min(self.NEWCOMER_FOLLOWS, len(small)), replace=False):
                pairs.append((self.user(n + j), names[small[int(account)]]))
        return pairs, above

    def describe(self) -> dict[str, Any]:
        return {"users": self.users, "newcomers (follow only accounts below the threshold)": self.newcomers,
                "time scale": self.time_scale, "G2 window (s)": round(self.window, 3),
                "posts/s": round(self.post_rate, 3), "feed reads/s": round(self.read_rate, 3),
                "mean followers": round(self.model["hybrid"]["mean_followers"], 2),
                "threshold (seed rule at this scale)": self.threshold,
                "accounts above the threshold": sum(1 for x in self.followers if x > self.threshold),
                "steady fan-out (writes/s)": round(self.steady, 2), "consumer capacity 3x steady (writes/s)":
                    round(self.capacity, 2), "write work below the threshold (writes/s)": round(self.write_work, 2)}
