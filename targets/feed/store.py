"""The feed's write side in SQLite: posts (with their deleted flag) and the follow graph.

The graph is an append-only log of follows and unfollows (no index to maintain: a bulk
``/admin/graph`` of 1.5 million follows is one fast transaction), replayed in order on
restore; the core only logs changes, so the log holds each follow once per change.

Inboxes are not stored: they are a materialized view the core rebuilds from this on start
(``FeedCore.restore``). WAL with ``synchronous=NORMAL`` survives a crash of the process
(what a restart test does); ``full`` also survives power loss, an fsync a commit.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from .core import Post


class SqliteFeedStore:
    def __init__(self, path: str | Path, durability: str = "normal") -> None:
        if durability not in ("normal", "full"):
            raise ValueError(f"durability must be normal or full; got {durability!r}")
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # The core calls the store under its own lock: one connection is enough and keeps
        # every write in the core's order.
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(f"PRAGMA synchronous={durability.upper()}")
        self._conn.executescript("""
            CREATE TABLE IF NOT EXISTS posts (
                post_id TEXT PRIMARY KEY, author_id TEXT NOT NULL, text TEXT NOT NULL,
                created_at REAL NOT NULL, fanned_out INTEGER NOT NULL, deleted INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE IF NOT EXISTS graph_log (
                user_id TEXT NOT NULL, followee_id TEXT NOT NULL, follows INTEGER NOT NULL);""")

    def save_post(self, post: Post) -> None:
        with self._lock:
            self._conn.execute("INSERT INTO posts VALUES (?, ?, ?, ?, ?, 0)",
                               (post.post_id, post.author_id, post.text, post.created_at, int(post.fanned_out)))

    def mark_deleted(self, post_id: str) -> None:
        with self._lock:
            self._conn.execute("UPDATE posts SET deleted = 1 WHERE post_id = ?", (post_id,))

    def save_follows(self, pairs: list[tuple[str, str]]) -> None:
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                self._conn.executemany("INSERT INTO graph_log VALUES (?, ?, 1)", pairs)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def remove_follow(self, user: str, followee: str) -> None:
        with self._lock:
            self._conn.execute("INSERT INTO graph_log VALUES (?, ?, 0)", (user, followee))

    def load(self) -> tuple[list[Post], set[str], list[tuple[str, str]]]:
        with self._lock:
            rows = self._conn.execute("SELECT post_id, author_id, text, created_at, fanned_out, deleted FROM posts "
                                      "ORDER BY created_at, post_id").fetchall()
            log = self._conn.execute("SELECT user_id, followee_id, follows FROM graph_log ORDER BY rowid").fetchall()
        posts = [Post(r[0], r[1], r[2], r[3], bool(r[4])) for r in rows]
        graph: dict[tuple[str, str], None] = {}
        for user, followee, follows in log:
            if follows:
                graph[(user, followee)] = None
            else:
                graph.pop((user, followee), None)
        return posts, {r[0] for r in rows if r[5]}, list(graph)

    def close(self) -> None:
        with self._lock:
            self._conn.close()
