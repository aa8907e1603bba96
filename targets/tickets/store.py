"""Stores for the tickets core: in memory (properties, replays) and SQLite (served).

Both implement :class:`peakproof.targets.tickets.core.Store`. ``apply`` is the one write: the quota
row (compare-and-set on its version unless the policy writes blind), plus at most one
reservation inserts or one conditional status transition, all or nothing.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import replace
from pathlib import Path

from .core import Change, QuotaRow, Reservation


class InMemoryStore:
    """Dicts behind one mutex. Reads are lock-free (dict lookups are atomic in CPython)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._quotas: dict[str, QuotaRow] = {}
        self._res: dict[str, Reservation] = {}
        self._keys: dict[tuple[str, str, str], str] = {}

    def load_quotas(self) -> list[QuotaRow]:
        return list(self._quotas.values())

    def load_held(self) -> list[Reservation]:
        return [r for r in self._res.values() if r.status == "held"]

    def read_quota(self, quota_id: str) -> QuotaRow | None:
        return self._quotas.get(quota_id)

    def reset_quota(self, row: QuotaRow) -> None:
        with self._mutex:
            self._quotas[row.quota_id] = row
            for rid in [rid for rid, r in self._res.items() if r.quota_id == row.quota_id]:
                r = self._res.pop(rid)
                self._keys.pop((r.quota_id, r.buyer_id, r.request_id), None)

    def apply(self, change: Change) -> str | None:
        row = change.row
        with self._mutex:
            current = self._quotas.get(row.quota_id)
            if current is None:
                return "version"
            if change.expected_version is not None and current.version != change.expected_version:
                return "version"
            keys = [(r.quota_id, r.buyer_id, r.request_id) for r in change.inserts]
            if any(k in self._keys for k in keys) or len(set(keys)) < len(keys):
                return "duplicate"
            if any(self._res[rid].status != "held" for rid in change.expirations):
                return "status"  # checked before anything changes: a Change is all or nothing
            if change.transition is not None:
                rid, was, now = change.transition
                if self._res[rid].status != was:
                    return "status"
                self._res[rid] = replace(self._res[rid], status=now)
            for rid in change.expirations:
                self._res[rid] = replace(self._res[rid], status="expired")
            for r in change.inserts:
                self._res[r.reservation_id] = r
                self._keys[(r.quota_id, r.buyer_id, r.request_id)] = r.reservation_id
            self._quotas[row.quota_id] = row
            return None

    def get_reservation(self, reservation_id: str) -> Reservation | None:
        return self._res.get(reservation_id)

    def find_by_key(self, quota_id: str, buyer_id: str, request_id: str) -> Reservation | None:
        rid = self._keys.get((quota_id, buyer_id, request_id))
        return None if rid is None else self._res.get(rid)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS quotas (
    quota_id TEXT PRIMARY KEY, capacity INTEGER NOT NULL, available INTEGER NOT NULL,
    held INTEGER NOT NULL, sold INTEGER NOT NULL, hold_seconds REAL NOT NULL,
    version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS reservations (
    reservation_id TEXT PRIMARY KEY, quota_id TEXT NOT NULL, buyer_id TEXT NOT NULL,
    request_id TEXT NOT NULL, quantity INTEGER NOT NULL, status TEXT NOT NULL,
    created_at REAL NOT NULL, expires_at REAL NOT NULL,
    UNIQUE (quota_id, buyer_id, request_id));
CREATE INDEX IF NOT EXISTS reservations_held ON reservations (status) WHERE status = 'held';
"""


class SqliteStore:
    """SQLite in WAL mode, one connection per thread.

    Every read of the quota row is a real database read and every write a real
    transaction, so the discipline around them (not the GIL) decides correctness: under
    policy ``none`` two threads really do read the same row and both write it back.
    ``synchronous=NORMAL`` in WAL survives a crash or restart of the process (what the
    contract promises); ``durability="full"`` also survives power loss, at an fsync a commit.
    """

    def __init__(self, path: str | Path, durability: str = "normal") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._sync = "FULL" if durability == "full" else "NORMAL"
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_mutex = threading.Lock()
        self._conn().executescript(_SCHEMA)
        # The key index is also kept in memory: replays and the sold-out path must not
        # wait for the database (it is rebuilt from the table on start).
        self._keys: dict[tuple[str, str, str], Reservation] = {}
        for r in self._select_res("SELECT * FROM reservations", ()):
            self._keys[(r.quota_id, r.buyer_id, r.request_id)] = r

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self._sync}")
            self._local.conn = conn
            with self._conns_mutex:
                self._conns.append(conn)
        return conn

    def close(self) -> None:
        with self._conns_mutex:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
        self._local = threading.local()

    def load_quotas(self) -> list[QuotaRow]:
        rows = self._conn().execute("SELECT * FROM quotas").fetchall()
        return [QuotaRow(*r) for r in rows]

    def load_held(self) -> list[Reservation]:
        return self._select_res("SELECT * FROM reservations WHERE status = 'held'", ())

    def _select_res(self, sql: str, args: tuple) -> list[Reservation]:
        return [Reservation(*r) for r in self._conn().execute(sql, args).fetchall()]

    def read_quota(self, quota_id: str) -> QuotaRow | None:
        r = self._conn().execute("SELECT * FROM quotas WHERE quota_id = ?", (quota_id,)).fetchone()
        return None if r is None else QuotaRow(*r)

    def reset_quota(self, row: QuotaRow) -> None:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM reservations WHERE quota_id = ?", (row.quota_id,))
            conn.execute("INSERT OR REPLACE INTO quotas VALUES (?,?,?,?,?,?,?)", _row(row))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        for key in [k for k in self._keys if k[0] == row.quota_id]:
            del self._keys[key]

    def apply(self, change: Change) -> str | None:
        conn = self._conn()
        row = change.row
        conn.execute("BEGIN IMMEDIATE")
        try:
            if change.expected_version is None:
                cur = conn.execute(
                    "UPDATE quotas SET available=?, held=?, sold=?, version=? WHERE quota_id=?",
                    (row.available, row.held, row.sold, row.version, row.quota_id))
            else:
                cur = conn.execute(
                    "UPDATE quotas SET available=?, held=?, sold=?, version=? WHERE quota_id=? AND version=?",
                    (row.available, row.held, row.sold, row.version, row.quota_id, change.expected_version))
            if cur.rowcount != 1:
                conn.execute("ROLLBACK")
                return "version"
            if change.transition is not None:
                rid, was, now = change.transition
                cur = conn.execute("UPDATE reservations SET status=? WHERE reservation_id=? AND status=?",
                                   (now, rid, was))
                if cur.rowcount != 1:
                    conn.execute("ROLLBACK")
                    return "status"
            if change.expirations:
                cur = conn.executemany("UPDATE reservations SET status='expired' WHERE reservation_id=? AND status='held'",
                                       [(rid,) for rid in change.expirations])
                if cur.rowcount != len(change.expirations):
                    conn.execute("ROLLBACK")
                    return "status"
            if change.inserts:
                try:
                    conn.executemany("INSERT INTO reservations VALUES (?,?,?,?,?,?,?,?)",
                                     [_res(r) for r in change.inserts])
                except sqlite3.IntegrityError:
                    conn.execute("ROLLBACK")
                    return "duplicate"
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        for r in change.inserts:
            self._keys[(r.quota_id, r.buyer_id, r.request_id)] = r
        return None

    def get_reservation(self, reservation_id: str) -> Reservation | None:
        rows = self._select_res("SELECT * FROM reservations WHERE reservation_id = ?", (reservation_id,))
        return rows[0] if rows else None

    def find_by_key(self, quota_id: str, buyer_id: str, request_id: str) -> Reservation | None:
        # The in-memory index holds the reservation as created; a replay answers with it
        # re-read so its status is current.
        r = self._keys.get((quota_id, buyer_id, request_id))
        return None if r is None else (self.get_reservation(r.reservation_id) or r)


def _row(r: QuotaRow) -> tuple:
    return (r.quota_id, r.capacity, r.available, r.held, r.sold, r.hold_seconds, r.version)


def _res(r: Reservation) -> tuple:
    return (r.reservation_id, r.quota_id, r.buyer_id, r.request_id, r.quantity, r.status,
            r.created_at, r.expires_at)
