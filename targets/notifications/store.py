"""Stores for the notifications core: in memory, and SQLite (an accepted notification survives a restart)."""

from __future__ import annotations

import copy
import json
import sqlite3
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .._asgi import _dumps
from .core import Attempt, Notification, Recipient


class InMemoryStore:
    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._recipients: dict[str, Recipient] = {}
        self._by_id: dict[str, Notification] = {}
        self._by_key: dict[tuple[str, str], str] = {}

    def save_recipient(self, r: Recipient) -> None:
        self._recipients[r.recipient_id] = r

    def load_recipient(self, recipient_id: str) -> Recipient | None:
        return self._recipients.get(recipient_id)

    def save(self, n: Notification) -> None:
        self._by_id[n.notification_id] = copy.deepcopy(n)

    def load(self, notification_id: str) -> Notification | None:
        n = self._by_id.get(notification_id)
        return copy.deepcopy(n) if n is not None else None

    def find(self, event_id: str, recipient_id: str) -> Notification | None:
        nid = self._by_key.get((event_id, recipient_id))
        return self.load(nid) if nid else None

    def insert_if_absent(self, n: Notification) -> Notification:
        with self._mutex:
            nid = self._by_key.get((n.event_id, n.recipient_id))
            if nid is not None:
                return self.load(nid)  # type: ignore[return-value]
            self._by_key[(n.event_id, n.recipient_id)] = n.notification_id
            self.save(n)
            return n

    def open_notifications(self) -> list[Notification]:
        return [copy.deepcopy(n) for n in self._by_id.values() if n.status in ("queued", "sending")]


class SqliteStore:
    """SQLite in WAL mode, one connection per thread; notifications as JSON documents."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        c = self._conn()
        c.executescript("""
            CREATE TABLE IF NOT EXISTS recipients (recipient_id TEXT PRIMARY KEY, doc TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS notifications (
                notification_id TEXT PRIMARY KEY, event_id TEXT NOT NULL, recipient_id TEXT NOT NULL,
                status TEXT NOT NULL, doc TEXT NOT NULL, UNIQUE (event_id, recipient_id));
            CREATE INDEX IF NOT EXISTS open_notifications ON notifications (status)
                WHERE status IN ('queued', 'sending');""")

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def save_recipient(self, r: Recipient) -> None:
        self._conn().execute("INSERT OR REPLACE INTO recipients VALUES (?, ?)",
                             (r.recipient_id, json.dumps({"channels": r.channels, "addresses": r.addresses})))

    def load_recipient(self, recipient_id: str) -> Recipient | None:
        row = self._conn().execute("SELECT doc FROM recipients WHERE recipient_id = ?", (recipient_id,)).fetchone()
        if row is None:
            return None
        d = json.loads(row[0])
        return Recipient(recipient_id, tuple(d["channels"]), d["addresses"])

    def save(self, n: Notification) -> None:
        self._conn().execute("UPDATE notifications SET status = ?, doc = ? WHERE notification_id = ?",
                             (n.status, _dump(n), n.notification_id))

    def load(self, notification_id: str) -> Notification | None:
        row = self._conn().execute("SELECT doc FROM notifications WHERE notification_id = ?",
                                   (notification_id,)).fetchone()
        return _load(row[0]) if row else None

    def find(self, event_id: str, recipient_id: str) -> Notification | None:
        row = self._conn().execute("SELECT doc FROM notifications WHERE event_id = ? AND recipient_id = ?",
                                   (event_id, recipient_id)).fetchone()
        return _load(row[0]) if row else None

    def insert_if_absent(self, n: Notification) -> Notification:
        cur = self._conn().execute("INSERT OR IGNORE INTO notifications VALUES (?, ?, ?, ?, ?)",
                                   (n.notification_id, n.event_id, n.recipient_id, n.status, _dump(n)))
        return n if cur.rowcount == 1 else self.find(n.event_id, n.recipient_id)  # type: ignore[return-value]

    def open_notifications(self) -> list[Notification]:
        rows = self._conn().execute("SELECT doc FROM notifications WHERE status IN ('queued', 'sending')").fetchall()
        return [_load(r[0]) for r in rows]


def _dump(n: Notification) -> str:
    return json.dumps(asdict(n))


def _load(text: str) -> Notification:
    d = json.loads(text)
    d["attempts"] = [Attempt(**a) if isinstance(a, dict) else Attempt(*a) for a in d["attempts"]]
    return Notification(**d)


class GroupCommitStore:
    """Memory for every read, SQLite for durability, one transaction per batch of writes.

    Every write (a recipient, an accepted notification, a status change) lands in memory at
    once and in a journal; one committer thread writes the journal to SQLite in a single
    transaction per batch (the batch is whatever accumulated while the previous one was
    committing: the busier it gets, the bigger the batches, the fewer the syncs).
    :meth:`barrier` returns a future that completes once everything written before it is
    durable: the HTTP layer answers an accept only then, so an accepted notification survives
    a crash (``synchronous=NORMAL`` in WAL mode: a killed process loses nothing committed;
    ``durability="full"`` also survives power loss).

    A restart loads everything back; the core re-queues what was not finished.
    """

    def __init__(self, path: str | Path, *, durability: str = "normal") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
        self._conn.executescript("""
            CREATE TABLE IF NOT EXISTS recipients (recipient_id TEXT PRIMARY KEY, doc TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS notifications (
                notification_id TEXT PRIMARY KEY, event_id TEXT NOT NULL, recipient_id TEXT NOT NULL,
                status TEXT NOT NULL, doc TEXT NOT NULL, UNIQUE (event_id, recipient_id));""")
        self._recipients: dict[str, Recipient] = {}
        self._by_id: dict[str, Notification] = {}
        self._by_key: dict[tuple[str, str], str] = {}
        for rid, doc in self._conn.execute("SELECT recipient_id, doc FROM recipients"):
            d = json.loads(doc)
            self._recipients[rid] = Recipient(rid, tuple(d["channels"]), d["addresses"])
        for (doc,) in self._conn.execute("SELECT doc FROM notifications"):
            n = _load(doc)
            self._by_id[n.notification_id] = n
            self._by_key[(n.event_id, n.recipient_id)] = n.notification_id
        self._mutex = threading.Lock()
        self._cv = threading.Condition(self._mutex)
        self._recipients_out: dict[str, Recipient] = {}  # written, not yet committed
        self._out: dict[str, tuple] = {}  # notification id -> its row, written not yet committed
        self._waiters: list = []
        self._stopping = False
        self.batches = self.rows = 0  # for /health and the benchmark: rows per transaction
        self._committer = threading.Thread(target=self._commit_loop, name="group-commit", daemon=True)
        self._committer.start()

    # -- the Store protocol (targets.notifications.core.Store) ------------------------------------

    def save_recipient(self, r: Recipient) -> None:
        with self._cv:
            self._recipients[r.recipient_id] = r
            self._recipients_out[r.recipient_id] = r
            self._cv.notify()

    def load_recipient(self, recipient_id: str) -> Recipient | None:
        return self._recipients.get(recipient_id)

    def save(self, n: Notification) -> None:
        snapshot, row = _copy(n), _row(n)  # serialised here, not in the committer: it holds the GIL less
        with self._cv:
            self._by_id[n.notification_id] = snapshot
            self._out[n.notification_id] = row
            self._cv.notify()

    def load(self, notification_id: str) -> Notification | None:
        n = self._by_id.get(notification_id)
        return _copy(n) if n is not None else None

    def find(self, event_id: str, recipient_id: str) -> Notification | None:
        nid = self._by_key.get((event_id, recipient_id))
        return self.load(nid) if nid else None

    def insert_if_absent(self, n: Notification) -> Notification:
        with self._cv:
            nid = self._by_key.get((n.event_id, n.recipient_id))
            if nid is not None:
                return _copy(self._by_id[nid])
            self._by_key[(n.event_id, n.recipient_id)] = n.notification_id
            self._by_id[n.notification_id] = _copy(n)
            self._out[n.notification_id] = _row(n)
            self._cv.notify()
            return n

    def open_notifications(self) -> list[Notification]:
        return [_copy(n) for n in self._by_id.values() if n.status in ("queued", "sending")]

    # -- durability ------------------------------------------------------------------------------

    def barrier(self) -> "Any":
        """A future that completes when everything written so far is committed."""
        from concurrent.futures import Future

        with self._cv:
            if not self._out and not self._recipients_out and not self._in_commit:
                done: Future = Future()
                done.set_result(None)
                return done
            if not self._waiters:  # one future per batch: every writer of the batch waits on the same one
                self._waiters.append(Future())
                self._cv.notify()
            return self._waiters[0]

    _in_commit = False

    def close(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify()
        self._committer.join(timeout=10)

    def _commit_loop(self) -> None:
        while True:
            with self._cv:
                while not (self._out or self._recipients_out or self._waiters) and not self._stopping:
                    self._cv.wait()
                if self._stopping and not (self._out or self._recipients_out or self._waiters):
                    return
                out, self._out = self._out, {}
                rout, self._recipients_out = self._recipients_out, {}
                waiters, self._waiters = self._waiters, []
                self._in_commit = True
            try:
                c = self._conn
                c.execute("BEGIN")
                if rout:
                    c.executemany("INSERT OR REPLACE INTO recipients VALUES (?, ?)",
                                  [(r.recipient_id, json.dumps({"channels": r.channels, "addresses": r.addresses}))
                                   for r in rout.values()])
                if out:
                    c.executemany("INSERT OR REPLACE INTO notifications VALUES (?, ?, ?, ?, ?)", list(out.values()))
                c.execute("COMMIT")
                self.batches += 1
                self.rows += len(out) + len(rout)
                error: BaseException | None = None
            except BaseException as e:  # noqa: BLE001 - the waiters must hear of it, not hang
                error = e
                try:
                    self._conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
                with self._cv:  # put the batch back: the next turn retries it
                    for k, v in out.items():
                        self._out.setdefault(k, v)
                    for k, r in rout.items():
                        self._recipients_out.setdefault(k, r)
            finally:
                with self._cv:
                    self._in_commit = False
            for f in waiters:
                if error is None:
                    f.set_result(None)
                else:
                    f.set_exception(error)


def _row(n: Notification) -> tuple:
    doc = {"notification_id": n.notification_id, "event_id": n.event_id, "recipient_id": n.recipient_id,
           "priority": n.priority, "title": n.title, "body": n.body, "accepted_at": n.accepted_at,
           "status": n.status, "attempts": [[a.channel, a.outcome, a.at, a.call_no] for a in n.attempts],
           "delivered_at": n.delivered_at, "channel": n.channel, "next_at": n.next_at}
    return (n.notification_id, n.event_id, n.recipient_id, n.status, _dumps(doc).decode())


def _copy(n: Notification) -> Notification:
    """A snapshot: the core mutates what it loads; readers and the journal must not see it half-done."""
    c = copy.copy(n)
    c.attempts = list(n.attempts)
    return c
