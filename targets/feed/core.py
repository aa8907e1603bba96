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
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from .._errors import ContractError

POLICIES = ("hybrid", "push", "pull")
PAGE = 20
INBOX_CAP = 400  # VH6


class FeedError(ContractError):
    status, code = 400, "invalid_request"


class InvalidRequest(FeedError):
    status, code = 400, "invalid_request"


class UnknownPost(FeedError):
    status, code = 404, "unknown_post"


@dataclass(frozen=True)
class Post:
    post_id: str
    author_id: str
    text: str
    created_at: float
    fanned_out: bool  # decided at publish time: the author was at or under the threshold

    @property
    def key(self) -> tuple[float, str]:
        return (self.created_at, self.post_id)


@dataclass
class _Job:
    post: Post
    followers: list[str]
    next: int = 0


@dataclass
class FeedStats:
    inbox_writes: int = 0
    pulled_sources: int = 0
    reads: int = 0
    degraded_reads: int = 0


class FeedCore:
    def __init__(self, clock: Callable[[], float], *, policy: str = "hybrid", threshold: int = 169_691,
                 inbox_cap: int = INBOX_CAP, shards: int = 4, id_factory: Callable[[], str] | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}; got {policy!r}")
        self.clock, self.policy = clock, policy
        self.threshold = {"hybrid": threshold, "push": 1 << 62, "pull": -1}[policy]
        self.inbox_cap, self.shards = inbox_cap, shards
        counter = itertools.count(1)
        self._new_id = id_factory or (lambda: f"p{next(counter):012d}")
        self._mutex = threading.RLock()
        self.posts: dict[str, Post] = {}
        self.deleted: set[str] = set()
        self.by_author: dict[str, list[tuple[float, str]]] = {}  # sorted keys of each author's posts
        self.following: dict[str, set[str]] = {}
        self.followers: dict[str, set[str]] = {}
        self.inboxes: dict[str, list[tuple[float, str]]] = {}  # ascending; the newest at the end
        self.queue: deque[_Job] = deque()
        self.pull_authors: set[str] = set()  # authors with posts that were not fanned out
        self.down: set[int] = set()
        self.stats = FeedStats()

    # -- writes ------------------------------------------------------------------------------

    def follow(self, user: str, followee: str) -> None:
        _require_id("user_id", user)
        _require_id("followee_id", followee)
        if user == followee:
            raise InvalidRequest("a user cannot follow themselves")
        with self._mutex:
            if followee in self.following.setdefault(user, set()):
                return
            self.following[user].add(followee)
            self.followers.setdefault(followee, set()).add(user)
            # backfill: the followee's fanned-out posts were never written to this inbox
            if self.threshold >= 0:
                for key in self.by_author.get(followee, [])[-self.inbox_cap:]:
                    if self.posts[key[1]].fanned_out:
                        self._write(user, key)

    def unfollow(self, user: str, followee: str) -> None:
        with self._mutex:
            self.following.get(user, set()).discard(followee)
            self.followers.get(followee, set()).discard(user)

    def publish(self, author: str, text: str) -> Post:
        _require_id("author_id", author)
        if not isinstance(text, str) or len(text) > 5_000:
            raise InvalidRequest(f"text must be a string of at most 5,000 characters; got {type(text).__name__}")
        with self._mutex:
            now = self.clock()
            fanned = len(self.followers.get(author, ())) <= self.threshold
            post = Post(self._new_id(), author, text, now, fanned)
            self.posts[post.post_id] = post
            bisect.insort(self.by_author.setdefault(author, []), post.key)
            if fanned:
                self.queue.append(_Job(post, sorted(self.followers.get(author, ()))))
            else:
                self.pull_authors.add(author)
            return post

    def delete(self, post_id: str) -> Post:
        with self._mutex:
            post = self.posts.get(post_id)
            if post is None:
                raise UnknownPost(f"no post {post_id!r}")
            self.deleted.add(post_id)
            return post

    def fanout(self, max_writes: int | None = None) -> int:
        """Do up to ``max_writes`` inbox writes from the queue (all of it when None)."""
        done = 0
        with self._mutex:
            while self.queue and (max_writes is None or done < max_writes):
                job = self.queue[0]
                while job.next < len(job.followers) and (max_writes is None or done < max_writes):
                    self._write(job.followers[job.next], job.post.key)
                    job.next += 1
                    done += 1
                if job.next >= len(job.followers):
                    self.queue.popleft()
        return done

    def backlog(self) -> int:
        return sum(len(j.followers) - j.next for j in self.queue)

    def _write(self, user: str, key: tuple[float, str]) -> None:
        inbox = self.inboxes.setdefault(user, [])
        i = bisect.bisect_left(inbox, key)
        if i < len(inbox) and inbox[i] == key:
            return
        inbox.insert(i, key)
        if len(inbox) > self.inbox_cap:
            del inbox[: len(inbox) - self.inbox_cap]
        self.stats.inbox_writes += 1

    # -- reads -------------------------------------------------------------------------------

    def shard_of(self, user: str) -> int:
        return sum(user.encode()) % self.shards

    def set_shard_down(self, shard: int, down: bool = True) -> None:
        (self.down.add if down else self.down.discard)(shard)

    def read(self, user: str, limit: int = PAGE, cursor: tuple[float, str] | None = None) -> tuple[list[Post], tuple[float, str] | None]:
        """The newest ``limit`` posts older than ``cursor``, newest first, ties by post id."""
        _require_id("user_id", user)
        if not isinstance(limit, int) or not 1 <= limit <= 100:
            raise InvalidRequest(f"limit must be an integer from 1 to 100; got {limit!r}")
        with self._mutex:
            self.stats.reads += 1
            followed = self.following.get(user, set())
            bound = cursor if cursor is not None else (float("inf"), "")
            candidates: list[tuple[float, str]] = []
            degraded = self.threshold < 0 or self.shard_of(user) in self.down
            if degraded:
                self.stats.degraded_reads += self.threshold >= 0
                sources = followed  # fan-in on read over every followee
            else:
                inbox = self.inboxes.get(user, [])
                candidates.extend(inbox[: bisect.bisect_left(inbox, bound)])
                sources = [a for a in followed if a in self.pull_authors]
            for author in sources:
                self.stats.pulled_sources += 1
                keys = self.by_author.get(author, [])
                end = bisect.bisect_left(keys, bound)
                picked = keys[max(0, end - (limit + len(self.deleted) if degraded else limit * 4 + 50)):end]
                candidates.extend(k for k in picked if degraded or not self.posts[k[1]].fanned_out)
            out, seen = [], set()
            for key in sorted(candidates, reverse=True):
                pid = key[1]
                post = self.posts.get(pid)
                if pid in seen or post is None or pid in self.deleted or post.author_id not in followed:
                    continue
                seen.add(pid)
                out.append(post)
                if len(out) == limit:
                    break
            nxt = out[-1].key if len(out) == limit else None
            return out, nxt


def _require_id(name: str, value: object) -> None:
    if type(value) is not str or not 0 < len(value) <= 200:
        raise InvalidRequest(f"{name} must be a string of 1 to 200 characters; got {value!r:.60}")
