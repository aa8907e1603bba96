"""Feeds broken in the classic ways, as FeedCore subclasses, and :func:`serve_core` to serve one over
HTTP: the quality tests ask whether the properties catch each; the served and load tests serve them."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from peakproof.targets.feed import FeedCore


class IgnoresDeletes(FeedCore):
    def read_view(self, user: str, limit: int = 20, cursor: Any = None) -> Any:
        hidden, self.deleted = self.deleted, set()
        try:
            return super().read_view(user, limit, cursor)
        finally:
            self.deleted = hidden


class SortsByArrival(FeedCore):
    """Keeps each inbox in the order entries arrived (fan-out, backfill), not by time."""

    def _write(self, user: str, key: Any) -> None:
        inbox = self.inboxes.setdefault(user, [])
        if key not in inbox:
            inbox.append(key)
            del inbox[: max(0, len(inbox) - self.inbox_cap)]

    def read_view(self, user: str, limit: int = 20, cursor: Any = None) -> Any:
        followed = self.following.get(user, set())
        items = [self.posts[k[1]] for k in reversed(self.inboxes.get(user, []))
                 if k[1] not in self.deleted and self.posts[k[1]].author_id in followed]
        return items[:limit], (items[limit - 1].key if len(items) >= limit else None), {}


class ForgetsUnfollows(FeedCore):
    def read_view(self, user: str, limit: int = 20, cursor: Any = None) -> Any:
        real = self.following.get(user, set())
        self.following[user] = real | {p.author_id for p in self.posts.values()} - {user}
        try:
            return super().read_view(user, limit, cursor)
        finally:
            self.following[user] = real


class DropsAboveThreshold(FeedCore):
    def read_view(self, user: str, limit: int = 20, cursor: Any = None) -> Any:
        hidden, self.pull_authors = self.pull_authors, set()
        try:
            return super().read_view(user, limit, cursor)
        finally:
            self.pull_authors = hidden


class DuplicatesAPost(FeedCore):
    """Merging the pulled authors with the inbox forgets to drop a post that is in both."""

    def read_view(self, user: str, limit: int = 20, cursor: Any = None) -> Any:
        items, nxt, how = super().read_view(user, limit, cursor)
        if len(items) >= 2:
            items = [items[0], items[0], *items[1:limit - 1]]
        return items, nxt, how


class SkipsAtPageBoundary(FeedCore):
    """The page after a cursor leaves out its first post (an off-by-one in the cursor)."""

    def read_view(self, user: str, limit: int = 20, cursor: Any = None) -> Any:
        if cursor is None:
            return super().read_view(user, limit, cursor)
        items, nxt, how = super().read_view(user, limit + 1, cursor)
        items = items[1:]
        return items, (nxt if len(items) >= limit else None), how


class UncappedInbox(FeedCore):
    """Inboxes grow without bound (the cap is forgotten on the write path)."""

    def _write(self, user: str, key: Any) -> None:
        import bisect

        inbox = self.inboxes.setdefault(user, [])
        if key not in inbox:
            bisect.insort(inbox, key)
            self.stats.inbox_writes += 1


def serve_core(core: Any) -> tuple[str, Any]:
    """``core`` (a FeedCore, broken or not) served over HTTP on 127.0.0.1 with its fan-out consumers: its
    feed's base URL and the uvicorn server (``server.should_exit = True`` stops it)."""
    import uvicorn

    from peakproof.targets.feed.app import FanoutConsumers, FeedApp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = FeedApp(core, FanoutConsumers(core, consumers=2).start())
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    return f"http://127.0.0.1:{port}/feed", server
