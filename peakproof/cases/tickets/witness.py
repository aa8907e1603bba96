"""Case T's witnesses: a violation bears on one quota; its witness is that quota's operations from its
creation (the ``put_quota`` the violation's epoch began with) to the violation, and a replay creates a
quota of its own (a smaller one, once the shrink found that enough)."""

from __future__ import annotations

import bisect
import re
from typing import Any, Sequence

from peakproof.checks import CheckResult
from peakproof.history import OK, Op
from peakproof.witness import CaseWitness, Step

_QUOTA = re.compile(r"quota '([^']+)'")
_ID = re.compile(r"'([^']+)'")
_EVENT = re.compile(r"event #(-?\d+)")


class TicketsWitness(CaseWitness):
    fresh = ("quota_id", "buyer_id", "request_id")
    produced = {"reservation_id": "reservation_id"}
    actors = ("buyer_id",)
    setup = ("put_quota",)

    def find(self, history: Sequence[Op], result: CheckResult) -> tuple[str, list[Op]] | None:
        """The quota the violation names; of its epoch (from the ``put_quota`` that began it), the
        reservations that bear on the violation: those certainly holding units at its moment (an oversell, a
        read whose counts do not add up) and those it names, each with every call on it, and the operations
        it cites. Without any, every call on the quota up to the violation."""
        from .analysis import TicketsAnalysis

        a = TicketsAnalysis(list(history))
        quota_of = {r.reservation_id: r.quota_id for ep in a.epochs.values() for r in ep.reservations
                    if r.reservation_id is not None}
        evidence = _evidence_ops(result.examples)
        text = result.first_violation or ""
        named = set(_QUOTA.findall(text)) | {quota_of.get(t, t) for t in _ID.findall(text)}
        named |= {op.args.get("quota_id") or quota_of.get(op.args.get("reservation_id")) for op in evidence}
        quotas = {ep.quota_id for ep in a.epochs.values()}
        chosen = sorted(q for q in named if q in quotas)
        if not chosen:
            return None
        quota = chosen[0]
        at = _EVENT.search(text)
        moment = int(at.group(1)) if at else max((op.complete_seq for op in evidence), default=None)
        epochs = [ep for ep in a.epochs.values() if ep.quota_id == quota]
        creations = a.setups.get(quota, [])
        epoch = epochs[-1]
        if moment is not None:  # the epoch the violation happened in: begun by the last creation before it
            i = bisect.bisect_left([op.complete_seq for op in creations], moment)
            epoch = next((ep for ep in epochs if ep.index == i), epoch)
        ids = set(_ID.findall(text)) | {str(op.args.get("reservation_id")) for op in evidence}
        bearing = [r for r in epoch.reservations if str(r.reservation_id) in ids or (
            moment is not None and any(s <= moment < e for s, e in r.certain_spans))]
        creation = [creations[epoch.index - 1]] if epoch.index >= 1 else []  # (analysis._epoch_of)
        if not creation and epoch.capacity is not None:  # created outside the history (a load's setup)
            creation = [_creation(quota, epoch)]
        if bearing:
            ops = creation + [op for r in bearing for op in r.reserves + r.confirms + r.cancels]
            ops += [op for op in evidence if op not in ops]
        else:
            end = moment if moment is not None else max((op.complete_seq for op in history), default=0)
            begun_at = creation[0].invoke_seq if creation else -1
            ops = [op for op in history if begun_at <= op.invoke_seq <= end and (
                op.args.get("quota_id") == quota or quota_of.get(op.args.get("reservation_id")) == quota)]
        return f"quota {quota!r}", ops

    def checks(self, driver: Any, ops: list[Op], spec: Any) -> list[CheckResult]:
        from .checks import check_tickets
        from .rules import tolerance_of

        return check_tickets(ops, tolerance_of(driver))

    def smaller(self, step: Step) -> list[dict[str, Any]]:
        capacity = step.args.get("capacity")
        if step.f != "put_quota" or not isinstance(capacity, int) or capacity <= 1:
            return []
        sizes = [1]
        while sizes[-1] * 2 < capacity:
            sizes.append(sizes[-1] * 2)
        return [{**step.args, "capacity": c} for c in sizes]


def _creation(quota: str, epoch: Any) -> Op:
    """The ``put_quota`` an epoch's reads and holds imply: its capacity as read, its hold window as the
    holds' announced expiry after their request (rounded to the millisecond; 120 s when none says)."""
    windows = sorted(op.value["expires_at"] - op.invoke_time for r in epoch.reservations for op in r.reserves
                     if op.type == OK and isinstance(op.value, dict) and isinstance(op.value.get("expires_at"), float))
    hold = round(windows[len(windows) // 2], 3) if windows else 120.0
    first = min((op.invoke_seq for r in epoch.reservations for op in r.reserves), default=0)
    op = Op("setup", "put_quota", {"quota_id": quota, "capacity": epoch.capacity, "hold_seconds": max(hold, 0.001)},
            first - 1, 0.0, type=OK, complete_seq=first - 1, complete_time=0.0, value={})
    return op


def _evidence_ops(examples: list[Any]) -> list[Op]:
    out: list[Op] = []
    for e in examples:
        for x in e if isinstance(e, tuple) else (e,):
            if isinstance(x, Op):
                out.append(x)
    return out


WITNESS = TicketsWitness()
