"""The ticket shop's HTTP API (Flask, served by gunicorn). Its own API, not peakproof's contract:

    PUT  /shop/api/events/<slug>                 create or reset an event (header X-Shop-Admin)
         {"capacity": 100, "hold_window_s": 120}  -> 201 (created) / 200 (reset: its holds forgotten)
    GET  /shop/api/events/<slug>                 {"slug", "capacity", "hold_window_s", "counts": {"free", "held", "sold"}}
    POST /shop/api/events/<slug>/holds           {"buyer": "...", "quantity": 2}, header Idempotency-Key
                                                 -> 201 a hold; 409 SOLD_OUT; a retry replays the first answer
    GET  /shop/api/holds/<id>                    a hold: {"id", "event", "buyer", "quantity", "state",
                                                 "created_at", "expires_at"}; state on_hold | purchased |
                                                 lapsed | cancelled; times ISO 8601 at the shop's zone
    POST /shop/api/holds/<id>/purchase           sell a hold (a lapsed hold sells until the expiry job ran)
    POST /shop/api/holds/<id>/cancel             release a hold or a sale

Errors: ``{"error": {"code": "SOLD_OUT", "message": "..."}}`` with 400 / 401 / 404 / 405 / 409 / 422.

The environment: ``TICKETS_DSN`` (the database), ``TICKETS_ADMIN_KEY``, ``TICKETS_DEFECT``
(``check-then-act``: the overselling variant, see :func:`_hold_checked_on_stale_stock`),
``TICKETS_HOLDS_NEVER_LAPSE`` (``1``: the variant of its own design whose holds last until paid or cancelled).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from flask import Flask, Response, request
from psycopg.types.json import Jsonb
from werkzeug.exceptions import HTTPException

from . import db

MAX_QUANTITY = 10
MAX_TEXT = 200
SHOP_ZONE = timezone(timedelta(hours=-5), "EST")  # the shop's head office; every time it answers is at -05:00
STATES = {"held": "on_hold", "sold": "purchased", "expired": "lapsed", "cancelled": "cancelled"}
DEFECTS = ("check-then-act",)
NEVER = 10 * 365 * 86400.0  # s: a hold of the variant whose holds never lapse

app = Flask(__name__)
app.config["MAX_CONTENT_LENGTH"] = 64 * 1024


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message}}


def answer(status: int, doc: dict[str, Any]) -> Response:
    return Response(json.dumps(doc), status=status, mimetype="application/json")


@app.errorhandler(ApiError)
def _api_error(e: ApiError) -> Response:
    return answer(e.status, e.body())


@app.errorhandler(HTTPException)
def _http_error(e: HTTPException) -> Response:  # Flask's own 404 / 405 / 413, in the shop's error shape
    code = {404: "ROUTE_NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "BODY_TOO_LARGE"}.get(
        e.code or 0, "INTERNAL_ERROR" if (e.code or 500) >= 500 else "BAD_REQUEST")
    return answer(e.code or 400, {"error": {"code": code, "message": e.description or e.name}})


def _stamp(t: datetime) -> str:
    return t.astimezone(SHOP_ZONE).isoformat(timespec="microseconds")


def _hold(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "event": row["slug"], "buyer": row["buyer"], "quantity": row["quantity"],
            "state": STATES[row["status"]], "created_at": _stamp(row["created_at"]), "expires_at": _stamp(row["expires_at"])}


def _event(row: dict[str, Any]) -> dict[str, Any]:
    return {"slug": row["slug"], "capacity": row["capacity"], "hold_window_s": row["hold_window_s"],
            "counts": {"free": row["capacity"] - row["held"] - row["sold"], "held": row["held"], "sold": row["sold"]}}


def _body() -> dict[str, Any]:
    doc = request.get_json(silent=True)
    if not isinstance(doc, dict):
        raise ApiError(400, "INVALID_BODY", "the body must be a JSON object")
    return doc


def _text(doc: dict[str, Any], name: str) -> str:
    value = doc.get(name)
    if not isinstance(value, str) or not 0 < len(value) <= MAX_TEXT:
        raise ApiError(400, "INVALID_FIELD", f"{name} must be a string of 1 to {MAX_TEXT} characters")
    return value


# -- events ------------------------------------------------------------------------------------------
@app.put("/shop/api/events/<slug>")
def put_event(slug: str) -> Response:
    key = request.headers.get("X-Shop-Admin", "")
    if not hmac.compare_digest(key.encode(), os.environ.get("TICKETS_ADMIN_KEY", "shop-admin-key").encode()):
        raise ApiError(401, "UNAUTHORIZED", "events are set up with the X-Shop-Admin key")
    if not 0 < len(slug) <= MAX_TEXT:
        raise ApiError(400, "INVALID_FIELD", f"a slug has 1 to {MAX_TEXT} characters")
    doc = _body()
    capacity, window = doc.get("capacity"), doc.get("hold_window_s", 900)
    if type(capacity) is not int or not 0 <= capacity <= 10_000_000:
        raise ApiError(400, "INVALID_FIELD", "capacity must be an integer from 0 to 10,000,000")
    if type(window) not in (int, float) or not 0 < window <= 86_400:
        raise ApiError(400, "INVALID_FIELD", "hold_window_s must be a number of seconds in (0, 86400]")
    c = db.conn()
    with c.transaction():
        row = c.execute("SELECT id FROM events WHERE slug = %s FOR NO KEY UPDATE", (slug,)).fetchone()
        if row is None:
            row = c.execute("""INSERT INTO events (slug, capacity, hold_window_s) VALUES (%s, %s, %s)
                               ON CONFLICT (slug) DO NOTHING RETURNING *""", (slug, capacity, float(window))).fetchone()
            if row is not None:
                return answer(201, _event(row))
            row = c.execute("SELECT id FROM events WHERE slug = %s FOR NO KEY UPDATE", (slug,)).fetchone()
        # a reset: the event starts over (its holds, sales and idempotency keys forgotten)
        c.execute("DELETE FROM idempotency_keys WHERE event_id = %s", (row["id"],))
        c.execute("DELETE FROM holds WHERE event_id = %s", (row["id"],))
        row = c.execute("""UPDATE events SET capacity = %s, hold_window_s = %s, held = 0, sold = 0, updated_at = now()
                           WHERE id = %s RETURNING *""", (capacity, float(window), row["id"])).fetchone()
    return answer(200, _event(row))


@app.get("/shop/api/events/<slug>")
def get_event(slug: str) -> Response:
    row = db.conn().execute("SELECT * FROM events WHERE slug = %s", (slug,)).fetchone()
    if row is None:
        raise ApiError(404, "EVENT_NOT_FOUND", f"no event {slug!r}")
    return answer(200, _event(row))


# -- holds -------------------------------------------------------------------------------------------
@app.post("/shop/api/events/<slug>/holds")
def create_hold(slug: str) -> Response:
    key = request.headers.get("Idempotency-Key", "")
    if not 0 < len(key) <= MAX_TEXT:
        raise ApiError(400, "IDEMPOTENCY_KEY_REQUIRED", f"send an Idempotency-Key header of 1 to {MAX_TEXT} characters")
    doc = _body()
    buyer = _text(doc, "buyer")
    quantity = doc.get("quantity")
    if type(quantity) is not int or not 1 <= quantity <= MAX_QUANTITY:
        raise ApiError(400, "INVALID_FIELD", f"quantity must be an integer from 1 to {MAX_QUANTITY}")
    c = db.conn()
    # the event as it stands (a plain read: no lock)
    event = c.execute("SELECT * FROM events WHERE slug = %s", (slug,)).fetchone()
    if event is None:
        raise ApiError(404, "EVENT_NOT_FOUND", f"no event {slug!r}")
    defect = os.environ.get("TICKETS_DEFECT") == "check-then-act"
    busy = float(os.environ.get("TICKETS_CPU_PER_REQUEST_MS") or 0)
    if busy:  # --cpu-per-request MS: a pricing rule that computes for MS ms of this thread's CPU before the hold
        until = time.thread_time() + busy / 1000
        while time.thread_time() < until:
            hashlib.sha256(key.encode()).digest()
    with c.transaction():
        slow = float(os.environ.get("TICKETS_SLOW_QUERY_MS") or 0)
        if slow:  # --slow-query MS: a slow statement in the database, before the row lock (slow, not serialised)
            c.execute("SELECT pg_sleep(%s)", (slow / 1000,))
        first = c.execute("""INSERT INTO idempotency_keys (event_id, buyer, key, quantity) VALUES (%s, %s, %s, %s)
                             ON CONFLICT ON CONSTRAINT idempotency_once DO NOTHING RETURNING 1""",
                          (event["id"], buyer, key, quantity)).fetchone()
        if first is None:  # a retry: the key's first answer (its transaction has committed: the insert waited)
            stored = c.execute("""SELECT quantity, status_code, response FROM idempotency_keys
                                  WHERE event_id = %s AND buyer = %s AND key = %s""", (event["id"], buyer, key)).fetchone()
        else:
            try:
                if defect:
                    status, body = 201, _hold_checked_on_stale_stock(c, event, buyer, quantity)
                else:
                    status, body = 201, _allocate(c, event, buyer, quantity)
            except ApiError as e:
                status, body = e.status, e.body()
            c.execute("""UPDATE idempotency_keys SET status_code = %s, response = %s
                         WHERE event_id = %s AND buyer = %s AND key = %s""",
                      (status, Jsonb(body), event["id"], buyer, key))
    if first is not None:
        if defect and status == 201:
            # THE DEFECT's second half: the allocation, an unconditional increment after the hold's commit
            c.execute("UPDATE events SET held = held + %s, updated_at = now() WHERE id = %s", (quantity, event["id"]))
        return answer(status, body)
    if stored is None:  # the event was reset between the two statements: its keys are gone
        raise ApiError(409, "RETRY", "the event was reset while this request ran; send it again")
    if stored["quantity"] != quantity:
        raise ApiError(422, "IDEMPOTENCY_KEY_REUSED", "this Idempotency-Key was used for another quantity")
    return answer(stored["status_code"], stored["response"])


def _allocate(c: db.psycopg.Connection, read: dict[str, Any], buyer: str, quantity: int) -> dict[str, Any]:
    """The reservation (inside the caller's transaction), checked twice. First on the event as read at the
    start of the request: that read saw every committed hold, so too few free units there is a true answer
    at that instant, and a sold-out event refuses its crowd without queueing for its row. Then, to grant,
    under the event row's lock: the free units checked again, the hold inserted, the count moved."""
    if read["capacity"] - read["held"] - read["sold"] < quantity:
        raise ApiError(409, "SOLD_OUT", f"only {max(0, read['capacity'] - read['held'] - read['sold'])} ticket(s) left")
    event = c.execute("SELECT * FROM events WHERE id = %s FOR NO KEY UPDATE", (read["id"],)).fetchone()
    free = event["capacity"] - event["held"] - event["sold"]
    if free < quantity:
        raise ApiError(409, "SOLD_OUT", f"only {free} ticket(s) left")
    row = c.execute("""INSERT INTO holds (event_id, buyer, quantity, expires_at)
                       VALUES (%s, %s, %s, clock_timestamp() + %s * interval '1 second') RETURNING *""",
                    (event["id"], buyer, quantity, _hold_seconds(event))).fetchone()
    c.execute("UPDATE events SET held = held + %s, updated_at = now() WHERE id = %s", (quantity, event["id"]))
    return _hold({**row, "slug": event["slug"]})


def _hold_checked_on_stale_stock(c: db.psycopg.Connection, event: dict[str, Any], buyer: str,
                                 quantity: int) -> dict[str, Any]:
    """THE DEFECT (``--defect check-then-act``), as it is found in real shops (an ORM's
    ``event = Event.get(slug)`` ... ``if event.free >= n: Hold.create(...)`` ... ``Event.update(held=F('held') + n)``):
    the stock is checked on the event as read at the start of the request (a plain read, no lock), the hold
    is created, and the allocation is an unconditional ``held = held + n`` later, after the hold's commit
    (``create_hold``). Buyers who read the last units before any of them counted theirs all get them. It is
    :func:`_allocate` without its second check, the one under the lock."""
    free = event["capacity"] - event["held"] - event["sold"]
    if free < quantity:
        raise ApiError(409, "SOLD_OUT", f"only {free} ticket(s) left")
    row = c.execute("""INSERT INTO holds (event_id, buyer, quantity, expires_at)
                       VALUES (%s, %s, %s, clock_timestamp() + %s * interval '1 second') RETURNING *""",
                    (event["id"], buyer, quantity, _hold_seconds(event))).fetchone()
    return _hold({**row, "slug": event["slug"]})


def _hold_seconds(event: dict[str, Any]) -> float:
    """How long a hold is kept. The variant whose holds never lapse (``--holds-never-lapse``, a design of its own,
    as real shops keep one: a hold lasts until it is paid or cancelled) answers an ``expires_at`` ten years ahead,
    and runs no expiry job."""
    return NEVER if os.environ.get("TICKETS_HOLDS_NEVER_LAPSE") == "1" else event["hold_window_s"]


def _hold_id(ref: str) -> int:
    if not ref.isdigit() or len(ref) > 18:
        raise ApiError(404, "HOLD_NOT_FOUND", f"no hold {ref!r}")
    return int(ref)


def _locked_hold(c: db.psycopg.Connection, ref: str) -> dict[str, Any]:
    """The hold and its event, locked in the shop's order: the event row first, then the hold."""
    hold_id = _hold_id(ref)
    found = c.execute("SELECT event_id FROM holds WHERE id = %s", (hold_id,)).fetchone()
    if found is None:
        raise ApiError(404, "HOLD_NOT_FOUND", f"no hold {ref!r}")
    c.execute("SELECT id FROM events WHERE id = %s FOR NO KEY UPDATE", (found["event_id"],))
    row = c.execute("""SELECT h.*, e.slug FROM holds h JOIN events e ON e.id = h.event_id
                       WHERE h.id = %s FOR NO KEY UPDATE OF h""", (hold_id,)).fetchone()
    if row is None:  # its event was reset meanwhile
        raise ApiError(404, "HOLD_NOT_FOUND", f"no hold {ref!r}")
    return row


@app.get("/shop/api/holds/<ref>")
def get_hold(ref: str) -> Response:
    row = db.conn().execute("SELECT h.*, e.slug FROM holds h JOIN events e ON e.id = h.event_id WHERE h.id = %s",
                            (_hold_id(ref),)).fetchone()
    if row is None:
        raise ApiError(404, "HOLD_NOT_FOUND", f"no hold {ref!r}")
    return answer(200, _hold(row))


@app.post("/shop/api/holds/<ref>/purchase")
def purchase(ref: str) -> Response:
    """A hold on hold sells, also after its window until the expiry job has released it (the shop's
    documented lag); a purchased hold answers its sale again."""
    c = db.conn()
    with c.transaction():
        row = _locked_hold(c, ref)
        if row["status"] == "expired":
            raise ApiError(409, "HOLD_LAPSED", "the hold lapsed and was released")
        if row["status"] == "cancelled":
            raise ApiError(409, "HOLD_CANCELLED", "the hold was cancelled")
        if row["status"] == "held":
            c.execute("UPDATE events SET held = held - %(q)s, sold = sold + %(q)s, updated_at = now() WHERE id = %(e)s",
                      {"q": row["quantity"], "e": row["event_id"]})
            row = {**c.execute("UPDATE holds SET status = 'sold', updated_at = clock_timestamp() WHERE id = %s RETURNING *",
                               (row["id"],)).fetchone(), "slug": row["slug"]}
    return answer(200, _hold(row))


@app.post("/shop/api/holds/<ref>/cancel")
def cancel(ref: str) -> Response:
    c = db.conn()
    with c.transaction():
        row = _locked_hold(c, ref)
        if row["status"] == "expired":
            raise ApiError(409, "HOLD_LAPSED", "the hold lapsed and was released")
        if row["status"] in ("held", "sold"):
            column = row["status"]
            c.execute(f"UPDATE events SET {column} = {column} - %s, updated_at = now() WHERE id = %s",
                      (row["quantity"], row["event_id"]))
            row = {**c.execute("UPDATE holds SET status = 'cancelled', updated_at = clock_timestamp() WHERE id = %s "
                               "RETURNING *", (row["id"],)).fetchone(), "slug": row["slug"]}
    return answer(200, _hold(row))


@app.get("/shop/api/health")
def health() -> Response:
    db.conn().execute("SELECT 1")
    return answer(200, {"ok": True, "defect": os.environ.get("TICKETS_DEFECT") or None})
