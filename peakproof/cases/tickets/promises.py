"""Two promises of the tickets contract judged on answers rather than on stock:
``hold_honoured_until_it_expires`` (a hold lasts until the ``expires_at`` the target announced)
and ``answers_belong_to_who_asked`` (every answer is about the request that asked). In
``TICKETS_CHECKS``; :mod:`peakproof.cases.tickets.checks` re-exports them."""

from __future__ import annotations

from typing import Any

from peakproof.checks import CheckResult, Violations, judge_answer
from peakproof.history import FAIL, OK, Op
from .analysis import INF, TICKETS, TicketsAnalysis, _key

__all__ = ["hold_honoured_until_it_expires", "answers_belong_to_who_asked"]


@TICKETS.register
def hold_honoured_until_it_expires(a: TicketsAnalysis) -> CheckResult:
    """A hold lasts until the ``expires_at`` the target announced: a confirm answered before then
    is not refused as expired, and no answer before then says the reservation expired (unless a
    cancel was sent first). A server that releases holds early takes a paying buyer's seats."""
    v = Violations()
    chances = 0
    reads: dict[str, list[Op]] = {}
    for op in a.ops:
        if op.f in ("get_reservation", "reserve") and op.type == OK and isinstance(op.value, dict):
            reads.setdefault(op.value.get("reservation_id"), []).append(op)
    for rid, r in a.by_id.items():
        if r.expires_at is None:
            continue
        limit = r.expires_at - a.tol.skew
        cancelled_from = min((op.invoke_time for op in r.cancels), default=INF)
        for op in a.confirm_attempts.get(rid, []):
            if op.complete_time >= limit or op.invoke_time >= cancelled_from:
                continue
            chances += 1  # a confirm the target answered while the hold it announced still stood
            if op.type == FAIL and op.value == "expired":
                v.add(f"{r.label()} was announced to hold until t={r.expires_at:.3f}, but a confirm answered at "
                      f"t={op.complete_time:.3f} ({r.expires_at - op.complete_time:.3f} s early) was refused "
                      f"as expired", op)
        announced = next((op for op in r.reserves if op.type == OK), None)  # the answer that announced it
        for op in reads.get(rid, []):
            if op is announced or op.complete_time >= limit or op.invoke_time >= cancelled_from:
                continue
            chances += 1
            if op.value.get("status") == "expired":
                v.add(f"{r.label()} was announced to hold until t={r.expires_at:.3f}, but an answer at "
                      f"t={op.complete_time:.3f} ({r.expires_at - op.complete_time:.3f} s early) says it expired", op)
    return v.result("hold_honoured_until_it_expires", {"reservations": len(a.by_id)}, chances=chances,
                    chance_kind="confirms and reads answered before their hold's announced expiry")


@TICKETS.register
def answers_belong_to_who_asked(a: TicketsAnalysis) -> CheckResult:
    """Every answer is about the request that asked: a reservation's answer names the quota, buyer
    and quantity of its request, and one reservation is never handed to two idempotency keys (a
    server keying on the request id alone hands buyer B the reservation buyer A made with that id);
    a confirm, cancel or read answers about the reservation it named. Fields a driver does not
    report are not judged."""
    v = Violations()
    answers = 0
    for op in a.ops:
        if op.type != OK or not isinstance(op.value, dict):
            continue
        if op.f == "reserve":
            asked = {"quota_id": op.args.get("quota_id"), "buyer_id": op.args.get("buyer_id"),
                     "quantity": op.args.get("quantity")}
        elif op.f in ("confirm", "cancel", "get_reservation"):
            asked = {"reservation_id": op.args.get("reservation_id")}
        else:
            continue
        if judge_answer(op, asked, v):
            answers += 1
    for rid, r in a.by_id.items():
        keys = {_key(op) for op in r.reserves if op.type == OK}
        if len(keys) > 1:
            v.add(f"reservation {rid} was handed to {len(keys)} requests: "
                  + "; ".join(f"quota {k[0]!r} buyer {k[1]!r} request {k[2]!r}" for k in sorted(keys, key=repr)[:3])
                  + " (the idempotency key is (quota, buyer, request id), not the request id alone)",
                  *[op for op in r.reserves if op.type == OK][:3])
    shared: dict[tuple[Any, Any], set[Any]] = {}
    for op in a.ops:
        if op.f == "reserve" and op.done:
            shared.setdefault((op.args.get("quota_id"), op.args.get("request_id")), set()).add(op.args.get("buyer_id"))
    return v.result("answers_belong_to_who_asked",
                    {"answers": answers, "request_ids_shared_by_buyers": sum(len(b) > 1 for b in shared.values())},
                    chances=answers, chance_kind="answers that name their request")
