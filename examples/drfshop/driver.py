"""A peakproof driver for the DRF-shaped shop (``examples/drfshop/service.py``).

What it shows, each the way real services need it (docs/drivers.md):

* ``auth = "every"`` and ``auth_headers``: ``Authorization: Token ...`` on every call (``--token``
  for buyers' calls, ``--admin-token`` for the events' set-up);
* an ``ErrorMap`` over DRF's error bodies: ``detail``, or per field nested in lists, matched by
  prefix where the text carries a number;
* ids the shop allocates: a quota is an event whose numeric id the shop picks, found again by
  its slug (the harness's quota id) and kept in ``self.ids`` (shared by every instance of the
  driver in a process); a reservation is an order whose code the shop picks: the driver names
  it ``<event id>-<code>`` so confirm and cancel need no look-up;
* operations of several requests (``self.operation``): find the event, then act;
* a per-request ``X-Idempotency-Key``;
* the shop's stated rule, ``--release-lag 3``: an unpaid order is released by a job within 3 s
  of its expiry, and can be paid until then.

    peakproof driver check tickets --driver examples/drfshop/driver.py:DrfShop \\
        --target-url http://127.0.0.1:PORT/api/v1 --token buyer-token --admin-token admin-token --release-lag 3
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from peakproof.driver import ErrorMap, Failed, HttpDriver, Operation, translate
from peakproof.history import FAIL, Op
from peakproof.timefmt import parse_time

STATUSES = {"n": "held", "p": "sold", "e": "expired", "c": "cancelled"}


class DrfShop(HttpDriver):
    auth = "every"
    errors = ErrorMap(
        field=("detail", "positions.item", "positions.count", "positions", "email", "quota", "hold_seconds", "slug",
               "non_field_errors"),
        codes={"Not found.": "not_found", "Invalid token.": "unauthorized",
               "Authentication credentials were not provided.": "unauthorized",
               "You do not have permission to perform this action.": "unauthorized",
               "The order has expired and cannot be paid.": "expired", "The order has expired.": "expired",
               "The order has been canceled.": "cancelled", "Request body too large.": "body_too_large",
               "Idempotency key was used for a different request.": "idempotency_key_reused"},
        prefixes={"There is not enough quota": "sold_out", "Ensure this value": "invalid_request",
                  "A valid integer": "invalid_request", "This field": "invalid_request", "Enter a valid": "invalid_request",
                  "Exactly one position": "invalid_request", "Method ": "method_not_allowed",
                  "JSON parse error": "invalid_request", "Invalid data": "invalid_request"})

    def auth_headers(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Token {token}"}

    # -- the event behind a quota id (the shop picks its number) ---------------------------------------
    def _event_id(self, op: Operation, quota_id: str) -> int:
        """The shop's id of the harness's quota, from the shared store or by its slug; unknown: fail."""
        def look_up() -> int | None:
            page = op.request("GET", f"/events/?slug={quote(quota_id, safe='')}")
            if not page.get("count"):
                return None
            self.ids.put("slug", str(page["results"][0]["id"]), quota_id)  # and back, for an order's quota id
            return page["results"][0]["id"]

        event = self.ids.get_or_create("event", quota_id, look_up)
        if event is None:
            op.fail("unknown_quota", f"no event with slug {quota_id!r}")
        return int(event)

    def put_quota(self, quota_id: str, capacity: int, hold_seconds: float = 120.0, *, process: Any = 0) -> Op:
        args = {"quota_id": quota_id, "capacity": capacity, "hold_seconds": hold_seconds}
        settings = {"quota": capacity, "hold_seconds": hold_seconds}
        with self.operation("put_quota", args, process=process) as op:
            try:
                event = self._event_id(op, quota_id)
            except Failed as e:  # a new quota: create its event (a reset keeps the id, forgets the orders)
                if e.code != "unknown_quota":
                    raise
                created = op.request("POST", "/events/", {"slug": quota_id, **settings}, admin=True)
                self.ids.put("event", quota_id, created["id"])
                self.ids.put("slug", str(created["id"]), quota_id)
                op.ok(quota(created))
            else:
                op.ok(quota(op.request("POST", f"/events/{event}/reset/", settings, admin=True)))
        return op.result

    def read_quota(self, quota_id: str, *, process: Any = 0) -> Op:
        with self.operation("read_quota", {"quota_id": quota_id}, process=process) as op:
            op.ok(quota(op.request("GET", f"/events/{self._event_id(op, quota_id)}/")))
        return op.result

    def reserve(self, quota_id: str, buyer_id: str, quantity: int, request_id: str, *, process: Any = 0,
                intended_time: float | None = None) -> Op:
        args = {"quota_id": quota_id, "buyer_id": buyer_id, "quantity": quantity, "request_id": request_id}
        with self.operation("reserve", args, process=process, intended_time=intended_time) as op:
            event = self._event_id(op, quota_id)
            body = {"email": buyer_id, "positions": [{"item": "admission", "count": quantity}]}
            key = f"{quota_id}:{buyer_id}:{request_id}"  # unique per (quota, buyer, request): the harness's key
            op.ok(order(op.request("POST", f"/events/{event}/orders/", body,
                                   headers={"X-Idempotency-Key": key}), quota_id))
        return op.result

    def _order_call(self, f: str, reservation_id: str, action: str | None, process: Any,
                    intended_time: float | None = None) -> Op:
        event, _, code = reservation_id.partition("-")
        if not event.isdigit() or not code:  # not an id this driver gave: the shop would not know it
            op = self.history.invoke(process, f, {"reservation_id": reservation_id}, intended_time)
            return self.history.complete(op, FAIL, "not_found", f"{reservation_id!r} is no <event>-<code> id")
        path = f"/events/{event}/orders/{quote(code, safe='')}/" + (f"{action}/" if action else "")
        return self._call(f, {"reservation_id": reservation_id}, "POST" if action else "GET", path,
                          {} if action else None, lambda doc: order(doc, self.ids.get("slug", event)),
                          process=process, intended_time=intended_time)

    def confirm(self, reservation_id: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return self._order_call("confirm", reservation_id, "mark_paid", process, intended_time)

    def cancel(self, reservation_id: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return self._order_call("cancel", reservation_id, "mark_canceled", process, intended_time)

    def get_reservation(self, reservation_id: str, *, process: Any = 0) -> Op:
        return self._order_call("get_reservation", reservation_id, None, process)


def quota(doc: Any) -> dict[str, Any]:
    q = translate(doc, {"capacity": "quota.size", "available": "quota.available", "held": "quota.pending",
                        "sold": "quota.paid", "quota_id": "slug"})
    for k in ("capacity", "available", "held", "sold"):
        if not isinstance(q[k], int):
            raise TypeError(f"{k} must be an integer, got {q[k]!r}")
    return q


def order(doc: Any, quota_id: str | None = None) -> dict[str, Any]:
    r = translate(doc, {"code": "code", "event": "event", "buyer_id": "email", "status": ("status", STATUSES),
                        "expires_at": ("expires", parse_time),
                        "quantity": ("positions", lambda ps: sum(p["count"] for p in ps))})
    if not isinstance(r["code"], str) or not isinstance(r["event"], int) or not isinstance(r["quantity"], int):
        raise TypeError(f"an order needs a code, an event id and a count, got {doc!r:.200}")
    return {"reservation_id": f"{r['event']}-{r['code']}", "quota_id": quota_id, "buyer_id": r["buyer_id"],
            "quantity": r["quantity"], "status": r["status"], "expires_at": r["expires_at"]}
