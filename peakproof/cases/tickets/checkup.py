"""``peakproof driver check tickets``: each operation once on a quota of its own (see :mod:`peakproof.drivertool`)."""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable, Iterator

from peakproof.operation_table import Step
from peakproof.history import FAIL, OK
from peakproof.operation_table import OperationSpec, tables
from .analysis import CLIENT_ERRORS

_RES = ("reservation_id", "quota_id", "buyer_id", "quantity", "status", "expires_at")
_RESERVATION = ('a reservation: `{"reservation_id", "quota_id", "buyer_id", "quantity", "status", "expires_at"}`; '
                "`status` is `held`, `sold`, `expired` or `cancelled`, `expires_at` epoch seconds (`parse_time`)")
OPERATIONS = (
    OperationSpec("read_quota", ("quota_id",), "The quota's counts; an unknown quota: fail `not_found` or `unknown_quota`.",
                  '`{"quota_id", "capacity", "available", "held", "sold"}`: ints (free, on hold, sold; expired '
                  "holds count as free)", ("quota_id", "capacity", "available", "held", "sold"), "quota"),
    OperationSpec("reserve", ("quota_id", "buyer_id", "quantity", "request_id"),
                  "Hold `quantity` units for the buyer; a replay of (quota, buyer, `request_id`) answers the same "
                  "reservation. Request and buyer ids are unique only with their quota and repeat from run to run "
                  "(quota ids never do): an idempotency key your service keeps across events or runs must be made "
                  "of all three. Sold out: fail `sold_out`; an unknown quota: fail `unknown_quota`; a bad request: "
                  "fail `invalid_request`; the same request id with another quantity: fail "
                  "`idempotency_key_reused`.", _RESERVATION, _RES, "reservation"),
    OperationSpec("confirm", ("reservation_id",),
                  "Sell a live hold (status `sold`). After its expiry: fail `expired`; cancelled: fail `cancelled`; "
                  "a hold already sold: ok with the sale (a replay) or fail `already_sold`, neither judged as a "
                  "new sale.", "the reservation", _RES, "reservation"),
    OperationSpec("cancel", ("reservation_id",), "Release a hold or a sale (status `cancelled`).",
                  "the reservation", _RES, "reservation"),
    OperationSpec("get_reservation", ("reservation_id",), "The reservation; an unknown id: fail `not_found` or `unknown_reservation`.",
                  "the reservation", _RES, "reservation"),
    OperationSpec("put_quota", ("quota_id", "capacity", "hold_seconds"),
                  "Create the quota with `capacity` units and a hold window of `hold_seconds`, or reset it: capacity "
                  "and hold window set anew, every earlier hold and sale of it forgotten (the checks start a new "
                  "epoch there: nothing before it counts against the new capacity). The harness resets only "
                  "quotas it created.", "anything (`{}` is fine)", capability="setup"),
    OperationSpec("nemesis", ("fault",), "The reference target's fault hook (`tickets-lease-faults` only); your "
                  "service most likely has none: delete it.", capability="faults"),
)
ARGS, VALUES, PARSERS, DOCS = tables(OPERATIONS)
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
