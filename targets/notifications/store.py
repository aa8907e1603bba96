"""Stores for the notifications core: in memory, and SQLite (an accepted notification survives a restart)."""

from __future__ import annotations

import copy
import json
import sqlite3
import threading
from dataclasses import asdict
from pathlib import Path

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
    d["attempts"] = [Attempt(**a) for a in d["attempts"]]
    return Notification(**d)
