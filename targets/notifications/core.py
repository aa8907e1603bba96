"""Case N's chosen design: accept, queue by priority, cascade across channels, deliver once.

Sans-I/O: the core never calls a provider itself. ``due_calls(now)`` hands out the
provider calls that are due (urgent before reminder), each with the idempotency key
(event id, recipient) that excludes the channel; the adapter makes the call and reports
``complete(call, outcome, now)`` with outcome ok | transient | permanent | unknown. Time
(backoff between rounds, breaker cool-down) moves only when the core is told the time.

* Budget: ``budget`` calls per notification (BI8: 3), one per round, rounds ``backoff``
  seconds apart (BI9: 30 s).
* ``cascade`` (chosen): preferred channel, then the others in push, SMS, e-mail order;
  never the same channel again after a permanent failure; channels whose breaker is open
  are skipped. ``single``: every call to the preferred channel. ``parallel``: all three
  channels at once (the rejected alternative: duplicates).
* Unknown outcome (timeout, ack lost): the next call goes to the *same* channel with the
  same key, so the provider can deduplicate; another channel could deliver twice.
* Circuit breaker per channel counting only transient failures (a permanent failure is
  about the address, not the channel).
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
import random
import threading
import uuid
from dataclasses import dataclass, field, replace
from typing import Callable, Literal, Protocol

from .._errors import ContractError, refusal
from .formatting import FORMATTERS

CHANNELS = ("push", "sms", "email")
ADDRESS_FIELD = {"push": "push_token", "sms": "phone", "email": "email"}
POLICIES = ("cascade", "single", "parallel")
PRIORITIES = ("urgent", "reminder")
Outcome = Literal["ok", "transient", "permanent", "unknown"]
STATUS_ORDER = {"queued": 0, "sending": 1, "delivered": 2, "failed": 2}


class NotificationError(ContractError):
    status, code = 400, "invalid_request"


InvalidRequest = refusal(NotificationError, 400, "invalid_request")
UnknownRecipient = refusal(NotificationError, 404, "unknown_recipient")
UnknownNotification = refusal(NotificationError, 404, "unknown_notification")


@dataclass(frozen=True)
class Recipient:
    recipient_id: str
    channels: tuple[str, ...]
    addresses: dict[str, str]


@dataclass(frozen=True)
class Attempt:
    channel: str
    outcome: str  # ok | transient | permanent | unknown | pending
    at: float
    call_no: int


@dataclass
class Notification:
    notification_id: str
    event_id: str
    recipient_id: str
    priority: str
    title: str
    body: str
    accepted_at: float
    status: str = "queued"
    attempts: list[Attempt] = field(default_factory=list)
    delivered_at: float | None = None
    channel: str | None = None
    next_at: float = 0.0

    @property
    def key(self) -> str:
        """The idempotency key: (event id, recipient); the channel is deliberately not in it."""
        return f"{self.event_id}/{self.recipient_id}"


@dataclass(frozen=True)
class Call:
    notification_id: str
    channel: str
    address: str
    message: dict
    idempotency_key: str
    call_no: int
    event_id: str
    recipient_id: str
    priority: str


class Store(Protocol):
    def save_recipient(self, r: Recipient) -> None: ...
    def load_recipient(self, recipient_id: str) -> Recipient | None: ...
    def save(self, n: Notification) -> None: ...
    def load(self, notification_id: str) -> Notification | None: ...
    def find(self, event_id: str, recipient_id: str) -> Notification | None: ...
    def insert_if_absent(self, n: Notification) -> Notification: ...
    def open_notifications(self) -> list[Notification]: ...


@dataclass
class BreakerConfig:
    """Opens when a channel's last ``window`` calls hold ``min_failures`` transient failures.

    200 / 24 (12%): at push's 5% transient rate a window reaches 24 about 3 times in a
    million, so a healthy channel does not trip it; with push's 6% permanent floor
    counted as well (11% in all) it would trip in a large share of windows, the seed's
    reason to count transient failures only. A channel that is down trips it after 24
    calls.
    """

    window: int = 200
    min_failures: int = 24
    cool_down: float = 10.0  # s open before a probe


class Breaker:
    """Closed -> open (too many transient failures) -> half-open (one probe) -> closed/open."""

    def __init__(self, cfg: BreakerConfig) -> None:
        self.cfg = cfg
        self.recent: list[bool] = []  # True = transient failure
        self.state = "closed"
        self.open_until = 0.0
        self.probe_out = False
        self.opened = 0
        self.transitions: list[tuple[float, str]] = []

    def allows(self, now: float) -> bool:
        """Would a call go through now? (Reserves nothing: :meth:`admit` does, once the call is made.)"""
        if self.state == "open" and now >= self.open_until:
            self._set("half-open", now)
            self.probe_out = False
        return self.state == "closed" or (self.state == "half-open" and not self.probe_out)

    def admit(self, now: float) -> None:
        """A call is being made: in half-open state it is the one probe. Reserving the probe only
        here matters: a probe reserved for a call that a full bulkhead then held back would never
        come back, and the channel would be skipped for good."""
        if self.state == "half-open":
            self.probe_out = True

    def record(self, outcome: str, now: float) -> None:
        if outcome == "permanent" and self.state != "half-open":
            return  # about the recipient's address, not the channel's health
        # (a probe answered "permanent": the channel is up and answering, only that address is
        # bad; ignoring it would leave the probe out for good and the channel skipped for good)
        failed = outcome in ("transient", "unknown")
        if self.state == "half-open":
            self.probe_out = False
            if failed:
                self._open(now)
            else:
                self._set("closed", now)
                self.recent.clear()
            return
        self.recent.append(failed)
        del self.recent[:-self.cfg.window]
        if sum(self.recent) >= self.cfg.min_failures:
            self._open(now)

    def _open(self, now: float) -> None:
        self._set("open", now)
        self.open_until = now + self.cfg.cool_down
        self.opened += 1
        self.recent.clear()

    def _set(self, state: str, now: float) -> None:
        self.state = state
        self.transitions.append((now, state))


class NotificationsCore:
    def __init__(self, store: Store, clock: Callable[[], float], *, policy: str = "cascade", budget: int = 3,
                 backoff: float = 30.0, breaker: BreakerConfig | None = None,
                 id_factory: Callable[[], str] | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}; got {policy!r}")
        self.store, self.clock, self.policy = store, clock, policy
        self.budget, self.backoff = budget, backoff
        self.breakers = {c: Breaker(breaker or BreakerConfig()) for c in CHANNELS}
        self._new_id = id_factory or _fast_uuid4
        self._mutex = threading.RLock()  # the queue and breakers; each notification is also guarded here
        # one heap per priority class, ordered by due time: urgent is always served first
        self._queues: dict[str, list[tuple[float, int, str]]] = {p: [] for p in PRIORITIES}
        # Rounds a full bulkhead held back, per priority and channels, in the order they were held:
        # served first on later turns, and never scanned again while their bulkhead stays full (a
        # backlog pushed back into the heap was re-planned on every turn, its cost growing with it).
        self._parked: dict[str, dict[tuple[str, ...], deque[tuple[float, int, str]]]] = {p: {} for p in PRIORITIES}
        self._seq = itertools.count()
        self.in_flight: dict[str, int] = {}  # notification id -> calls outstanding
        for n in store.open_notifications():  # a restart: everything accepted and not done is due again
            if n.status == "sending":  # it stays "sending": a status never moves back
                n.attempts = [a if a.outcome != "pending" else replace(a, outcome="unknown") for a in n.attempts]
                store.save(n)
            self._enqueue(n, n.next_at)

    # -- recipients and acceptance -----------------------------------------------------------

    def put_recipient(self, recipient_id: str, channels: list[str], addresses: dict[str, str]) -> Recipient:
        _require_id("recipient_id", recipient_id)
        # Members are checked before the set is built: an unhashable member ({}) is bad input, not a 500.
        if not isinstance(channels, list) or not channels or any(
                type(c) is not str or c not in CHANNELS for c in channels) or len(set(channels)) != len(channels):
            raise InvalidRequest(f"channels must be a non-empty list of distinct channels from "
                                 f"{', '.join(CHANNELS)}, in preference order; got {channels!r}")
        for field, a in addresses.items():  # an address given is a real one, listed channel or not
            if not isinstance(a, str) or not 0 < len(a) <= 320:
                raise InvalidRequest(f"{field} must be a string of 1 to 320 characters; got {a!r:.60}")
        clean = {}
        for c in channels:
            a = addresses.get(ADDRESS_FIELD[c])
            if not isinstance(a, str) or not 0 < len(a) <= 320:
                raise InvalidRequest(f"channel {c} needs {ADDRESS_FIELD[c]} (a string of 1 to 320 characters); "
                                     f"got {a!r}")
            clean[c] = a
        r = Recipient(recipient_id, tuple(channels), clean)
        self.store.save_recipient(r)
        return r

    def accept(self, event_id: str, recipient_id: str, priority: str, title: str, body: str) -> tuple[Notification, bool]:
        _require_id("event_id", event_id)
        _require_id("recipient_id", recipient_id)
        if priority not in PRIORITIES:
            raise InvalidRequest(f"priority must be 'urgent' or 'reminder'; got {priority!r}")
        for name, v, limit in (("title", title, 1_000), ("body", body, 20_000)):
            if not isinstance(v, str) or len(v) > limit:
                raise InvalidRequest(f"{name} must be a string of at most {limit} characters; got {type(v).__name__}")
        if self.store.load_recipient(recipient_id) is None:
            raise UnknownRecipient(f"no recipient {recipient_id!r}; create it with PUT /recipients/{{id}}")
        now = self.clock()
        fresh = Notification(self._new_id(), event_id, recipient_id, priority, title, body, now, next_at=now)
        with self._mutex:
            n = self.store.insert_if_absent(fresh)  # atomic on (event id, recipient): a replay finds the first
            if n is fresh:
                self._enqueue(n, now)
        return n, n is fresh

    def get(self, notification_id: str) -> Notification:
        n = self.store.load(notification_id)
        if n is None:
            raise UnknownNotification(f"no notification {notification_id!r}")
        return n

    # -- the queue ---------------------------------------------------------------------------

    def _enqueue(self, n: Notification, due: float) -> None:
        heapq.heappush(self._queues[n.priority], (due, next(self._seq), n.notification_id))

    def next_due(self) -> float | None:
        with self._mutex:
            heads = [q[0][0] for q in self._queues.values() if q]
            heads += [w[0][0] for parked in self._parked.values() for w in parked.values() if w]
            return min(heads, default=None)

    def backlog(self) -> dict[str, int]:
        return {p: len(q) + sum(map(len, self._parked[p].values())) for p, q in self._queues.items()}

    def due_calls(self, now: float | None = None, limit: int = 1_000,
                  room: Callable[[list[str]], bool] | None = None,
                  release: Callable[[list[str]], None] | None = None) -> list[Call]:
        """Provider calls due now, urgent first. ``room(channels)`` lets the bulkheads refuse more
        work (all of a round's channels or none); ``release(channels)`` gives back what ``room``
        granted to a round that then failed to be built. A round that fails stays queued: the
        calls already built are returned, and the failure is raised on a turn that built none."""
        now = self.clock() if now is None else now
        calls: list[Call] = []
        failure: Exception | None = None
        with self._mutex:
            for priority in PRIORITIES:
                queue, parked = self._queues[priority], self._parked[priority]
                for chans in list(parked):  # first what full bulkheads held back, in the order held
                    waiting = parked[chans]
                    while waiting and len(calls) < limit and failure is None:
                        item = waiting.popleft()
                        held, failure = self._round(item, now, room, release, calls)
                        if failure is not None:
                            waiting.appendleft(item)
                        elif held is not None:
                            if held == chans:  # still full: the rest of this line waits too
                                waiting.appendleft(item)
                                break
                            parked.setdefault(held, deque()).append(item)
                    if not waiting:
                        del parked[chans]
                while queue and queue[0][0] <= now and len(calls) < limit and failure is None:
                    item = heapq.heappop(queue)
                    held, failure = self._round(item, now, room, release, calls)
                    if failure is not None:
                        heapq.heappush(queue, item)
                    elif held is not None:
                        parked.setdefault(held, deque()).append(item)
        if failure is not None and not calls:
            raise failure
        return calls

    def _round(self, item: tuple[float, int, str], now: float, room: Callable[[list[str]], bool] | None,
               release: Callable[[list[str]], None] | None,
               calls: list[Call]) -> tuple[tuple[str, ...] | None, Exception | None]:
        """Build the next round of one due notification into ``calls``. Returns the channels whose
        full bulkhead held it back (or None), and the exception that kept it queued (or None)."""
        granted: list[str] = []
        try:
            n = self.store.load(item[2])
            if n is None or n.status in ("delivered", "failed"):
                return None, None
            picked = self._plan(n, now)
            if picked is None:
                return None, None
            if room is not None and not room(picked):
                return tuple(picked), None  # a bulkhead of this round is full; the others go on
            granted = picked
            built = [self._call(n, channel, now) for channel in picked]
            n.status = "sending"
            self.store.save(n)
        except Exception as e:  # noqa: BLE001 - kept queued, its bulkhead room given back
            if granted and release is not None:
                release(granted)
            return None, e
        for channel in picked:
            self.breakers[channel].admit(now)
        calls.extend(built)
        self.in_flight[n.notification_id] = len(picked)
        return None, None

    def _plan(self, n: Notification, now: float) -> list[str] | None:
        """The channel(s) of the next round, or None when the notification is finished here."""
        r = self.store.load_recipient(n.recipient_id)
        used = len(n.attempts)
        if r is None or used >= self.budget:
            self._finish(n, now)
            return None
        if self.policy == "parallel":
            chans = [c for c in CHANNELS if c in r.addresses][: self.budget - used]
            return chans or None
        last = n.attempts[-1] if n.attempts else None
        if last is not None and last.outcome == "unknown":
            return [last.channel]  # same channel, same key: the provider can deduplicate
        if self.policy == "single":
            return [r.channels[0]]
        order = [*r.channels, *(c for c in CHANNELS if c in r.addresses and c not in r.channels)]
        failed_for_good = {a.channel for a in n.attempts if a.outcome == "permanent"}
        tried = [a.channel for a in n.attempts]
        # the next channel in the cascade after the last one tried, skipping dead addresses
        start = order.index(tried[-1]) + 1 if tried and tried[-1] in order else 0
        candidates = [c for c in order[start:] + order[:start] if c not in failed_for_good]
        if not candidates:
            self._finish(n, now)
            return None
        for c in candidates:  # the first channel whose breaker lets a call through (a probe counts)
            if self.breakers[c].allows(now):
                return [c]
        return [candidates[0]]  # every breaker open: a notification still gets its round

    def _call(self, n: Notification, channel: str, now: float) -> Call:
        r = self.store.load_recipient(n.recipient_id)
        assert r is not None
        call_no = len(n.attempts) + 1
        n.attempts.append(Attempt(channel, "pending", now, call_no))
        return Call(n.notification_id, channel, r.addresses[channel], FORMATTERS[channel](n.title, n.body),
                    n.key, call_no, n.event_id, n.recipient_id, n.priority)

    def complete(self, call: Call, outcome: Outcome, now: float | None = None) -> Notification:
        """Record a provider call's outcome and decide what comes next."""
        now = self.clock() if now is None else now
        if outcome not in ("ok", "transient", "permanent", "unknown"):
            raise ValueError(f"outcome must be ok, transient, permanent or unknown; got {outcome!r}")
        with self._mutex:
            self.breakers[call.channel].record(outcome, now)
            n = self.store.load(call.notification_id)
            assert n is not None
            n.attempts = [replace(a, outcome=outcome, at=now) if a.call_no == call.call_no and a.outcome == "pending"
                          else a for a in n.attempts]
            if outcome == "ok" and n.status != "delivered":
                n.status, n.delivered_at, n.channel = "delivered", now, call.channel
            left = self.in_flight.get(n.notification_id, 1) - 1
            self.in_flight[n.notification_id] = left
            if left <= 0:
                self.in_flight.pop(n.notification_id, None)
                if n.status != "delivered":
                    if len(n.attempts) >= self.budget or (
                            self.policy == "parallel" and len(n.attempts) >= len(CHANNELS)):
                        # Budget spent. If the last answer never came, the message may well have
                        # arrived: saying "failed" could be a lie, so it stays "sending" (unknown).
                        n.status = "sending" if n.attempts[-1].outcome == "unknown" else "failed"
                    else:
                        # between rounds it is still being sent: status only ever moves forward
                        n.status = "sending"
                        n.next_at = now + self.backoff
                        self._enqueue(n, n.next_at)
            self.store.save(n)
            return n

    def _finish(self, n: Notification, now: float) -> None:
        if n.status not in ("delivered", "failed"):
            n.status = "sending" if n.attempts and n.attempts[-1].outcome == "unknown" else "failed"
            self.store.save(n)


_IDS = random.Random(uuid.uuid4().int)  # seeded once from the OS; os.urandom per id cost ~125 us here


def _fast_uuid4() -> str:
    """A random (version 4) UUID's hex, without a system call per id."""
    return uuid.UUID(int=_IDS.getrandbits(128), version=4).hex


def _require_id(name: str, value: object) -> None:
    if type(value) is not str or not 0 < len(value) <= 200:
        raise InvalidRequest(f"{name} must be a string of 1 to 200 characters; got {value!r:.60}")
