"""Beacon's HTTP API (Flask, served by gunicorn): recipients and notifications.

    PUT  /api/v2/recipients/<id>        {"preferences": ["sms", "push"], "contacts": {"push": "...", "sms": "+90...", "email": "..."}}
    POST /api/v2/notifications          {"event": "...", "recipient": "...", "priority": "high"|"normal", "title", "body"}
                                        201 {"notification": {...}} accepted; 200 the same notification for a replay
    GET  /api/v2/notifications/<id>     {"notification": {"id": 17, "event", "recipient", "priority", "state",
                                         "channel", "accepted_at", "delivered_at", "attempts": [{"channel", "result", "at"}]}}
    GET  /api/v2/health

Errors: {"error": {"code": "RECIPIENT_NOT_FOUND" | "NOTIFICATION_NOT_FOUND" | "VALIDATION_FAILED" | ..., "message"}}.
Times are RFC 3339 in UTC; ids are the database's (bigserial).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
from flask import Flask, jsonify, request

from . import db
from .settings import CHANNELS
from .tasks import S, deliver, queue_for

app = Flask(__name__)
app.json.sort_keys = False
CONTACT_FIELD = {"push": "push_token", "sms": "phone", "email": "email"}


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@app.errorhandler(ApiError)
def _api_error(e: ApiError):
    return jsonify(error={"code": e.code, "message": e.message}), e.status


@app.errorhandler(404)
def _not_found(_e):
    return jsonify(error={"code": "NOT_FOUND", "message": "no such route"}), 404


@app.errorhandler(405)
def _not_allowed(_e):
    return jsonify(error={"code": "METHOD_NOT_ALLOWED", "message": "method not allowed"}), 405


def _body() -> dict[str, Any]:
    doc = request.get_json(silent=True)
    if not isinstance(doc, dict):
        raise ApiError(400, "VALIDATION_FAILED", "the body must be a JSON object")
    return doc


def _text(doc: dict, name: str, lo: int, hi: int) -> str:
    v = doc.get(name, "" if lo == 0 else None)
    if not isinstance(v, str) or not lo <= len(v) <= hi:
        raise ApiError(400, "VALIDATION_FAILED", f"{name} must be a string of {lo} to {hi} characters")
    if "\x00" in v:
        raise ApiError(400, "VALIDATION_FAILED", f"{name} must not contain NUL characters")
    return v


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat(timespec="microseconds")


@app.get("/api/v2/health")
def health():
    db.connect(S.database_url).execute("SELECT 1")
    return jsonify(status="ok")


@app.put("/api/v2/recipients/<path:rid>")
def put_recipient(rid: str):
    if not 0 < len(rid) <= 200 or "\x00" in rid:
        raise ApiError(400, "VALIDATION_FAILED", "a recipient id is 1 to 200 characters")
    doc = _body()
    prefs, contacts = doc.get("preferences"), doc.get("contacts") or {}
    if not isinstance(prefs, list) or len(set(map(str, prefs))) != len(prefs) or any(p not in CHANNELS for p in prefs):
        raise ApiError(400, "VALIDATION_FAILED", "preferences must be a list of distinct channels: push, sms, email")
    if not isinstance(contacts, dict) or set(contacts) - set(CHANNELS):
        raise ApiError(400, "VALIDATION_FAILED", "contacts maps channels (push, sms, email) to addresses")
    addresses = {}
    for c in CHANNELS:
        if contacts.get(c) is not None:
            addresses[c] = _text(contacts, c, 1, 320)
    if not addresses:
        raise ApiError(400, "VALIDATION_FAILED", "a recipient needs an address on at least one channel")
    conn = db.connect(S.database_url)
    conn.execute("INSERT INTO recipients (id, preferences, push_token, phone, email) VALUES (%s, %s, %s, %s, %s) "
                 "ON CONFLICT (id) DO UPDATE SET preferences = EXCLUDED.preferences, push_token = EXCLUDED.push_token, "
                 "phone = EXCLUDED.phone, email = EXCLUDED.email, updated_at = clock_timestamp()",
                 (rid, prefs, addresses.get("push"), addresses.get("sms"), addresses.get("email")))
    return jsonify(recipient={"id": rid, "preferences": prefs, "contacts": addresses})


@app.post("/api/v2/notifications")
def create_notification():
    doc = _body()
    event, recipient = _text(doc, "event", 1, 200), _text(doc, "recipient", 1, 200)
    priority = doc.get("priority", "normal")
    if priority not in ("high", "normal"):
        raise ApiError(400, "VALIDATION_FAILED", "priority must be 'high' or 'normal'")
    title, body = _text(doc, "title", 0, 1_000), _text(doc, "body", 0, 20_000)
    conn = db.connect(S.database_url)
    try:
        row = conn.execute(
            "INSERT INTO notifications (event_id, recipient_id, priority, title, body) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (event_id, recipient_id) DO NOTHING RETURNING id",
            (event, recipient, priority, title, body)).fetchone()
    except psycopg.errors.ForeignKeyViolation:
        raise ApiError(404, "RECIPIENT_NOT_FOUND", f"no recipient {recipient!r}") from None
    if row is None:  # a replay of (event, recipient): the notification it already made
        existing = conn.execute("SELECT id FROM notifications WHERE event_id = %s AND recipient_id = %s",
                                (event, recipient)).fetchone()
        if S.defect == "replay-sends-twice":
            # THE DEFECT (--defect replay-sends-twice): a replay is taken for a "send it again" of a notification
            # already delivered (a resend feature reached by the create endpoint), and it is sent once more
            resent = conn.execute("UPDATE notifications SET state = 'SENDING' WHERE id = %s AND state = 'DELIVERED' "
                                  "RETURNING priority", (existing["id"],)).fetchone()
            if resent is not None:
                deliver.apply_async((existing["id"],), queue=queue_for(resent["priority"]))
        return jsonify(notification=_notification(conn, existing["id"])), 200
    deliver.apply_async((row["id"],), queue=queue_for(priority))
    return jsonify(notification=_notification(conn, row["id"])), 201


@app.get("/api/v2/notifications/<int:nid>")
def get_notification(nid: int):
    conn = db.connect(S.database_url)
    n = _notification(conn, nid)
    if n is None:
        raise ApiError(404, "NOTIFICATION_NOT_FOUND", f"no notification {nid}")
    return jsonify(notification=n)


def _notification(conn: psycopg.Connection, nid: int) -> dict | None:
    n = conn.execute("SELECT * FROM notifications WHERE id = %s", (nid,)).fetchone()
    if n is None:
        return None
    attempts = conn.execute("SELECT channel, result, finished_at FROM attempts WHERE notification_id = %s "
                            "AND result <> 'in_flight' ORDER BY seq", (nid,)).fetchall()
    return {"id": n["id"], "event": n["event_id"], "recipient": n["recipient_id"], "priority": n["priority"],
            "state": n["state"], "channel": n["channel"], "accepted_at": _iso(n["accepted_at"]),
            "delivered_at": _iso(n["delivered_at"]),
            "attempts": [{"channel": a["channel"], "result": a["result"], "at": _iso(a["finished_at"])} for a in attempts]}
