"""PostgreSQL: the schema and one connection per process (or per thread in gunicorn's gthread workers).

The (event, recipient) idempotency is the database's: ``UNIQUE (event_id, recipient_id)``.
The suppression list is a table: an address a provider answered 422 for is never called again.
"""

from __future__ import annotations

import os
import threading

import psycopg
from psycopg.rows import dict_row

SCHEMA = """
CREATE TABLE IF NOT EXISTS recipients (
    id          text PRIMARY KEY,
    preferences text[] NOT NULL,
    push_token  text,
    phone       text,
    email       text,
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS notifications (
    id           bigserial PRIMARY KEY,
    event_id     text NOT NULL,
    recipient_id text NOT NULL REFERENCES recipients (id),
    priority     text NOT NULL CHECK (priority IN ('high', 'normal')),
    title        text NOT NULL,
    body         text NOT NULL,
    state        text NOT NULL DEFAULT 'QUEUED' CHECK (state IN ('QUEUED', 'SENDING', 'DELIVERED', 'FAILED')),
    channel      text,
    accepted_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    delivered_at timestamptz,
    UNIQUE (event_id, recipient_id)
);
CREATE TABLE IF NOT EXISTS attempts (
    id              bigserial PRIMARY KEY,
    notification_id bigint NOT NULL REFERENCES notifications (id),
    seq             int NOT NULL,
    channel         text NOT NULL,
    idempotency_key text NOT NULL,
    result          text NOT NULL DEFAULT 'in_flight'
                    CHECK (result IN ('in_flight', 'delivered', 'retryable', 'rejected', 'no_answer')),
    started_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at     timestamptz,
    UNIQUE (notification_id, seq)
);
CREATE TABLE IF NOT EXISTS suppressions (
    channel    text NOT NULL,
    address    text NOT NULL,
    reason     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (channel, address)
);
"""

_local = threading.local()


def connect(url: str) -> psycopg.Connection:
    """This thread's connection (autocommit: every transaction is an explicit ``with conn.transaction()``);
    a new one after a fork (Celery's prefork children) or once the old one broke."""
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed or conn.broken or getattr(_local, "pid", None) != os.getpid():
        conn = psycopg.connect(url, autocommit=True, row_factory=dict_row)
        _local.conn, _local.pid = conn, os.getpid()
    return conn


def migrate(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SCHEMA)
