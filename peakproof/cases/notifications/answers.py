"""``answers_belong_to_who_asked`` for notifications: every answer is about the request that
asked, and every provider call reaches the recipient it is for. In ``NOTIFICATIONS_CHECKS``;
:mod:`peakproof.cases.notifications.checks` re-exports it."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from peakproof.checks import CheckResult, Violations, judge_answer
from peakproof.history import OK
from .analysis import NOTIFICATIONS, NotificationsAnalysis

__all__ = ["answers_belong_to_who_asked"]


def _address(x: Any) -> str:
    """An address as compared: case, spaces, dashes, dots of a phone, brackets and a leading + aside
    (a target may write "+90 555 301 60 01" as "905553016001"; it is the same recipient)."""
    text = str(x).strip().lower()
    return text if "@" in text else "".join(ch for ch in text if ch not in " -().+")


@NOTIFICATIONS.register
def answers_belong_to_who_asked(a: NotificationsAnalysis) -> CheckResult:
    """Every answer is about the request that asked, and every call reaches the recipient it is for:
    a notify answer names its event and recipient, a status read names the notification asked for,
    one notification id never stands for two (event, recipient) pairs, and a provider call for a
    recipient goes to one of that recipient's addresses (never another recipient's)."""
    v = Violations()
    answers = 0
    owner: dict[str, tuple[Any, Any]] = {}
    for op in a.ops:
        if op.type != OK or not isinstance(op.value, dict):
            continue
        if op.f == "notify":
            asked = {"event_id": op.args.get("event_id"), "recipient_id": op.args.get("recipient_id")}
        elif op.f == "get_notification":
            asked = {"notification_id": op.args.get("notification_id")}
        else:
            continue
        nid = op.value.get("notification_id")
        pair = (op.value.get("event_id"), op.value.get("recipient_id"))
        if not judge_answer(op, asked, v):
            continue
        answers += 1
        if isinstance(nid, str) and None not in pair:
            if owner.setdefault(nid, pair) != pair:
                v.add(f"notification {nid} stands for event {owner[nid][0]!r} to {owner[nid][1]!r} and for event "
                      f"{pair[0]!r} to {pair[1]!r}", op)
    addresses: dict[str, set[str]] = defaultdict(set)
    for op in a.ops:
        if op.f == "put_recipient" and op.type == OK:
            addresses[op.args["recipient_id"]] |= {_address(x) for x in (op.args.get("addresses") or {}).values()}
    calls = 0
    for c in a.calls:
        known = addresses.get(c.get("recipient_id"))
        if not known or c.get("to") is None:
            continue
        calls += 1
        if _address(c["to"]) not in known:
            v.add(f"a {c['channel']} call for event {c['event_id']!r} to {c['recipient_id']!r} went to {c['to']!r}, "
                  f"not one of that recipient's addresses", c)
    return v.result("answers_belong_to_who_asked", {"answers": answers, "calls_addressed": calls},
                    chances=answers + calls, chance_kind="answers that name their request and calls to known recipients")
