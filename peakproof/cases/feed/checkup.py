"""``peakproof driver check feed``: each operation once on users of its own."""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable, Iterator

from peakproof.operation_table import Step
from peakproof.history import OK
from peakproof.operation_table import OperationSpec, tables

_POST = '`{"post_id", "author_id", "text", "created_at"}`, `created_at` epoch seconds (`parse_time`)'
OPERATIONS = (
    OperationSpec("follow", ("user_id", "followee_id"), "`user` follows `followee` (idempotent)."),
    OperationSpec("unfollow", ("user_id", "followee_id"), "`user` stops following `followee` (idempotent)."),
    OperationSpec("publish", ("author_id", "text"), "Publish a post.", "a post: " + _POST,
                  ("post_id", "author_id", "text", "created_at"), "post"),
    OperationSpec("delete", ("post_id",), "Delete the post: never shown again; an unknown post: fail "
                  "`unknown_post`."),
    OperationSpec("read", ("user_id", "limit", "cursor"),
                  "The user's timeline, newest first by (`created_at`, `post_id`), post ids compared as strings; "
                  "the next page is `read(user, limit, next_cursor)`.",
                  'a page: `{"items": [post, ...], "next_cursor": opaque or None}`, each item a post; add '
                  "`inbox_size` where your design has inboxes", ("items", "next_cursor"), "page"),
    OperationSpec("add_follows", ("pairs",), "Bulk follows `[(user, followee), ...]` in one call or a few; record "
                  "each call as op `follow_many` with args `{\"pairs\": part}`; when the service refuses, raise "
                  "`peakproof.errors.SetupFailed` (a finding). Without it the graph goes one follow at a time "
                  "(small graphs only).", "the number added (an int, not an Op)", capability="bulk_graph",
                  recorded_as="follow_many"),
    OperationSpec("stats", (), "Your fan-out backlog (a harness side call: `self.side_call(...)`).",
                  '`{"backlog": n, ...}`, or None when unknown', capability="stats"),
    OperationSpec("admin", (), "The reference target's fan-out fault hooks (fault scenarios only); delete it.",
                  capability="faults"),
)
ARGS, VALUES, PARSERS, DOCS = tables(OPERATIONS)
STATUS_HINT = {400: "invalid_request", 404: "unknown_post"}
PARSER_HINTS = {"page": {"items": '("TODO", lambda items: [post(item) for item in items])'}}
SKELETON = {
    "add_follows": '''
        def add_follows(self, pairs: list[tuple[str, str]], *, process: Any = "graph") -> int:
            """Bulk follows [(user, followee), ...] in one call (or a few): returns how many were added.
            Record each call as op "follow_many" with args {"pairs": part} (the checks count its follows)."""
            op = self._call("follow_many", {"pairs": pairs}, "POST", "/TODO", {"TODO": [list(p) for p in pairs]},
                            lambda doc: {"added": doc["TODO"]}, process=process, admin=True)
            if op.type != "ok":  # the target refused its graph: a finding (from peakproof.errors import SetupFailed)
                raise SetupFailed(f"bulk follows failed: {op!r:.300}")
            return op.value["added"]
    ''',
    "stats": '''
        def stats(self) -> dict[str, Any] | None:
            """Your fan-out backlog: {"backlog": n} (None when unknown). A harness side call."""
            _, doc = self.side_call("stats", "GET", f"{self.base}/TODO")
            return {"backlog": doc["TODO"]} if doc else None
    ''',
    "admin": '''
        def admin(self, **settings: Any) -> dict[str, Any] | None:
            """The reference target's fan-out fault hooks (rate, threshold, shards_down): delete this."""
            return None
    ''',
}


def steps(d: Any, spec: Any, offered: Callable[[str], bool]) -> Iterator[Step]:
    run = uuid.uuid4().hex[:8]
    a, b = f"check-{run}-a", f"check-{run}-b"

    from .case import rules_of

    rules = rules_of(spec, type(d))  # the stated design: a lag is waited out before a read is held to a write

    def settle(after: str = "publish") -> None:
        if callable(getattr(d, "fanout", None)):
            d.fanout()
        if rules.lag(after):
            time.sleep(rules.lag(after) + 0.05)

    op = d.follow(a, b)
    yield Step(f"follow({a!r}, {b!r})", op, "ok", op.type == OK)
    posts = []
    for i in range(3):
        op = d.publish(b, f"driver check {i}")
        v = op.value if op.type == OK else {}
        fresh = isinstance(v.get("created_at"), (int, float)) and abs(v["created_at"] - time.time()) < 300
        if i == 0 or op.type != OK:
            yield Step(f"publish by {b!r}", op, "ok, post_id, author_id and created_at in epoch seconds",
                       op.type == OK and v.get("author_id") == b and fresh,
                       "" if fresh or op.type != OK else f"created_at {v.get('created_at')!r} is not now in epoch s")
        if op.type == OK:
            posts.append(str(v["post_id"]))
        time.sleep(0.002)
    settle()
    op = d.read(a, 20)
    items = [str(p.get("post_id")) for p in op.value.get("items", [])] if op.type == OK else []
    yield Step(f"read({a!r})", op, f"ok, the {len(posts)} posts newest first", op.type == OK and items == posts[::-1],
               promise="feed_matches_pull_model", detail="inbox_size: " + ("reported" if op.type == OK and isinstance(op.value.get("inbox_size"), int) else
                                 "waived (--without inbox_size)" if "inbox_size" in spec.without else
                                 "not reported: inbox_capped will be undecided (INCONCLUSIVE); a design with no "
                                 "inboxes says so with --without inbox_size"))
    op = d.read(a, 1)
    cursor = op.value.get("next_cursor") if op.type == OK else None
    # pages of a timeline the full read above already found short (a fan-out that lands later: empty, or missing
    # the newest) are the same promise not kept, not calls answered wrong: a statement may explain them
    short = op.type == OK and len(items) < len(posts)
    yield Step("read(limit 1)", op, "ok, one post and a next_cursor", op.type == OK and cursor is not None,
               promise="feed_matches_pull_model" if short and not op.value.get("items") else "")
    if cursor is not None:
        nxt = d.read(a, 1, cursor)
        got = [str(p.get("post_id")) for p in nxt.value.get("items", [])] if nxt.type == OK else []
        yield Step("read(limit 1, next_cursor)", nxt, f"ok, the next older post {posts[-2:-1]}",
                   nxt.type == OK and got == posts[-2:-1], promise="feed_matches_pull_model" if short else "")
    if posts:
        op = d.delete(posts[-1])
        yield Step("delete the newest post", op, "ok", op.type == OK)
        settle("delete")
        op = d.read(a, 20)
        shown = [str(p.get("post_id")) for p in op.value.get("items", [])] if op.type == OK else []
        yield Step("read after the delete", op, "ok, the deleted post not shown", op.type == OK
                   and posts[-1] not in shown, promise="deleted_posts_never_shown")
    op = d.delete(f"check-{run}-no-such-post")
    yield Step("delete an unknown post", op, "fail with a client code (unknown_post, not_found)", op.type == "fail")
    op = d.unfollow(a, b)
    yield Step("unfollow", op, "ok", op.type == OK)
    settle("unfollow")
    op = d.read(a, 20)
    yield Step("read after the unfollow", op, "ok, no post of the unfollowed author",
               op.type == OK and not [p for p in op.value.get("items", []) if str(p.get("author_id")) == b],
               promise="unfollowed_authors_never_shown")
    if offered("bulk_graph"):
        try:
            n = d.add_follows([(f"check-{run}-d", b), (f"check-{run}-c", b)])  # new pairs: an unfollow may lag
            yield Step("add_follows (2 pairs)", None, "returns 2", n == 2, f"returned {n!r}")
        except Exception as e:  # noqa: BLE001
            yield Step("add_follows (2 pairs)", None, "returns 2", False, f"raised {type(e).__name__}: {e}"[:300])
    else:
        yield Step("add_follows (capability bulk_graph)", None, "", True,
                   "not offered: the graph is loaded one follow at a time (small graphs only)")
    if offered("stats"):
        st = d.stats()
        yield Step("stats", None, "a dict with 'backlog', or None", st is None or "backlog" in st, f"{st!r}"[:200])
