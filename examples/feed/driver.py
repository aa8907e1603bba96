"""A peakproof driver for Chirp (examples/feed/service.py), whose API is not the feed contract.

Chirp                                          the feed case
POST   /graph/{user}/follows {"target"}        follow(user, followee)
DELETE /graph/{user}/follows/{followee}        unfollow(user, followee)
POST   /chirps {"by", "body"} -> {"chirp"}     publish(author, text)
DELETE /chirps/{id}                            delete(post_id)
GET    /timeline/{user}?count=&before=         read(user, limit, cursor) ({"chirps", "more"})
POST   /admin/bulk-follows {"edges"}           capability bulk_graph: add_follows(pairs)

Errors are {"message", "kind"}; times are ISO 8601 with +03:00. Chirp merges on read: there
are no inboxes (run with --without inbox_size), no fan-out backlog and no fault hooks.

Check it: peakproof driver check feed --driver examples/feed/driver.py:Chirp --target-url URL
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from peakproof.driver import ErrorMap, HttpDriver, translate
from peakproof.history import Op
from peakproof.timefmt import parse_time


def _seg(value: str) -> str:
    """One path segment: ids may hold '/', '?', '%' or spaces."""
    return quote(str(value), safe="")


def _anything(doc: Any) -> dict:
    return doc if isinstance(doc, dict) else {}


class Chirp(HttpDriver):
    """Chirp as the feed case's operations. Built by the harness as Chirp(base_url, history=...,
    transport=..., timeout=..., admin_token=...) (HttpDriver keeps them)."""

    errors = ErrorMap(field="kind", message="message",
                      codes={"bad_request": "invalid_request", "not_found": "unknown_post"},
                      statuses={400: "invalid_request", 404: "unknown_post"})

    def follow(self, user: str, followee: str, *, process: Any = 0, intended_time: Any = None) -> Op:
        args = {"user_id": user, "followee_id": followee}
        return self._call("follow", args, "POST", f"/graph/{_seg(user)}/follows", {"target": followee},
                          _anything, process=process, intended_time=intended_time)

    def unfollow(self, user: str, followee: str, *, process: Any = 0, intended_time: Any = None) -> Op:
        args = {"user_id": user, "followee_id": followee}
        return self._call("unfollow", args, "DELETE", f"/graph/{_seg(user)}/follows/{_seg(followee)}", None,
                          _anything, process=process, intended_time=intended_time)

    def publish(self, author: str, text: str, *, process: Any = 0, intended_time: Any = None) -> Op:
        args = {"author_id": author, "text": text}
        return self._call("publish", args, "POST", "/chirps", {"by": author, "body": text},
                          published, process=process, intended_time=intended_time)

    def delete(self, post_id: str, *, process: Any = 0, intended_time: Any = None) -> Op:
        args = {"post_id": post_id}
        return self._call("delete", args, "DELETE", f"/chirps/{_seg(post_id)}", None,
                          _anything, process=process, intended_time=intended_time)

    def read(self, user: str, limit: int = 20, cursor: Any = None, *, process: Any = 0,
             intended_time: Any = None) -> Op:
        args = {"user_id": user, "limit": limit, "cursor": cursor}
        query = {"count": limit}
        if cursor is not None:
            query["before"] = cursor
        return self._call("read", args, "GET", f"/timeline/{_seg(user)}?{urlencode(query)}", None,
                          page, process=process, intended_time=intended_time)

    # capability bulk_graph
    def add_follows(self, pairs: list[tuple[str, str]], *, chunk: int = 200_000, process: Any = "graph") -> int:
        """Bulk follows [(user, followee), ...]; returns the number added. One op 'follow_many' per chunk."""
        pairs = [(u, f) for u, f in pairs]
        added = 0
        for i in range(0, len(pairs), chunk):
            part = pairs[i:i + chunk]
            op = self._call("follow_many", {"pairs": part}, "POST", "/admin/bulk-follows",
                            {"edges": [list(p) for p in part]}, added_count, process=process)
            if op.type != "ok":
                raise RuntimeError(f"bulk follows failed: {op!r:.300}")
            added += op.value
        return added


def post(doc: Any) -> dict[str, Any]:
    """A CHIRP {"id", "by", "body", "ts"} as the contract's post."""
    return translate(doc, {"post_id": "id", "author_id": "by", "text": "body",
                           "created_at": ("ts", parse_time)})


def published(doc: Any) -> dict[str, Any]:
    return translate(doc, {"post_id": "id", "author_id": "by", "text": "body",
                           "created_at": ("ts", parse_time)}, at="chirp")


def page(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict) or not isinstance(doc.get("chirps"), list):
        raise TypeError(f"chirps is not a list: {doc!r:.200}")
    return translate(doc, {"items": ("chirps", lambda items: [post(c) for c in items]),
                           "next_cursor": "more"})


def added_count(doc: Any) -> int:
    n = doc["count"]
    if type(n) is not int:
        raise TypeError(f"count is not an int: {n!r}")
    return n
