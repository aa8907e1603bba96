"""The tickets promises about stock, judged on certain and possible holds: no oversell, stock
conserved, no valid rejection, idempotent reservations, no expired hold sold, units returned once."""

from __future__ import annotations

import bisect
from typing import Any

from peakproof.checks import CheckResult, Due, Violations
from peakproof.history import INFO, OK, Op
from peakproof.timefmt import moment
from .analysis import INF, TICKETS, TicketsAnalysis, _key, _prefix, _sweep


# -- the invariants ----------------------------------------------------------------------------


@TICKETS.register(groups=("opening", "sold_out"))
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
        certain = [(s, e, r.quantity, r.label()) for r in ep.reservations for s, e in r.certain_spans]
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


@TICKETS.register(groups=("opening", "sold_out"))
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


@TICKETS.register(groups=("opening",))
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
        possible = sorted(((s, e, r.quantity) for r in ep.reservations for s, e in [r.possible_span]),
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


@TICKETS.register
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


@TICKETS.register
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


def lapsed_holds(a: TicketsAnalysis, ep: Any) -> list[tuple[float, float, Any]]:
    """The holds of an epoch that lapsed unsold and uncancelled, with the moment their units fell
    due back (the announced expiry, the clock skew and the stated release lag after) and the
    sequence number from which a read must show them: (due, due_seq, reservation), by due."""
    out = []
    for r in ep.reservations:
        end = r.possible_span[1]
        if r.expires_at is None or end == INF or any(op.type in (OK, INFO) for op in r.confirms):
            continue
        due = r.expires_at + a.tol.skew + a.tol.return_lag
        if end == a.first_seq_after(due):  # released by its lapse, not by a cancel that came first
            out.append((due, end, r))
    return sorted(out, key=lambda x: x[0])


@TICKETS.register
def units_return_exactly_once(a: TicketsAnalysis) -> CheckResult:
    """Every read's ``available`` lies between what the history allows.

    Above ``capacity - certainly held`` means units came back twice (or a lost update);
    below ``capacity - possibly held`` means units that should be back never returned. Each
    lapsed hold is also a moment its units fell due back (the result's ``due``), judged by the
    first read after it: back (held), short (violated), or no read after it (undecided).
    """
    v = Violations()
    checked = chances = 0
    due: list[Due] = []
    for ep in a.epochs.values():
        if ep.capacity is None or not ep.reads:
            continue
        certain = [(s, e, r.quantity) for r in ep.reservations for s, e in r.certain_spans]
        possible = [(*r.possible_span, r.quantity) for r in ep.reservations]
        lapsed = lapsed_holds(a, ep)
        lapsed_seqs = [seq for _, seq, _ in lapsed]  # in order too: the first sequence number after each due moment
        short: dict[int, tuple[int, int]] = {}  # read's invoke_seq -> (available, at least free)
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
                short[op.invoke_seq] = (av, bottom)
                fell = bisect.bisect_right(lapsed_seqs, lo_inv)
                why = ""
                if fell:  # the hold whose units fell due last before the read: the one the read was after
                    at, _, r = lapsed[fell - 1]
                    why = (f"; {fell:,} lapsed holds' units were due back by then, the last: {r.label()}, "
                           f"expired at {moment(r.expires_at)}, its units due back at {moment(at)} "
                           f"(read {op.invoke_time - at:,.2f} s after)")
                v.add(f"quota {ep.quota_id!r}: read available {av:,} but at most {held_maybe:,} units "
                      f"could be held or sold (at least {bottom:,} free): units never returned{why}", op)
        reads = sorted((op.invoke_seq, op) for op in ep.reads if isinstance(op.value.get("available"), int))
        seqs = [s for s, _ in reads]
        for at, seq, r in lapsed:
            what = f"the {r.quantity:,} units of {r.label()} back on quota {ep.quota_id!r}"
            k = bisect.bisect_left(seqs, seq)
            if k == len(reads):
                due.append(Due(what, at, "undecided", "no read after they fell due"))
                continue
            op = reads[k][1]
            if op.invoke_seq in short:
                av, bottom = short[op.invoke_seq]
                # the read is short by bottom - av units: these or another lapsed hold's, due back by then too
                due.append(Due(what, at, "violated", f"not back by the first read after, {op.invoke_time - at:,.2f} s "
                                                      f"later: available {av:,}, at least {bottom:,} free "
                                                      f"({bottom - av:,} units missing; "
                                                      f"{bisect.bisect_right(lapsed_seqs, op.invoke_seq):,} lapsed "
                                                      f"holds' units were due back by then)"))
            else:
                due.append(Due(what, at, "held", f"back by the first read after, {op.invoke_time - at:,.2f} s later"))
    return v.result("units_return_exactly_once", {"reads_checked": checked}, chances=chances,
                    chance_kind="reads after units were released", due=due)
