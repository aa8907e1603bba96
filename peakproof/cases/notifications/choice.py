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

"Could have had its breaker open" is judged from the record alone, generously (a failure heard
within a cool-down and its slack, or a call out on a channel that has failed before): the more
calls are taken as forced, the more skips are excused, never the other way.
"""

from __future__ import annotations

import bisect
from typing import Any

from ... import providers as pv
from .analysis import NotificationsAnalysis

__all__ = ["DECIDED_BEFORE", "addressed", "forced", "possible_probe", "chosen_answers", "chosen_permanent"]

DECIDED_BEFORE = 0.25  # s between a target's choice of channel and the call's arrival, at most
ADDRESS_FIELDS = {"push": "push_token", "sms": "phone", "email": "email"}


def addressed(r: dict[str, Any]) -> list[str]:
    """The channels a recipient has an address for."""
    addr = r.get("addresses", {})
    return [c for c in pv.CHANNELS if addr.get(ADDRESS_FIELDS[c]) or addr.get(c)]


def maybe_blocking(a: NotificationsAnalysis, channel: str, at: float) -> bool:
    """Could ``channel``'s breaker have held calls back at ``at``? Open: a failure heard within a
    cool-down (and its slack) before. Half-open with its probe out: a call out on it then, on a channel
    that has failed before."""
    cd = a.breaker_cool_down
    failures = a._failed_heard.get(channel, [])
    before = bisect.bisect_right(failures, at)
    if before == 0:
        return False
    if failures[before - 1] >= at - 1.25 * cd - 0.25 - DECIDED_BEFORE:
        return True
    story = a.by_arrival.get(channel, [])
    since = at - a.answer_timeout - DECIDED_BEFORE
    for i in range(bisect.bisect_right(story, (at, float("inf"))) - 1, -1, -1):  # latest first: a flood ends soon
        arrived, heard, _, _ = story[i]
        if arrived < since:
            return False
        if heard >= at - DECIDED_BEFORE:
            return True
    return False


def forced(a: NotificationsAnalysis, c: dict[str, Any]) -> bool:
    """Was call ``c`` made whatever its channel's breaker said (see the module's doc)? A call of a
    recipient the run did not register (an earlier run's) counts as chosen."""
    if id(c) in a.retries:
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
