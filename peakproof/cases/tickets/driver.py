"""Case T, tickets: the driver protocol, the in-process and HTTP drivers.

Every driver records every call in its :class:`History` and returns the completed
:class:`Op`: ok (it happened), fail (it certainly did not), info (unknown).
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, runtime_checkable

from peakproof.clock import VirtualClock
from peakproof.driver import HttpDriver, InProcessDriver
from peakproof.history import History, Op
from peakproof.timefmt import parse_time
from .rules import Tolerance


@runtime_checkable
class TicketsDriver(Protocol):
    """The operations of Case T: what a driver for your ticket shop must offer (docs/drivers.md).

    Subclass :class:`peakproof.driver.HttpDriver` (it brings ``history``, ``now``, ``advance``
    and the transport) and give each operation. Each records one operation in ``history``
    and returns it completed: ok (it happened, with the value below), fail (it certainly did
    not: the value is one of the contract's codes: ``sold_out`` for a buyer turned away
    for lack of stock, ``invalid_request`` / ``unknown_quota`` / ``not_found`` /
    ``idempotency_key_reused`` for the request's own fault, ``busy`` for "nothing changed,
    try again") or info (unknown: a timeout, a 5xx, an answer of another shape).

    Values: a reservation is a dict with reservation_id (str), quota_id, buyer_id, quantity
    (int), status (held / sold / expired / cancelled) and ``expires_at`` in epoch seconds on
    the target's clock (:func:`peakproof.timefmt.parse_time` reads any ISO 8601 time); a
    quota is a dict with capacity, available, held and sold (ints: free, on hold, sold).

    Optional capabilities (``peakproof.cases.tickets.case.CAPABILITIES``): ``put_quota``
    (set-up: without it nothing can run) and ``nemesis`` (fault hooks). A ``tolerance``
    attribute (:class:`~peakproof.cases.tickets.checks.Tolerance`) states the clock skew and
    release grace the checks allow; the default is 0.25 s and 1 s.
    """

    history: History

    def now(self) -> float: ...
    def advance(self, seconds: float) -> None: ...
    def read_quota(self, quota_id: str, *, process: Any = 0) -> Op: ...
    def reserve(self, quota_id: str, buyer_id: str, quantity: int, request_id: str, *, process: Any = 0,
                intended_time: float | None = None) -> Op: ...
    def confirm(self, reservation_id: str, *, process: Any = 0, intended_time: float | None = None) -> Op: ...
    def cancel(self, reservation_id: str, *, process: Any = 0, intended_time: float | None = None) -> Op: ...
    def get_reservation(self, reservation_id: str, *, process: Any = 0) -> Op: ...


# -- in process ------------------------------------------------------------------------------


class InProcessTickets(InProcessDriver):
    """Drives a :class:`peakproof.targets.tickets.TicketsCore` directly, in virtual time by default."""

    tolerance = Tolerance(skew=0.0, release_lag=0.0)

    def __init__(self, core: Any = None, *, policy: str = "pessimistic", clock: VirtualClock | None = None,
                 history: History | None = None, core_factory: Callable[[VirtualClock], Any] | None = None,
                 **core_options: Any) -> None:
        from peakproof.targets.tickets import InMemoryStore, TicketError, TicketsCore  # the target, only in-process

        super().__init__(clock, history)
        core = self._plugged(core, core_factory)
        self.core = core or TicketsCore(InMemoryStore(), self.clock, policy=policy, **core_options)  # type: ignore[arg-type]
        if history is None:
            self.history.clock = self.core.clock  # a shared core brings its own clock
        self.error = TicketError

    def now(self) -> float:
        return self.core.clock()

    def put_quota(self, quota_id: str, capacity: int, hold_seconds: float = 120.0, *, process: Any = 0) -> Op:
        return self._do("put_quota", {"quota_id": quota_id, "capacity": capacity, "hold_seconds": hold_seconds},
                        lambda: _quota(self.core.put_quota(quota_id, capacity, hold_seconds)), process)

    def read_quota(self, quota_id: str, *, process: Any = 0) -> Op:
        return self._do("read_quota", {"quota_id": quota_id}, lambda: _quota(self.core.get_quota(quota_id)), process)

    def reserve(self, quota_id: str, buyer_id: str, quantity: int, request_id: str, *, process: Any = 0,
                intended_time: float | None = None) -> Op:
        return self._do("reserve", {"quota_id": quota_id, "buyer_id": buyer_id, "quantity": quantity,
                                    "request_id": request_id},
                        lambda: _res(self.core.reserve(quota_id, buyer_id, quantity, request_id)[0]), process,
                        intended_time)

    def confirm(self, reservation_id: str, *, process: Any = 0) -> Op:
        return self._do("confirm", {"reservation_id": reservation_id},
                        lambda: _res(self.core.confirm(reservation_id)), process)

    def cancel(self, reservation_id: str, *, process: Any = 0) -> Op:
        return self._do("cancel", {"reservation_id": reservation_id},
                        lambda: _res(self.core.cancel(reservation_id)), process)

    def get_reservation(self, reservation_id: str, *, process: Any = 0) -> Op:
        return self._do("get_reservation", {"reservation_id": reservation_id},
                        lambda: _res(self.core.get_reservation(reservation_id)), process)


def _quota(row: Any) -> dict[str, Any]:
    return {"quota_id": row.quota_id, "capacity": row.capacity, "available": row.available,
            "held": row.held, "sold": row.sold}


def _res(r: Any) -> dict[str, Any]:
    return {"reservation_id": r.reservation_id, "quota_id": r.quota_id, "buyer_id": r.buyer_id,
            "quantity": r.quantity, "status": r.status, "expires_at": r.expires_at}


# -- over HTTP -------------------------------------------------------------------------------

_RES_FIELDS = ("reservation_id", "quantity", "status", "expires_at")
_RES_KEEP = ("reservation_id", "quota_id", "buyer_id", "quantity", "status")
_QUOTA_FIELDS = ("capacity", "available", "held", "sold")
_STATUSES = ("held", "sold", "expired", "cancelled")


class HttpTickets(HttpDriver):
    """Drives any server that implements the tickets contract (``targets/tickets/openapi.json``).

    The quota's PUT is an admin call (``admin_token``); it may answer 200, 201 or 204.
    """

    tolerance = Tolerance()

    def put_quota(self, quota_id: str, capacity: int, hold_seconds: float = 120.0, *, process: Any = 0) -> Op:
        args = {"quota_id": quota_id, "capacity": capacity, "hold_seconds": hold_seconds}
        return self._call("put_quota", args, "PUT", f"/quotas/{quota_id}", {"capacity": capacity,
                          "hold_seconds": hold_seconds}, parse_quota_or_empty, process=process, admin=True,
                          name="PUT quota")

    def read_quota(self, quota_id: str, *, process: Any = 0) -> Op:
        return self._call("read_quota", {"quota_id": quota_id}, "GET", f"/quotas/{quota_id}", None, parse_quota,
                          process=process, name="GET quota")

    def reserve(self, quota_id: str, buyer_id: str, quantity: int, request_id: str, *, process: Any = 0,
                intended_time: float | None = None) -> Op:
        args = {"quota_id": quota_id, "buyer_id": buyer_id, "quantity": quantity, "request_id": request_id}
        body = {"buyer_id": buyer_id, "quantity": quantity, "request_id": request_id}
        return self._call("reserve", args, "POST", f"/quotas/{quota_id}/reservations", body, parse_reservation,
                          process=process, intended_time=intended_time, name="POST reserve")

    def confirm(self, reservation_id: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return self._call("confirm", {"reservation_id": reservation_id}, "POST",
                          f"/reservations/{reservation_id}/confirm", None, parse_reservation, process=process,
                          intended_time=intended_time, name="POST confirm")

    def cancel(self, reservation_id: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return self._call("cancel", {"reservation_id": reservation_id}, "POST",
                          f"/reservations/{reservation_id}/cancel", None, parse_reservation, process=process,
                          intended_time=intended_time, name="POST cancel")

    def get_reservation(self, reservation_id: str, *, process: Any = 0) -> Op:
        return self._call("get_reservation", {"reservation_id": reservation_id}, "GET",
                          f"/reservations/{reservation_id}", None, parse_reservation, process=process,
                          name="GET reservation")

    def nemesis(self, fault: str, **params: Any) -> Op:
        """The reference target's fault hook (``POST /_nemesis``, not in the contract): ``stall``
        (``seconds``), ``die`` or ``restart``. A target without it answers 404: the fault is not applied."""
        return self._call("nemesis", {"fault": fault, **params}, "POST", "/_nemesis", {"fault": fault, **params},
                          lambda doc: doc, process="nemesis", admin=True, name="POST _nemesis")


def parse_quota(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise TypeError(f"expected a JSON object, got {type(doc).__name__}")
    out = {}
    for k in _QUOTA_FIELDS:
        v = doc[k]
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"{k} must be an integer, got {v!r}")
        out[k] = v
    out["quota_id"] = doc.get("quota_id")
    return out


def parse_quota_or_empty(doc: Any) -> dict[str, Any]:
    """A quota's PUT may answer the quota or nothing (204): the checks read its args."""
    return {} if doc is None else parse_quota(doc)


def parse_reservation(doc: Any) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise TypeError(f"expected a JSON object, got {type(doc).__name__}")
    for k in _RES_FIELDS:
        doc[k]  # noqa: B018  (KeyError names the missing field)
    if not isinstance(doc["reservation_id"], str) or not doc["reservation_id"]:
        raise TypeError(f"reservation_id must be a non-empty string, got {doc['reservation_id']!r}")
    if doc["status"] not in _STATUSES:
        raise ValueError(f"status must be one of {_STATUSES}, got {doc['status']!r}")
    if not isinstance(doc["quantity"], int):
        raise TypeError(f"quantity must be an integer, got {doc['quantity']!r}")
    out = {k: doc.get(k) for k in _RES_KEEP}  # what the checks read; keeps histories small
    out["expires_at"] = parse_time(doc["expires_at"], "expires_at")
    return out
