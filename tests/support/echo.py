"""Per-request headers, checked at the target: what goes on the wire is what the driver asked.

``EchoTickets`` sends each reservation with ``X-Peakproof-Echo: <buyer> <request id>`` (a value of
its own per request, as an ``Idempotency-Key`` or a trace id is); the served variant
``tickets-checks-echo`` (:func:`tests.support.mutants.tickets_checks_echo`) compares that header
with the body it came with and counts, at ``GET <base>/_echo``, the requests whose header was
another request's (``stale``), missing, or right.
"""

from __future__ import annotations

from typing import Any

from peakproof.cases.tickets.driver import HttpTickets, parse_reservation
from peakproof.history import Op

ECHO_HEADER = "X-Peakproof-Echo"


class EchoTickets(HttpTickets):
    """The contract's driver, with one header value of its own on every reservation."""

    def reserve(self, quota_id: str, buyer_id: str, quantity: int, request_id: str, *, process: Any = 0,
                intended_time: float | None = None) -> Op:
        args = {"quota_id": quota_id, "buyer_id": buyer_id, "quantity": quantity, "request_id": request_id}
        body = {"buyer_id": buyer_id, "quantity": quantity, "request_id": request_id}
        return self._call("reserve", args, "POST", f"/quotas/{quota_id}/reservations", body, parse_reservation,
                          process=process, intended_time=intended_time, name="POST reserve",
                          headers={ECHO_HEADER: f"{buyer_id} {request_id}"})
