"""The peakproof driver of the PostgreSQL ticket shop (``examples/stacks/tickets``), whose API is its own.

How the shop's API reads as the tickets case (docs/drivers.md):

* a quota is an event, named by its slug (the harness's quota id); ``put_quota`` is the shop's
  ``PUT /events/<slug>`` (create, or reset: its holds forgotten), under the ``X-Shop-Admin`` key
  (``--admin-token``); buyers' calls carry no key;
* a reservation is a hold, whose id the shop allocates (a number: the reservation id is its text);
* the ``Idempotency-Key`` header: the shop keeps keys per (event, buyer) (a UNIQUE constraint on
  the three), so the harness's request id is a key of its own there, across events and runs;
* errors ``{"error": {"code": "SOLD_OUT", "message": ...}}``; times ISO 8601 at -05:00; states
  ``on_hold`` / ``purchased`` / ``lapsed`` / ``cancelled``;
* the shop's stated rule, ``--release-lag 3``: its expiry job runs every second, and a lapsed hold
  can be purchased until the job has released it.

    peakproof driver check tickets --driver examples/stacks/tickets/driver.py:PgTicketShop \\
        --target-url http://127.0.0.1:PORT/shop/api --admin-token shop-admin-key --release-lag 3
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from peakproof.driver import ErrorMap, HttpDriver, translate
from peakproof.history import Op
from peakproof.timefmt import parse_time

STATES = {"on_hold": "held", "purchased": "sold", "lapsed": "expired", "cancelled": "cancelled"}


class PgTicketShop(HttpDriver):
    """The PostgreSQL ticket shop as the tickets case's operations."""

    errors = ErrorMap(
        field="error.code", message="error.message",
        codes={"SOLD_OUT": "sold_out", "EVENT_NOT_FOUND": "unknown_quota", "HOLD_NOT_FOUND": "not_found",
               "ROUTE_NOT_FOUND": "not_found", "INVALID_FIELD": "invalid_request", "INVALID_BODY": "invalid_request",
               "IDEMPOTENCY_KEY_REQUIRED": "invalid_request", "IDEMPOTENCY_KEY_REUSED": "idempotency_key_reused",
               "HOLD_LAPSED": "expired", "HOLD_CANCELLED": "cancelled", "UNAUTHORIZED": "unauthorized",
               "METHOD_NOT_ALLOWED": "method_not_allowed", "BODY_TOO_LARGE": "body_too_large",
               # the shop's own "send it again": its event was reset under the request (nothing was decided)
               "RETRY": "busy"})

    def auth_headers(self, token: str) -> dict[str, str]:
        return {"X-Shop-Admin": token}

    def put_quota(self, quota_id: str, capacity: int, hold_seconds: float = 120.0, *, process: Any = 0) -> Op:
        args = {"quota_id": quota_id, "capacity": capacity, "hold_seconds": hold_seconds}
        return self._call("put_quota", args, "PUT", f"/events/{quote(quota_id, safe='')}",
                          {"capacity": capacity, "hold_window_s": hold_seconds}, event, process=process, admin=True)

    def read_quota(self, quota_id: str, *, process: Any = 0) -> Op:
        return self._call("read_quota", {"quota_id": quota_id}, "GET", f"/events/{quote(quota_id, safe='')}", None,
                          event, process=process)

    def reserve(self, quota_id: str, buyer_id: str, quantity: int, request_id: str, *, process: Any = 0,
                intended_time: float | None = None) -> Op:
        args = {"quota_id": quota_id, "buyer_id": buyer_id, "quantity": quantity, "request_id": request_id}
        return self._call("reserve", args, "POST", f"/events/{quote(quota_id, safe='')}/holds",
                          {"buyer": buyer_id, "quantity": quantity}, hold, process=process,
                          intended_time=intended_time, headers={"Idempotency-Key": request_id})

    def confirm(self, reservation_id: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return self._call("confirm", {"reservation_id": reservation_id}, "POST",
                          f"/holds/{quote(reservation_id, safe='')}/purchase", {}, hold, process=process,
                          intended_time=intended_time)

    def cancel(self, reservation_id: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return self._call("cancel", {"reservation_id": reservation_id}, "POST",
                          f"/holds/{quote(reservation_id, safe='')}/cancel", {}, hold, process=process,
                          intended_time=intended_time)

    def get_reservation(self, reservation_id: str, *, process: Any = 0) -> Op:
        return self._call("get_reservation", {"reservation_id": reservation_id}, "GET",
                          f"/holds/{quote(reservation_id, safe='')}", None, hold, process=process)


def event(doc: Any) -> dict[str, Any]:
    q = translate(doc, {"quota_id": "slug", "capacity": "capacity", "available": "counts.free",
                        "held": "counts.held", "sold": "counts.sold"})
    for k in ("capacity", "available", "held", "sold"):
        if not isinstance(q[k], int):
            raise TypeError(f"{k} must be an integer, got {q[k]!r}")
    return q


def hold(doc: Any) -> dict[str, Any]:
    r = translate(doc, {"reservation_id": ("id", str), "quota_id": "event", "buyer_id": "buyer",
                        "quantity": "quantity", "status": ("state", STATES), "expires_at": ("expires_at", parse_time)})
    if not isinstance(doc.get("id"), int) or not isinstance(r["quantity"], int):
        raise TypeError(f"a hold needs an integer id and quantity, got {doc!r:.200}")
    return r
