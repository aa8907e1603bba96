"""The notifications history and the providers' record, analysed once:
:class:`NotificationsAnalysis`, the rules a target states (:class:`DeliveryRules`), and
:data:`NOTIFICATIONS`, the registry every notifications check joins. The bottom of the case's checks.

The providers' record (every call with its outcome, every delivery once per channel and
key) is the ground truth; the history says what was accepted, for whom, with which
preferences, and what the target reported. Operation names: ``put_recipient`` (args
recipient_id, channels, addresses), ``notify`` (args event_id, recipient_id, priority,
title, body; ok value has notification_id), ``get_notification`` (ok value: the
notification with status, channel, attempts).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any, Iterable

from peakproof.checks import CheckRegistry
from peakproof.history import OK, History, Op

CASCADES = ("after-any", "after-permanent", "none")  # the --cascade statement
ALL_CHANNELS = ("push", "sms", "email")


def service_channels(text: str | Iterable[str]) -> tuple[str, ...]:
    """The --channels statement: the channels a service has, in the seed's order ("sms,email")."""
    given = [c.strip() for c in (text.split(",") if isinstance(text, str) else text) if c.strip()]
    unknown = [c for c in given if c not in ALL_CHANNELS]
    if unknown or not given:
        raise ValueError(f"a comma-separated list of the channels your service has, among {', '.join(ALL_CHANNELS)} "
                         f"(e.g. sms,email); got {','.join(given) or 'none'}")
    return tuple(c for c in ALL_CHANNELS if c in given)


def on_channels(recipient: dict[str, Any], channels: tuple[str, ...]) -> dict[str, Any]:
    """A recipient as a service with only ``channels`` sees them: their preferences and addresses on the other
    channels are nothing to it (a push-first recipient of a service without push is met on their next choice)."""
    if set(channels) >= set(ALL_CHANNELS):
        return recipient
    field_of = {v: k for k, v in ADDRESS_FIELD.items()}
    addresses = {k: v for k, v in (recipient.get("addresses") or {}).items() if field_of.get(k, k) in channels}
    return {**recipient, "channels": [c for c in recipient.get("channels") or () if c in channels],
            "addresses": addresses}
STATUS_RANK = {"queued": 0, "sending": 1, "delivered": 2, "failed": 2}
ADDRESS_FIELD = {"push": "push_token", "sms": "phone", "email": "email"}  # a recipient's address on each channel


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
    # a suppression list: an address a provider answered permanent (422) is dead on that channel for
    # every later notification (this run's or an earlier one's), which moves on to the next channel
    suppression_list: bool = False
    # a design statement (case.DESIGN): the API has no idempotency key, so each notify the client sends is a
    # notification of its own; the seed's one delivery per (event, recipient) reads one per request the client made
    no_idempotency_key: bool = False
    # a design statement (case.DESIGN): when a notification moves on to another channel. "after-any" (the seed's:
    # after any failure), "after-permanent" (a transient failure is retried on the same channel), "none" (one
    # channel per notification: its first; a dead address there is undeliverable by design)
    cascade: str = "after-any"
    # a design statement (case.DESIGN): the channels the service has (a preference for another is met on the
    # recipient's next choice it has)
    channels: tuple[str, ...] = ALL_CHANNELS

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

    # flag, field, help: rules that are on or off
    SWITCHES = (
        ("--suppression-list", "suppression_list",
         "your target keeps a suppression list: an address a provider answered permanent (422) is not called "
         "again on that channel by any later notification (which goes to the next channel): a skip of it is "
         "the dead address's, not a breaker's"),
    )

    def __post_init__(self) -> None:
        for flag, name, kind, _ in self.OPTIONS:
            v = getattr(self, name)
            floor_ok = v >= 0 if name == "answer_timeout" else v > 0  # 0: virtual time, given up on at once
            if not isinstance(v, (int, float)) or not floor_ok or (kind is int and int(v) != v):
                raise ValueError(f"{flag} must be a positive {'whole number' if kind is int else 'number'}; "
                                 f"got {v!r}")
        if self.cascade not in CASCADES:
            raise ValueError(f"--cascade must be one of {', '.join(CASCADES)}; got {self.cascade!r}")
        if self.breaker_min_failures > self.breaker_window:
            raise ValueError(f"--breaker-failures ({self.breaker_min_failures}) cannot exceed --breaker-window "
                             f"({self.breaker_window}): the breaker could never open")

    @classmethod
    def from_options(cls, get: Any) -> "DeliveryRules":
        """From parsed options: ``get(field)`` returns the value or None (then the default stands)."""
        given: dict[str, Any] = {name: kind(get(name)) for _, name, kind, _ in cls.OPTIONS if get(name) is not None}
        given.update({name: bool(get(name)) for _, name, _ in cls.SWITCHES if get(name) is not None})
        return cls(**given)

    def judging(self) -> dict[str, Any]:
        """The keyword arguments of :class:`NotificationsAnalysis` these rules set."""
        return asdict(self)

    def describe(self) -> dict[str, Any]:
        return {"attempt budget": self.budget, "backoff (s)": self.backoff,
                "breaker": f"{self.breaker_min_failures} transient failures in the last {self.breaker_window} calls, "
                           f"{self.breaker_cool_down:g} s open before a probe",
                "answer timeout (s)": self.answer_timeout,
                "suppression list": "yes: an address answered permanent stays dead on its channel for later "
                                    "notifications" if self.suppression_list
                                    else "not stated: every notification calls a recipient's preferred channel "
                                         "(--suppression-list if yours keeps dead addresses)",
                "cascade": {"after-any": "to the next channel after any failure (the seed's)",
                            "after-permanent": "to the next channel after a permanent failure only",
                            "none": "none: one channel per notification"}[self.cascade],
                "channels": ", ".join(self.channels) + ("" if self.channels == ALL_CHANNELS else
                                                        " (stated: a preference for another is met on the next)"),
                "one delivery": "per request the client made (--no-idempotency-key: each notify is a notification "
                                "of its own)" if self.no_idempotency_key else "per (event, recipient)"}


# In process, in virtual time: the driver tells the core every outcome at once, a lost answer is
# given up on at once (no answer timeout to wait for).
IN_VIRTUAL_TIME = DeliveryRules(answer_timeout=0.0)


class NotificationsAnalysis:
    def __init__(self, history: History | Iterable[Op], calls: list[dict[str, Any]], budget: int = 3,
                 breaker_window: int = 200, breaker_min_failures: int = 24,
                 channel_calls: list[dict[str, Any]] | None = None, answer_timeout: float = 2.0,
                 answer_latency: float = 0.0, breaker_cool_down: float = 10.0, backoff: float = 30.0,
                 suppression_list: bool = False, no_idempotency_key: bool = False,
                 cascade: str = "after-any", channels: tuple[str, ...] = ALL_CHANNELS) -> None:
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
                self.recipients[op.args["recipient_id"]] = on_channels(op.args, tuple(channels))
        self.channels = tuple(channels)
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
        # every call as the target heard it, in order: (heard, arrived, failed | answered | permanent)
        self._heard: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
        self._failed_heard: dict[str, list[float]] = defaultdict(list)  # when the target heard each failure
        self._failed_arrived: dict[str, dict[float, float]] = defaultdict(dict)  # ...and when its call arrived
        self._answered: dict[str, list[tuple[float, float]]] = defaultdict(list)  # (arrived, heard): not failures
        self._all_times: dict[str, list[float]] = defaultdict(list)  # every heard call, permanent ones too
        # every call, by channel, as (arrived, heard, kind, call) sorted by arrival (kind as in _heard)
        self.by_arrival: dict[str, list[tuple[float, float, str, dict[str, Any]]]] = defaultdict(list)
        self._counted_cum: dict[str, list[int]] = defaultdict(lambda: [0])  # failures, permanent ones too
        # A call the target called again on the same channel under the same key: the target never
        # heard its answer (it retries so only after an unknown outcome), whatever the record says.
        # Its own timeout (a stalled process, a slow connection) is a failure to its breaker.
        every = sorted(channel_calls if channel_calls is not None else self.calls, key=lambda c: c["at"])
        # (A cascade that comes back to a channel under one key in a later round, email 503, push, email, is
        # read so too, which moves that 503 a timeout later: a service that keys its calls so may see
        # preference_respected blame its breaker. Reading only an immediate call again as unheard made the
        # reference's URL properties FAIL preference_respected once in CI; kept as it was until understood.)
        seen_key: dict[tuple[str, str], dict[str, Any]] = {}
        retried: set[int] = set()
        self.retries: set[int] = set()  # id() of each call that retried an unknown outcome: no choice of channel
        for c in every:
            k = (c["channel"], c.get("idempotency_key") or "")
            if k[1] and k in seen_key and seen_key[k]["outcome"] != "permanent":
                retried.add(id(seen_key[k]))
                self.retries.add(id(c))
            seen_key[k] = c

        # What the target itself recorded of each call, where its notifications were read (the reference's
        # wire reports every attempt: channel, outcome, when it recorded it): a target that processes answers
        # behind a queue, or is short of CPU, hears them later than the provider gave them, and its breaker
        # with it; one that recorded "unknown" never heard the answer the provider gave.
        # (over a live target only: in virtual time every answer is heard at once, on the model's clock)
        recorded = self._recorded_attempts(every) if answer_timeout > 0 else {}

        def lost(c: dict[str, Any]) -> bool:  # to the target: no answer heard
            own = recorded.get(id(c))
            return self.unheard(c) or id(c) in retried or (own is not None and own[0] == "unknown")

        def heard_by_target(c: dict[str, Any]) -> float:
            at = c["at"] + answer_timeout if id(c) in retried and not self.unheard(c) else heard(c)
            own = recorded.get(id(c))
            return max(at, own[1]) if own is not None else at

        for c in sorted(every, key=heard_by_target):
            ch, h = c["channel"], heard_by_target(c)
            failed = c["outcome"] in ("transient", "ack_lost") or lost(c)
            if failed:
                self._failed_heard[ch].append(h)
                self._failed_arrived[ch][h] = c["at"]
            else:
                self._answered[ch].append((c["at"], h))
            # what a breaker that (wrongly) counted permanent failures would hold: every heard call
            self._all_times[ch].append(h)
            self._counted_cum[ch].append(self._counted_cum[ch][-1] + (failed or c["outcome"] == "permanent"))
            kind = "permanent" if c["outcome"] == "permanent" and not lost(c) else "failed" if failed else "answered"
            self.by_arrival[ch].append((c["at"], h, kind, c))
            if kind == "permanent":
                self._permanent_seen[ch].append(h)
                self._heard[ch].append((h, c["at"], "permanent"))
                continue  # the breaker's window holds calls that say something about the channel
            self._times[ch].append(h)
            self._heard[ch].append((h, c["at"], "failed" if failed else "answered"))
            self._last_failed[ch].append(failed)
            # a lost or late answer is a timeout to the caller: a fair reason for a breaker to count it
            self._transient_cum[ch].append(self._transient_cum[ch][-1] + failed)
        # under a suppression list: when the target heard each (channel, address) answer permanent first
        self.suppression_list = suppression_list
        self.no_idempotency_key = no_idempotency_key
        self.cascade = cascade
        self._dead_from: dict[tuple[str, str], float] = {}
        for c in every:
            if c["outcome"] == "permanent" and not lost(c) and c.get("to"):
                k, h = (c["channel"], str(c["to"])), heard_by_target(c)
                self._dead_from[k] = min(self._dead_from.get(k, h), h)
        for story in self.by_arrival.values():
            story.sort(key=lambda s: s[0])
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


    def suppressed(self, recipient_id: str, channel: str, at: float) -> bool:
        """Under a stated suppression list: the recipient's address on ``channel`` was heard answered
        permanent before ``at`` (by any notification, any run), so the target rightly skips it."""
        return self.suppression_list and self.dead_since(recipient_id, channel, at) is not None

    def dead_since(self, recipient_id: str, channel: str, at: float) -> float | None:
        """When the target heard the recipient's address on ``channel`` answered permanent, if before ``at``
        (whatever the rules: a skip's likeliest cause, named when a breaker is blamed)."""
        r = self.recipients.get(recipient_id) or {}
        address = (r.get("addresses") or {}).get(ADDRESS_FIELD.get(channel, channel))
        dead = self._dead_from.get((channel, str(address))) if address is not None else None
        return dead if dead is not None and dead < at else None

    def skip_hint(self, recipient_id: str, channel: str, at: float) -> str:
        """What else explains a skip of ``channel`` than a breaker, for a violation's message ('' if nothing)."""
        dead = self.dead_since(recipient_id, channel, at)
        if dead is None or self.suppression_list:
            return ""
        return (f"; but {recipient_id!r}'s address on {channel} had been answered permanent {at - dead:.2f} s "
                f"before (a suppression list skips it: if your service keeps one, state --suppression-list)")

    def preferred_at(self, recipient_id: str, at: float) -> str | None:
        """The channel a notification's first call should go to at ``at``: the recipient's first choice whose
        address is not suppressed (None: every one is)."""
        r = self.recipients.get(recipient_id) or {}
        return next((ch for ch in r.get("channels") or () if not self.suppressed(recipient_id, ch, at)), None)

    def _recorded_attempts(self, calls: list[dict[str, Any]]) -> dict[int, tuple[str, float]]:
        """id(provider call) -> (outcome, when) as the target recorded that attempt, for the calls whose
        notification the run read back with its attempts (the n-th attempt on a channel is the n-th call on
        it for that notification); pending attempts and reads without attempts say nothing."""
        attempts: dict[tuple[str, str, str], list[tuple[str, float]]] = {}
        for op in self.ops:
            v = op.value if op.f == "get_notification" and op.type == OK else None
            if not isinstance(v, dict) or not isinstance(v.get("attempts"), list):
                continue
            mine: dict[tuple[str, str, str], list[tuple[str, float]]] = {}
            for a in v["attempts"]:
                if isinstance(a, dict) and isinstance(a.get("at"), (int, float)) and a.get("outcome") != "pending":
                    k = (str(v.get("event_id")), str(v.get("recipient_id")), str(a.get("channel")))
                    mine.setdefault(k, []).append((str(a.get("outcome")), float(a["at"])))
            for k, seen in mine.items():  # a later read knows as much or more
                if len(seen) >= len(attempts.get(k, [])):
                    attempts[k] = seen
        out: dict[int, tuple[str, float]] = {}
        if not attempts:
            return out
        nth: dict[tuple[str, str, str], int] = {}
        for c in calls:
            k = (str(c.get("event_id")), str(c.get("recipient_id")), str(c.get("channel")))
            i = nth.get(k, 0)
            nth[k] = i + 1
            if k in attempts and i < len(attempts[k]):
                out[id(c)] = attempts[k][i]
        return out

    def unheard(self, c: dict[str, Any]) -> bool:
        """The target never heard this call's answer: it was lost, or slower than the target's
        ``answer_timeout`` (the provider's record says how long it took). To the target the
        outcome is unknown, and retrying the same channel with the same key is the rule."""
        latency = float(c.get("latency") or 0.0)
        return c["outcome"] == "ack_lost" or (latency > 0 and latency >= self.answer_timeout)

    def answer_stall(self, since: float, until: float) -> float:
        """The longest the target took to answer one of the harness's operations in flight between
        ``since`` and ``until`` (0 when none was): how far behind it may have been just then (short of
        CPU: a busy machine, a flood on its loop), which a check of its timing forgives, never blames."""
        return max((op.complete_time - op.invoke_time for op in self.ops
                    if op.f in TARGET_OPERATIONS and op.done and op.invoke_time < until
                    and op.complete_time > since), default=0.0)

    def first_calls(self) -> tuple[list[tuple[Op, dict[str, Any], tuple[str, str]]],
                                   list[tuple[Op, dict[str, Any], tuple[str, str]]]]:
        """(urgent, reminder): every accepted notification that was called, with its first call and
        key, split by priority. Both priority checks read it, so both classify alike."""
        urgent: list[tuple[Op, dict[str, Any], tuple[str, str]]] = []
        reminder: list[tuple[Op, dict[str, Any], tuple[str, str]]] = []
        for key, op in self.accepted.items():
            cs = self.calls_by_key.get(key)
            if cs:
                (urgent if op.args.get("priority") == "urgent" else reminder).append((op, cs[0], key))
        return urgent, reminder


TARGET_OPERATIONS = ("put_recipient", "notify", "get_notification")  # what the harness asks the target itself

# every notifications check registers here (peakproof.checks.CheckRegistry); checks.py reads the list
NOTIFICATIONS: CheckRegistry[NotificationsAnalysis] = CheckRegistry("notifications")
