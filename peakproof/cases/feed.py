"""Case F, news feed: the in-process driver (virtual time, fan-out progress under control).

Work in progress for issue 6: the HTTP driver, the served target and the load scenario
are not built yet. The checks live in :mod:`peakproof.cases.feed_checks`.
"""

from __future__ import annotations

from typing import Any, Callable

from ..clock import VirtualClock
from ..history import FAIL, INFO, OK, History, Op
from .feed_checks import FEED_CHECKS, FeedAnalysis, check_feed

__all__ = ["InProcessFeed", "FEED_CHECKS", "FeedAnalysis", "check_feed"]


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
