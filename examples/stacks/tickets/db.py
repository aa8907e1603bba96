"""The shop's database: its schema, its connections, and the one job that writes outside a request
(releasing lapsed holds).

Counts live on the event row (``held``, ``sold``) so that a reservation decides on one row: the
reservation takes that row's lock (``SELECT ... FOR NO KEY UPDATE``), checks the free units, inserts the
hold and moves the counts in one transaction. Every writer locks the event row before any of its holds,
so two writers never wait on each other in opposite orders.

Why ``FOR NO KEY UPDATE`` and not ``FOR UPDATE``: inserting a hold or an idempotency key checks its
foreign key by taking ``FOR KEY SHARE`` on the event row, and ``FOR UPDATE`` conflicts with that. A
reservation inserts its idempotency key first (that is what makes two retries one), so with ``FOR
UPDATE`` two reservations each held KEY SHARE and waited for the other's: PostgreSQL broke the
deadlock after a second by failing one (measured: every reservation of an opening timed out).
``FOR NO KEY UPDATE`` is the lock an ``UPDATE`` of non-key columns takes anyway: it excludes every
other writer of the row and lets foreign-key checks through.

There is deliberately no ``CHECK (held + sold <= capacity)``: the counts are kept right by the lock,
and the check-then-act defect (``app.py``) shows what happens without it.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import psycopg
from psycopg.rows import dict_row

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    id            bigserial PRIMARY KEY,
    slug          text NOT NULL UNIQUE,
    capacity      integer NOT NULL CHECK (capacity >= 0),
    hold_window_s double precision NOT NULL CHECK (hold_window_s > 0),
    held          integer NOT NULL DEFAULT 0 CHECK (held >= 0),
    sold          integer NOT NULL DEFAULT 0 CHECK (sold >= 0),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS holds (
    id          bigserial PRIMARY KEY,
    event_id    bigint NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    buyer       text NOT NULL,
    quantity    integer NOT NULL CHECK (quantity BETWEEN 1 AND 10),
    status      text NOT NULL DEFAULT 'held' CHECK (status IN ('held', 'sold', 'expired', 'cancelled')),
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS holds_by_event ON holds (event_id);
-- what the expiry job scans: live holds by their expiry
CREATE INDEX IF NOT EXISTS holds_lapsing ON holds (expires_at) WHERE status = 'held';

-- A reservation's idempotency: the first answer for (event, buyer, key) is stored and replayed to every
-- retry (refusals too, as Stripe's keys do). The UNIQUE constraint is what makes two concurrent
-- retries one: the second INSERT waits for the first's transaction and then finds its row.
CREATE TABLE IF NOT EXISTS idempotency_keys (
    event_id    bigint NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    buyer       text NOT NULL,
    key         text NOT NULL,
    quantity    integer NOT NULL,
    status_code integer,
    response    jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT idempotency_once UNIQUE (event_id, buyer, key)
);
"""


def dsn() -> str:
    """The database's URI, from the environment (the launcher sets it for every process)."""
    value = os.environ.get("TICKETS_DSN")
    if not value:
        raise RuntimeError("TICKETS_DSN is not set (start the shop with python -m examples.stacks.tickets)")
    return value


def connect(uri: str | None = None) -> psycopg.Connection[dict[str, Any]]:
    """An autocommit connection (transactions are explicit: ``with conn.transaction():``), in UTC."""
    conn = psycopg.connect(uri or dsn(), autocommit=True, row_factory=dict_row,
                           application_name=f"tickets-{os.getpid()}")
    conn.execute("SET TIME ZONE 'UTC'")
    return conn


_local = threading.local()


def conn() -> psycopg.Connection[dict[str, Any]]:
    """This thread's connection (gthread workers keep a fixed set of threads: one connection each),
    opened again if the last one broke."""
    c = getattr(_local, "conn", None)
    if c is None or c.closed or c.broken:
        c = _local.conn = connect()
    return c


def create_schema(uri: str) -> None:
    with psycopg.connect(uri, autocommit=True) as c:
        c.execute(SCHEMA)


def release_lapsed() -> int:
    """Release every hold whose window has passed: one transaction per event, its row locked first
    (the order every writer follows). Returns the holds released."""
    c = conn()
    released = 0
    due = c.execute("SELECT DISTINCT event_id FROM holds WHERE status = 'held' AND expires_at <= clock_timestamp()")
    for row in due.fetchall():
        with c.transaction():
            c.execute("SELECT id FROM events WHERE id = %s FOR NO KEY UPDATE", (row["event_id"],))
            done = c.execute(
                """WITH lapsed AS (
                       UPDATE holds SET status = 'expired', updated_at = clock_timestamp()
                        WHERE event_id = %(e)s AND status = 'held' AND expires_at <= clock_timestamp()
                    RETURNING quantity)
                   UPDATE events SET held = held - (SELECT coalesce(sum(quantity), 0) FROM lapsed),
                                     updated_at = now()
                    WHERE id = %(e)s
                   RETURNING (SELECT count(*) FROM lapsed) AS n""", {"e": row["event_id"]}).fetchone()
            released += done["n"] if done else 0
    return released
