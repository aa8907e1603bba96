"""A peakproof driver for the feed stack (``python -m examples.stacks.feed``): Django + actstream.

The stack's API                                              the feed case
POST   /users/{u}/following/ {"username": f}         201     follow(user, followee)
DELETE /users/{u}/following/{f}/                     204     unfollow(user, followee)
POST   /posts/ {"author", "text"}                    201     publish(author, text)
DELETE /posts/{id}/                                  204     delete(post_id)
GET    /users/{u}/home/?limit=N&before=CURSOR        200     read(user, limit, cursor)
       (the page-numbers defect: ?page=N)
POST   /admin/follows/bulk/ {"pairs": [[u, f], ...]} 200     capability bulk_graph: add_follows(pairs)

(paths under the base URL the launcher prints, ``http://127.0.0.1:PORT/api``.)

* Errors are ``{"error": "invalid" | "not_found", "detail": ...}``.
* A feed item is an activity: ``{"id", "verb", "actor", "timestamp", "post": {"id", "author",
  "text", "created_at"}}``; the post is what the harness reads. Post ids are integers in the
  API and strings for the harness (the feed case compares post ids as strings).
* Times are Django's JSON: ISO 8601 in UTC cut to milliseconds, while the stream orders by
  the database's microseconds: run with ``--time-precision 0.001``.
* ``next_cursor`` is passed through as the service gave it: an opaque signed string (keyset),
  or the integer page number of the ``page-numbers`` defect; the driver sends a string as
  ``?before=`` and an integer as ``?page=``.
* A pull design (``user_stream`` merges on read): no inboxes (``--without inbox_size``), no
  fan-out backlog, no fault hooks. The same driver serves ``--design fanout-worker`` (the same API; its
  timelines written by a worker, which reports no backlog either): state its design, the stack's README says how.

    peakproof driver check feed --driver examples/stacks/feed/driver.py:ActivityFeed --target-url URL
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from peakproof.driver import ErrorMap, HttpDriver, translate
from peakproof.errors import SetupFailed
from peakproof.history import OK, Op
from peakproof.timefmt import parse_time


def _seg(value: Any) -> str:
    """One path segment: ids may hold '/', '?', '%' or spaces."""
    return quote(str(value), safe="")


def _anything(doc: Any) -> dict:
    return doc if isinstance(doc, dict) else {}  # 204: no body


class ActivityFeed(HttpDriver):
    """The feed stack as the feed case's operations (HttpDriver's constructor, unchanged)."""

    errors = ErrorMap(field="error", message="detail",
                      codes={"invalid": "invalid_request", "not_found": "unknown_post"},
                      statuses={400: "invalid_request", 404: "unknown_post"})
    BULK_CHUNK = 20_000  # pairs a request: a few seconds of bulk_create, well inside gunicorn's 30 s

    def follow(self, user: str, followee: str, *, process: Any = 0, intended_time: Any = None) -> Op:
        return self._call("follow", {"user_id": user, "followee_id": followee}, "POST",
                          f"/users/{_seg(user)}/following/", {"username": followee}, _anything,
                          process=process, intended_time=intended_time)

    def unfollow(self, user: str, followee: str, *, process: Any = 0, intended_time: Any = None) -> Op:
        return self._call("unfollow", {"user_id": user, "followee_id": followee}, "DELETE",
                          f"/users/{_seg(user)}/following/{_seg(followee)}/", None, _anything,
                          process=process, intended_time=intended_time)

    def publish(self, author: str, text: str, *, process: Any = 0, intended_time: Any = None) -> Op:
        return self._call("publish", {"author_id": author, "text": text}, "POST", "/posts/",
                          {"author": author, "text": text}, post, process=process, intended_time=intended_time)

    def delete(self, post_id: str, *, process: Any = 0, intended_time: Any = None) -> Op:
        return self._call("delete", {"post_id": post_id}, "DELETE", f"/posts/{_seg(post_id)}/", None, _anything,
                          process=process, intended_time=intended_time)

    def read(self, user: str, limit: int = 20, cursor: Any = None, *, process: Any = 0,
             intended_time: Any = None) -> Op:
        query: dict[str, Any] = {"limit": limit}
        if isinstance(cursor, int) and not isinstance(cursor, bool):
            query["page"] = cursor  # the page-numbers API's cursor: a page number
        elif cursor is not None:
            query["before"] = cursor  # the keyset API's: an opaque string
        # the cursor is recorded exactly as the service gave it (an int stays an int)
        return self._call("read", {"user_id": user, "limit": limit, "cursor": cursor}, "GET",
                          f"/users/{_seg(user)}/home/?{urlencode(query)}", None, page,
                          process=process, intended_time=intended_time)

    # capability bulk_graph
    def add_follows(self, pairs: list[tuple[str, str]], *, process: Any = "graph") -> int:
        """Bulk follows [(user, followee), ...]; how many were new. One op 'follow_many' per request."""
        pairs = [(u, f) for u, f in pairs]
        added = 0
        for i in range(0, len(pairs), self.BULK_CHUNK):
            part = pairs[i:i + self.BULK_CHUNK]
            op = self._call("follow_many", {"pairs": part}, "POST", "/admin/follows/bulk/",
                            {"pairs": [list(p) for p in part]}, created, process=process, admin=True,
                            slow=True)  # set-up: the long timeout of the graph's load
            if op.type != OK:
                raise SetupFailed(f"POST {self.base}/admin/follows/bulk/: {op.value} {op.error or ''}"[:400])
            added += op.value
        return added


def post(doc: Any) -> dict[str, Any]:
    """The stack's post {"id", "author", "text", "created_at"} as the case's."""
    p = translate(doc, {"post_id": "id", "author_id": "author", "text": "text",
                        "created_at": ("created_at", parse_time)})
    if p["post_id"] is None or p["created_at"] is None:
        raise KeyError(f"a post without id or created_at: {doc!r:.200}")
    p["post_id"] = str(p["post_id"])
    return p


def page(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list) or "next_cursor" not in doc:
        raise TypeError(f"a home page is {{'results': [...], 'next_cursor'}}; got {doc!r:.200}")
    return {"items": [post(activity["post"]) for activity in doc["results"]], "next_cursor": doc["next_cursor"]}


def created(doc: Any) -> int:
    n = doc["created"]
    if type(n) is not int:
        raise TypeError(f"created is not an int: {n!r}")
    return n
