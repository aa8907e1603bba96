"""The tickets history, analysed once: :class:`TicketsAnalysis` (reservations, epochs, the
certain and possible intervals of every hold) and :data:`TICKETS`, the registry every tickets
check joins. The bottom of the case's checks: the promise modules import it, it imports none.

Operation names (``Op.f``) and their values, as every tickets driver records them:

* ``put_quota`` args {quota_id, capacity, hold_seconds}; ok value: the quota dict.
* ``read_quota`` args {quota_id}; ok value {capacity, available, held, sold}.
* ``reserve`` args {quota_id, buyer_id, quantity, request_id}; ok value: the reservation
  dict with ``expires_at`` as epoch seconds on the target's clock; fail value: error code.
* ``confirm`` / ``cancel`` / ``get_reservation`` args {reservation_id}.

How uncertainty is treated (the honest part): every reservation has a *certain* interval
(from the completion of an ok reserve until the first cancel could have begun or the hold
certainly lapsed) and a *possible* interval (from the first invocation that may have
created it, including ``info`` ones whose outcome is unknown, until its release is
certain). An oversell needs certain holds beyond capacity; a valid rejection needs free
stock under the *possible* holds. Wall-clock comparisons with the target's ``expires_at``
allow ``skew`` seconds either way, and a target gets ``release_lag`` seconds after an
expiry to put the units back.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any, Iterable

from peakproof.checks import CheckRegistry
from peakproof.history import FAIL, INFO, OK, History, Op
from .rules import Tolerance

INF = math.inf

# Definite refusals caused by the request itself: not a buyer turned away while stock remains.
CLIENT_ERRORS = frozenset({"invalid_request", "unknown_quota", "idempotency_key_reused", "unauthorized",
                           "body_too_large", "not_found", "method_not_allowed"})


@dataclass
class _Reservation:
    quota_id: str
    epoch: int
    quantity: int
    key: tuple[str, str, str]
    reservation_id: str | None = None
    reserves: list[Op] = field(default_factory=list)
    confirms: list[Op] = field(default_factory=list)
    cancels: list[Op] = field(default_factory=list)
    expires_at: float | None = None
    # when its units may have been held or sold (from its first send to when they surely came back) and the
    # spans they surely were: set by the analysis once the epoch's end is known, read by the checks
    possible_span: tuple[float, float] = (0.0, 0.0)
    certain_spans: list[tuple[float, float]] = field(default_factory=list)

    @property
    def certain(self) -> bool:
        return any(op.type == OK for op in self.reserves)

    def label(self) -> str:
        rid = self.reservation_id or "(unknown id)"
        return f"reservation {rid} of {self.quantity} by buyer {self.key[1]!r}"


@dataclass
class _Epoch:
    quota_id: str
    index: int
    capacity: int | None
    hold_seconds: float | None
    reservations: list[_Reservation] = field(default_factory=list)
    reads: list[Op] = field(default_factory=list)
    rejections: list[Op] = field(default_factory=list)


class TicketsAnalysis:
    """Everything the checks share, computed once per history."""

    def __init__(self, history: History | Iterable[Op], tolerance: Tolerance = Tolerance()) -> None:
        ops = history.ops if isinstance(history, History) else list(history)
        self.tol = tolerance
        self.ops = ops
        self._time_index(ops)
        setups: dict[str, list[Op]] = {}
        for op in ops:
            if op.f == "put_quota" and op.type in (OK, INFO):
                setups.setdefault(op.args["quota_id"], []).append(op)
        for lst in setups.values():
            lst.sort(key=lambda o: o.complete_seq)
        self.setups = setups
        self.epochs: dict[tuple[str, int], _Epoch] = {}
        by_id: dict[str, _Reservation] = {}
        by_key: dict[tuple[str, str, str], list[_Reservation]] = {}
        pending_info: list[Op] = []
        for op in ops:
            if op.f == "reserve":
                if op.type == OK and isinstance(op.value, dict):
                    rid = op.value.get("reservation_id")
                    r = by_id.get(rid)
                    if r is None:
                        ep = self._epoch_of(op)
                        r = by_id[rid] = _Reservation(ep.quota_id, ep.index, int(op.value.get("quantity", op.args["quantity"])),
                                                      _key(op), rid, expires_at=_num(op.value.get("expires_at")))
                        ep.reservations.append(r)
                        by_key.setdefault(_key(op), []).append(r)
                    r.reserves.append(op)
                elif op.type == INFO:
                    pending_info.append(op)
                elif op.type == FAIL and op.value not in CLIENT_ERRORS:
                    self._epoch_of(op).rejections.append(op)
            elif op.f == "read_quota" and op.type == OK:
                self._epoch_of(op).reads.append(op)
        # An info reserve is the same reservation as an ok one with its key (the contract's
        # idempotency); otherwise it may have created a reservation nobody saw.
        for op in pending_info:
            same = [r for r in by_key.get(_key(op), []) if r.quantity == op.args.get("quantity")]
            if same:
                same[0].reserves.append(op)
                continue
            ep = self._epoch_of(op)
            r = _Reservation(ep.quota_id, ep.index, int(op.args.get("quantity", 0)), _key(op))
            r.reserves.append(op)
            ep.reservations.append(r)
        self.confirm_attempts: dict[str, list[Op]] = {}  # every answered confirm, refusals included
        for op in ops:
            if op.f == "confirm" and op.done:
                self.confirm_attempts.setdefault(op.args.get("reservation_id"), []).append(op)
            if op.f in ("confirm", "cancel") and op.type in (OK, INFO):
                r = by_id.get(op.args.get("reservation_id"))
                if r is not None:
                    (r.confirms if op.f == "confirm" else r.cancels).append(op)
        self.by_id = by_id
        self.by_key = by_key
        for ep in self.epochs.values():
            if ep.capacity is None and ep.reads:
                ep.capacity = _num(ep.reads[0].value.get("capacity"))
            ep_end = self._epoch_end(ep)
            for r in ep.reservations:
                r.possible_span = self._possible(r, ep, ep_end)
                r.certain_spans = self._certain(r, ep_end)

    # -- time and epochs -------------------------------------------------------------------

    def _time_index(self, ops: list[Op]) -> None:
        events = []
        for op in ops:
            events.append((op.invoke_seq, op.invoke_time))
            if op.done:
                events.append((op.complete_seq, op.complete_time))
        events.sort()
        self._seqs = [s for s, _ in events]
        times, high = [], -INF
        for _, t in events:  # threads stamp times a hair out of order; keep it monotone
            high = t if t > high else high
            times.append(high)
        self._times = times

    def first_seq_at_or_after(self, t: float) -> float:
        """The sequence number of the first event stamped at or after time t (inf if none)."""
        i = bisect.bisect_left(self._times, t)
        return self._seqs[i] if i < len(self._seqs) else INF

    def first_seq_after(self, t: float) -> float:
        i = bisect.bisect_right(self._times, t)
        return self._seqs[i] if i < len(self._seqs) else INF

    def _epoch_of(self, op: Op) -> _Epoch:
        quota_id = op.args.get("quota_id")
        setups = self.setups.get(quota_id, [])
        i = bisect.bisect_left([s.complete_seq for s in setups], op.invoke_seq)
        key = (quota_id, i)
        ep = self.epochs.get(key)
        if ep is None:
            setup = setups[i - 1] if i else None
            cap = setup.args.get("capacity") if setup else None
            hold = setup.args.get("hold_seconds") if setup else None
            ep = self.epochs[key] = _Epoch(quota_id, i, cap, hold)
        return ep

    def _epoch_end(self, ep: _Epoch) -> float:
        later = self.setups.get(ep.quota_id, [])[ep.index:]
        return later[0].invoke_seq if later else INF

    # -- intervals -------------------------------------------------------------------------

    def _possible(self, r: _Reservation, ep: _Epoch, ep_end: float) -> tuple[float, float]:
        """[first moment it may exist, moment its release is certain)."""
        start = min(op.invoke_seq for op in r.reserves)
        end = ep_end
        for op in r.cancels:
            if op.type == OK:
                end = min(end, op.complete_seq)
        maybe_sold = any(op.type in (OK, INFO) for op in r.confirms)
        if not maybe_sold:
            expires = r.expires_at
            if expires is None:  # never seen: bound it by the hold window, if known
                last = max((op.complete_time for op in r.reserves), default=INF)
                expires = last + ep.hold_seconds if ep.hold_seconds is not None else INF
            if expires < INF:
                end = min(end, self.first_seq_after(expires + self.tol.skew + self.tol.return_lag))
        return start, end

    def _certain(self, r: _Reservation, ep_end: float) -> list[tuple[float, float]]:
        """Intervals in which this reservation certainly holds or has sold its units."""
        oks = [op for op in r.reserves if op.type == OK]
        if not oks:
            return []
        start = min(op.complete_seq for op in oks)
        cancel_from = min((op.invoke_seq for op in r.cancels), default=INF)
        end_all = min(ep_end, cancel_from)
        hold_end = end_all
        if r.expires_at is not None:
            hold_end = min(hold_end, self.first_seq_at_or_after(r.expires_at - self.tol.skew))
        sale = [op.complete_seq for op in r.confirms if op.type == OK]
        out = []
        if start < hold_end:
            out.append((start, hold_end))
        if sale:
            s = min(sale)
            if out and s <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], end_all))
            elif s < end_all:
                out.append((s, end_all))
        return out


def _key(op: Op) -> tuple[str, str, str]:
    a = op.args
    return (a.get("quota_id"), a.get("buyer_id"), a.get("request_id"))


def _num(v: Any) -> Any:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _sweep(intervals: list[tuple[float, float, int, Any]]) -> tuple[int, float, list[Any]]:
    """Max total quantity over time of (start, end, qty, tag) intervals; ends come before starts."""
    events = []
    for start, end, qty, tag in intervals:
        events.append((start, 1, qty, tag))
        if end < INF:
            events.append((end, 0, -qty, tag))
    events.sort(key=lambda e: (e[0], e[1]))
    total, best, at, live, best_live = 0, 0, -1.0, set(), []
    for seq, kind, qty, tag in events:
        total += qty
        if kind:
            live.add(tag)
        else:
            live.discard(tag)
        if total > best:
            best, at, best_live = total, seq, list(live)
    return best, at, best_live


def _prefix(values: Iterable[int]) -> list[int]:
    out = [0]
    for x in values:
        out.append(out[-1] + x)
    return out


# every tickets check registers here (peakproof.checks.CheckRegistry); checks.py reads the list
TICKETS: CheckRegistry[TicketsAnalysis] = CheckRegistry("tickets")
