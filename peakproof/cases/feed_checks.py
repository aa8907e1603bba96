"""The feed invariants, as pure functions of a history.

Operations: ``follow`` / ``unfollow`` (args user_id, followee_id), ``publish`` (args
author_id, text; ok value the post with post_id and created_at), ``delete`` (args
post_id), ``read`` (args user_id, limit, cursor; ok value {items: [post...],
next_cursor, and optionally backlog (fan-out entries still to write; 0 = settled) and
inbox_size, which the reference target reports}).

The pull model: at a read, the timeline a pure fan-in-on-read design would return: the
live posts of the authors the user follows, newest first (ties by post id). Writes that
overlap a read make it uncertain, so model comparisons use only reads no write overlapped.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..checks import CheckResult, Violations
from ..history import OK, History, Op

WRITES = ("follow", "unfollow", "publish", "delete")


def _key(item: dict[str, Any]) -> tuple[float, str]:
    return (float(item["created_at"]), str(item["post_id"]))


class FeedAnalysis:
    def __init__(self, history: History | Iterable[Op], inbox_cap: int = 400, window: float = 60.0) -> None:
        self.ops = sorted(history.ops if isinstance(history, History) else list(history), key=lambda o: o.invoke_seq)
        self.inbox_cap, self.window = inbox_cap, window
        self.reads = [op for op in self.ops if op.f == "read" and op.type == OK]
        self.writes = [op for op in self.ops if op.f in WRITES and op.type != "fail"]
        # replay the writes in completion order to know the state each quiet read saw
        self.states: dict[int, dict[str, Any]] = {}
        posts: dict[str, dict[str, Any]] = {}
        published_at: dict[str, float] = {}
        deleted: set[str] = set()
        following: dict[str, set[str]] = {}
        ever: dict[str, set[str]] = {}
        events = sorted([(op.complete_seq, 1, op) for op in self.writes if op.type == OK]
                        + [(op.invoke_seq, 0, op) for op in self.reads], key=lambda e: e[0])
        for _, kind, op in events:
            if kind == 1:
                a = op.args
                if op.f == "follow":
                    following.setdefault(a["user_id"], set()).add(a["followee_id"])
                    ever.setdefault(a["user_id"], set()).add(a["followee_id"])
                elif op.f == "unfollow":
                    following.setdefault(a["user_id"], set()).discard(a["followee_id"])
                elif op.f == "publish":
                    posts[op.value["post_id"]] = op.value
                    published_at[op.value["post_id"]] = op.complete_time
                elif op.f == "delete":
                    deleted.add(a["post_id"])
            else:
                user = op.args["user_id"]
                self.states[id(op)] = {"following": set(following.get(user, ())), "ever": set(ever.get(user, ())),
                                       "deleted": set(deleted), "published": set(posts)}
        self.posts, self.published_at = posts, published_at
        self.deleted_before: dict[int, set[str]] = {}
        self.unfollowed_before: dict[int, set[str]] = {}
        for op in self.reads:
            self.deleted_before[id(op)] = {w.args["post_id"] for w in self.writes
                                           if w.f == "delete" and w.type == OK and w.complete_seq < op.invoke_seq}
            user, last = op.args["user_id"], {}
            for w in self.writes:
                if w.f in ("follow", "unfollow") and w.args["user_id"] == user and w.invoke_seq < op.complete_seq:
                    certain = w.type == OK and w.complete_seq < op.invoke_seq
                    last[w.args["followee_id"]] = (w.f, certain)
            self.unfollowed_before[id(op)] = {a for a, (f, certain) in last.items() if f == "unfollow" and certain}

    def quiet(self, op: Op) -> bool:
        """No write overlapped this read."""
        return not any(w.invoke_seq < op.complete_seq and (w.complete_seq > op.invoke_seq or w.type == "info")
                       for w in self.writes)

    def model(self, op: Op) -> tuple[list[tuple[float, str]], int]:
        """(live model keys after the read's cursor, newest first; how many of them the cap guarantees)."""
        st = self.states[id(op)]
        cursor = op.args.get("cursor")
        bound = (float(cursor[0]), str(cursor[1])) if cursor else (float("inf"), "")
        seen = [self.posts[pid] for pid in st["published"]]
        every = sorted((_key(p) for p in seen if p["author_id"] in st["ever"]), reverse=True)
        cap_edge = every[self.inbox_cap - 1] if len(every) >= self.inbox_cap else (float("-inf"), "")
        live = [k for k in sorted((_key(p) for p in seen
                                   if p["author_id"] in st["following"] and p["post_id"] not in st["deleted"]),
                                  reverse=True) if k < bound]
        guaranteed = sum(1 for k in live if k >= cap_edge)
        return live, guaranteed


def _items(op: Op) -> list[dict[str, Any]]:
    return list(op.value.get("items") or [])


def feed_is_newest_first(a: FeedAnalysis) -> CheckResult:
    v = Violations()
    for op in a.reads:
        keys = [_key(i) for i in _items(op)]
        for x, y in zip(keys, keys[1:]):
            if not x > y:
                v.add(f"{op.args['user_id']!r}'s feed put post {y[1]} (t={y[0]:.3f}) after {x[1]} (t={x[0]:.3f}): "
                      f"not newest first (ties by post id)", op)
                break
    return v.result("feed_is_newest_first", {"reads": len(a.reads)})


def no_duplicate_items(a: FeedAnalysis) -> CheckResult:
    v = Violations()
    for op in a.reads:
        ids = [i["post_id"] for i in _items(op)]
        if len(ids) != len(set(ids)):
            v.add(f"{op.args['user_id']!r}'s page shows a post twice: "
                  f"{sorted({i for i in ids if ids.count(i) > 1})}", op)
    return v.result("no_duplicate_items", {"reads": len(a.reads)})


def deleted_posts_never_shown(a: FeedAnalysis) -> CheckResult:
    v = Violations()
    for op in a.reads:
        gone = a.deleted_before[id(op)]
        for item in _items(op):
            if item["post_id"] in gone:
                v.add(f"{op.args['user_id']!r}'s feed shows post {item['post_id']} after its delete returned", op)
                break
    return v.result("deleted_posts_never_shown", {"reads": len(a.reads)})


def unfollowed_authors_never_shown(a: FeedAnalysis) -> CheckResult:
    v = Violations()
    for op in a.reads:
        gone = a.unfollowed_before[id(op)]
        for item in _items(op):
            if item["author_id"] in gone:
                v.add(f"{op.args['user_id']!r}'s feed shows {item['author_id']!r}'s post {item['post_id']} after the "
                      f"unfollow returned", op)
                break
    return v.result("unfollowed_authors_never_shown", {"reads": len(a.reads)})


def feed_matches_pull_model(a: FeedAnalysis) -> CheckResult:
    """A quiet read returns the pull model's timeline in its order; a settled one returns all
    of it that the inbox cap guarantees (short pages are fine beyond the cap)."""
    v = Violations()
    judged = 0
    for op in a.reads:
        if not a.quiet(op):
            continue
        judged += 1
        live, guaranteed = a.model(op)
        got = [_key(i) for i in _items(op)]
        limit = int(op.args.get("limit") or 20)
        settled = op.value.get("backlog") == 0
        if settled and got != live[: len(got)]:
            first = next(i for i, (x, y) in enumerate(zip(got + [None] * len(live), live + [None] * len(got)))
                         if x != y)
            v.add(f"{op.args['user_id']!r}'s settled feed differs from the pull model at position {first}: got "
                  f"{got[first][1] if first < len(got) else 'nothing'}, the model has "
                  f"{live[first][1] if first < len(live) else 'nothing'}", op)
        elif not settled and not _in_order_within(got, live):
            # fan-out may still be on its way: newer posts can be missing, nothing else may differ
            v.add(f"{op.args['user_id']!r}'s feed shows posts the pull model does not have, or out of its order: "
                  f"{[k[1] for k in got][:6]}", op)
        elif settled and len(got) < min(limit, guaranteed):
            missing = live[len(got)]
            v.add(f"{op.args['user_id']!r}'s settled feed stops after {len(got)} posts; the model has "
                  f"{min(limit, guaranteed)} within the inbox cap (first missing {missing[1]})", op)
    return v.result("feed_matches_pull_model", {"quiet_reads": judged})


def _in_order_within(got: list[tuple[float, str]], live: list[tuple[float, str]]) -> bool:
    it = iter(live)
    return all(any(k == m for m in it) for k in got)  # a subsequence, in the model's order


def pages_do_not_skip_or_repeat(a: FeedAnalysis) -> CheckResult:
    """Following next_cursor never shows a post twice and never goes back in time."""
    v = Violations()
    chains = 0
    last_page: dict[tuple[str, tuple[float, str]], Op] = {}
    for op in a.reads:
        nxt = op.value.get("next_cursor")
        cursor = op.args.get("cursor")
        if cursor is not None:
            prev = last_page.get((op.args["user_id"], (float(cursor[0]), str(cursor[1]))))
            if prev is not None:
                chains += 1
                before = {i["post_id"] for i in _items(prev)}
                edge = _key(_items(prev)[-1]) if _items(prev) else None
                for item in _items(op):
                    if item["post_id"] in before or (edge is not None and not _key(item) < edge):
                        v.add(f"{op.args['user_id']!r}: the page after cursor {cursor} repeats or goes back to "
                              f"post {item['post_id']}", prev, op)
                        break
        if nxt:
            last_page[(op.args["user_id"], (float(nxt[0]), str(nxt[1])))] = op
    return v.result("pages_do_not_skip_or_repeat", {"page_chains": chains})


def inbox_capped(a: FeedAnalysis) -> CheckResult:
    sizes = [op.value["inbox_size"] for op in a.reads if isinstance(op.value.get("inbox_size"), int)]
    if not sizes:
        return CheckResult("inbox_capped", "unknown", {"reads_with_size": 0},
                           note="the target does not report inbox sizes")
    v = Violations()
    for op in a.reads:
        size = op.value.get("inbox_size")
        if isinstance(size, int) and size > a.inbox_cap:
            v.add(f"{op.args['user_id']!r}'s inbox holds {size} entries (cap {a.inbox_cap})", op)
    return v.result("inbox_capped", {"largest_inbox": max(sizes)})


def posts_visible_within_window(a: FeedAnalysis) -> CheckResult:
    """G2: a followed author's post published ``window`` s before a first-page read is in it
    (unless the page is full of newer posts)."""
    v = Violations()
    for op in a.reads:
        if op.args.get("cursor"):
            continue
        live, _ = a.model(op)
        limit = int(op.args.get("limit") or 20)
        got = [_key(i) for i in _items(op)]
        shown = set(got)
        for key in live[:limit]:
            age = op.invoke_time - a.published_at.get(key[1], op.invoke_time)
            if key in shown:
                continue
            if age >= a.window and not (len(got) >= limit and got[-1] > key):
                v.add(f"{op.args['user_id']!r}'s feed lacks post {key[1]} published {age:.1f} s before the read "
                      f"(window {a.window:g} s)", op)
                break
    return v.result("posts_visible_within_window", {"reads": len(a.reads)})


FEED_CHECKS = (feed_is_newest_first, deleted_posts_never_shown, unfollowed_authors_never_shown, no_duplicate_items,
               pages_do_not_skip_or_repeat, feed_matches_pull_model, inbox_capped, posts_visible_within_window)


def check_feed(history: History | Iterable[Op], inbox_cap: int = 400, window: float = 60.0) -> list[CheckResult]:
    a = FeedAnalysis(history, inbox_cap, window)
    return [c(a) for c in FEED_CHECKS]
