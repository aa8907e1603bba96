"""A peakproof driver for the example box office (``examples/tickets/service.py``), whose API is its own.

Paths under /api/v2, holds instead of reservations, ``customer`` / ``count`` /
``idempotency_key``, 410 for sold out, ``{"problem": {"type", "detail"}}`` errors, times at
+03:00, an ISO 8601 duration for the hold window, an ``X-Api-Key`` admin header.

    peakproof driver check tickets --driver examples/tickets/driver.py:BoxOffice \\
        --target-url http://127.0.0.1:PORT/api/v2 --admin-token KEY
    peakproof run tickets --driver examples/tickets/driver.py:BoxOffice --target-url ... --admin-token KEY
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from peakproof.driver import ErrorMap, HttpDriver, translate
from peakproof.history import Op
from peakproof.timefmt import parse_time

STATES = {"ON_HOLD": "held", "PURCHASED": "sold", "RELEASED": "expired", "CANCELLED": "cancelled"}


class BoxOffice(HttpDriver):
    """The box office as the tickets case's operations."""

    errors = ErrorMap(field="problem.type", message="problem.detail",
                      codes={"sold-out": "sold_out", "invalid": "invalid_request", "no-such-event": "unknown_quota",
                             "no-such-hold": "not_found", "idempotency-key-reused": "idempotency_key_reused",
                             "hold-expired": "expired", "hold-cancelled": "cancelled", "unauthorized": "unauthorized",
                             "no-such-route": "not_found", "method-not-allowed": "method_not_allowed",
                             "too-large": "body_too_large"})

    def admin_headers(self, token: str) -> dict[str, str]:
        return {"X-Api-Key": token}

    def put_quota(self, quota_id: str, capacity: int, hold_seconds: float = 120.0, *, process: Any = 0) -> Op:
        args = {"quota_id": quota_id, "capacity": capacity, "hold_seconds": hold_seconds}
        return self._call("put_quota", args, "PUT", f"/events/{quote(quota_id, safe='')}/inventory",
                          {"seats": capacity, "hold_for": f"PT{hold_seconds:g}S"}, inventory, process=process,
                          admin=True)

    def read_quota(self, quota_id: str, *, process: Any = 0) -> Op:
        return self._call("read_quota", {"quota_id": quota_id}, "GET", f"/events/{quote(quota_id, safe='')}/inventory",
                          None, inventory, process=process)

    def reserve(self, quota_id: str, buyer_id: str, quantity: int, request_id: str, *, process: Any = 0,
                intended_time: float | None = None) -> Op:
        args = {"quota_id": quota_id, "buyer_id": buyer_id, "quantity": quantity, "request_id": request_id}
        body = {"customer": buyer_id, "count": quantity, "idempotency_key": request_id}
        return self._call("reserve", args, "POST", f"/events/{quote(quota_id, safe='')}/holds", body, hold,
                          process=process, intended_time=intended_time)

    def confirm(self, reservation_id: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return self._call("confirm", {"reservation_id": reservation_id}, "POST",
                          f"/holds/{quote(reservation_id, safe='')}/purchase", None, hold, process=process,
                          intended_time=intended_time)

    def cancel(self, reservation_id: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return self._call("cancel", {"reservation_id": reservation_id}, "DELETE",
                          f"/holds/{quote(reservation_id, safe='')}", None, hold, process=process,
                          intended_time=intended_time)

    def get_reservation(self, reservation_id: str, *, process: Any = 0) -> Op:
        return self._call("get_reservation", {"reservation_id": reservation_id}, "GET",
                          f"/holds/{quote(reservation_id, safe='')}", None, hold, process=process)


def inventory(doc: Any) -> dict[str, Any]:
    q = translate(doc, {"quota_id": "event", "capacity": "total", "available": "free", "held": "on_hold",
                        "sold": "purchased"})
    for k in ("capacity", "available", "held", "sold"):
        if not isinstance(q[k], int):
            raise TypeError(f"{k} must be an integer, got {q[k]!r}")
    return q


def hold(doc: Any) -> dict[str, Any]:
    r = translate(doc, {"reservation_id": "id", "quota_id": "event", "buyer_id": "customer", "quantity": "count",
                        "status": ("state", STATES), "expires_at": ("expires", parse_time)}, at="hold")
    if not isinstance(r["reservation_id"], str) or not isinstance(r["quantity"], int):
        raise TypeError(f"a hold needs a string id and an integer count, got {r!r:.200}")
    return r
