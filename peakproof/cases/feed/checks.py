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

import bisect
import json
from typing import Any, Iterable

from ...checks import CheckResult, Violations
from ...history import OK, History, Op
from ...slo import op_kind

WRITES = ("follow", "unfollow", "publish", "delete")

# G1 is about the first page: ``--slo first_page:p99<=200ms`` judges reads without a cursor
op_kind("first_page", lambda op: op.f == "read" and op.args.get("cursor") is None)


def _key(item: dict[str, Any]) -> tuple[float, str]:
    return (float(item["created_at"]), str(item["post_id"]))


def _cursor_id(cursor: Any) -> str:
    """Cursors are opaque over HTTP (strings) and [created_at, post_id] in process: compare them as JSON."""
    return json.dumps(cursor, sort_keys=True)


class FeedAnalysis:
    """Indexes a history once so every check is cheap per read (load runs record thousands).

    ``follow_many`` ops (args ``pairs``: the bulk graph a load test builds) count as one
    follow per pair.
    """

    def __init__(self, history: History | Iterable[Op], inbox_cap: int = 400, window: float = 60.0) -> None:
        self.ops = sorted(history.ops if isinstance(history, History) else list(history), key=lambda o: o.invoke_seq)
        self.inbox_cap, self.window = inbox_cap, window
        self.reads = [op for op in self.ops if op.f == "read" and op.type == OK]
        self.writes = [op for op in self.ops if op.f in WRITES + ("follow_many",) and op.type != "fail"]
        inf = float("inf")
        # quiet reads: the largest completion among writes invoked before each point (info/pending: never done)
        by_invoke = sorted(self.writes, key=lambda w: w.invoke_seq)
        self._w_invoke = [w.invoke_seq for w in by_invoke]
        self._w_maxdone, top = [], -1.0
        for w in by_invoke:
            top = max(top, inf if w.type != OK else w.complete_seq)
            self._w_maxdone.append(top)
        ok_writes = [w for w in self.writes if w.type == OK]
        # posts: who, when published (completion), when deleted (the first delete that completed ok)
        self.posts: dict[str, dict[str, Any]] = {}
        self.published_at: dict[str, float] = {}
        self._published_seq: dict[str, int] = {}
        self._deleted_seq: dict[str, int] = {}
        for w in ok_writes:
            if w.f == "publish" and isinstance(w.value, dict) and "post_id" in w.value:
                pid = str(w.value["post_id"])
                self.posts[pid], self.published_at[pid], self._published_seq[pid] = w.value, w.complete_time, w.complete_seq
            elif w.f == "delete":
                pid = str(w.args["post_id"])
                self._deleted_seq[pid] = min(self._deleted_seq.get(pid, w.complete_seq), w.complete_seq)
        self._newest_first = sorted(self.posts, key=lambda pid: _key(self.posts[pid]), reverse=True)
        # follow / unfollow events per (user, followee), only for pairs that were ever unfollowed
        unfollowed_pairs = {(w.args["user_id"], w.args["followee_id"]) for w in self.writes if w.f == "unfollow"}
        self._pair_events: dict[tuple[str, str], list[tuple[int, str, bool]]] = {}
        for w in self.writes:
            for pair in _pairs(w):
                if pair in unfollowed_pairs:
                    certain = w.type == OK
                    self._pair_events.setdefault(pair, []).append((w.invoke_seq, w.f, certain, w.complete_seq))  # type: ignore[arg-type]
        # each read's user's followees at its invocation (writes applied in completion order)
        self._following: dict[int, tuple[set[str], set[str]]] = {}
        following: dict[str, set[str]] = {}
        ever: dict[str, set[str]] = {}
        events = sorted([(w.complete_seq, 1, w) for w in ok_writes if w.f in ("follow", "unfollow", "follow_many")]
                        + [(op.invoke_seq, 0, op) for op in self.reads], key=lambda e: e[0])
        for _, kind, op in events:
            if kind == 1:
                if op.f == "unfollow":
                    following.setdefault(op.args["user_id"], set()).discard(op.args["followee_id"])
                else:
                    for user, followee in _pairs(op):
                        following.setdefault(user, set()).add(followee)
                        ever.setdefault(user, set()).add(followee)
            else:
                user = op.args["user_id"]
                self._following[id(op)] = (set(following.get(user, ())), set(ever.get(user, ())))
        self._unfollow_pairs_by_user: dict[str, list[str]] = {}
        for (user, author) in self._pair_events:
            self._unfollow_pairs_by_user.setdefault(user, []).append(author)
        self._publish_seqs_by_author: dict[str, list[int]] = {}
        for pid in sorted(self.posts, key=lambda p: self._published_seq[p]):
            self._publish_seqs_by_author.setdefault(str(self.posts[pid].get("author_id")), []).append(
                self._published_seq[pid])
        # the first delete *sent* of each post (ok, info or still open): from then on it may be gone
        self._delete_sent: dict[str, int] = {}
        for w in self.writes:
            if w.f == "delete":
                pid = str(w.args["post_id"])
                self._delete_sent[pid] = min(self._delete_sent.get(pid, w.invoke_seq), w.invoke_seq)
        self._first_delete_by_author: dict[str, int] = {}
        for pid, seq in self._deleted_seq.items():
            post = self.posts.get(pid)
            if post is not None:
                author = str(post.get("author_id"))
                self._first_delete_by_author[author] = min(self._first_delete_by_author.get(author, seq), seq)
        # which posts each user has been shown, and when first (a post shown is certainly visible)
        self._shown: dict[tuple[str, str], int] = {}
        for op in self.reads:
            for item in _items(op):
                k = (op.args["user_id"], str(item.get("post_id")))
                if k not in self._shown or op.complete_seq < self._shown[k]:
                    self._shown[k] = op.complete_seq
        # an opaque cursor means "after the last item of the page that returned it"
        self.cursor_edge: dict[tuple[str, str], tuple[float, str]] = {}
        for op in self.reads:
            nxt, items = op.value.get("next_cursor"), _items(op)
            if nxt is not None and items:
                self.cursor_edge[(op.args["user_id"], _cursor_id(nxt))] = _key(items[-1])

    def quiet(self, op: Op) -> bool:
        """No write overlapped this read."""
        i = bisect.bisect_left(self._w_invoke, op.complete_seq)
        return i == 0 or self._w_maxdone[i - 1] < op.invoke_seq

    def deleted_before(self, op: Op, post_id: str) -> bool:
        """The post's delete returned before this read was invoked."""
        return self._deleted_seq.get(post_id, op.invoke_seq) < op.invoke_seq

    def is_deleted(self, post_id: str) -> bool:
        """A delete of the post returned ok somewhere in the history."""
        return str(post_id) in self._deleted_seq

    def unfollowed_before(self, op: Op, author: str) -> bool:
        """The last follow/unfollow of ``author`` by this read's user that may have taken effect is an
        unfollow that certainly returned before the read."""
        last = None
        for invoke_seq, f, certain, complete_seq in self._pair_events.get((op.args["user_id"], author), ()):
            if invoke_seq < op.complete_seq:
                last = (f, certain and complete_seq < op.invoke_seq)
        return last is not None and last[0] == "unfollow" and last[1]

    def followed_ever(self, op: Op) -> set[str]:
        return self._following[id(op)][1]

    def posts_before(self, author: str, seq: int) -> int:
        """How many of ``author``'s posts were published (completed) before ``seq``."""
        return bisect.bisect_left(self._publish_seqs_by_author.get(author, []), seq)

    def shown_before(self, user: str, post_id: str, seq: int) -> bool:
        """This user was shown the post by a read that completed before ``seq``."""
        return self._shown.get((user, post_id), seq) < seq

    def bound(self, op: Op) -> tuple[float, str] | None:
        """The key a read's page must stay below (None: a cursor no recorded page returned)."""
        cursor = op.args.get("cursor")
        if cursor is None:
            return (float("inf"), "")
        if isinstance(cursor, (list, tuple)) and len(cursor) == 2:
            return (float(cursor[0]), str(cursor[1]))
        return self.cursor_edge.get((op.args["user_id"], _cursor_id(cursor)))

    def model(self, op: Op, upto: tuple[float, str] | None = None) -> tuple[list[tuple[float, str]], int] | None:
        """(live model keys after the read's cursor, newest first, down to ``upto`` and at least the
        page's limit + 1 of them; how many of those the inbox cap guarantees), or None when the
        cursor's position is unknown."""
        bound = self.bound(op)
        if bound is None:
            return None
        following, ever = self._following[id(op)]
        s = op.invoke_seq
        need = int(op.args.get("limit") or 20) + 1
        live: list[tuple[float, str]] = []
        every = 0
        cap_edge = (float("-inf"), "")
        for pid in self._newest_first:
            if self._published_seq[pid] >= s:
                continue  # not yet published when the read began
            post = self.posts[pid]
            author = post["author_id"]
            if author not in ever:
                continue
            key = _key(post)
            every += 1
            if every == self.inbox_cap:
                cap_edge = key
            if author in following and key < bound and not self._deleted_seq.get(pid, s) < s:
                live.append(key)
            if every >= self.inbox_cap and len(live) >= need and (upto is None or live[-1] < upto):
                break
        guaranteed = sum(1 for k in live if k >= cap_edge)
        return live, guaranteed


def _pairs(op: Op) -> Any:
    if op.f == "follow_many":
        return op.args.get("pairs", ())  # (user, followee) pairs, as recorded
    if op.f in ("follow", "unfollow"):
        return [(op.args["user_id"], op.args["followee_id"])]
    return []


def _items(op: Op) -> list[dict[str, Any]]:
    return list(op.value.get("items") or [])


def _multi_item_reads(a: FeedAnalysis) -> int:
    return sum(1 for op in a.reads if len(_items(op)) > 1)


def feed_is_newest_first(a: FeedAnalysis) -> CheckResult:
    """Every page lists its posts newest first (created_at descending, ties by post id)."""
    v = Violations()
    for op in a.reads:
        keys = [_key(i) for i in _items(op)]
        for x, y in zip(keys, keys[1:]):
            if not x > y:
                v.add(f"{op.args['user_id']!r}'s feed put post {y[1]} (t={y[0]:.3f}) after {x[1]} (t={x[0]:.3f}): "
                      f"not newest first (ties by post id)", op)
                break
    return v.result("feed_is_newest_first", {"reads": len(a.reads)}, chances=_multi_item_reads(a),
                    chance_kind="pages of two posts or more")


def no_duplicate_items(a: FeedAnalysis) -> CheckResult:
    """No page shows one post twice."""
    v = Violations()
    for op in a.reads:
        ids = [i["post_id"] for i in _items(op)]
        if len(ids) != len(set(ids)):
            v.add(f"{op.args['user_id']!r}'s page shows a post twice: "
                  f"{sorted({i for i in ids if ids.count(i) > 1})}", op)
    return v.result("no_duplicate_items", {"reads": len(a.reads)}, chances=_multi_item_reads(a),
                    chance_kind="pages of two posts or more")


def deleted_posts_never_shown(a: FeedAnalysis) -> CheckResult:
    """A post whose delete returned never shows in a read invoked after that."""
    v = Violations()
    chances = 0
    for op in a.reads:
        # a chance: a read after some followed author's post was deleted
        chances += any(a._first_delete_by_author.get(author, op.invoke_seq) < op.invoke_seq
                       for author in a.followed_ever(op))
        for item in _items(op):
            if a.deleted_before(op, str(item["post_id"])):
                v.add(f"{op.args['user_id']!r}'s feed shows post {item['post_id']} after its delete returned", op)
                break
    return v.result("deleted_posts_never_shown", {"reads": len(a.reads)}, chances=chances,
                    chance_kind="reads after a followed author's post was deleted")


def unfollowed_authors_never_shown(a: FeedAnalysis) -> CheckResult:
    """After an unfollow returns, the reader's feed shows none of that author's posts (until a refollow)."""
    v = Violations()
    chances = 0
    for op in a.reads:
        # a chance: a read while an author with posts is certainly unfollowed by this reader
        user = op.args["user_id"]
        chances += any(a.unfollowed_before(op, author) and a.posts_before(author, op.invoke_seq)
                       for author in a._unfollow_pairs_by_user.get(user, ()))
        for item in _items(op):
            if a.unfollowed_before(op, str(item["author_id"])):
                v.add(f"{op.args['user_id']!r}'s feed shows {item['author_id']!r}'s post {item['post_id']} after the "
                      f"unfollow returned", op)
                break
    return v.result("unfollowed_authors_never_shown", {"reads": len(a.reads)}, chances=chances,
                    chance_kind="reads while an author with posts was unfollowed")


def feed_matches_pull_model(a: FeedAnalysis) -> CheckResult:
    """A quiet read returns the pull model's timeline in its order; a settled one returns all
    of it that the inbox cap guarantees, and beyond the cap a part of it in its order (an
    inbox keeps its newest ``inbox_cap`` entries while a pulled author's posts all stay)."""
    v = Violations()
    judged = 0
    for op in a.reads:
        got = [_key(i) for i in _items(op)]
        model = a.model(op, upto=min(got) if got else None) if a.quiet(op) else None
        if model is None:
            continue
        judged += 1
        live, guaranteed = model
        limit = int(op.args.get("limit") or 20)
        settled = op.value.get("backlog") == 0
        within = min(len(got), guaranteed)  # beyond the cap: a subsequence (evicted inbox posts), in order
        if settled and (got[:within] != live[:within] or not _in_order_within(got[within:], live[within:])):
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
    return v.result("feed_matches_pull_model", {"quiet_reads": judged}, chances=judged,
                    chance_kind="quiet reads (no write overlapped them)")


def _in_order_within(got: list[tuple[float, str]], live: list[tuple[float, str]]) -> bool:
    it = iter(live)
    return all(any(k == m for m in it) for k in got)  # a subsequence, in the model's order


def pages_do_not_skip_or_repeat(a: FeedAnalysis) -> CheckResult:
    """Following next_cursor never shows a post twice, never goes back in time, and never
    skips a post that was certainly visible.

    A skip: the next page leaves out a live post of a followed author that lies between
    the previous page's last post and this page's last one (or anywhere after the cursor,
    on a short page), though that post was certainly visible: this user had been shown
    it already, or it was published a whole window before, or the target reports its
    fan-out settled. Judged on quiet pages only (no write overlapped them), within the
    posts the inbox cap guarantees.
    """
    v = Violations()
    chains = 0
    last_page: dict[tuple[str, str], Op] = {}
    for op in a.reads:
        nxt = op.value.get("next_cursor")
        cursor = op.args.get("cursor")
        if cursor is not None:
            prev = last_page.get((op.args["user_id"], _cursor_id(cursor)))
            if prev is not None:
                chains += 1
                _judge_page_turn(a, v, prev, op, cursor)
        if nxt:
            last_page[(op.args["user_id"], _cursor_id(nxt))] = op
    return v.result("pages_do_not_skip_or_repeat", {"page_chains": chains}, chances=chains,
                    chance_kind="page turns (a read with the cursor a recorded page returned)")


def _judge_page_turn(a: FeedAnalysis, v: Violations, prev: Op, op: Op, cursor: Any) -> None:
    user = op.args["user_id"]
    before = {i["post_id"] for i in _items(prev)}
    edge = _key(_items(prev)[-1]) if _items(prev) else None
    for item in _items(op):
        if item["post_id"] in before or (edge is not None and not _key(item) < edge):
            v.add(f"{user!r}: the page after cursor {cursor} repeats or goes back to post {item['post_id']}",
                  prev, op)
            return
    if not a.quiet(op):
        return
    got = [_key(i) for i in _items(op)]
    limit = int(op.args.get("limit") or 20)
    model = a.model(op, upto=min(got) if got else None)
    if model is None:
        return
    live, guaranteed = model
    shown = set(got)
    floor = got[-1] if len(got) >= limit else (float("-inf"), "")  # a full page only vouches down to its end
    settled = op.value.get("backlog") == 0
    # only the posts the inbox cap guarantees are vouched for: beyond it an inbox author's older posts
    # are gone while a pulled author's still show (the hybrid design), so a page there may leave some out
    for key in live[:guaranteed]:
        if key <= floor:
            break
        if key in shown:
            continue
        visible = (settled or a.shown_before(user, key[1], op.invoke_seq)
                   or op.invoke_time - a.published_at.get(key[1], op.invoke_time) >= a.window)
        if visible:
            v.add(f"{user!r}: the page after cursor {cursor} skips post {key[1]} (t={key[0]:.3f}), which was "
                  f"certainly visible and lies between the previous page's last post and this page's end", prev, op)
            return


def inbox_capped(a: FeedAnalysis) -> CheckResult:
    """No inbox holds more than the cap (the target's own ``inbox_size``, where it reports one)."""
    sizes = [op.value["inbox_size"] for op in a.reads if isinstance(op.value.get("inbox_size"), int)]
    if not sizes:
        return CheckResult("inbox_capped", "unknown", {"reads_with_size": 0},
                           note="the target does not report inbox_size (optional in the contract): the cap "
                                "cannot be observed", chances=0, chance_kind="reads of users whose followed "
                                                                              "authors published more than the cap")
    v = Violations()
    chances = 0
    for op in a.reads:
        size = op.value.get("inbox_size")
        if not isinstance(size, int):
            continue
        # a chance: the reader's followed authors had published more posts than the cap
        chances += sum(a.posts_before(author, op.invoke_seq) for author in a.followed_ever(op)) > a.inbox_cap
        if size > a.inbox_cap:
            v.add(f"{op.args['user_id']!r}'s inbox holds {size} entries (cap {a.inbox_cap})", op)
    return v.result("inbox_capped", {"largest_inbox": max(sizes)}, chances=chances,
                    chance_kind="reads of users whose followed authors published more than the cap")


def posts_visible_within_window(a: FeedAnalysis) -> CheckResult:
    """G2: a followed author's post published ``window`` s before a first-page read is in it
    (unless the page is full of newer posts)."""
    v = Violations()
    chances = 0
    for op in a.reads:
        if op.args.get("cursor"):
            continue
        live, _ = a.model(op)  # type: ignore[misc]  # a first page always has a model
        limit = int(op.args.get("limit") or 20)
        got = [_key(i) for i in _items(op)]
        shown = set(got)
        # a chance: a first page whose model holds a post older than the window
        chances += any(op.invoke_time - a.published_at.get(k[1], op.invoke_time) >= a.window for k in live[:limit])
        for key in live[:limit]:
            age = op.invoke_time - a.published_at.get(key[1], op.invoke_time)
            if key in shown or a._delete_sent.get(key[1], op.complete_seq) < op.complete_seq:
                continue  # shown, or a delete sent before the read returned may have taken it
            if age >= a.window and not (len(got) >= limit and got[-1] > key):
                v.add(f"{op.args['user_id']!r}'s feed lacks post {key[1]} published {age:.1f} s before the read "
                      f"(window {a.window:g} s)", op)
                break
    return v.result("posts_visible_within_window", {"reads": len(a.reads)}, chances=chances,
                    chance_kind="first pages due to show a post older than the window")


from .promises import answers_belong_to_who_asked  # noqa: E402

FEED_CHECKS = (feed_is_newest_first, deleted_posts_never_shown, unfollowed_authors_never_shown, no_duplicate_items,
               pages_do_not_skip_or_repeat, feed_matches_pull_model, inbox_capped, posts_visible_within_window,
               answers_belong_to_who_asked)


def check_feed(history: "History | Iterable[Op] | FeedAnalysis", inbox_cap: int = 400,
               window: float = 60.0) -> list[CheckResult]:
    """Every feed invariant over one shared analysis of the history (``inbox_cap`` and the G2
    ``window`` are the target's: 400 entries and 60 s in the seed)."""
    a = history if isinstance(history, FeedAnalysis) else FeedAnalysis(history, inbox_cap, window)
    return [c(a) for c in FEED_CHECKS]
