"""Case F, news feed: the driver protocol, the in-process and HTTP drivers.

Both record the same operations (follow, unfollow, publish, delete, read) into a
history the checks in :mod:`peakproof.cases.feed.checks` judge. In process, fan-out
progresses only when told (``fanout``); over HTTP it is the target's business, and
``fanout`` waits for the reference target's backlog to drain when it reports one.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Protocol, runtime_checkable
from urllib.parse import quote

from peakproof.clock import VirtualClock
from peakproof.driver import HttpDriver, InProcessDriver
from peakproof.errors import SetupFailed
from peakproof.history import OK, History, Op
from peakproof.http import json_object
from peakproof.timefmt import parse_time


@runtime_checkable
class FeedDriver(Protocol):
    """The operations of Case F: what a driver for your feed service must offer (docs/drivers.md).

    Subclass :class:`peakproof.driver.HttpDriver` and give each operation; each records one
    operation and returns it completed (ok / fail with a contract code such as
    ``invalid_request`` or ``not_found`` / info when unknown). ``publish`` answers a post
    (post_id, author_id, text, created_at in epoch seconds); ``read`` answers a page
    ``{"items": [post...], "next_cursor": opaque or None}``, newest first, and may add
    ``inbox_size`` (the reader's inbox entries) where the design has inboxes.

    Optional capabilities (``peakproof.cases.feed.case.CAPABILITIES``): ``add_follows`` (bulk
    graph), ``stats`` (the fan-out backlog), ``admin`` (fault hooks), ``fanout`` (wait until
    fan-out has caught up) and the ``inbox_size`` field.
    """

    history: History

    def now(self) -> float: ...
    def advance(self, seconds: float) -> None: ...
    def follow(self, user: str, followee: str, *, process: Any = 0, intended_time: float | None = None) -> Op: ...
    def unfollow(self, user: str, followee: str, *, process: Any = 0, intended_time: float | None = None) -> Op: ...
    def publish(self, author: str, text: str, *, process: Any = 0, intended_time: float | None = None) -> Op: ...
    def delete(self, post_id: str, *, process: Any = 0, intended_time: float | None = None) -> Op: ...
    def read(self, user: str, limit: int = 20, cursor: Any = None, *, process: Any = 0,
             intended_time: float | None = None) -> Op: ...


class InProcessFeed(InProcessDriver):
    """The reference core in virtual time; ``core_factory(clock)`` plugs another core (quality tests)."""

    def __init__(self, *, policy: str = "hybrid", threshold: int = 169_691, inbox_cap: int = 400,
                 core: Any = None, core_factory: Callable[[VirtualClock], Any] | None = None,
                 clock: VirtualClock | None = None, history: History | None = None) -> None:
        from peakproof.targets.feed import FeedCore, FeedError

        super().__init__(clock, history)
        core = self._plugged(core, core_factory)
        self.core = core or FeedCore(self.clock, policy=policy, threshold=threshold, inbox_cap=inbox_cap)
        self.error = FeedError

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
            # the cursor comes back as this driver gave it (a list once recorded): the core's key is a tuple
            items, nxt, _ = self.core.read_view(user, limit, tuple(cursor) if cursor is not None else None)
            return {"items": [post_json(p) for p in items], "next_cursor": list(nxt) if nxt else None,
                    "backlog": self.core.backlog(), "inbox_size": len(self.core.inboxes.get(user, []))}

        return self._do("read", {"user_id": user, "limit": limit, "cursor": list(cursor) if cursor else None}, go,
                        process)

    def fanout(self, max_writes: int | None = None) -> int:
        return self.core.fanout(max_writes)


def post_json(p: Any) -> dict[str, Any]:
    return {"post_id": p.post_id, "author_id": p.author_id, "text": p.text, "created_at": p.created_at}


class HttpFeed(HttpDriver):
    """Drives any server that implements the feed contract (``targets/feed/openapi.json``)."""

    def follow(self, user: str, followee: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return self._call("follow", {"user_id": user, "followee_id": followee}, "PUT",
                          f"/users/{quote(user, safe='')}/following/{quote(followee, safe='')}", None, json_object,
                          process=process, intended_time=intended_time, name="PUT follow")

    def unfollow(self, user: str, followee: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return self._call("unfollow", {"user_id": user, "followee_id": followee}, "DELETE",
                          f"/users/{quote(user, safe='')}/following/{quote(followee, safe='')}", None, json_object,
                          process=process, intended_time=intended_time, name="DELETE follow")

    def publish(self, author: str, text: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return self._call("publish", {"author_id": author, "text": text}, "POST", "/posts",
                          {"author_id": author, "text": text}, _post, process=process, intended_time=intended_time,
                          name="POST post")

    def delete(self, post_id: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return self._call("delete", {"post_id": post_id}, "DELETE", f"/posts/{quote(post_id, safe='')}", None,
                          json_object, process=process, intended_time=intended_time, name="DELETE post")

    def read(self, user: str, limit: int = 20, cursor: Any = None, *, process: Any = 0,
             intended_time: float | None = None, name: str | None = None) -> Op:
        query = f"?limit={limit}" + (f"&cursor={quote(str(cursor), safe='')}" if cursor is not None else "")
        return self._call("read", {"user_id": user, "limit": limit, "cursor": cursor}, "GET",
                          f"/users/{quote(user, safe='')}/feed{query}", None, _page, process=process,
                          intended_time=intended_time,
                          name=name or ("GET feed (first page)" if cursor is None else "GET feed (next page)"))

    def add_follows(self, pairs: list[tuple[str, str]], *, chunk: int = 200_000, process: Any = "graph") -> int:
        """Bulk follows through ``POST /admin/graph``, one ``follow_many`` op a chunk; returns those added.

        A failure raises :class:`TargetError` (a load test cannot go on without its graph).
        """
        added = 0
        for start in range(0, len(pairs), chunk):
            part = pairs[start:start + chunk]
            op = self._call("follow_many", {"pairs": part}, "POST", "/admin/graph",
                            {"follows": [list(p) for p in part]}, _added, process=process, admin=True,
                            name="POST admin graph", slow=True)  # a million follows take minutes
            if op.type != OK:
                from peakproof.capabilities import no_route
                from peakproof.errors import OffContract

                if no_route(op):
                    raise OffContract("feed", "POST /admin/graph (bulk follows)", op.value)
                raise SetupFailed(f"POST {self.base}/admin/graph: {op.value} {op.error or ''} (expected 200 "
                                  f"with {{'added': n}}; an admin token goes in --admin-token)")
            added += op.value["added"]
        return added

    def stats(self) -> dict[str, Any] | None:
        """The reference target's ``/_stats`` (None from a target without it)."""
        _, doc = self.side_call("stats", "GET", f"{self.base}/_stats", parse=_stats)
        return doc

    def admin(self, **settings: Any) -> dict[str, Any] | None:
        """Reference target only: ``POST /_admin/fanout`` (rate, threshold, shards_down, max_backlog)."""
        _, doc = self.side_call("fanout_admin", "POST", f"{self.base}/_admin/fanout", settings, args=settings,
                                admin=True)
        return doc

    def fanout(self, max_writes: int | None = None, timeout: float = 5.0) -> int:
        """Over HTTP fan-out is the target's: wait (bounded) until it reports an empty backlog."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.stats()
            if st is None or st.get("backlog") == 0:
                return 0
            time.sleep(0.01)
        return 0


def _added(doc: Any) -> dict[str, Any]:
    d = json_object(doc)
    if not isinstance(d.get("added"), int):
        raise TypeError("the graph's answer must be {'added': n}")
    return {"added": d["added"]}


def _stats(doc: Any) -> dict[str, Any]:
    d = json_object(doc)
    if "backlog" not in d:
        raise KeyError("stats without 'backlog'")
    return d


def _post(doc: Any) -> dict[str, Any]:
    doc = json_object(doc)
    for k in ("post_id", "author_id", "created_at"):
        if k not in doc:
            raise KeyError(f"the post has no {k!r}")
    doc["created_at"] = parse_time(doc["created_at"], "created_at")
    return doc


def _page(doc: Any) -> dict[str, Any]:
    doc = json_object(doc)
    if not isinstance(doc.get("items"), list) or "next_cursor" not in doc:
        raise KeyError("a feed page must have 'items' (a list) and 'next_cursor'")
    for item in doc["items"]:
        _post(item)
    return doc
