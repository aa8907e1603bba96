"""The feed history, analysed once: :class:`FeedAnalysis` (reads, writes, the pull model at each
read) and :data:`FEED`, the registry every feed check joins. The bottom of the case's checks.

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

from peakproof.checks import CheckRegistry
from peakproof.history import OK, History, Op
from peakproof.slo import op_kind
from .rules import CONTRACT, OrderRules

WRITES = ("follow", "unfollow", "publish", "delete")

# G1 is about the first page: ``--slo first_page:p99<=200ms`` judges reads without a cursor
op_kind("first_page", lambda op: op.f == "read" and op.args.get("cursor") is None)


def _key(item: dict[str, Any]) -> tuple[float, str]:
    return (float(item["created_at"]), str(item["post_id"]))


def _cursor_id(cursor: Any) -> str:
    """A cursor is opaque (any JSON value: a string, a page number, a dict; [created_at, post_id] in
    process): two are the same cursor when they are the same JSON."""
    return json.dumps(cursor, sort_keys=True, default=repr)


class FeedAnalysis:
    """Indexes a history once so every check is cheap per read (load runs record thousands).

    ``follow_many`` ops (args ``pairs``: the bulk graph a load test builds) count as one
    follow per pair. ``rules``: how the target's times and ties read (``--time-precision``,
    ``--ties``); a post's key is (its time's step, its id), and where ties are not known
    (:attr:`OrderRules.ties_known`) posts of one step are in no order the checks may hold.
    """

    def __init__(self, history: History | Iterable[Op], inbox_cap: int = 400, window: float = 60.0,
                 rules: OrderRules = CONTRACT) -> None:
        self.ops = sorted(history.ops if isinstance(history, History) else list(history), key=lambda o: o.invoke_seq)
        self.inbox_cap, self.window, self.rules = inbox_cap, window, rules
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
        self._published_invoke: dict[str, int] = {}
        self._deleted_seq: dict[str, int] = {}
        self._deleted_at: dict[str, float] = {}
        for w in ok_writes:
            if w.f == "publish" and isinstance(w.value, dict) and "post_id" in w.value:
                pid = str(w.value["post_id"])
                self.posts[pid], self.published_at[pid], self._published_seq[pid] = w.value, w.complete_time, w.complete_seq
                self._published_invoke[pid] = w.invoke_seq
            elif w.f == "delete":
                pid = str(w.args["post_id"])
                if w.complete_seq < self._deleted_seq.get(pid, w.complete_seq + 1):
                    self._deleted_seq[pid], self._deleted_at[pid] = w.complete_seq, w.complete_time
        # a design whose writes take effect after they answer (rules.lag): when each kind's ok writes answered,
        # so a read that began within the lag of one is not quiet (the write may not show yet)
        self._lagged = {f: sorted(w.complete_time for w in ok_writes if w.f == f)
                        for f in ("unfollow", "delete", "publish") if rules.lag(f) > 0}
        self._newest_first = sorted(self.posts, key=lambda pid: self.key(self.posts[pid]), reverse=True)
        # follow / unfollow events per (user, followee), only for pairs that were ever unfollowed
        unfollowed_pairs = {(w.args["user_id"], w.args["followee_id"]) for w in self.writes if w.f == "unfollow"}
        self._pair_events: dict[tuple[str, str], list[tuple[int, str, bool]]] = {}
        for w in self.writes:
            for pair in _pairs(w):
                if pair in unfollowed_pairs:
                    certain = w.type == OK
                    self._pair_events.setdefault(pair, []).append(  # type: ignore[arg-type]
                        (w.invoke_seq, w.f, certain, w.complete_seq, w.complete_time if certain else inf))
        # each read's user's followees at its invocation (writes applied in completion order)
        self._following: dict[int, tuple[set[str], set[str]]] = {}
        # with a design whose follow does not bring every earlier post in: each followee's current follow, as
        # (its invocation, its completion), at each read
        self._since: dict[int, dict[str, tuple[int, int]]] = {}
        partial = rules.follow_brings != "all"
        following: dict[str, set[str]] = {}
        ever: dict[str, set[str]] = {}
        since: dict[str, dict[str, tuple[int, int]]] = {}
        events = sorted([(w.complete_seq, 1, w) for w in ok_writes if w.f in ("follow", "unfollow", "follow_many")]
                        + [(op.invoke_seq, 0, op) for op in self.reads], key=lambda e: e[0])
        for _, kind, op in events:
            if kind == 1:
                if op.f == "unfollow":
                    following.setdefault(op.args["user_id"], set()).discard(op.args["followee_id"])
                    since.get(op.args["user_id"], {}).pop(op.args["followee_id"], None)
                else:
                    for user, followee in _pairs(op):
                        if followee not in following.setdefault(user, set()):
                            since.setdefault(user, {})[followee] = (op.invoke_seq, op.complete_seq)
                        following[user].add(followee)
                        ever.setdefault(user, set()).add(followee)
            else:
                user = op.args["user_id"]
                own = {user} if rules.own_posts else set()
                self._following[id(op)] = (set(following.get(user, ())) | own, set(ever.get(user, ())) | own)
                if partial:
                    self._since[id(op)] = dict(since.get(user, {}))
        self._maybe: dict[int, set[tuple[float, str]]] = {}  # per read: posts it may show or not (model())
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
        # An opaque cursor means "after the last item of the page that returned it", and a page chain is
        # followed by who read it: the page before a read is the last one that the same reader, in the same
        # process (a load's greenlet, a property's thread), got this cursor from and that returned before the
        # read was sent. Never by the cursor's value alone: a service that pages by number gives every
        # reader, and every first page, the cursor "2".
        self.prev_page: dict[int, Op] = {}
        last: dict[tuple[str, str, str], Op] = {}
        for op in sorted(self.reads + [o for o in self.ops if o.f == "read" and o.type != OK],
                         key=lambda o: o.invoke_seq):
            cursor = op.args.get("cursor")
            if cursor is not None and op.type == OK:
                prev = last.get((op.args["user_id"], repr(op.process), _cursor_id(cursor)))
                if prev is not None and prev.complete_seq < op.invoke_seq:
                    self.prev_page[id(op)] = prev
            if op.type == OK and op.value.get("next_cursor") is not None:
                last[(op.args["user_id"], repr(op.process), _cursor_id(op.value["next_cursor"]))] = op

    def _brought_in(self, pid: str, author: str, follow: tuple[int, int]) -> bool | None:
        """Is the post in a timeline that follows ``author`` since ``follow`` (its invocation and completion),
        under the stated ``follow_brings``: one published after the follow, yes; one before it, when the follow
        brings it (all, or the last N before it); one published while the follow was in flight, None."""
        invoked, completed = follow
        if self._published_invoke[pid] > completed:
            return True
        if self._published_seq[pid] > invoked:
            return None
        brings = self.rules.follow_brings
        if brings == "all" or brings == "nothing":
            return brings == "all"
        earlier = self._publish_seqs_by_author.get(str(author), [])
        newer_before = len(earlier[bisect.bisect_right(earlier, self._published_seq[pid]):
                                   bisect.bisect_left(earlier, invoked)])
        return newer_before < int(brings)

    def maybe_shown(self, op: Op) -> set[tuple[float, str]]:
        """The posts a read may show or not, as :meth:`model` found them (a post published while its
        author's follow was in flight, when the follow does not bring every earlier post in)."""
        return self._maybe.get(id(op), set())

    def key(self, item: dict[str, Any]) -> tuple[float, str]:
        """A post's place in a timeline: (its time's step, its id); descending is newest first."""
        return (self.rules.step(item["created_at"]), str(item["post_id"]))

    def unordered(self, x: tuple[float, str], y: tuple[float, str]) -> bool:
        """The two keys are of posts the target may list in either order (one step, ties not known)."""
        return not self.rules.ties_known and x[0] == y[0]

    def quiet(self, op: Op) -> bool:
        """No write overlapped this read, nor answered within its stated lag before it (rules.lag)."""
        i = bisect.bisect_left(self._w_invoke, op.complete_seq)
        if not (i == 0 or self._w_maxdone[i - 1] < op.invoke_seq):
            return False
        for f, times in self._lagged.items():
            j = bisect.bisect_right(times, op.invoke_time)
            if j and times[j - 1] > op.invoke_time - self.rules.lag(f):
                return False
        return True

    def deleted_before(self, op: Op, post_id: str) -> bool:
        """The post's delete returned before this read was invoked (and its stated lag had passed)."""
        if not self._deleted_seq.get(post_id, op.invoke_seq) < op.invoke_seq:
            return False
        lag = self.rules.delete_lag
        return not lag or self._deleted_at[post_id] + lag < op.invoke_time

    def is_deleted(self, post_id: str) -> bool:
        """A delete of the post returned ok somewhere in the history."""
        return str(post_id) in self._deleted_seq

    def unfollowed_before(self, op: Op, author: str) -> bool:
        """The last follow/unfollow of ``author`` by this read's user that may have taken effect is an
        unfollow that certainly returned before the read."""
        if self.rules.own_posts and author == op.args["user_id"]:
            return False  # stated: a reader's own posts are in their timeline, whatever they "unfollowed"
        last = None
        lag = self.rules.unfollow_lag
        for invoke_seq, f, certain, complete_seq, done in self._pair_events.get((op.args["user_id"], author), ()):
            if invoke_seq < op.complete_seq:
                last = (f, certain and complete_seq < op.invoke_seq and (not lag or done + lag < op.invoke_time))
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
        """The key a read's page must stay below (None: a cursor whose page is not known)."""
        cursor = op.args.get("cursor")
        if cursor is None:
            return (float("inf"), "")
        prev = self.prev_page.get(id(op))
        if prev is not None:
            items = _items(prev)
            return self.key(items[-1]) if items else None
        return None

    def model(self, op: Op, upto: tuple[float, str] | None = None) -> tuple[list[tuple[float, str]], int] | None:
        """(live model keys after the read's cursor, newest first, down to ``upto`` and at least the
        page's limit + 1 of them; how many of those the inbox cap guarantees), or None when the
        cursor's position is unknown."""
        bound = self.bound(op)
        if bound is None:
            return None
        following, ever = self._following[id(op)]
        since = self._since.get(id(op))
        s = op.invoke_seq
        need = int(op.args.get("limit") or 20) + 1
        live: list[tuple[float, str]] = []
        every = 0
        cap_edge = (float("-inf"), "")
        maybe = self._maybe.setdefault(id(op), set())
        for pid in self._newest_first:
            if self._published_seq[pid] >= s:
                continue  # not yet published when the read began
            post = self.posts[pid]
            author = post["author_id"]
            if author not in ever:
                continue
            key = self.key(post)
            if since is not None and author in since:
                brought = self._brought_in(pid, author, since[author])
                if brought is None:  # published while the follow was in flight: before it or after, either
                    maybe.add(key)
                    continue
                if not brought:
                    continue
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
    if op.f == "follow_many":  # (user, followee) pairs, as recorded: a list of two (JSON's) is a pair too
        return [tuple(p) for p in op.args.get("pairs", ())]
    if op.f in ("follow", "unfollow"):
        return [(op.args["user_id"], op.args["followee_id"])]
    return []


def _items(op: Op) -> list[dict[str, Any]]:
    return list(op.value.get("items") or [])


def _multi_item_reads(a: FeedAnalysis) -> int:
    return sum(1 for op in a.reads if len(_items(op)) > 1)


# every feed check registers here (peakproof.checks.CheckRegistry); checks.py reads the list
FEED: CheckRegistry[FeedAnalysis] = CheckRegistry("feed")
