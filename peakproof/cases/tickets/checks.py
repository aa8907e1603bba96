"""The tickets invariants, as pure functions of a history.

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
allow ``skew`` seconds either way, and a target gets ``release_grace`` seconds after an
expiry to put the units back.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any, Iterable

from ...checks import CheckResult, Violations
from ...history import FAIL, INFO, OK, History, Op
from .rules import RELEASE_SLACK, TicketRules, Tolerance, tolerance_of  # noqa: F401  (re-exported)

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
                r._possible = self._possible(r, ep, ep_end)  # type: ignore[attr-defined]
                r._certain = self._certain(r, ep_end)  # type: ignore[attr-defined]

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
                end = min(end, self.first_seq_after(expires + self.tol.skew + self.tol.release_slack))
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


# -- the invariants ----------------------------------------------------------------------------


def no_oversell(a: TicketsAnalysis) -> CheckResult:
    """Units certainly held or sold never exceed the capacity; no read shows sold > capacity."""
    v = Violations()
    worst, info_res, sold_units = 0, 0, 0
    unknown = False
    chances = 0
    for ep in a.epochs.values():
        if ep.capacity is None:
            continue
        # An oversell needs more demand than stock: only then could a wrong decision sell too much.
        demand = sum(r.quantity for r in ep.reservations) + sum(
            op.args.get("quantity", 0) for op in ep.rejections if isinstance(op.args.get("quantity"), int))
        if demand > ep.capacity:
            chances += sum(1 for r in ep.reservations for op in r.reserves + r.confirms if op.type == OK)
            chances += len(ep.reads)
        certain = [(s, e, r.quantity, r.label()) for r in ep.reservations for s, e in r._certain]  # type: ignore[attr-defined]
        best, at, live = _sweep(certain)
        worst = max(worst, best - ep.capacity)
        if best > ep.capacity:
            v.add(f"quota {ep.quota_id!r}: {best:,} units certainly held or sold at once "
                  f"(capacity {ep.capacity:,}; oversold by {best - ep.capacity:,}) at event #{int(at)}",
                  *live[:4])
        sold_units += sum(r.quantity for r in ep.reservations if any(o.type == OK for o in r.confirms))
        infos = [r for r in ep.reservations if not r.certain]
        info_res += len(infos)
        if infos and not best > ep.capacity:
            with_info = certain + [(min(o.complete_seq for o in r.reserves), INF, r.quantity, r.label()) for r in infos]
            unknown = unknown or _sweep(with_info)[0] > ep.capacity
        for op in ep.reads:
            sold, held = op.value.get("sold", 0), op.value.get("held", 0)
            if isinstance(sold, int) and isinstance(held, int) and sold + held > ep.capacity:
                v.add(f"quota {ep.quota_id!r}: the target itself reports held {held:,} + sold {sold:,} "
                      f"> capacity {ep.capacity:,}", op)
    return v.result("no_oversell", {"oversold_units": max(0, worst), "sold_units": sold_units,
                                    "info_reservations": info_res}, unknown=unknown,
                    note="info reservations could explain an oversell; outcome unknown" if unknown else None,
                    chances=chances, chance_kind="holds, sales and reads on a quota asked for more than its capacity")


def stock_is_conserved(a: TicketsAnalysis) -> CheckResult:
    """Every read: available + held + sold == capacity, none negative, capacity as set up."""
    v = Violations()
    reads = 0
    for ep in a.epochs.values():
        for op in ep.reads:
            reads += 1
            q = op.value
            parts = {k: q.get(k) for k in ("capacity", "available", "held", "sold")}
            if not all(isinstance(x, int) and not isinstance(x, bool) for x in parts.values()):
                v.add(f"quota {ep.quota_id!r}: a read returned non-integer counts {parts}", op)
                continue
            cap, av, held, sold = parts["capacity"], parts["available"], parts["held"], parts["sold"]
            if min(av, held, sold) < 0:
                v.add(f"quota {ep.quota_id!r}: negative count in {parts}", op)
            elif av + held + sold != cap:
                v.add(f"quota {ep.quota_id!r}: available {av:,} + held {held:,} + sold {sold:,} = "
                      f"{av + held + sold:,}, not the capacity {cap:,}", op)
            elif ep.capacity is not None and cap != ep.capacity:
                v.add(f"quota {ep.quota_id!r}: read capacity {cap:,}, set up as {ep.capacity:,}", op)
    return v.result("stock_is_conserved", {"reads": reads}, chances=reads, chance_kind="quota reads")


def no_valid_rejection(a: TicketsAnalysis) -> CheckResult:
    """No buyer is turned away while enough stock is certainly free.

    Certainly free = capacity minus every reservation that may have held stock at any
    moment of the rejected request (ok ones, and info ones whose outcome is unknown).
    A refusal that repeats one already given for the same idempotency key, quantity and
    code is that first answer replayed (counted, not judged) unless the target states it
    decides retries afresh (:attr:`Tolerance.retries_decide_afresh`).
    """
    v = Violations()
    rejections = 0
    chances = 0
    retried = replayed = 0
    for ep in a.epochs.values():
        rejections += len(ep.rejections)
        if ep.capacity is None:
            continue
        possible = sorted(((s, e, r.quantity) for r in ep.reservations for s, e in [r._possible]),  # type: ignore[attr-defined]
                          key=lambda x: x[0])
        starts = [p[0] for p in possible]
        start_sums = _prefix(p[2] for p in possible)
        ends_sorted = sorted((p[1], p[2]) for p in possible)
        ends = [e for e, _ in ends_sorted]
        end_sums = _prefix(q for _, q in ends_sorted)
        def free_during(op: Op) -> int:
            # Holds that may overlap [invoke, complete]: started before it completed, minus
            # those certainly released before it was invoked.
            started = start_sums[bisect.bisect_left(starts, op.complete_seq)]
            released = end_sums[bisect.bisect_right(ends, op.invoke_seq)]
            return ep.capacity - (started - released)  # type: ignore[operator]

        # A chance: a request decided while enough stock was certainly free (a refusal then is the bug).
        for r in ep.reservations:
            for op in r.reserves:
                if op.type == OK and op is r.reserves[0] and isinstance(op.args.get("quantity"), int):
                    chances += free_during(op) + r.quantity >= op.args["quantity"]
        first_refused: dict[tuple[Any, ...], float] = {}  # (key, quantity, code) -> when its first refusal came
        for op in sorted(ep.rejections, key=lambda o: o.invoke_seq):
            if op.value == "busy" and _served_later(a, op):
                retried += 1  # "busy, try again", then the same request held stock: the buyer was served
                continue
            same = (*_key(op), op.args.get("quantity"), op.value)
            if not a.tol.retries_decide_afresh and op.args.get("request_id") is not None:
                if first_refused.get(same, INF) < op.invoke_seq:
                    replayed += 1  # the key's first answer, given again: that decision is judged, not this
                    continue
                first_refused[same] = min(first_refused.get(same, INF), op.complete_seq)
            free = free_during(op)
            want = op.args.get("quantity")
            if isinstance(want, int) and free >= want:
                chances += 1
                v.add(f"quota {ep.quota_id!r}: {op.args.get('buyer_id')!r} asked {want} and was refused "
                      f"({op.value}) while at least {free:,} of {ep.capacity:,} units were certainly free", op)
    counts = ({"rejections": rejections} | ({"busy then served on a retry": retried} if retried else {})
              | ({"refusals replayed under their key": replayed} if replayed else {}))
    convention = ("every refusal judged: retries under one key decided afresh (--retries-decide-afresh)"
                  if a.tol.retries_decide_afresh else
                  "a refusal repeated under its idempotency key is the key's first answer replayed; the first is judged")
    return v.result("no_valid_rejection", counts | {"convention": convention}, chances=chances,
                    chance_kind="reservations decided while enough stock was certainly free")


def _served_later(a: TicketsAnalysis, op: Op) -> bool:
    """A later reservation with the same key (the same request retried) was answered ok."""
    return any(r.quantity == op.args.get("quantity") and any(o.type == OK and o.invoke_seq > op.complete_seq
                                                            for o in r.reserves)
               for r in a.by_key.get(_key(op), ()))


def reservation_is_idempotent(a: TicketsAnalysis) -> CheckResult:
    """All answers for one key (buyer, quota, request id) name one reservation."""
    v = Violations()
    keys = replays = 0
    seen: set[tuple[str, str, str]] = set()
    chances = 0
    for op in a.ops:  # a chance: a request that reuses a key already sent (a retry, or another quantity)
        if op.f == "reserve" and op.done and op.value != "connection_refused":
            k = _key(op)
            chances += k in seen
            seen.add(k)
    for key, rs in a.by_key.items():
        keys += 1
        oks = [op for r in rs for op in r.reserves if op.type == OK]
        replays += max(0, len(oks) - 1)
        if len(rs) > 1:
            v.add(f"one idempotency key {key} opened {len(rs)} reservations: "
                  + ", ".join(r.label() for r in rs[:3]), *oks[:3])
        for op in oks:
            if op.args.get("quantity") != rs[0].quantity:
                v.add(f"key {key}: asked {op.args.get('quantity')} after the key held {rs[0].quantity}; "
                      f"expected 422 idempotency_key_reused, got ok", op)
    return v.result("reservation_is_idempotent", {"keys": keys, "replays": replays}, chances=chances,
                    chance_kind="requests that reused an idempotency key")


def expired_hold_is_never_sold(a: TicketsAnalysis) -> CheckResult:
    """A confirm that began after the hold expired never succeeds (after the stated release lag, if any)."""
    v = Violations()
    late = chances = 0
    lag = a.tol.sale_lag
    for rid, r in a.by_id.items():
        attempts = a.confirm_attempts.get(rid, [])
        if r.expires_at is None or not attempts:
            continue
        limit = r.expires_at + a.tol.skew + lag
        in_time = [op for op in r.confirms if op.invoke_time <= limit]  # ok or info: may have sold it in time
        for op in attempts:
            if op.invoke_time > limit and not in_time:
                chances += 1  # a confirm sent after the hold lapsed, with no earlier one that may have sold it
                if op.type == OK:
                    late += 1
                    v.add(f"{r.label()} expired at t={r.expires_at:.3f} but a confirm sent at "
                          f"t={op.invoke_time:.3f} sold it"
                          + (f" (after the stated release lag of {lag:g} s)" if lag else
                             " (no release lag stated: --release-lag S if your service sells a lapsed hold until "
                             "its expiry job runs)"), op)
    return v.result("expired_hold_is_never_sold", {"late_confirms_sold": late, "release lag (s)": lag},
                    chances=chances, chance_kind="confirms sent after their hold expired"
                    + (f" and the stated release lag of {lag:g} s" if lag else ""))


def units_return_exactly_once(a: TicketsAnalysis) -> CheckResult:
    """Every read's ``available`` lies between what the history allows.

    Above ``capacity - certainly held`` means units came back twice (or a lost update);
    below ``capacity - possibly held`` means units that should be back never returned.
    """
    v = Violations()
    checked = chances = 0
    for ep in a.epochs.values():
        if ep.capacity is None or not ep.reads:
            continue
        certain = [(s, e, r.quantity) for r in ep.reservations for s, e in r._certain]  # type: ignore[attr-defined]
        possible = [(*r._possible, r.quantity) for r in ep.reservations]  # type: ignore[attr-defined]
        for op in ep.reads:
            av = op.value.get("available")
            if not isinstance(av, int):
                continue
            checked += 1
            lo_inv, hi_comp = op.invoke_seq, op.complete_seq
            held_for_sure = sum(q for s, e, q in certain if s < lo_inv and e > hi_comp)
            held_maybe = sum(q for s, e, q in possible if s < hi_comp and e > lo_inv)
            top, bottom = ep.capacity - held_for_sure, ep.capacity - held_maybe
            # a chance: a read after some units were certainly released (cancelled or lapsed), or one
            # that shows a unit out of place anyway
            chances += av > top or av < bottom or any(e <= lo_inv for s, e, q in possible)
            if av > top:
                v.add(f"quota {ep.quota_id!r}: read available {av:,} but at least {held_for_sure:,} units "
                      f"were held or sold (at most {top:,} free): units returned twice or a write was lost", op)
            elif av < bottom:
                v.add(f"quota {ep.quota_id!r}: read available {av:,} but at most {held_maybe:,} units "
                      f"could be held or sold (at least {bottom:,} free): units never returned", op)
    return v.result("units_return_exactly_once", {"reads_checked": checked}, chances=chances,
                    chance_kind="reads after units were released")


from .promises import answers_belong_to_who_asked, hold_honoured_until_it_expires  # noqa: E402

TICKETS_CHECKS = (no_oversell, stock_is_conserved, no_valid_rejection, reservation_is_idempotent,
                  expired_hold_is_never_sold, units_return_exactly_once, hold_honoured_until_it_expires,
                  answers_belong_to_who_asked)


def check_tickets(history: History | Iterable[Op], tolerance: Tolerance | None = None) -> list[CheckResult]:
    """Run every tickets invariant over one shared analysis of the history."""
    a = TicketsAnalysis(history, tolerance or Tolerance())
    return [check(a) for check in TICKETS_CHECKS]


def _prefix(values: Iterable[int]) -> list[int]:
    out = [0]
    for x in values:
        out.append(out[-1] + x)
    return out
