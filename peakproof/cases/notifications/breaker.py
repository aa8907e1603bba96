"""The channel breaker, rebuilt from the providers' record, and the three checks that judge the
skips of a preferred channel against it: ``preference_respected`` (the first call goes to the
preferred channel unless it was failing transiently), ``breaker_counts_only_transient`` (a
breaker never opens on permanent failures) and ``breaker_opens_when_due`` (once the stated
count of transient failures is reached, the channel is skipped for the cool-down: each moment
that fell due is judged, and one that passed without a skip is a violation, not "not exercised").

Each channel's window is rebuilt from provider-side times (when the target heard each
answer: its latency, or ``answer_timeout`` for one it never heard), judged with a 25%
margin (:attr:`NotificationsAnalysis.suspicious_below`) where a skip is excused; where one is
due, only with the stated count reached. The checks are in
``NOTIFICATIONS_CHECKS``; :mod:`peakproof.cases.notifications.checks` re-exports them.
"""

from __future__ import annotations

import bisect
from typing import Any, NamedTuple

from peakproof import providers as pv
from peakproof.checks import CheckResult, Due, Violations, due_counts
from peakproof.timefmt import moment
from .analysis import NOTIFICATIONS, NotificationsAnalysis
from .choice import DECIDED_BEFORE, addressed, chosen_answers, chosen_permanent, count_reached, possible_probe

__all__ = ["DECIDED_BEFORE", "HEARD_LATE", "preference_respected", "breaker_counts_only_transient",
           "breaker_opens_when_due", "due_openings", "DueOpening"]


def _transient_before(a: NotificationsAnalysis, channel: str, at: float) -> int:
    """Transient failures among the channel's last ``breaker_window`` non-permanent calls heard
    before ``at``: what a fair breaker's window held."""
    times = a._times.get(channel, [])
    end = bisect.bisect_left(times, at)
    t = a._transient_cum[channel]
    return t[end] - t[max(0, end - a.breaker_window)]


class ChannelStory(str):
    """A breaker verdict a reader can follow: the channel's calls the harness saw before a violating first
    call (when each arrived and was heard, relative to it, and how it ended), the window and state the
    stated rules infer, and the recipient's address on the channel. Shown in the report as it reads."""


def channel_story(a: NotificationsAnalysis, channel: str, recipient_id: str, at: float,
                  calls: int = 12) -> ChannelStory:
    heard = a._heard.get(channel, [])
    before = [h for h in heard if h[0] < at][-calls:]
    lines = [f"{channel} as the harness saw it before the call at {at:.3f} (times relative to that call):"]
    lines += [f"  arrived {arrived - at:+8.3f} s, heard {h - at:+8.3f} s: {kind}" for h, arrived, kind in before]
    if not before:
        lines.append("  (no call to it was heard before)")
    lines.append(f"  the stated breaker's window: {_transient_before(a, channel, at)} transient failures (lost answers "
                 f"included) in its last {a.breaker_window} calls; it opens at {a.breaker_min_failures}, stays open "
                 f"{a.breaker_cool_down:g} s before a probe")
    lines.append(f"  inferred: a fair breaker could {'' if _could_be_open(a, channel, at) else 'not '}be open or "
                 f"probing then")
    dead = a.dead_since(recipient_id, channel, at)
    lines.append(f"  {recipient_id!r}'s address on {channel}: "
                 + (f"answered permanent {at - dead:.2f} s before" if dead is not None else "never answered permanent"))
    lines.append("  the service's own breaker state: its transitions (the report's breaker chart, where the driver "
                 "offers breakers()) or its log, to hold against the inferred state above")
    return ChannelStory("\n".join(lines))


def _excused(a: NotificationsAnalysis, channel: str, at: float) -> bool:
    """Could the channel's breaker fairly be open (or probing) when the target chose a channel for
    the call that arrived at ``at``? Over a live target: never after permanent answers alone, nor on
    a channel no call reached for a whole cool-down; yes without evidence that the breaker let
    calls through just before (two answers: a target's own timeouts can open it on answers the
    record calls fine); else only if a fair breaker could have opened within reach of that moment
    and no probe since closed it (:func:`_could_be_open`)."""
    if a.answer_timeout == 0:
        # Virtual time (the in-process reference): every outcome is in the record, heard at once. The
        # window was already judged; a failed last call (a half-open probe) reopens the breaker.
        i = bisect.bisect_left(a._times.get(channel, []), at)
        return i > 0 and a._last_failed[channel][i - 1]
    # Permanent answers alone, enough of them, in the last cool-down: the one pattern no fair
    # breaker opens on (a dead address is not a sick channel); nothing excuses that skip.
    # (Only calls the target chose count: one forced through an open breaker says nothing. :mod:`.choice`)
    since = at - 1.25 * a.breaker_cool_down - 0.25
    perm, failures = chosen_permanent(a, channel), a._failed_heard.get(channel, [])
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
    # The target decided before the call arrived (up to DECIDED_BEFORE s under load). Calls it had to make
    # whatever the breaker said (every other channel possibly open, a retry) are no evidence.
    answered = chosen_answers(a, channel)
    decided = at - DECIDED_BEFORE
    recent = answered[bisect.bisect_left(answered, (decided - 0.5, 0.0)):bisect.bisect_left(answered, (decided, 0.0))]
    if sum(1 for _, h in recent if h < decided) < 2:
        return True
    # the choice fell somewhere between DECIDED_BEFORE before the call's arrival and the arrival
    return _could_be_open(a, channel, at) or _could_be_open(a, channel, at - DECIDED_BEFORE)


def _open_moments(a: NotificationsAnalysis, channel: str, proof: bool = True) -> list[float]:
    """When a fair breaker on ``channel`` could have opened: a transient failure heard that brought
    its window to :attr:`suspicious_below`, or a failure heard after the cool-down of the last such
    moment while it could be probing (a failed probe reopens it). A failure while it is open
    changes nothing (its cleared window is no fuller than the rebuilt one). ``proof=False``: without
    taking first calls let through as proof it had closed (a superset). Computed once."""
    cache: dict[tuple[str, bool], list[float]] = a.__dict__.setdefault("_open_moments", {})
    if (channel, proof) not in cache:
        threshold = count_reached(a, channel)
        moments: list[float] = []
        probe_from = 0.75 * a.breaker_cool_down - 0.25  # after the cool-down (slack as below): a probe's failure
        for f in a._failed_heard.get(channel, []):
            if f in threshold or (moments and f - moments[-1] >= probe_from
                                  and _open_or_probing(a, channel, moments[-1], f, proof)):
                moments.append(f)
        cache[(channel, proof)] = moments
    return cache[(channel, proof)]


def _open_or_probing(a: NotificationsAnalysis, channel: str, opened: float, at: float, proof: bool = True) -> bool:
    """Could a breaker that opened at ``opened`` still be open, or half-open with its probe out, at
    ``at``? Open for its cool-down (a quarter and 0.25 s of slack: the target opens and probes on
    its own clock, the record says when calls arrived); then half-open until the first call after
    the cool-down (its probe) is answered: while that call is out, the breaker skips. Never once
    two first calls went to the channel as their recipient's preferred one after it opened, while
    the target had a channel it could have called instead (unless ``proof`` is False)."""
    cd = a.breaker_cool_down
    # Let through since: two first calls to the channel as the preferred one, decided after it opened
    # (an open breaker lets none through, a probing one one): it was closed again by then. ``opened`` is the
    # earliest the target could have heard the failure (when the provider answered); a target short of CPU
    # hears it later, up to its own answer timeout after the call (then it is a timeout, a failure all the
    # same): calls it decided before it heard are no proof. (Counted from the provider's answer alone, a
    # reference starved on a shared CI host was FAILed for 20 skips in a burst: its breaker opened late.)
    if proof:
        let_through = _preferred_first_calls(a, channel)
        arrived = a._failed_arrived.get(channel, {}).get(opened, opened)
        heard_by = max(opened, arrived + a.answer_timeout) + DECIDED_BEFORE
        if bisect.bisect_left(let_through, at) - bisect.bisect_right(let_through, heard_by) >= 2:
            return False
    if at < opened + 1.25 * cd + 0.25:
        return True
    # a probe out at ``at``: a call that reached the channel after the cool-down, not yet heard of (the first
    # then, or a later one while those before it were forced through: :func:`.choice.possible_probe`)
    probe = possible_probe(a, channel, opened + 0.75 * cd - 0.25, at + DECIDED_BEFORE)
    if probe is None:
        return False  # half-open and no probe yet: the next call must go through as the probe
    # the probe's answer: an answer heard from a call that arrived then or later closes the breaker;
    # a failure heard reopens it (an open moment itself)
    answered = a._answered.get(channel, [])
    j = bisect.bisect_left(answered, (probe, 0.0))
    return not any(h < at - 0.25 for _, h in answered[j:bisect.bisect_right(answered, (at, float("inf")))])


def _preferred_first_calls(a: NotificationsAnalysis, channel: str) -> list[float]:
    """When first calls went to ``channel`` as their recipient's preferred channel while another of
    the recipient's channels was surely closed (sorted): a breaker that let such a call through was
    not open. With every channel it could use possibly open, a target may call the preferred one
    all the same (a notification still gets its round): no proof of anything."""
    cache: dict[str, list[float]] = a.__dict__.setdefault("_preferred_firsts", {})
    if not cache:
        for key, cs in a.calls_by_key.items():
            r = a.recipients.get(key[1])
            if r is None or not cs or not r["channels"] or cs[0]["channel"] != a.preferred_at(key[1], cs[0]["at"]):
                continue
            at, preferred = cs[0]["at"], cs[0]["channel"]
            others = {c for c in [*r["channels"], *addressed(r)] if c != preferred and c in pv.CHANNELS}
            if any(not _could_be_open(a, c, at, proof=False) and not _could_be_open(a, c, at - DECIDED_BEFORE, proof=False)
                   for c in others):
                cache.setdefault(preferred, []).append(at)
        for times in cache.values():
            times.sort()
        cache.setdefault("", [])  # computed, even when no first call went to a preferred channel
    return cache.get(channel, [])


def _could_be_open(a: NotificationsAnalysis, channel: str, at: float, proof: bool = True) -> bool:
    moments = _open_moments(a, channel, proof)
    i = bisect.bisect_left(moments, at)
    return bool(i) and _open_or_probing(a, channel, moments[i - 1], at, proof)


def _first_round(cs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls made together with the first one (a parallel round sends several at once)."""
    return [c for c in cs if c["at"] == cs[0]["at"]]


@NOTIFICATIONS.register
def preference_respected(a: NotificationsAnalysis) -> CheckResult:
    """The first call goes to the preferred channel, unless that channel was failing transiently (or,
    under a stated suppression list, the recipient's address on it was dead: then the next one is preferred)."""
    v = Violations()
    firsts = 0
    for key, cs in a.calls_by_key.items():
        r = a.recipients.get(key[1])
        if r is None or not cs:
            continue
        first = cs[0]
        preferred = a.preferred_at(key[1], first["at"])
        if preferred is None:  # every address suppressed: any call is the target's own business
            continue
        firsts += 1
        # a target chooses the channel up to DECIDED_BEFORE before its call arrives: an address heard dead in
        # between was not dead yet to that choice (a Celery round claimed its channel, then the 422 came back)
        if {preferred, a.preferred_at(key[1], first["at"] - DECIDED_BEFORE)} & {c["channel"] for c in _first_round(cs)}:
            continue
        if first["channel"] not in pv.CHANNELS or first["channel"] not in r["channels"] + [
                c for c in pv.CHANNELS if c in addressed(r)]:
            v.add(f"event {key[0]!r}: called {first['channel']}, a channel {key[1]!r} has no address for", first)
        elif (first["channel"] != preferred and _transient_before(a, preferred, first["at"]) < a.suspicious_below
              and not _excused(a, preferred, first["at"])):
            v.add(f"event {key[0]!r}: the first call went to {first['channel']}, not the preferred {preferred}, "
                  f"though {preferred} had failed transiently only "
                  f"{_transient_before(a, preferred, first['at'])} times in its last {a.breaker_window} calls"
                  f"{a.skip_hint(key[1], preferred, first['at'])}", channel_story(a, preferred, key[1], first["at"]))
    return v.result("preference_respected", {"first_calls": firsts}, chances=firsts,
                    chance_kind="first calls of recipients with a preference")


def _open_moments_counting_permanent(a: NotificationsAnalysis, channel: str) -> list[float]:
    """When a breaker that counted permanent failures as the channel's could have opened: whenever a
    fair one could, when its window (permanent answers too) reached :attr:`suspicious_below`, and
    when a probe it let through came back permanent (a fair breaker closes on that answer: the
    channel is up; one that counts it reopens). Computed once."""
    cache: dict[str, list[float]] = a.__dict__.setdefault("_open_moments_counting", {})
    if channel not in cache:
        times, cum = a._all_times.get(channel, []), a._counted_cum[channel]
        threshold = {times[end - 1] for end in range(1, len(times) + 1)
                     if cum[end] > cum[end - 1] and cum[end] - cum[max(0, end - a.breaker_window)] >= a.suspicious_below}
        threshold.update(_open_moments(a, channel))
        probe_from = 0.75 * a.breaker_cool_down - 0.25
        moments: list[float] = []
        for f in sorted({*a._failed_heard.get(channel, []), *a._permanent_seen.get(channel, [])}):
            if f in threshold or (moments and f - moments[-1] >= probe_from
                                  and _open_or_probing(a, channel, moments[-1], f)):
                moments.append(f)
        cache[channel] = moments
    return cache[channel]


def _reopened_on_permanent(a: NotificationsAnalysis, channel: str, at: float) -> bool:
    """Could a breaker counting permanent failures be open at ``at`` for a permanent answer to its
    probe (its last opening), where a fair one had closed?"""
    moments = _open_moments_counting_permanent(a, channel)
    i = bisect.bisect_left(moments, at)
    return (bool(i) and moments[i - 1] in set(a._permanent_seen.get(channel, []))
            and _open_or_probing(a, channel, moments[i - 1], at))


def _counting_permanent(a: NotificationsAnalysis, channel: str, at: float) -> tuple[int, int]:
    """(calls, failures) in the window of a breaker that counted permanent failures as the channel's:
    the channel's last ``breaker_window`` calls heard before ``at``, whatever they answered."""
    times = a._all_times.get(channel, [])
    end = bisect.bisect_left(times, at)
    start = max(0, end - a.breaker_window)
    cum = a._counted_cum[channel]
    return end - start, cum[end] - cum[start]


@NOTIFICATIONS.register
def breaker_counts_only_transient(a: NotificationsAnalysis) -> CheckResult:
    """A channel is skipped (breaker open) only after transient failures, never for permanent ones.

    A chance is a first call that would show the bug if the target had it: a breaker counting
    permanent failures too would be open (its window holds enough failures, or its probe came
    back permanent and reopened it), a fair one could not (too few transient failures, and
    nothing else excuses a skip: :func:`_excused`). Any other first call could not tell the two
    breakers apart, and is not counted.
    """
    v = Violations()
    skips = chances = 0
    for key, cs in a.calls_by_key.items():
        r = a.recipients.get(key[1])
        if r is None or not cs:
            continue
        first = cs[0]
        preferred = a.preferred_at(key[1], first["at"])  # a dead address's skip is the suppression list's
        if preferred is None:
            continue
        skipped = preferred not in {c["channel"] for c in _first_round(cs)}
        skips += skipped
        transient = _transient_before(a, preferred, first["at"])
        n_counted, counted = _counting_permanent(a, preferred, first["at"])
        if transient >= a.suspicious_below:
            continue
        window_full = counted >= a.suspicious_below
        reopened = not window_full and any(_reopened_on_permanent(a, preferred, t)
                                           for t in (first["at"], first["at"] - DECIDED_BEFORE))
        if not (window_full or reopened) or _excused(a, preferred, first["at"]):
            continue
        chances += 1
        if skipped and window_full:
            v.add(f"{preferred} was skipped for event {key[0]!r} after {counted} failures in its last {n_counted} "
                  f"calls counting permanent ones, and only {transient} transient failures in its last "
                  f"{a.breaker_window} calls that were not permanent: the breaker counted permanent failures"
                  f"{a.skip_hint(key[1], preferred, first['at'])}", channel_story(a, preferred, key[1], first["at"]))
        elif skipped:
            v.add(f"{preferred} was skipped for event {key[0]!r} after its breaker's probe came back permanent "
                  f"(the channel answered: a fair breaker closes), with only {transient} transient failures in its "
                  f"last {a.breaker_window} calls: the breaker counted a permanent failure and reopened"
                  f"{a.skip_hint(key[1], preferred, first['at'])}", channel_story(a, preferred, key[1], first["at"]))
    return v.result("breaker_counts_only_transient", {"preferred_channel_skips": skips}, chances=chances,
                    chance_kind="first calls while permanent failures alone would open a breaker")


# -- due, not done: the moments the stated rules made a breaker open ------------------------------------------

HEARD_LATE = 0.25  # s: the target hears an answer after the providers' record says it was given, by this at most


class DueOpening(NamedTuple):
    """A moment the stated rules made ``channel``'s breaker open: when, why, and from when a call to the
    channel may have been the probe that closed the opening the target is in (the first of a chain:
    a probe that failed only continues it)."""
    at: float
    why: str
    probes_from: float


def due_openings(a: NotificationsAnalysis, channel: str) -> list[DueOpening]:
    """When the stated breaker had to open on ``channel``, and why, in order.

    Closed, it opens once the transient failures among its last ``breaker_window`` calls heard
    (permanent answers aside: they are about an address) reach ``breaker_min_failures``, counted
    over the calls heard since its window was last cleared, and over a window shortened by the
    answers heard within :data:`HEARD_LATE` after (a target that heard those first would have
    pushed older failures out with them; failures heard then would only add to its count). Open, the calls made before its cool-down could be over say
    nothing; the first call that reached the channel after that (its probe, or a call that was
    no probe) decides: a failure heard is a moment it had to be open again; an answer, a
    permanent one too (the channel is up), closes it, its window cleared."""
    window, need, cd = a.breaker_window, a.breaker_min_failures, a.breaker_cool_down
    out: list[DueOpening] = []
    heard: list[float] = []  # the window's calls (non-permanent) heard since it was last cleared
    fails: list[int] = [0]  # running count of failures among them
    answers = [h for h, _, kind in a._heard.get(channel, []) if kind == "answered"]
    opened: float | None = None
    for h, arrived, kind in a._heard.get(channel, []):
        if opened is not None:
            if arrived < opened + 0.75 * cd - 0.25:
                continue  # made before its cool-down could be over: a call in flight, a retry, not a probe
            if kind == "failed":
                # No probe at all, perhaps (a retry of an unknown outcome, a recipient every breaker fails):
                # the target's own probe of the opening before may still close it, so that opening's
                # probes end this moment's judging too.
                opened = h
                out.append(DueOpening(h, f"a call to {channel} after its cool-down (its probe, or no probe at "
                                         f"all) failed", out[-1].probes_from))
            else:
                opened, heard, fails = None, [], [0]
            continue
        if kind == "permanent":
            continue
        heard.append(h)
        fails.append(fails[-1] + (kind == "failed"))
        if kind != "failed":
            continue
        late = bisect.bisect_right(answers, h + HEARD_LATE) - bisect.bisect_right(answers, h)
        lo = max(0, len(heard) - max(1, window - late))
        if fails[-1] - fails[lo] >= need:
            opened = h
            # the target may have opened it up to half a cool-down earlier on its own count (its timeouts)
            out.append(DueOpening(h, f"{fails[-1] - fails[lo]} transient failures among its last "
                                     f"{len(heard) - lo} calls heard", h + 0.5 * cd))
            heard, fails = [], [0]
    return out


def _first_calls_preferring(a: NotificationsAnalysis,
                            channel: str) -> list[tuple[float, bool, dict[str, Any], float]]:
    """(arrival, went to ``channel``, call, when its notification was sent) for every first call of a
    recipient who prefers ``channel`` and had another channel surely closed then (sorted): the calls an
    open breaker must send elsewhere. With every other channel possibly open, a target may call the
    preferred one all the same. A notification whose sending is not in the history (another client's)
    counts as sent long before."""
    cache: dict[str, list[tuple[float, bool, dict[str, Any], float]]] = a.__dict__.setdefault("_firsts_preferring",
                                                                                             {})
    if channel not in cache:
        found = []
        for key, cs in a.calls_by_key.items():
            r = a.recipients.get(key[1])
            if r is None or not cs or not r["channels"] or a.preferred_at(key[1], cs[0]["at"]) != channel:
                continue
            at = cs[0]["at"]
            others = {c for c in [*r["channels"], *addressed(r)] if c != channel and c in pv.CHANNELS}
            if any(not _could_be_open(a, c, at, proof=False) and not _could_be_open(a, c, at - DECIDED_BEFORE,
                                                                                 proof=False) for c in others):
                sent = a.accepted.get(key)
                found.append((at, channel in {c["channel"] for c in _first_round(cs)}, cs[0],
                              sent.invoke_time if sent is not None else float("-inf")))
        cache[channel] = sorted(found, key=lambda f: f[0])
    return cache[channel]


def _judged(a: NotificationsAnalysis, channel: str, opening: DueOpening) -> tuple[Due, list[dict[str, Any]]]:
    """How one due opening ended, and the first calls that went through it. The breaker must skip the
    channel from when the target had surely heard the failure and decided anew (:data:`HEARD_LATE` and
    :data:`DECIDED_BEFORE` after; up to a second after when the cool-down is long enough to spare it,
    for a target that a busy machine slowed) until its cool-down is over (it opened no earlier than
    the record's moment; 0.1 s for the clocks' grain), or until an answer to a call that may have been
    the probe of the opening the target is in (``opening.probes_from``): from then on it may have
    closed. Only the first calls of notifications sent after the target heard the failure count: one
    sent before may have had its channel chosen then and waited in a queue. Two first calls let
    through in that time are the violation: one may be such a probe."""
    due, why, cd = opening.at, opening.why, a.breaker_cool_down
    start, end = due + max(HEARD_LATE + DECIDED_BEFORE, min(1.0, 0.25 * cd)), due + cd - 0.1
    # A target that was slow to answer the harness just then (short of CPU, a flood on its loop) was as slow
    # to hear the providers' answers: the time it took is added before anything is judged.
    stall = a.answer_stall(due, start)
    start += stall
    # Answers to the calls made before that (in flight when it opened, a retry after an unknown outcome) close
    # nothing; an answer to a possible probe may have.
    probes = [(h, arrived) for h, arrived, kind in a._heard.get(channel, [])
              if kind != "failed" and arrived >= opening.probes_from and h > due]
    what = f"{channel}'s breaker open ({why}; stated: {a.breaker_min_failures} in {a.breaker_window}, " \
           f"{cd:g} s before a probe)"
    if probes and min(probes)[0] <= start:
        h, arrived = min(probes)
        return Due(what, due, "undecided", f"it may have closed before it could be judged: a call to {channel} "
                                           f"made at +{arrived - due:.2f} s (the probe of an opening before, "
                                           f"perhaps) was answered at +{h - due:.2f} s"), []
    if probes:
        end = min(end, min(probes)[0])
    if end - start <= 0:
        slow = f" and the target's {stall:.2f} s answer then" if stall > 0.05 else ""
        return Due(what, due, "undecided", f"no time to judge: the stated cool-down ({cd:g} s) is within the "
                                            f"clocks' slack{slow}"), []
    firsts = _first_calls_preferring(a, channel)
    ats = [at for at, _, _, _ in firsts]
    window = [(went, c) for _, went, c, sent in firsts[bisect.bisect_right(ats, start):bisect.bisect_left(ats, end)]
              if sent >= due + HEARD_LATE or sent == float("-inf")]
    through = [c for went, c in window if went]
    skipped = len(window) - len(through)
    span = f"between +{start - due:.2f} s and +{end - due:.2f} s" + (
        f" (its start later by the {stall:.2f} s the target took to answer the harness then)" if stall > 0.05 else "")
    if len(through) >= 2:
        first = through[0]
        return Due(what, due, "violated", f"{len(through)} of {len(window)} first calls of recipients who prefer "
                                          f"{channel} went to it {span} (the first: event {first['event_id']!r} at "
                                          f"+{first['at'] - due:.2f} s)"), through
    if skipped:
        return Due(what, due, "held", f"{skipped} first calls skipped {channel} {span}"
                   + (" (one went to it: a probe, perhaps)" if through else "")), []
    return Due(what, due, "undecided", f"no first call of a recipient who prefers {channel} (with another channel "
                                       f"to use, sent after the failure was heard) fell {span}"), []


@NOTIFICATIONS.register
def breaker_opens_when_due(a: NotificationsAnalysis) -> CheckResult:
    """Once a channel's transient failures reach the stated count in its window, its breaker opens
    and the channel is skipped until the cool-down is over; a failed probe opens it again.

    Each moment the stated rules made a breaker open (:func:`due_openings`) is judged by the
    first calls of the recipients who prefer that channel in the time it had to stay open: held,
    violated (it never opened), or undecided (no such first call then). The check's chances are
    those moments; a run in which no breaker ever fell due did not put it to the test."""
    v = Violations()
    due: list[Due] = []
    # the providers' record may hold earlier runs (a breaker remembers them): their moments are not this run's
    since = min((op.invoke_time for op in a.ops), default=float("-inf"))
    for channel in pv.CHANNELS:
        for opening in due_openings(a, channel):
            if opening.at < since:
                continue
            moment_due, through = _judged(a, channel, opening)
            at = opening.at
            due.append(moment_due)
            if moment_due.ended == "violated":
                v.add(f"{moment_due.what} fell due at {moment(at)} and the channel was not skipped: "
                      f"{moment_due.detail}", *through[:3])
    ended = due_counts(due)
    undecided = [d for d in due if d.ended == "undecided"]
    note = None
    if undecided:
        note = (f"{len(undecided)} of {len(due)} due moments could not be judged; the first: "
                f"{undecided[0].detail}")
    return v.result("breaker_opens_when_due", {"due": len(due), "held": ended["held"], "undecided": ended["undecided"]},
                    unknown=bool(due) and not ended["held"], note=note, chances=len(due),
                    chance_kind="moments at which a breaker was due", due=due)
