"""The notification invariants: pure functions of the history plus the providers' record.

The providers' record (every call with its outcome, every delivery once per channel and
key) is the ground truth; the history says what was accepted, for whom, with which
preferences, and what the target reported. Operation names: ``put_recipient`` (args
recipient_id, channels, addresses), ``notify`` (args event_id, recipient_id, priority,
title, body; ok value has notification_id), ``get_notification`` (ok value: the
notification with status, channel, attempts).
"""

from __future__ import annotations

import bisect
import html
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any, Iterable

from ...checks import CheckResult, Measure, Violations
from ...history import OK, History, Op
from .breaker import DECIDED_BEFORE, breaker_counts_only_transient, preference_respected

# the breaker checks live in .breaker (with the window they rebuild); this module names them all
__all__ = ["STATUS_RANK", "DeliveryRules", "IN_VIRTUAL_TIME", "NotificationsAnalysis", "one_delivery_per_event",
           "delivery_ratio_at_least", "attempt_budget_respected", "no_retry_after_permanent_on_same_channel",
           "DECIDED_BEFORE", "preference_respected", "breaker_counts_only_transient", "status_matches_providers",
           "status_moves_forward", "formatting_within_channel_limits", "urgent_mean_latency", "MIN_HELD",
           "BACKLOG_TIMES", "AHEAD_SHARE", "urgent_overtakes_reminder_backlog", "NOTIFICATIONS_CHECKS",
           "SATURATION_CHECKS", "check_notifications"]

STATUS_RANK = {"queued": 0, "sending": 1, "delivered": 2, "failed": 2}


@dataclass(frozen=True)
class DeliveryRules:
    """What the target under test does about delivery, as its owner states it; the checks judge
    against these, never against the reference's insides. The defaults are the seed's (BI8, BI9)
    and the reference target's (breaker, answer timeout).

    Every field is an option of the properties (``pytest --budget ...``), of the load
    (``locust ... --budget ...``) and of ``peakproof run``, and the report shows them.
    """

    budget: int = 3  # provider calls per notification (BI8)
    backoff: float = 30.0  # s between rounds (BI9): how long a cascade may take to finish
    breaker_window: int = 200  # a channel's breaker looks at its last N calls...
    breaker_min_failures: int = 24  # ...and opens at this many transient failures among them
    breaker_cool_down: float = 10.0  # s an open breaker waits before a probe (a failed probe reopens it)
    answer_timeout: float = 2.0  # s the target waits for a provider's answer before "unknown"

    # flag, field, type, help (the defaults are the fields')
    OPTIONS = (
        ("--budget", "budget", int, "provider calls your target spends per notification at most (BI8: 3)"),
        ("--backoff", "backoff", float, "s your target waits between rounds (BI9: 30; the reference's --backoff)"),
        ("--breaker-window", "breaker_window", int, "calls your target's per-channel breaker looks back over (200)"),
        ("--breaker-failures", "breaker_min_failures", int,
         "transient failures in that window that open your target's breaker (24)"),
        ("--breaker-cool-down", "breaker_cool_down", float,
         "s your target's open breaker waits before a probe (10; the reference's --breaker-cool-down)"),
        ("--answer-timeout", "answer_timeout", float,
         "s your target waits for a provider's answer before it counts the outcome unknown (the reference's "
         "--call-timeout, 2); slower answers were never heard"),
    )

    def __post_init__(self) -> None:
        for flag, name, kind, _ in self.OPTIONS:
            v = getattr(self, name)
            floor_ok = v >= 0 if name == "answer_timeout" else v > 0  # 0: virtual time, given up on at once
            if not isinstance(v, (int, float)) or not floor_ok or (kind is int and int(v) != v):
                raise ValueError(f"{flag} must be a positive {'whole number' if kind is int else 'number'}; "
                                 f"got {v!r}")
        if self.breaker_min_failures > self.breaker_window:
            raise ValueError(f"--breaker-failures ({self.breaker_min_failures}) cannot exceed --breaker-window "
                             f"({self.breaker_window}): the breaker could never open")

    @classmethod
    def from_options(cls, get: Any) -> "DeliveryRules":
        """From parsed options: ``get(field)`` returns the value or None (then the default stands)."""
        given = {name: kind(get(name)) for _, name, kind, _ in cls.OPTIONS if get(name) is not None}
        return cls(**given)

    def judging(self) -> dict[str, Any]:
        """The keyword arguments of :class:`NotificationsAnalysis` these rules set."""
        return asdict(self)

    def describe(self) -> dict[str, Any]:
        return {"attempt budget": self.budget, "backoff (s)": self.backoff,
                "breaker": f"{self.breaker_min_failures} transient failures in the last {self.breaker_window} calls, "
                           f"{self.breaker_cool_down:g} s open before a probe",
                "answer timeout (s)": self.answer_timeout}


# In process, in virtual time: the driver tells the core every outcome at once, a lost answer is
# given up on at once (no answer timeout to wait for).
IN_VIRTUAL_TIME = DeliveryRules(answer_timeout=0.0)


class NotificationsAnalysis:
    def __init__(self, history: History | Iterable[Op], calls: list[dict[str, Any]], budget: int = 3,
                 breaker_window: int = 200, breaker_min_failures: int = 24,
                 channel_calls: list[dict[str, Any]] | None = None, answer_timeout: float = 2.0,
                 answer_latency: float = 0.0, breaker_cool_down: float = 10.0, backoff: float = 30.0) -> None:
        """``calls``: the provider calls of this run. ``channel_calls``: every call the providers
        saw (earlier runs too), for the channel-health windows: a breaker remembers them.
        ``breaker_window`` / ``breaker_min_failures``: the breaker the checks assume (the
        reference target's: 24 transient failures among a channel's last 200 calls).
        ``answer_timeout``: when the target gives up on a lost answer (the reference: 2 s);
        the breaker hears of that failure then, not when the provider took the call."""
        self.ops = history.ops if isinstance(history, History) else list(history)
        self.calls = sorted(calls, key=lambda c: c["at"])
        self.budget = budget
        self.backoff = backoff  # s between the target's rounds, as stated (BI9)
        self.breaker_window, self.breaker_min_failures = breaker_window, breaker_min_failures
        self.breaker_cool_down = breaker_cool_down
        # The window is rebuilt from provider-side times, the breaker counts completions (a
        # timeout completes seconds after its call arrived): judge with a 25% margin.
        self.suspicious_below = 0.75 * breaker_min_failures
        self.recipients: dict[str, dict[str, Any]] = {}
        for op in self.ops:
            if op.f == "put_recipient" and op.type == OK:
                self.recipients[op.args["recipient_id"]] = op.args
        self.accepted: dict[tuple[str, str], Op] = {}
        for op in self.ops:
            if op.f == "notify" and op.type == OK:
                self.accepted.setdefault((op.args["event_id"], op.args["recipient_id"]), op)
        self.calls_by_key: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for c in self.calls:
            self.calls_by_key[(c["event_id"], c["recipient_id"])].append(c)
        # per channel: call times and a running count of transient failures, for window queries
        self._times: dict[str, list[float]] = defaultdict(list)
        self._transient_cum: dict[str, list[int]] = defaultdict(lambda: [0])
        self._permanent_seen: dict[str, list[float]] = defaultdict(list)
        self.answer_timeout = answer_timeout

        def heard(c: dict[str, Any]) -> float:  # when the target learned the call's outcome
            return c["at"] + (answer_timeout if self.unheard(c) else max(answer_latency, float(c.get("latency") or 0.0)))

        self._last_failed: dict[str, list[bool]] = defaultdict(list)  # per heard call: was it a failure
        self._failed_heard: dict[str, list[float]] = defaultdict(list)  # when the target heard each failure
        self._answered: dict[str, list[tuple[float, float]]] = defaultdict(list)  # (arrived, heard): not failures
        self._all_times: dict[str, list[float]] = defaultdict(list)  # every heard call, permanent ones too
        self._counted_cum: dict[str, list[int]] = defaultdict(lambda: [0])  # failures, permanent ones too
        # A call the target called again on the same channel under the same key: the target never
        # heard its answer (it retries so only after an unknown outcome), whatever the record says.
        # Its own timeout (a stalled process, a slow connection) is a failure to its breaker.
        every = sorted(channel_calls if channel_calls is not None else self.calls, key=lambda c: c["at"])
        seen_key: dict[tuple[str, str], dict[str, Any]] = {}
        retried: set[int] = set()
        for c in every:
            k = (c["channel"], c.get("idempotency_key") or "")
            if k[1] and k in seen_key and seen_key[k]["outcome"] != "permanent":
                retried.add(id(seen_key[k]))
            seen_key[k] = c

        def lost(c: dict[str, Any]) -> bool:  # to the target: no answer heard
            return self.unheard(c) or id(c) in retried

        def heard_by_target(c: dict[str, Any]) -> float:
            return c["at"] + answer_timeout if id(c) in retried and not self.unheard(c) else heard(c)

        for c in sorted(every, key=heard_by_target):
            ch, h = c["channel"], heard_by_target(c)
            failed = c["outcome"] in ("transient", "ack_lost") or lost(c)
            if failed:
                self._failed_heard[ch].append(h)
            else:
                self._answered[ch].append((c["at"], h))
            # what a breaker that (wrongly) counted permanent failures would hold: every heard call
            self._all_times[ch].append(h)
            self._counted_cum[ch].append(self._counted_cum[ch][-1] + (failed or c["outcome"] == "permanent"))
            if c["outcome"] == "permanent" and not lost(c):
                self._permanent_seen[ch].append(h)
                continue  # the breaker's window holds calls that say something about the channel
            self._times[ch].append(h)
            self._last_failed[ch].append(failed)
            # a lost or late answer is a timeout to the caller: a fair reason for a breaker to count it
            self._transient_cum[ch].append(self._transient_cum[ch][-1] + failed)
        self._arrived: dict[str, list[float]] = defaultdict(list)  # every call's arrival, by channel
        for c in channel_calls if channel_calls is not None else self.calls:
            self._arrived[c["channel"]].append(c["at"])
        for arrivals in self._arrived.values():
            arrivals.sort()
        self.delivered: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for c in self.calls:
            if c["outcome"] in ("ok", "ack_lost"):
                self.delivered[(c["event_id"], c["recipient_id"])].append(c)
        self.faults = [op for op in self.ops if op.process == "nemesis"]


    def unheard(self, c: dict[str, Any]) -> bool:
        """The target never heard this call's answer: it was lost, or slower than the target's
        ``answer_timeout`` (the provider's record says how long it took). To the target the
        outcome is unknown, and retrying the same channel with the same key is the rule."""
        latency = float(c.get("latency") or 0.0)
        return c["outcome"] == "ack_lost" or (latency > 0 and latency >= self.answer_timeout)

def one_delivery_per_event(a: NotificationsAnalysis) -> CheckResult:
    """Every (event, recipient) reached the recipient at most once, over all channels."""
    v = Violations()
    extra = 0
    for key, ds in a.delivered.items():
        if len(ds) > 1:
            extra += len(ds) - 1
            v.add(f"event {key[0]!r} reached recipient {key[1]!r} {len(ds)} times, on "
                  + ", ".join(d["channel"] for d in ds), *[(d["channel"], d["at"]) for d in ds[:3]])
    # a chance: a notification the target called more than once for, or accepted more than once
    notifies: dict[tuple[str, str], int] = defaultdict(int)
    for op in a.ops:
        if op.f == "notify" and op.done:
            notifies[(op.args["event_id"], op.args["recipient_id"])] += 1
    chances = sum(1 for k in set(a.calls_by_key) | set(notifies)
                  if len(a.calls_by_key.get(k, ())) > 1 or notifies.get(k, 0) > 1)
    return v.result("one_delivery_per_event", {"duplicate_deliveries": extra, "delivered": len(a.delivered)},
                    chances=chances, chance_kind="notifications retried or replayed")


def delivery_ratio_at_least(a: NotificationsAnalysis, threshold: float = 0.99) -> CheckResult:
    """Share of accepted notifications that some provider delivered (the providers' record)."""
    n = len(a.accepted)
    delivered = sum(1 for k in a.accepted if a.delivered.get(k))
    ratio = delivered / n if n else 1.0
    ok = ratio >= threshold
    return CheckResult("delivery_ratio_at_least", ok if n else "unknown", {"accepted": n, "delivered": delivered},
                       None if ok else f"Actual {ratio:.4f} / Limit {threshold:.2f}: {n - delivered:,} of {n:,} "
                                       f"accepted notifications never reached their recipient",
                       note=None if n else "no notification was accepted", chances=n,
                       chance_kind="accepted notifications", actual=Measure(round(ratio, 4), "share"),
                       limit=Measure(threshold, "share", ">="))


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


def formatting_within_channel_limits(a: NotificationsAnalysis) -> CheckResult:
    """What reached each provider fits that channel: SMS segments and encoding, push sizes, e-mail headers."""
    from targets.notifications import formatting as fm  # the limits are the contract's, stated once

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
    from ...slo import Latencies, Threshold

    samples = [(op.invoke_time, min(d["at"] for d in a.delivered[key]) - op.invoke_time)
               for key, op in a.accepted.items() if op.args.get("priority") == "urgent" and a.delivered.get(key)]
    t = Threshold("urgent delivery", "mean", limit, basis="acceptance")
    r = t.judge_samples(Latencies(samples), "urgent notifications delivered")
    r.name = "urgent mean delivery latency"
    return r


class _Counter:
    """Counts inserted values at or below a bound (a Fenwick tree over known values)."""

    def __init__(self, values: list[float]) -> None:
        self.keys = sorted(set(values))
        self.tree = [0] * (len(self.keys) + 1)

    def add(self, v: float) -> None:
        i = bisect.bisect_left(self.keys, v) + 1
        while i < len(self.tree):
            self.tree[i] += 1
            i += i & -i

    def at_most(self, v: float) -> int:
        i, n = bisect.bisect_right(self.keys, v), 0
        while i > 0:
            n += self.tree[i]
            i -= i & -i
        return n


def _peak_concurrency(calls: list[dict[str, Any]]) -> int:
    """The most calls a channel had open at once, from the providers' record (arrival + latency)."""
    edges = sorted([(c["at"], 1) for c in calls] + [(c["at"] + float(c.get("latency") or 0.0), -1) for c in calls],
                   key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, d in edges:
        now += d
        most = max(most, now)
    return most


MIN_HELD = 8  # calls any target may hold after its priority decision, whatever its concurrency
BACKLOG_TIMES = 3  # a backlog puts priority to the test when it is this many times what the target holds
AHEAD_SHARE = 0.6  # of the reminders beyond what it held, the urgent one may follow this share (jitter)


def urgent_overtakes_reminder_backlog(a: NotificationsAnalysis) -> CheckResult:
    """Urgent before reminder: an urgent notification accepted while reminders wait for the same
    channel goes out ahead of most of them, it does not queue behind the backlog (one FIFO).

    For each urgent notification: the backlog is the reminders accepted before it was sent whose
    first call to the same channel came after it was accepted; the urgent may follow those the
    target already held (twice the channel's peak concurrency in the providers' record, at
    least 8: running and queued calls), and at most 60% of the rest (a live target's threads
    jitter). A chance: a backlog three times that allowance; the promise is only put to the test when delivery
    saturates (a flood, slow providers), and a run where it never did leaves it unknown.
    """
    v = Violations()
    first: dict[tuple[str, str], dict[str, Any]] = {k: cs[0] for k, cs in a.calls_by_key.items() if cs}
    by_channel: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in a.calls:
        by_channel[c["channel"]].append(c)
    allowance = {ch: max(MIN_HELD, 2 * _peak_concurrency(cs)) for ch, cs in by_channel.items()}
    reminders: dict[str, list[tuple[float, float]]] = defaultdict(list)  # channel -> (accepted by, first call)
    urgents: list[tuple[float, float, float, str, tuple[str, str]]] = []  # (sent, accepted, first call, ch, key)
    for key, op in a.accepted.items():
        c = first.get(key)
        if c is None:
            continue
        if op.args.get("priority") == "urgent":
            urgents.append((op.invoke_time, op.complete_time, c["at"], c["channel"], key))
        else:
            reminders[c["channel"]].append((op.complete_time, c["at"]))
    counters = {ch: _Counter([t for _, t in rs]) for ch, rs in reminders.items()}
    for rs in reminders.values():
        rs.sort()
    fed = {ch: 0 for ch in reminders}
    chances = worst_backlog = 0
    for sent, accepted, called, ch, key in sorted(urgents):
        rs = reminders.get(ch)
        if not rs:
            continue
        while fed[ch] < len(rs) and rs[fed[ch]][0] <= sent:  # reminders accepted before the urgent was sent
            counters[ch].add(rs[fed[ch]][1])
            fed[ch] += 1
        waiting = fed[ch] - counters[ch].at_most(accepted)  # ...still waiting when it was accepted
        ahead = counters[ch].at_most(called) - counters[ch].at_most(accepted)  # ...and called before it
        worst_backlog = max(worst_backlog, waiting)
        held = allowance[ch]
        if waiting < BACKLOG_TIMES * held:
            continue
        chances += 1
        if ahead > held + AHEAD_SHARE * (waiting - held):
            v.add(f"urgent event {key[0]!r} waited behind {ahead} of the {waiting} reminders queued for {ch} when "
                  f"it was accepted (Limit: {held} held + 60% of the rest): urgent does not go first", key)
    return v.result("urgent_overtakes_reminder_backlog", {"urgent": len(urgents), "longest_backlog": worst_backlog,
                                                          "allowance": allowance},
                    chances=chances, chance_kind="urgent notifications accepted behind a reminder backlog")


from .answers import answers_belong_to_who_asked  # noqa: E402
from .priority import urgent_first_outside_a_backlog  # noqa: E402

NOTIFICATIONS_CHECKS = (one_delivery_per_event, delivery_ratio_at_least, attempt_budget_respected,
                       no_retry_after_permanent_on_same_channel, breaker_counts_only_transient, preference_respected,
                       status_matches_providers, status_moves_forward, formatting_within_channel_limits,
                       urgent_overtakes_reminder_backlog, urgent_first_outside_a_backlog, answers_belong_to_who_asked)
# Put to the test only when delivery saturates: a run that never saturated it (the peak, when the
# target keeps up) leaves them out; a run meant to saturate it (a flood) must exercise them.
SATURATION_CHECKS = ("urgent_overtakes_reminder_backlog",)


def check_notifications(history: History | Iterable[Op], calls: list[dict[str, Any]], *,
                        rules: DeliveryRules = DeliveryRules(), threshold: float = 0.99,
                        channel_calls: list[dict[str, Any]] | None = None, answer_latency: float = 0.0,
                        saturated: bool = True) -> list[CheckResult]:
    """Every notification invariant over one shared analysis of the history and the providers'
    record (``calls``), judged against the target's ``rules``. ``saturated=False`` leaves out
    :data:`SATURATION_CHECKS` (a workload that was not meant to saturate delivery)."""
    a = NotificationsAnalysis(history, calls, channel_calls=channel_calls, answer_latency=answer_latency,
                              **rules.judging())
    return [check(a) if check is not delivery_ratio_at_least else check(a, threshold) for check in NOTIFICATIONS_CHECKS
            if saturated or check.__name__ not in SATURATION_CHECKS]
