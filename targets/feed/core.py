"""Case F's chosen design: fan-out on write with a hybrid threshold, CQRS, capped inboxes.

Sans-I/O: time comes from an injected clock and fan-out happens when the core is told to
work (``fanout(max_writes)``), so properties control the fan-out's progress and a served
target runs it from consumer threads.

* Posts live in the post store (the write side); inboxes are a materialized view of
  (created_at, post_id) capped at ``inbox_cap`` entries per user (the read side).
* A post by an author with at most ``threshold`` followers is fanned out: a job on the
  queue writes it into every follower's inbox. Above the threshold it is not: readers
  merge it at read time (scatter-gather for those few authors only). Whether a post was
  fanned out is decided at publish time and kept on the post, so an author crossing the
  threshold either way leaves every timeline correct.
* Deletes and unfollows take effect on both paths at read time (a deleted post or an
  unfollowed author never shows), whatever the fan-out has done.
* Inboxes are sharded by user id; a shard marked down makes its users' reads pull from
  every followee (expensive, never empty).
* Policies: ``hybrid`` (default), ``push`` (threshold infinite), ``pull`` (threshold 0: no
  inboxes at all).
* Durability: with a ``store`` every publish, delete, follow and unfollow is written
  through before it returns; ``restore`` rebuilds the posts, the graph and the inboxes
  (the materialized view) from it after a restart.
* Fan-out is a queue of jobs (one per post, its followers at publish time) that competing
  consumers drain in batches (``fanout(max_writes)``); ``max_backlog`` bounds the queue
  (a publish that would overflow it is refused: ``Backpressure``) and ``expected_lag``
  tells the publish path when the backlog threatens the G2 window.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import threading
from collections import deque
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Iterator, Protocol

from .._errors import ContractError, refusal

POLICIES = ("hybrid", "push", "pull")
PAGE = 20
INBOX_CAP = 400  # VH6


class FeedError(ContractError):
    status, code = 400, "invalid_request"


InvalidRequest = refusal(FeedError, 400, "invalid_request")
UnknownPost = refusal(FeedError, 404, "unknown_post")
# 409, not 400: the ids are each well formed (the contract's schema allows them), the pair is what
# the design refuses; a schema cannot say "two path parameters differ", so the status must.
SelfFollow = refusal(FeedError, 409, "cannot_follow_self")


class Backpressure(FeedError):
    """The fan-out queue is full: nothing was stored; publish again after ``retry_after`` s."""

    status, code = 429, "backpressure"

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message, retry_after=round(retry_after, 3))  # the HTTP layer adds Retry-After
        self.retry_after = retry_after


class FeedStore(Protocol):
    """Where the write side lives (see :mod:`peakproof.targets.feed.store`)."""

    def save_post(self, post: "Post") -> None: ...
    def mark_deleted(self, post_id: str) -> None: ...
    def save_follows(self, pairs: list[tuple[str, str]]) -> None: ...
    def remove_follow(self, user: str, followee: str) -> None: ...
    def load(self) -> tuple[list["Post"], set[str], list[tuple[str, str]]]: ...


@dataclass(frozen=True)
class Post:
    post_id: str
    author_id: str
    text: str
    created_at: float
    fanned_out: bool  # decided at publish time: the author was at or under the threshold

    @cached_property
    def key(self) -> tuple[float, str]:
        # one tuple per post, shared by every inbox and index that holds it (G3: memory per entry)
        return (self.created_at, self.post_id)


@dataclass
class _Job:
    post: Post
    followers: list[str]
    next: int = 0
    attempts: int = 0  # turns that raised; at MAX_JOB_ATTEMPTS the job is dead-lettered


MAX_JOB_ATTEMPTS = 3


class FanoutJobFailed(Exception):
    """A fan-out job raised while writing inboxes (it is retried, then dead-lettered)."""


@dataclass
class FeedStats:
    inbox_writes: int = 0
    pulled_sources: int = 0
    reads: int = 0
    degraded_reads: int = 0
    posts: int = 0
    fanned_posts: int = 0  # posts whose fan-out was queued (the rest are merged at read time)


class FeedCore:
    def __init__(self, clock: Callable[[], float], *, policy: str = "hybrid", threshold: int = 169_691,
                 inbox_cap: int = INBOX_CAP, shards: int = 4, id_factory: Callable[[], str] | None = None,
                 store: FeedStore | None = None, max_backlog: int | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}; got {policy!r}")
        if shards < 1 or inbox_cap < 1:
            raise ValueError(f"shards and inbox_cap must be >= 1; got shards={shards}, inbox_cap={inbox_cap}")
        self.clock, self.policy = clock, policy
        self.threshold = 0
        self.set_threshold(threshold)
        self.inbox_cap, self.shards = inbox_cap, shards
        self.store, self.max_backlog = store, max_backlog
        self._counter = itertools.count(1)
        self._new_id = id_factory or (lambda: f"p{next(self._counter):012d}")
        self._mutex = threading.RLock()
        self.posts: dict[str, Post] = {}
        self.deleted: set[str] = set()
        self.by_author: dict[str, list[tuple[float, str]]] = {}  # sorted keys of each author's posts
        self.following: dict[str, set[str]] = {}
        self.followers: dict[str, set[str]] = {}
        self.inboxes: dict[str, list[tuple[float, str]]] = {}  # ascending; the newest at the end
        self.queue: deque[_Job] = deque()
        self._backlog = 0
        self.pull_authors: set[str] = set()  # authors with posts that were not fanned out
        self.down: set[int] = set()
        self.stats = FeedStats()
        self.dead_letters: list[dict[str, Any]] = []  # fan-out jobs that failed MAX_JOB_ATTEMPTS times
        self.drain_rate: float | None = None  # inbox writes/s the consumers manage (set by them), for the lag estimate

    def set_threshold(self, threshold: int) -> None:
        """Followers above which a new post is merged at read time (hybrid only; takes effect for new posts)."""
        if not isinstance(threshold, int) or threshold < 0:
            raise InvalidRequest(f"threshold must be an integer >= 0; got {threshold!r}")
        self.threshold = {"hybrid": threshold, "push": 1 << 62, "pull": -1}[self.policy]

    # -- writes ------------------------------------------------------------------------------

    def follow(self, user: str, followee: str) -> None:
        self.follow_many([(user, followee)])

    def follow_many(self, pairs: list[tuple[str, str]]) -> int:
        """Add follows (the bulk path of ``/admin/graph``); returns how many were new."""
        for user, followee in pairs:
            _require_id("user_id", user)
            _require_id("followee_id", followee)
            if user == followee:
                raise SelfFollow(f"a user cannot follow themselves (user {user!r})")
        with self._mutex:
            following, empty = self.following, frozenset()
            new = [(u, f) for u, f in dict.fromkeys(pairs) if f not in following.get(u, empty)]
            if self.store is not None and new:
                self.store.save_follows(new)
            for user, followee in new:
                mine = following.get(user)
                if mine is None:
                    mine = following[user] = set()
                mine.add(followee)
                fans = self.followers.get(followee)
                if fans is None:
                    fans = self.followers[followee] = set()
                fans.add(user)
                # backfill: the followee's fanned-out posts were never written to this inbox
                keys = self.by_author.get(followee)
                if keys and self.threshold >= 0:
                    # the newest cap *live* posts: a deleted one must not take an older live post's slot
                    live = 0
                    for key in reversed(keys):
                        if live >= self.inbox_cap:
                            break
                        if self.posts[key[1]].fanned_out and key[1] not in self.deleted:
                            self._write(user, key)
                            live += 1
            return len(new)

    def unfollow(self, user: str, followee: str) -> None:
        _require_id("user_id", user)  # the same ids follow takes: a 201-character id is refused, not ignored
        _require_id("followee_id", followee)
        with self._mutex:
            if followee in self.following.get(user, ()):
                if self.store is not None:
                    self.store.remove_follow(user, followee)
                self.following[user].discard(followee)
                self.followers.get(followee, set()).discard(user)

    def publish(self, author: str, text: str) -> Post:
        _require_id("author_id", author)
        if not isinstance(text, str) or len(text) > 5_000:
            raise InvalidRequest(f"text must be a string of at most 5,000 characters; got {type(text).__name__} "
                                 f"of length {len(text) if isinstance(text, str) else '-'}")
        with self._mutex:
            now = round(self.clock(), 6)  # microseconds: what RFC 3339 on the wire carries, exactly
            audience = self.followers.get(author, ())
            fanned = len(audience) <= self.threshold
            if fanned and self.max_backlog is not None and self._backlog + len(audience) > self.max_backlog:
                lag = self.expected_lag() or 1.0
                raise Backpressure(f"the fan-out queue holds {self._backlog:,} inbox writes and this post needs "
                                   f"{len(audience):,} more (capacity {self.max_backlog:,}); publish again later",
                                   retry_after=lag)
            post = Post(self._new_id(), author, text, now, fanned)
            if self.store is not None:
                self.store.save_post(post)  # durable before it is acknowledged
            self._index(post)
            self.stats.posts += 1
            self.stats.fanned_posts += fanned
            if fanned and audience:
                self.queue.append(_Job(post, sorted(audience)))
                self._backlog += len(audience)
            return post

    def _index(self, post: Post) -> None:
        self.posts[post.post_id] = post
        bisect.insort(self.by_author.setdefault(post.author_id, []), post.key)
        if not post.fanned_out:
            self.pull_authors.add(post.author_id)

    def delete(self, post_id: str) -> Post:
        with self._mutex:
            post = self.posts.get(post_id)
            if post is None:
                raise UnknownPost(f"no post {post_id!r}")
            if post_id not in self.deleted:
                if self.store is not None:
                    self.store.mark_deleted(post_id)
                self.deleted.add(post_id)
            return post

    def fanout(self, max_writes: int | None = None) -> int:
        """Do up to ``max_writes`` inbox writes from the queue (all of it when None).

        Consumers call this concurrently, each taking a batch under the lock: the inbox is
        sorted by timestamp, so the order in which jobs finish does not matter.
        """
        done = 0
        with self._mutex:
            while self.queue and (max_writes is None or done < max_writes):
                job = self.queue[0]
                if job.post.post_id in self.deleted:  # nobody will see it: skip the rest of its writes
                    self._backlog -= len(job.followers) - job.next
                    self.queue.popleft()
                    continue
                end = len(job.followers) if max_writes is None else min(len(job.followers),
                                                                         job.next + max_writes - done)
                key = job.post.key  # one tuple shared by every inbox: 8 B an entry, not a tuple each
                written = job.next
                try:
                    for user in job.followers[job.next:end]:
                        self._write(user, key)
                        written += 1
                except Exception as e:
                    done += written - job.next
                    self._backlog -= written - job.next
                    job.next = written
                    job.attempts += 1
                    if job.attempts >= MAX_JOB_ATTEMPTS:  # never left at the head of the queue forever
                        self._backlog -= len(job.followers) - job.next
                        self.queue.popleft()
                        self.dead_letters.append({"post_id": job.post.post_id, "error": f"{type(e).__name__}: {e}",
                                                  "writes_lost": len(job.followers) - job.next})
                    raise FanoutJobFailed(f"fan-out of post {job.post.post_id} (attempt {job.attempts} of "
                                          f"{MAX_JOB_ATTEMPTS}): {type(e).__name__}: {e}") from e
                done += end - job.next
                self._backlog -= end - job.next
                job.next = end
                if job.next >= len(job.followers):
                    self.queue.popleft()
        return done

    def backlog(self) -> int:
        return self._backlog

    def oldest_pending(self) -> float | None:
        """created_at of the oldest post whose fan-out is unfinished (freshness: now minus this)."""
        with self._mutex:
            return self.queue[0].post.created_at if self.queue else None

    def expected_lag(self) -> float | None:
        """Seconds the current backlog needs at the consumers' drain rate (None: rate unknown)."""
        if not self.drain_rate:
            return None
        return self._backlog / self.drain_rate

    def _write(self, user: str, key: tuple[float, str]) -> None:
        inbox = self.inboxes.setdefault(user, [])
        if inbox and key > inbox[-1]:
            inbox.append(key)  # the common case: the newest post so far
        else:
            i = bisect.bisect_left(inbox, key)
            if i < len(inbox) and inbox[i] == key:
                return
            if i == 0 and len(inbox) >= self.inbox_cap:
                return  # older than everything a full inbox keeps
            inbox.insert(i, key)
        if len(inbox) > self.inbox_cap:
            del inbox[: len(inbox) - self.inbox_cap]
        self.stats.inbox_writes += 1

    # -- durability ----------------------------------------------------------------------------

    def restore(self) -> int:
        """Rebuild everything from the store (after a restart); returns the posts loaded.

        Inboxes are a view: each is rebuilt from the followees' fanned-out posts. Only an
        author's newest ``inbox_cap`` posts can be in any inbox, so only those are replayed.
        """
        if self.store is None:
            return 0
        posts, deleted, follows = self.store.load()
        with self._mutex:
            for user, followee in follows:
                self.following.setdefault(user, set()).add(followee)
                self.followers.setdefault(followee, set()).add(user)
            for post in posts:
                self._index(post)
            self.deleted |= deleted
            for author, keys in self.by_author.items():
                for key in keys[-self.inbox_cap:]:
                    if self.posts[key[1]].fanned_out and key[1] not in self.deleted:
                        for user in self.followers.get(author, ()):
                            self._write(user, key)
            numbers = [int(p.post_id[1:]) for p in posts if p.post_id[:1] == "p" and p.post_id[1:].isdigit()]
            self._counter = itertools.count(max(numbers, default=0) + 1)
        return len(posts)

    # -- reads -------------------------------------------------------------------------------

    def shard_of(self, user: str) -> int:
        return sum(user.encode()) % self.shards

    def set_shard_down(self, shard: int, down: bool = True) -> None:
        if not isinstance(shard, int) or not 0 <= shard < self.shards:
            raise InvalidRequest(f"shard must be an integer from 0 to {self.shards - 1}; got {shard!r}")
        with self._mutex:
            (self.down.add if down else self.down.discard)(shard)

    def read(self, user: str, limit: int = PAGE, cursor: tuple[float, str] | None = None) -> tuple[list[Post], tuple[float, str] | None]:
        """The newest ``limit`` posts older than ``cursor``, newest first, ties by post id."""
        return self.read_view(user, limit, cursor)[:2]  # type: ignore[return-value]

    def read_view(self, user: str, limit: int = PAGE, cursor: tuple[float, str] | None = None
                  ) -> tuple[list[Post], tuple[float, str] | None, dict[str, Any]]:
        """``read`` plus how it was served: degraded (fan-in over every followee) and sources merged."""
        _require_id("user_id", user)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 100:
            raise InvalidRequest(f"limit must be an integer from 1 to 100; got {limit!r}")
        with self._mutex:
            self.stats.reads += 1
            followed = self.following.get(user, set())
            bound = cursor if cursor is not None else (float("inf"), "")
            degraded = self.threshold < 0 or self.shard_of(user) in self.down
            streams: list[Iterator[tuple[float, str]]] = []
            if degraded:
                self.stats.degraded_reads += self.threshold >= 0
                sources = list(followed)  # fan-in on read over every followee
            else:
                inbox = self.inboxes.get(user, [])
                streams.append(_newest_first(inbox, bisect.bisect_left(inbox, bound)))
                sources = [a for a in followed if a in self.pull_authors]
            for author in sources:
                self.stats.pulled_sources += 1
                keys = self.by_author.get(author, [])
                stream = _newest_first(keys, bisect.bisect_left(keys, bound))
                if not degraded:  # fanned-out posts come through the inbox; only the rest is merged
                    stream = (k for k in stream if not self.posts[k[1]].fanned_out)
                streams.append(stream)
            out: list[Post] = []
            last = None
            for key in heapq.merge(*streams, reverse=True):
                if key == last:
                    continue
                last = key
                post = self.posts.get(key[1])
                if post is None or key[1] in self.deleted or post.author_id not in followed:
                    continue
                out.append(post)
                if len(out) == limit:
                    break
            nxt = out[-1].key if len(out) == limit else None
            # a design that merges on read has no inbox: it reports no size (not a size of 0)
            return out, nxt, {"degraded": degraded, "sources": len(sources),
                              "inbox_size": None if self.policy == "pull" else len(self.inboxes.get(user, ()))}


def _newest_first(keys: list[tuple[float, str]], end: int) -> Iterator[tuple[float, str]]:
    for i in range(end - 1, -1, -1):
        yield keys[i]


def _require_id(name: str, value: object) -> None:
    if type(value) is not str or not 0 < len(value) <= 200:
        raise InvalidRequest(f"{name} must be a string of 1 to 200 characters; got {value!r:.60}")
