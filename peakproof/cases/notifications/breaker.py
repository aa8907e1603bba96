"""The channel breaker, rebuilt from the providers' record, and the two checks that judge a
skipped preferred channel against it: ``preference_respected`` (the first call goes to the
preferred channel unless it was failing transiently) and ``breaker_counts_only_transient``
(a breaker never opens on permanent failures).

Each channel's window is rebuilt from provider-side times (when the target heard each
answer: its latency, or ``answer_timeout`` for one it never heard), judged with a 25%
margin (:attr:`NotificationsAnalysis.suspicious_below`). Both checks are in
``NOTIFICATIONS_CHECKS``; :mod:`peakproof.cases.notifications.checks` re-exports them.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

from ...checks import CheckResult, Violations
from ... import providers as pv

if TYPE_CHECKING:
    from .checks import NotificationsAnalysis

__all__ = ["DECIDED_BEFORE", "preference_respected", "breaker_counts_only_transient"]


def _window_before(a: NotificationsAnalysis, channel: str, at: float) -> tuple[int, int, int]:
    """(calls, transient failures) among the channel's last ``breaker_window`` non-permanent calls
    before ``at``, and the permanent failures answered over the same stretch of time."""

    times = a._times.get(channel, [])
    end = bisect.bisect_left(times, at)
    start = max(0, end - a.breaker_window)
    t = a._transient_cum[channel]
    since = times[start] if start < len(times) else at
    perm = a._permanent_seen.get(channel, [])
    permanent = bisect.bisect_left(perm, at) - bisect.bisect_left(perm, since)
    return end - start, t[end] - t[start], permanent


def _transient_before(a: NotificationsAnalysis, channel: str, at: float) -> int:
    return _window_before(a, channel, at)[1]


DECIDED_BEFORE = 0.25  # s between a target's choice of channel and the call's arrival, at most


def _excused(a: NotificationsAnalysis, channel: str, at: float) -> bool:
    """Could the channel's breaker fairly be open (or probing) at ``at``? Over a live target: never
    after permanent answers alone, nor on a channel no call reached for a whole cool-down; else yes
    unless calls were answered on it just before; yes if
    no call answered since its last failure (a breaker opens on a failure and only an answer closes it again, however
    long the channel stays idle), if a call failed within the last cool-down (a failed probe
    reopens it at once, whatever the window holds; calls the breaker does not govern, such as a
    retry after a lost answer, can come between), or if at some moment of the last cool-down its
    window held enough transient failures."""
    if a.answer_timeout == 0:
        # Virtual time (the in-process reference): every outcome is in the record, heard at once. The
        # window was already judged; a failed last call (a half-open probe) reopens the breaker.
        i = bisect.bisect_left(a._times.get(channel, []), at)
        return i > 0 and a._last_failed[channel][i - 1]
    # Permanent answers alone, enough of them, in the last cool-down: the one pattern no fair
    # breaker opens on (a dead address is not a sick channel); nothing excuses that skip.
    since = at - 1.25 * a.breaker_cool_down - 0.25
    perm, failures = a._permanent_seen.get(channel, []), a._failed_heard.get(channel, [])
    if (bisect.bisect_left(perm, at) - bisect.bisect_left(perm, since) >= a.suspicious_below
            and bisect.bisect_left(failures, at) == bisect.bisect_left(failures, since)):
        return False
    # A quiet channel: no call reached it for a whole cool-down (and an answer timeout) before the
    # decision, nor just after it (a probe on its way). Whatever opened its breaker, the cool-down is
    # over: it is half-open at worst and must let this call through as its probe.
    times = a._arrived.get(channel, [])
    quiet_from = at - DECIDED_BEFORE - a.answer_timeout - 1.25 * a.breaker_cool_down - 0.5
    if bisect.bisect_left(times, at + DECIDED_BEFORE) == bisect.bisect_left(times, quiet_from):
        return False
    # Evidence the breaker was letting calls through just then: two or more calls to the channel
    # answered in the half second before. An open breaker lets none through, a probing one one
    # (a target's own timeouts can open it on answers the record calls fine: without such
    # evidence a skip is given the benefit of the doubt).
    # The target decided before the call arrived (up to DECIDED_BEFORE s under load).
    answered = a._answered.get(channel, [])
    decided = at - DECIDED_BEFORE
    recent = answered[bisect.bisect_left(answered, (decided - 0.5, 0.0)):bisect.bisect_left(answered, (decided, 0.0))]
    if sum(1 for _, h in recent if h < decided) < 2:
        return True
    failures = a._failed_heard.get(channel, [])
    i = bisect.bisect_left(failures, at)
    if i:  # no answer since the last failure proved the channel back: an open or probing breaker may stand
        since = failures[i - 1] + 0.25  # calls already on their way when it failed prove nothing
        answered = a._answered.get(channel, [])
        j = bisect.bisect_right(answered, (since, float("inf")))
        if not any(h < at for arrived, h in answered[j:bisect.bisect_left(answered, (at, 0.0))]):
            return True
    times, cum = a._times.get(channel, []), a._transient_cum[channel]
    # a quarter and 0.25 s of slack: the target opens and probes on its own clock, the record
    # says when calls arrived, and a call travels between the two
    lo = bisect.bisect_left(times, at - 1.25 * a.breaker_cool_down - 0.25)
    hi = bisect.bisect_left(times, at)
    if cum[hi] - cum[lo] > 0:
        return True
    for end in range(lo, hi + 1):  # the window as it stood after each heard call of the cool-down
        if cum[end] - cum[max(0, end - a.breaker_window)] >= a.suspicious_below:
            return True
    return False


def _first_round(cs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls made together with the first one (a parallel round sends several at once)."""
    return [c for c in cs if c["at"] == cs[0]["at"]]


def preference_respected(a: NotificationsAnalysis) -> CheckResult:
    """The first call goes to the preferred channel, unless that channel was failing transiently."""
    v = Violations()
    firsts = 0
    for key, cs in a.calls_by_key.items():
        r = a.recipients.get(key[1])
        if r is None or not cs:
            continue
        firsts += 1
        first = cs[0]
        preferred = r["channels"][0]
        if preferred in {c["channel"] for c in _first_round(cs)}:
            continue
        if first["channel"] not in pv.CHANNELS or first["channel"] not in r["channels"] + [
                c for c in pv.CHANNELS if c in _addressed(r)]:
            v.add(f"event {key[0]!r}: called {first['channel']}, a channel {key[1]!r} has no address for", first)
        elif (first["channel"] != preferred and _transient_before(a, preferred, first["at"]) < a.suspicious_below
              and not _excused(a, preferred, first["at"])):
            v.add(f"event {key[0]!r}: the first call went to {first['channel']}, not the preferred {preferred}, "
                  f"though {preferred} had failed transiently only "
                  f"{_transient_before(a, preferred, first['at'])} times in its last {a.breaker_window} calls", first)
    return v.result("preference_respected", {"first_calls": firsts}, chances=firsts,
                    chance_kind="first calls of recipients with a preference")


def breaker_counts_only_transient(a: NotificationsAnalysis) -> CheckResult:
    """A channel is skipped (breaker open) only after transient failures, never for permanent ones.

    A chance: a first call made while the channel's permanent failures alone would have opened
    a breaker that (wrongly) counted them; a skip then, with few transient failures, is the bug.
    """
    v = Violations()
    skips = chances = 0
    for key, cs in a.calls_by_key.items():
        r = a.recipients.get(key[1])
        if r is None or not cs:
            continue
        preferred = r["channels"][0]
        first = cs[0]
        # a chance: the preferred channel's recent permanent failures would open a breaker that counted them
        _, tr, pe = _window_before(a, preferred, first["at"])
        chances += tr < a.suspicious_below <= tr + pe
        if preferred in {c["channel"] for c in _first_round(cs)}:
            continue
        skips += 1
        n_recent, transient, permanent = _window_before(a, preferred, first["at"])
        if (transient < a.suspicious_below and transient + permanent >= a.suspicious_below
                and not _excused(a, preferred, first["at"])):
            v.add(f"{preferred} was skipped for event {key[0]!r} after {permanent} permanent and only {transient} "
                  f"transient failures in its last {n_recent} calls: the breaker counted permanent failures",
                  first)
    return v.result("breaker_counts_only_transient", {"preferred_channel_skips": skips}, chances=chances,
                    chance_kind="first calls while permanent failures alone would open a breaker")


def _addressed(r: dict[str, Any]) -> list[str]:
    addr = r.get("addresses", {})
    fields = {"push": "push_token", "sms": "phone", "email": "email"}
    return [c for c in pv.CHANNELS if addr.get(fields[c]) or addr.get(c)]
