"""The priority promises: urgent goes first. Both read the same first calls
(:meth:`NotificationsAnalysis.first_calls`).

``urgent_overtakes_reminder_backlog`` judges a backlog of reminders; it puts the priority to the test only when reminders queue. A
target that holds every urgent notification back a round while reminders go at once keeps its urgent
mean under the limit at short rounds and never meets a backlog; what shows it is a reminder sent
*after* an urgent notification was accepted that reaches the same channel *before* it.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any

from peakproof.checks import CheckResult, Violations
from .analysis import NOTIFICATIONS, NotificationsAnalysis

__all__ = ["MIN_HELD", "BACKLOG_TIMES", "AHEAD_SHARE", "urgent_overtakes_reminder_backlog",
           "urgent_first_outside_a_backlog"]

# Two calls a target dispatches at once reach the providers in either order (threads, connections):
# a reminder may be recorded this much before an urgent one sent with it. A round's hold is longer
# (the slack is at most half the stated backoff).
SLACK = 0.25


MIN_HELD = 8  # calls any target may hold after its priority decision, whatever its concurrency
BACKLOG_TIMES = 3  # a backlog puts priority to the test when it is this many times what the target holds
AHEAD_SHARE = 0.6  # of the reminders beyond what it held, the urgent one may follow this share (jitter)


@NOTIFICATIONS.register
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
    by_channel: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in a.calls:
        by_channel[c["channel"]].append(c)
    allowance = {ch: max(MIN_HELD, 2 * _peak_concurrency(cs)) for ch, cs in by_channel.items()}
    reminders: dict[str, list[tuple[float, float]]] = defaultdict(list)  # channel -> (accepted by, first call)
    urgents: list[tuple[float, float, float, str, tuple[str, str]]] = []  # (sent, accepted, first call, ch, key)
    urgent, reminder = a.first_calls()
    for op, c, key in urgent:
        urgents.append((op.invoke_time, op.complete_time, c["at"], c["channel"], key))
    for op, c, key in reminder:
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


@NOTIFICATIONS.register
def urgent_first_outside_a_backlog(a: NotificationsAnalysis) -> CheckResult:
    """A reminder sent after an urgent notification was accepted, whose first call goes to the same
    channel as the urgent's first call (its preferred channel), is not called before it (beyond the slack,
    and the longest the target took to answer the harness meanwhile: a target short of CPU is not blamed).

    A chance: an urgent notification with such a reminder sent within one stated backoff of its
    acceptance (where a round's hold would let the reminder through first). The earliest of those
    reminders' first calls is compared with the urgent one's."""
    v = Violations()
    slack = min(SLACK, a.backoff / 2)
    urgent, reminder = a.first_calls()
    reminders: dict[str, list[tuple[float, float, tuple[str, str]]]] = defaultdict(list)  # ch -> (sent, called, key)
    for op, c, key in reminder:
        reminders[c["channel"]].append((op.invoke_time, c["at"], key))
    # (accepted by, call, ch, key) of the urgent ones whose first call went to their preferred channel: one that
    # went elsewhere was held for its preferred channel first (a full bulkhead there, a probe out) and moved on
    # when that changed; a reminder on the channel it ended on owed it nothing meanwhile (a false FAIL of the
    # reference on the dev profile: an urgent one held 0.2 s for e-mail's bulkhead, then sent by push)
    urgents = [(op.complete_time, c["at"], c["channel"], key) for op, c, key in urgent
               if c["channel"] == a.preferred_at(key[1], op.complete_time)]
    tables = {ch: _RangeMin(sorted(rs)) for ch, rs in reminders.items()}
    chances = 0
    for accepted, called, ch, key in urgents:
        table = tables.get(ch)
        if table is None:
            continue
        lo = bisect.bisect_right(table.sent, accepted)
        hi = bisect.bisect_right(table.sent, accepted + a.backoff)
        if lo >= hi:
            continue
        chances += 1
        earliest, witness = table.min(lo, hi)
        if earliest < called - slack:
            # a target slow to answer the harness meanwhile was short of CPU (a busy machine): its workers'
            # order within that stall is the scheduler's, not its priority's (a Celery stack beside a load: 0.28 s)
            stall = a.answer_stall(accepted, called)
            if earliest < called - slack - stall:
                v.add(f"urgent event {key[0]!r} was accepted by {accepted:.3f} and first called on {ch} at "
                      f"{called:.3f}; reminder event {witness[0]!r}, sent after it, was called on {ch} at "
                      f"{earliest:.3f}, {called - earliest:.3f} s before it (slack {slack:g} s"
                      + (f", and {stall:.3f} s the target took to answer the harness meanwhile" if stall else "")
                      + "): urgent does not go first", key)
    return v.result("urgent_first_outside_a_backlog", {"urgent": len(urgents), "slack_s": slack},
                    chances=chances, chance_kind="urgent notifications followed within a round by a reminder "
                                                 "to the same channel")


class _RangeMin:
    """The earliest first call among reminders ``lo:hi`` (sorted by when they were sent), in O(1) a
    query: a peak has tens of thousands of urgent notifications and of reminders."""

    def __init__(self, rows: list[tuple[float, float, tuple[str, str]]]) -> None:
        self.sent = [r[0] for r in rows]
        level = [(r[1], r[2]) for r in rows]
        self.levels = [level]
        span = 1
        while 2 * span <= len(level):
            prev = self.levels[-1]
            self.levels.append([min(prev[i], prev[i + span]) for i in range(len(prev) - span)])
            span *= 2

    def min(self, lo: int, hi: int) -> tuple[float, Any]:
        k = (hi - lo).bit_length() - 1
        row = self.levels[k]
        return min(row[lo], row[hi - (1 << k)])
