"""Which provider calls were a target's choice of channel, and which it made whatever its breaker said.

A call is evidence about its channel's breaker (it let calls through: it was closed, or this was
its probe) only when the target could have called another channel instead. It could not when the
call retried an unknown outcome (the same channel under the same key: the rule), nor when every
other channel the recipient could use (an address, not answered permanent for this notification)
could have had its breaker open or its probe out: a target may then call the channel all the same
(the reference does: a notification still gets its round). Such a call is *forced*.

Forced calls prove nothing about the breaker, and a breaker still open lets them through: the
probe that ends an opening may be a later call. (A reference FAILed over a live target: push's
breaker reopened on a lost probe; two calls forced through it before its cool-down was over had
been taken for the probe, their answers for its closing, and a skip a second later for the bug.)

"Could have had its breaker open" is judged from the record alone, generously (within a cool-down
and its slack of a failure that brought its window to the count, or of a failed probe after one; or
a call out on it after such a span): the more calls are taken as forced, the more skips are excused,
never the other way. (Any failure heard would not do: at the seed's 5% transient failures every
channel has one within a 10 s cool-down at peak, every call would be forced, and no skip judged.)
"""

from __future__ import annotations

import bisect
from typing import Any

from peakproof import providers as pv
from .analysis import NotificationsAnalysis

__all__ = ["DECIDED_BEFORE", "addressed", "count_reached", "forced", "possible_probe", "chosen_answers", "chosen_permanent"]

DECIDED_BEFORE = 0.25  # s between a target's choice of channel and the call's arrival, at most
ADDRESS_FIELDS = {"push": "push_token", "sms": "phone", "email": "email"}


def addressed(r: dict[str, Any]) -> list[str]:
    """The channels a recipient has an address for."""
    addr = r.get("addresses", {})
    return [c for c in pv.CHANNELS if addr.get(ADDRESS_FIELDS[c]) or addr.get(c)]


def count_reached(a: NotificationsAnalysis, channel: str) -> set[float]:
    """When a transient failure heard brought the channel's rebuilt window to :attr:`suspicious_below`
    (a fair breaker could open then). Computed once."""
    cache: dict[str, set[float]] = a.__dict__.setdefault("_count_reached", {})
    if channel not in cache:
        times, cum = a._times.get(channel, []), a._transient_cum[channel]
        cache[channel] = {times[end - 1] for end in range(1, len(times) + 1) if cum[end] > cum[end - 1]
                          and cum[end] - cum[max(0, end - a.breaker_window)] >= a.suspicious_below}
    return cache[channel]


def _open_spans(a: NotificationsAnalysis, channel: str) -> list[tuple[float, float]]:
    """When a fair breaker on ``channel`` could have been open, as (from, until) spans, computed once from the
    record alone: from a transient failure heard that brought its window to :attr:`suspicious_below`, for a
    cool-down and its slack; a failed probe (the failure of the first call made after the cool-down could be
    over) reopens it. It takes no call for forced (this module's judgement of a call reads these spans for
    the other channels): a later probe's failure after forced calls is read by the checks themselves."""
    cache: dict[str, list[tuple[float, float]]] = a.__dict__.setdefault("_choice_spans", {})
    if channel not in cache:
        cd = a.breaker_cool_down
        hold = 1.25 * cd + 0.25 + DECIDED_BEFORE  # open from a failure heard, at most (the clocks' slack)
        threshold = count_reached(a, channel)
        arrivals, arrived_at = a._arrived.get(channel, []), a._failed_arrived.get(channel, {})
        spans: list[tuple[float, float]] = []
        link: float | None = None
        for f in a._failed_heard.get(channel, []):
            if f not in threshold:
                if link is None:
                    continue  # below the count, and no opening to probe: a closed breaker's failure
                arrived, after = arrived_at.get(f, f), link + 0.75 * cd - 0.25
                if arrived < after or bisect.bisect_left(arrivals, after) != bisect.bisect_left(arrivals, arrived):
                    continue  # not the first call after the cool-down could be over: not its probe
            if spans and f <= spans[-1][1]:
                spans[-1] = (spans[-1][0], f + hold)
            else:
                spans.append((f, f + hold))
            link = f
        cache[channel] = spans
    return cache[channel]


def maybe_blocking(a: NotificationsAnalysis, channel: str, at: float) -> bool:
    """Could ``channel``'s breaker have held calls back at ``at``? Open: within a span of
    :func:`_open_spans`. Half-open with its probe out: after one, a call out on the channel then."""
    spans = _open_spans(a, channel)
    i = bisect.bisect_right(spans, (at, float("inf")))
    if i == 0:
        return False  # a fair breaker never opened before
    if at <= spans[i - 1][1]:
        return True
    story = a.by_arrival.get(channel, [])
    since = at - a.answer_timeout - DECIDED_BEFORE
    for j in range(bisect.bisect_right(story, (at, float("inf"))) - 1, -1, -1):  # latest first: a flood ends soon
        arrived, heard, _, _ = story[j]
        if arrived < since:
            return False
        if heard >= at - DECIDED_BEFORE:
            return True
    return False


def forced(a: NotificationsAnalysis, c: dict[str, Any]) -> bool:
    """Was call ``c`` made whatever its channel's breaker said (see the module's doc)? A call of a
    recipient the run did not register (an earlier run's) counts as chosen."""
    if id(c) in a.retries or a.cascade == "none":  # no cascade: its one channel, whatever the breakers said
        return True
    r = a.recipients.get(c.get("recipient_id", ""))
    if r is None:
        return False
    at, rid = c["at"], c["recipient_id"]
    dead = {x["channel"] for x in a.calls_by_key.get((c.get("event_id"), rid), ())
            if x["outcome"] == "permanent" and x["at"] < at}
    others = {ch for ch in [*(r.get("channels") or ()), *addressed(r)]
              if ch in pv.CHANNELS and ch != c["channel"] and ch not in dead and not a.suppressed(rid, ch, at)}
    return all(maybe_blocking(a, o, at) or maybe_blocking(a, o, at - DECIDED_BEFORE) for o in others)


def _facts(a: NotificationsAnalysis, channel: str) -> dict[str, Any]:
    """Per channel, computed once: arrivals, the index of the next chosen call from each, and the chosen
    calls' answers and permanent answers."""
    cache: dict[str, dict[str, Any]] = a.__dict__.setdefault("_choice_facts", {})
    if channel not in cache:
        story = a.by_arrival.get(channel, [])
        chosen = [not forced(a, c) for _, _, _, c in story]
        next_chosen = [len(story)] * (len(story) + 1)
        for i in range(len(story) - 1, -1, -1):
            next_chosen[i] = i if chosen[i] else next_chosen[i + 1]
        cache[channel] = {
            "arrivals": [s[0] for s in story], "next_chosen": next_chosen,
            "answers": [(arr, h) for (arr, h, kind, _), ok in zip(story, chosen) if ok and kind == "answered"],
            "permanent": sorted(h for (_, h, kind, _), ok in zip(story, chosen) if ok and kind == "permanent")}
    return cache[channel]


def possible_probe(a: NotificationsAnalysis, channel: str, after: float, until: float) -> float | None:
    """The latest arrival (from ``after`` to ``until``) of a call that may have been the probe of a breaker
    whose cool-down could be over from ``after``: the first call then, or a later one while every call
    before it was forced (a breaker still open lets those through; a target may not count them as its
    probe). None: no call reached the channel then (half-open, it must let the next one through)."""
    f = _facts(a, channel)
    lo, hi = bisect.bisect_left(f["arrivals"], after), bisect.bisect_right(f["arrivals"], until)
    if lo == hi:
        return None
    return f["arrivals"][min(f["next_chosen"][lo], hi - 1)]


def chosen_answers(a: NotificationsAnalysis, channel: str) -> list[tuple[float, float]]:
    """(arrived, heard) of the channel's answered calls the target chose (sorted by arrival)."""
    return _facts(a, channel)["answers"]


def chosen_permanent(a: NotificationsAnalysis, channel: str) -> list[float]:
    """When the target heard each permanent answer to a call it chose (sorted)."""
    return _facts(a, channel)["permanent"]
