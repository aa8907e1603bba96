"""The notifications' delivery promises, judged on the providers' record: one delivery per
(event, recipient), the delivery ratio, the call budget, no retry after a permanent failure, a status
that matches the providers and only moves forward, formatting within each channel's limits; and the
urgent mean latency (a service level, judged where the SLOs are)."""

from __future__ import annotations

import html
from collections import defaultdict

from peakproof.checks import CheckResult, Measure, Violations
from peakproof.history import OK, Op
from .analysis import NOTIFICATIONS, STATUS_RANK, NotificationsAnalysis


@NOTIFICATIONS.register
def one_delivery_per_event(a: NotificationsAnalysis) -> CheckResult:
    """Every (event, recipient) reached the recipient at most once, over all channels. A service stated to have
    no idempotency key (``--no-idempotency-key``) makes each notify its client sent a notification of its own:
    then at most once per request the client made (accepted, or whose answer was lost)."""
    notifies: dict[tuple[str, str], int] = defaultdict(int)
    for op in a.ops:
        if op.f == "notify" and op.done:
            notifies[(op.args["event_id"], op.args["recipient_id"])] += 1
    requests: dict[tuple[str, str], int] = defaultdict(int)
    if a.no_idempotency_key:
        for op in a.ops:
            if op.f == "notify" and op.type in (OK, "info"):
                requests[(op.args["event_id"], op.args["recipient_id"])] += 1
    v = Violations()
    extra = 0
    for key, ds in a.delivered.items():
        allowed = max(1, requests[key]) if a.no_idempotency_key else 1
        if len(ds) > allowed:
            extra += len(ds) - allowed
            per = f" for {allowed} request(s) the client made" if a.no_idempotency_key else ""
            v.add(f"event {key[0]!r} reached recipient {key[1]!r} {len(ds)} times{per}, on "
                  + ", ".join(d["channel"] for d in ds), *[(d["channel"], d["at"]) for d in ds[:3]])
    # a chance: a notification the target called more than once for, or accepted more than once
    chances = sum(1 for k in set(a.calls_by_key) | set(notifies)
                  if len(a.calls_by_key.get(k, ())) > 1 or notifies.get(k, 0) > 1)
    return v.result("one_delivery_per_event", {"duplicate_deliveries": extra, "delivered": len(a.delivered)},
                    chances=chances, chance_kind="notifications retried or replayed")


@NOTIFICATIONS.register
def delivery_ratio_at_least(a: NotificationsAnalysis, threshold: float = 0.99) -> CheckResult:
    """Share of accepted notifications that some provider delivered (the providers' record). A service stated to
    have no cascade (``--cascade none``) cannot rescue a notification whose one channel answered permanent (a dead
    address): such a notification is undeliverable by design and out of the ratio, said in its counts."""
    dead = set()
    if a.cascade == "none":
        dead = {k for k in a.accepted if not a.delivered.get(k)
                and (any(c["outcome"] == "permanent" and not a.unheard(c) for c in a.calls_by_key.get(k, ()))
                     or (not a.calls_by_key.get(k) and _one_channel_suppressed(a, k)))}
    n = len(a.accepted) - len(dead)
    delivered = sum(1 for k in a.accepted if a.delivered.get(k))
    ratio = delivered / n if n else 1.0
    ok = ratio >= threshold
    counts = {"accepted": len(a.accepted), "delivered": delivered}
    if a.cascade == "none":
        counts["undeliverable_by_design"] = len(dead)  # dead on their one channel: no cascade, as stated
    return CheckResult("delivery_ratio_at_least", ok if n else "unknown", counts,
                       None if ok else f"Actual {ratio:.4f} / Limit {threshold:.2f}: {n - delivered:,} of {n:,} "
                                       f"accepted notifications never reached their recipient"
                                       + (f" ({len(dead):,} more, dead on their one channel, left out: "
                                          f"--cascade none)" if dead else ""),
                       note=None if n else "no notification was accepted", chances=n,
                       chance_kind="accepted notifications", actual=Measure(round(ratio, 4), "share"),
                       limit=Measure(threshold, "share", ">="))


def _one_channel_suppressed(a: NotificationsAnalysis, key: tuple[str, str]) -> bool:
    """Under a stated suppression list and no cascade: the notification's one channel (the recipient's first
    the service has) had its address answered permanent before the notify was accepted: the service rightly
    calls nobody."""
    r = a.recipients.get(key[1]) or {}
    one = next(iter(r.get("channels") or ()), None)
    op = a.accepted.get(key)
    return one is not None and op is not None and a.suppressed(key[1], one, op.complete_time)


def dead_address_met_every_channel(a: NotificationsAnalysis) -> int:
    """Undelivered notifications that met a dead address and were called until the budget or the
    channels ran out: the budget and "never the same dead channel again" were put to the test."""
    reach = 1 if a.cascade == "none" else len(a.channels)  # the channels a notification may go to: one without
    # a cascade, else every channel the service has
    return sum(1 for cs in a.calls_by_key.values()
               if any(c["outcome"] == "permanent" and not a.unheard(c) for c in cs)
               and not any(c["outcome"] in ("ok", "ack_lost") for c in cs)
               and (len(cs) >= a.budget or len({c["channel"] for c in cs}) >= reach))



@NOTIFICATIONS.register
def attempt_budget_respected(a: NotificationsAnalysis) -> CheckResult:
    """At most ``budget`` provider calls per (event, recipient)."""
    v = Violations()
    chances = 0
    for key, cs in a.calls_by_key.items():
        # a chance: the budget was reached, or every call so far failed (a careless target calls again)
        chances += len(cs) >= a.budget or not any(c["outcome"] in ("ok", "ack_lost") for c in cs)
        if len(cs) > a.budget:
            v.add(f"event {key[0]!r} for {key[1]!r}: {len(cs)} provider calls (budget {a.budget})",
                  [(c["channel"], c["outcome"]) for c in cs])
    total = len(a.calls)
    return v.result("attempt_budget_respected", {"calls": total,
                                                 "calls_per_notification": round(total / max(1, len(a.accepted)), 3)},
                    chances=chances, chance_kind="notifications that reached the budget or had only failed calls")


@NOTIFICATIONS.register
def no_retry_after_permanent_on_same_channel(a: NotificationsAnalysis) -> CheckResult:
    """After a channel answers *permanent* (a dead address) for a notification, it is never called again
    for it. An answer the target never heard (lost, or slower than its answer timeout) is unknown to
    it: retrying that channel is then the contract's rule, not a violation."""
    v = Violations()
    chances = 0
    for key, cs in a.calls_by_key.items():
        chances += any(c["outcome"] == "permanent" and not a.unheard(c) for c in cs)
        dead: set[str] = set()
        for c in cs:
            if c["channel"] in dead:
                v.add(f"event {key[0]!r} for {key[1]!r}: {c['channel']} called again after it answered permanent",
                      [(x["channel"], x["outcome"]) for x in cs])
                break
            if c["outcome"] == "permanent" and not a.unheard(c):  # a permanent answer the target heard
                dead.add(c["channel"])
    return v.result("no_retry_after_permanent_on_same_channel", {"notifications": len(a.calls_by_key)},
                    chances=chances, chance_kind="notifications with a permanent failure")


@NOTIFICATIONS.register
def status_matches_providers(a: NotificationsAnalysis) -> CheckResult:
    """The target's last reported status agrees with the providers' record."""
    v = Violations()
    last: dict[str, Op] = {}
    for op in a.ops:
        if op.f == "get_notification" and op.type == OK:
            last[op.args["notification_id"]] = op
    for nid, op in last.items():
        n = op.value
        key = (n.get("event_id"), n.get("recipient_id"))
        delivered = a.delivered.get(key, [])
        status = n.get("status")
        if status == "delivered" and not delivered:
            v.add(f"notification {nid} says delivered, but no provider delivered event {key[0]!r} to {key[1]!r}", op)
        elif status == "failed" and delivered:
            v.add(f"notification {nid} says failed, but {delivered[0]['channel']} delivered it", op)
        elif status == "delivered" and n.get("channel") not in {d["channel"] for d in delivered}:
            v.add(f"notification {nid} names channel {n.get('channel')!r}; the providers delivered it on "
                  + ", ".join(d["channel"] for d in delivered), op)
    return v.result("status_matches_providers", {"notifications_read": len(last)}, chances=len(last),
                    chance_kind="notifications whose status was read")


@NOTIFICATIONS.register
def status_moves_forward(a: NotificationsAnalysis) -> CheckResult:
    """queued -> sending -> delivered | failed; never back, never from one end to the other."""
    v = Violations()
    seen: dict[str, tuple[str, Op]] = {}
    reads: dict[str, int] = defaultdict(int)
    for op in sorted((o for o in a.ops if o.f == "get_notification" and o.type == OK), key=lambda o: o.invoke_seq):
        nid, status = op.args["notification_id"], op.value.get("status")
        reads[nid] += 1
        if status not in STATUS_RANK:
            v.add(f"notification {nid}: unknown status {status!r}", op)
            continue
        if nid in seen:
            before, prev = seen[nid]
            if prev.complete_seq < op.invoke_seq and (
                    STATUS_RANK[status] < STATUS_RANK[before] or (STATUS_RANK[before] == 2 and status != before)):
                v.add(f"notification {nid}: status went from {before} to {status}", prev, op)
        seen[nid] = (status, op)
    return v.result("status_moves_forward", {"notifications_read": len(seen)},
                    chances=sum(1 for n in reads.values() if n > 1), chance_kind="notifications read twice or more")


@NOTIFICATIONS.register
def formatting_within_channel_limits(a: NotificationsAnalysis) -> CheckResult:
    """What reached each provider fits that channel: SMS segments and encoding, push sizes, e-mail headers."""
    from peakproof.targets.notifications import formatting as fm  # the limits are the contract's, stated once

    v = Violations()
    checked = 0
    for c in a.calls:
        m = c.get("message") or {}
        checked += 1
        if c["channel"] == "sms":
            text = m.get("text", "")
            enc, segs = fm.sms_segments(text)
            if enc != m.get("encoding") or segs != m.get("segments") or segs > fm.SMS_MAX_SEGMENTS:
                v.add(f"SMS for {c['event_id']!r}: claims {m.get('encoding')} x{m.get('segments')}, "
                      f"its text needs {enc} x{segs} (limit {fm.SMS_MAX_SEGMENTS} segments)", text[:80])
        elif c["channel"] == "push":
            size = len(__import__("json").dumps({"title": m.get("title"), "body": m.get("body")},
                                                ensure_ascii=False).encode())
            if len(m.get("title", "")) > fm.PUSH_TITLE_MAX or size > fm.PUSH_PAYLOAD_MAX:
                v.add(f"push for {c['event_id']!r}: title {len(m.get('title', ''))} chars, payload {size} bytes "
                      f"(limits {fm.PUSH_TITLE_MAX}, {fm.PUSH_PAYLOAD_MAX})", m.get("title"))
        elif c["channel"] == "email":
            subject, body = m.get("subject", ""), m.get("html", "")
            stripped = body.replace("<p>", "").replace("</p>", "").replace("<br>", "")
            if len(subject) > fm.EMAIL_SUBJECT_MAX or "\r" in subject or "\n" in subject or "<" in stripped:
                v.add(f"e-mail for {c['event_id']!r}: subject {subject[:40]!r} ({len(subject)} chars) or an "
                      f"unescaped body", html.escape(stripped[:80]))
    return v.result("formatting_within_channel_limits", {"messages": checked}, chances=checked,
                    chance_kind="messages the providers received")


def urgent_mean_latency(a: NotificationsAnalysis, limit: float = 5.0) -> CheckResult:
    """SLO (BI5): the mean time from acceptance to the first delivery, over delivered urgent
    notifications, at most ``limit`` s. Judged by :class:`peakproof.slo.Threshold`, like every SLO."""
    from peakproof.slo import Latencies, Threshold

    samples = [(op.invoke_time, min(d["at"] for d in a.delivered[key]) - op.invoke_time)
               for key, op in a.accepted.items() if op.args.get("priority") == "urgent" and a.delivered.get(key)]
    t = Threshold("urgent delivery", "mean", limit, basis="acceptance")
    r = t.judge_samples(Latencies(samples), "urgent notifications delivered")
    r.name = "urgent mean delivery latency"
    return r
