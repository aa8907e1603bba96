"""``urgent_first_outside_a_backlog``: urgent before reminder when nothing queues, too. In
``NOTIFICATIONS_CHECKS``; :mod:`peakproof.cases.notifications.checks` re-exports it.

``urgent_overtakes_reminder_backlog`` puts the priority to the test only when reminders queue. A
target that holds every urgent notification back a round while reminders go at once keeps its urgent
mean under the limit at short rounds and never meets a backlog; what shows it is a reminder sent
*after* an urgent notification was accepted that reaches the same channel *before* it.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from ...checks import CheckResult, Violations

if TYPE_CHECKING:
    from .checks import NotificationsAnalysis

__all__ = ["urgent_first_outside_a_backlog"]

# Two calls a target dispatches at once reach the providers in either order (threads, connections):
# a reminder may be recorded this much before an urgent one sent with it. A round's hold is longer
# (the slack is at most half the stated backoff).
SLACK = 0.25


def urgent_first_outside_a_backlog(a: NotificationsAnalysis) -> CheckResult:
    """A reminder sent after an urgent notification was accepted, whose first call goes to the same
    channel as the urgent's first call, is not called before it (beyond the slack).

    A chance: an urgent notification with such a reminder sent within one stated backoff of its
    acceptance (where a round's hold would let the reminder through first). The earliest of those
    reminders' first calls is compared with the urgent one's."""
    v = Violations()
    slack = min(SLACK, a.backoff / 2)
    first = {k: cs[0] for k, cs in a.calls_by_key.items() if cs}
    reminders: dict[str, list[tuple[float, float, tuple[str, str]]]] = defaultdict(list)  # ch -> (sent, called, key)
    urgents: list[tuple[float, float, str, tuple[str, str]]] = []  # (accepted by, first call, channel, key)
    for key, op in a.accepted.items():
        c = first.get(key)
        if c is None:
            continue
        if op.args.get("priority") == "urgent":
            urgents.append((op.complete_time, c["at"], c["channel"], key))
        else:
            reminders[c["channel"]].append((op.invoke_time, c["at"], key))
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
            v.add(f"urgent event {key[0]!r} was accepted by {accepted:.3f} and first called on {ch} at "
                  f"{called:.3f}; reminder event {witness[0]!r}, sent after it, was called on {ch} at "
                  f"{earliest:.3f}, {called - earliest:.3f} s before it (slack {slack:g} s): urgent does not go "
                  f"first", key)
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
