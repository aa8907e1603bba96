"""``peakproof driver check tickets``: each operation once on a quota of its own (see :mod:`peakproof.drivertool`)."""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable, Iterator

from ...drivertool import Step
from ...history import FAIL, OK
from .checks import CLIENT_ERRORS

# the names each operation records its arguments under (the checks read them)
ARGS = {"put_quota": ("quota_id", "capacity", "hold_seconds"), "read_quota": ("quota_id",),
        "reserve": ("quota_id", "buyer_id", "quantity", "request_id"), "confirm": ("reservation_id",),
        "cancel": ("reservation_id",), "get_reservation": ("reservation_id",), "nemesis": ("fault",)}
_RES = ("reservation_id", "quota_id", "buyer_id", "quantity", "status", "expires_at")
VALUES = {"read_quota": ("quota_id", "capacity", "available", "held", "sold"), "reserve": _RES, "confirm": _RES,
          "cancel": _RES, "get_reservation": _RES}
PARSERS = {"read_quota": "quota", "reserve": "reservation", "confirm": "reservation", "cancel": "reservation", "get_reservation": "reservation"}  # the skeleton's parser of each value
DOCS = {"read_quota": "The quota's counts: capacity, available (free), held, sold (ints; expired holds are free).",
        "reserve": "Hold `quantity` units for the buyer; a replay of (buyer, request_id) answers the same "
                   "reservation. Sold out: fail 'sold_out'; a bad request: fail 'invalid_request'; the same "
                   "request id with another quantity: fail 'idempotency_key_reused'.",
        "confirm": "Sell a live hold (status 'sold'); after its expiry: fail 'expired'.",
        "cancel": "Release a hold or a sale (status 'cancelled').",
        "get_reservation": "The reservation; unknown: fail 'not_found'.",
        "put_quota": "Create or reset the quota with `capacity` units and a hold window of `hold_seconds`.",
        "nemesis": "The reference target's fault hook; your service most likely has none: delete this."}
STATUS_HINT = {404: "not_found", 409: "sold_out", 422: "invalid_request"}


def steps(d: Any, spec: Any, offered: Callable[[str], bool]) -> Iterator[Step]:
    q = f"check-{uuid.uuid4().hex[:8]}"
    if not offered("setup"):
        yield Step("put_quota", expect="the 'setup' capability (put_quota)", holds=False,
                   detail="without it no scenario and no property can run (each needs a quota of known capacity)")
        return
    op = d.put_quota(q, 3, 60.0)
    yield Step(f"put_quota({q!r}, capacity=3, hold_seconds=60)", op, "ok", op.type == OK)
    op = d.read_quota(q)
    v = op.value if op.type == OK else {}
    yield Step("read_quota", op, "ok, capacity 3 available 3 held 0 sold 0",
               op.type == OK and (v.get("capacity"), v.get("available"), v.get("held"), v.get("sold")) == (3, 3, 0, 0))
    first = d.reserve(q, "check-b1", 2, "r1")
    v = first.value if first.type == OK else {}
    expires = v.get("expires_at")
    fresh = isinstance(expires, (int, float)) and 0 < expires - time.time() < 60 + 5
    yield Step("reserve(buyer b1, quantity 2, request r1)", first, "ok, status 'held', quantity 2, expires_at within "
               "the 60 s window (epoch seconds)", first.type == OK and v.get("status") == "held"
               and v.get("quantity") == 2 and fresh,
               "" if fresh or first.type != OK else f"expires_at {expires!r} is not ~60 s ahead in epoch seconds "
                                                    "(parse_time reads ISO 8601 with a zone)")
    rid = v.get("reservation_id")
    op = d.reserve(q, "check-b1", 2, "r1")
    yield Step("reserve again, same buyer and request id (a replay)", op, f"ok, the same reservation {rid!r}",
               op.type == OK and op.value.get("reservation_id") == rid)
    op = d.reserve(q, "check-b2", 2, "r2")
    yield Step("reserve(buyer b2, quantity 2) with 1 unit left", op, "fail 'sold_out' (a buyer turned away for lack "
               "of stock)", op.type == FAIL and op.value == "sold_out",
               "" if op.type != FAIL or op.value == "sold_out" else
               f"code {op.value!r}: " + ("a client code, so no_valid_rejection would never judge this refusal"
                                         if op.value in CLIENT_ERRORS else
                                         "not sold_out") + ": map your sold-out answer to 'sold_out' in errors")
    op = d.reserve(q, "check-b3", 0, "r3")
    yield Step("reserve(quantity 0): an invalid request", op, f"fail with a client code ({', '.join(sorted(CLIENT_ERRORS))})",
               op.type == FAIL and op.value in CLIENT_ERRORS,
               "" if op.type != FAIL or op.value in CLIENT_ERRORS else
               f"code {op.value!r} would read as a valid buyer turned away (no_valid_rejection): map it in errors")
    op = d.reserve(q, "check-b1", 3, "r1")
    yield Step("reserve(buyer b1, request r1, another quantity)", op, "fail 'idempotency_key_reused'",
               op.type == FAIL and op.value == "idempotency_key_reused")
    if rid:
        op = d.confirm(rid)
        yield Step("confirm the hold", op, "ok, status 'sold'", op.type == OK and op.value.get("status") == "sold")
        op = d.get_reservation(rid)
        yield Step("get_reservation", op, "ok, status 'sold'", op.type == OK and op.value.get("status") == "sold")
        op = d.cancel(rid)
        yield Step("cancel the sale", op, "ok, status 'cancelled'", op.type == OK
                   and op.value.get("status") == "cancelled")
    op = d.read_quota(q)
    v = op.value if op.type == OK else {}
    yield Step("read_quota after the cancel", op, "ok, available 3 held 0 sold 0",
               op.type == OK and (v.get("available"), v.get("held"), v.get("sold")) == (3, 0, 0))
    op = d.get_reservation("check-no-such-reservation")
    yield Step("get_reservation of an unknown id", op, "fail 'not_found' or 'unknown_reservation'",
               op.type == FAIL and op.value in ("not_found", "unknown_reservation"),
               "" if op.type != FAIL or op.value in ("not_found", "unknown_reservation") else
               f"code {op.value!r}: map your unknown-id answer to 'not_found' in errors")
    yield Step("nemesis (capability 'faults')", None, "", True,
               "offered (not called: it stalls the target)" if offered("faults") else
               "not offered: tickets-lease-faults will be INCONCLUSIVE (or waive it: --without faults)")
