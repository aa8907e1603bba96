"""Case N, notifications: the driver protocol, the in-process and HTTP drivers.

The in-process driver runs the reference core against the provider simulator: ``advance``
moves virtual time and pumps every provider call that falls due (rounds 30 s apart, the
breakers' cool-down), in time order. The HTTP driver reads the providers' record through
its transport (a recorded side call).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Protocol, runtime_checkable

from peakproof.clock import VirtualClock
from peakproof.driver import HttpDriver, InProcessDriver
from peakproof.history import History, Op
from peakproof.http import json_object
from peakproof.providers import ProviderConfig, ProviderSim
from peakproof.timefmt import parse_time


@runtime_checkable
class NotificationsDriver(Protocol):
    """The operations of Case N: what a driver for your notification service must offer (docs/drivers.md).

    Subclass :class:`peakproof.driver.HttpDriver` and give each operation; each records one
    operation and returns it completed (ok / fail with a contract code such as
    ``unknown_recipient`` or ``invalid_request`` / info when unknown). ``notify``'s value has
    notification_id (str) and status; ``get_notification``'s has notification_id, event_id,
    recipient_id, priority (urgent / reminder), status (queued / sending / delivered /
    failed), channel, accepted_at and delivered_at (epoch seconds or None) and attempts
    (``[{"channel", "outcome": ok / transient / permanent / unknown, "at"}]``).

    Optional capabilities (``peakproof.cases.notifications.case.CAPABILITIES``):
    ``put_recipient`` (set-up), ``provider_calls`` (the providers' record; by default the
    harness reads the simulator at ``--provider-url`` itself) and ``breakers`` (counters).
    """

    history: History

    def now(self) -> float: ...
    def advance(self, seconds: float) -> None: ...
    def notify(self, event_id: str, recipient_id: str, priority: str, title: str, body: str, *,
               process: Any = 0, intended_time: float | None = None) -> Op: ...
    def get_notification(self, notification_id: str, *, process: Any = 0,
                         intended_time: float | None = None) -> Op: ...


class InProcessNotifications(InProcessDriver):
    """The reference core and the provider simulator in one virtual clock."""

    def __init__(self, *, policy: str = "cascade", providers: ProviderConfig | None = None,
                 call_latency: float = 0.2, history: History | None = None, core: Any = None,
                 outcome: Callable[[Any], str] | None = None, capacity: dict[str, float] | None = None,
                 clock: VirtualClock | None = None, core_factory: Callable[[VirtualClock], Any] | None = None,
                 **core_options: Any) -> None:
        from peakproof.targets.notifications import InMemoryStore, NotificationError, NotificationsCore

        super().__init__(clock, history)
        core = self._plugged(core, core_factory)
        self.core = core or NotificationsCore(InMemoryStore(), self.clock, policy=policy, **core_options)
        self.sim = ProviderSim(providers, self.clock)
        self.call_latency = call_latency
        self.outcome = outcome  # a test may decide provider outcomes itself (Hypothesis does)
        self.error = NotificationError
        # Bulkheads: provider calls each channel may start per virtual second (None: unbounded).
        self.capacity = capacity
        self._lanes = {c: {"urgent": deque(), "reminder": deque()} for c in ("push", "sms", "email")}
        self._free = {c: 0.0 for c in ("push", "sms", "email")}

    def put_recipient(self, recipient_id: str, channels: list[str], addresses: dict[str, str], *,
                      process: Any = 0) -> Op:
        return self._do("put_recipient", {"recipient_id": recipient_id, "channels": list(channels),
                                          "addresses": dict(addresses)},
                        lambda: {"recipient_id": self.core.put_recipient(recipient_id, list(channels),
                                                                         addresses).recipient_id}, process)

    def notify(self, event_id: str, recipient_id: str, priority: str, title: str, body: str, *,
               process: Any = 0, intended_time: float | None = None) -> Op:
        args = {"event_id": event_id, "recipient_id": recipient_id, "priority": priority, "title": title,
                "body": body}

        def accept() -> dict[str, Any]:
            n, created = self.core.accept(event_id, recipient_id, priority, title, body)
            return {"notification_id": n.notification_id, "event_id": n.event_id, "recipient_id": n.recipient_id,
                    "status": n.status, "created": created}

        op = self._do("notify", args, accept, process, intended_time)
        self.pump()  # calls due now go out now (the first round is immediate)
        return op

    def get_notification(self, notification_id: str, *, process: Any = 0) -> Op:
        return self._do("get_notification", {"notification_id": notification_id},
                        lambda: notification_json(self.core.get(notification_id)), process)

    def provider_calls(self) -> list[dict[str, Any]]:
        return self.sim.record()["calls"]

    def advance(self, seconds: float) -> None:
        """Move virtual time, pumping every round, cool-down and bulkhead slot that falls due."""
        target = self.clock.now + seconds
        while True:
            due = min(self.core.next_due() or float("inf"), self._lanes_next())
            if due > target:
                break
            self.clock.set(due)
            self.pump()
        self.clock.set(target)
        self.pump()

    def _lanes_next(self) -> float:
        busy = [self._free[c] for c, lanes in self._lanes.items() if lanes["urgent"] or lanes["reminder"]]
        return min(busy, default=float("inf"))

    def pump(self) -> None:
        """Hand due calls to the channels' bulkheads, then run every call whose slot has come.

        Without ``capacity`` a call runs at once. With it, each channel starts at most
        ``capacity[channel]`` calls per second, urgent ones first (a worker pool per
        channel with a priority queue in front).
        """
        while True:
            calls = self.core.due_calls(self.clock.now)
            for call in calls:
                self._lanes[call.channel][call.priority].append(call)
            ran = self._serve()
            if not calls and not ran:
                return

    def _serve(self) -> bool:
        ran = False
        for channel, lanes in self._lanes.items():
            while lanes["urgent"] or lanes["reminder"]:
                if self.capacity is not None and self._free[channel] > self.clock.now:
                    break
                call = (lanes["urgent"] or lanes["reminder"]).popleft()
                if self.capacity is not None:
                    self._free[channel] = max(self._free[channel], self.clock.now) + 1.0 / self.capacity[channel]
                self._run(call)
                ran = True
        return ran

    def _run(self, call: Any) -> None:
        forced = self.outcome(call) if self.outcome is not None else None
        outcome = self.sim.send(call.channel, call.address, call.idempotency_key, call.event_id,
                                call.recipient_id, call.message, forced=forced)
        self.core.complete(call, "unknown" if outcome == "ack_lost" else outcome, self.clock.now + self.call_latency)


class HttpNotifications(HttpDriver):
    """Drives any server that implements the notifications contract; reads the providers' record.

    ``provider_url`` serves ``GET /calls`` (the simulator does); against real providers,
    pass ``calls`` yourself to the checks.
    """

    def __init__(self, base_url: str, provider_url: str | None = None, **options: Any) -> None:
        super().__init__(base_url, **options)
        self.provider_url = provider_url.rstrip("/") if provider_url else None

    def put_recipient(self, recipient_id: str, channels: list[str], addresses: dict[str, str], *,
                      process: Any = 0) -> Op:
        args = {"recipient_id": recipient_id, "channels": list(channels), "addresses": dict(addresses)}
        return self._call("put_recipient", args, "PUT", f"/recipients/{recipient_id}",
                          {"channels": list(channels), **addresses}, json_object, process=process,
                          name="PUT recipient")

    def notify(self, event_id: str, recipient_id: str, priority: str, title: str, body: str, *,
               process: Any = 0, intended_time: float | None = None) -> Op:
        args = {"event_id": event_id, "recipient_id": recipient_id, "priority": priority, "title": title, "body": body}
        return self._call("notify", args, "POST", "/notifications", args, _notification, process=process,
                          intended_time=intended_time, name="POST notification")

    def get_notification(self, notification_id: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        return self._call("get_notification", {"notification_id": notification_id}, "GET",
                          f"/notifications/{notification_id}", None, _notification, process=process,
                          intended_time=intended_time, name="GET notification")

    def providers(self) -> "Providers":
        """The provider simulator at ``provider_url``, its side calls recorded in this driver's history
        over this driver's transport (one place says how the simulator is spoken to: :class:`Providers`)."""
        return Providers(self.provider_url or "", history=self.history, transport=self.transport, timeout=self.timeout,
                         slow_transport=self._slow)

    def provider_calls(self) -> list[dict[str, Any]]:
        """The providers' record (``GET {provider_url}/calls``); the history keeps its size only."""
        return self.providers().calls() if self.provider_url else []

    def provider_config(self, *, replace: bool = True, **config: Any) -> Op:
        """The simulator's failure model: ``PUT {provider_url}/config`` replaces all of it (fields not
        given take their defaults: what every run does first); ``replace=False`` POSTs a change."""
        return self.providers().config(replace=replace, **config)

    def breakers(self) -> dict[str, Any] | None:
        """The reference target's ``/_breakers`` (None from a target without it)."""
        op, doc = self.side_call("breakers", "GET", f"{self.base}/_breakers")
        return doc


class Providers(HttpDriver):
    """The provider simulator the target delivers through (ours, not the target's API): its failure
    model and its record, as side calls recorded in the run's history. Whatever the driver."""

    def config(self, *, replace: bool = True, **config: Any) -> Op:
        """``PUT /config`` replaces the whole model (what every run does first); ``replace=False`` POSTs a change."""
        return self.side_call("provider_config", "PUT" if replace else "POST", f"{self.base}/config", config,
                              args=config)[0]

    def calls(self) -> list[dict[str, Any]]:
        """``GET /calls``: every call the target made; the history keeps its size only."""
        op, doc = self.side_call("provider_calls", "GET", f"{self.base}/calls", parse=_calls,
                                 keep=lambda d: {"calls": len(d["calls"])}, slow=True)
        if doc is None:
            from peakproof.errors import TargetError

            raise TargetError(f"the providers' record at {self.base}/calls could not be read: "
                              f"{op.value} {op.error or ''}".strip())
        return doc["calls"]


def provider_record(driver: Any, provider_url: str | None, history: History | None = None) -> list[dict[str, Any]]:
    """The providers' record: the driver's own ``provider_calls`` (a user's, for providers of
    their own), else the simulator's at ``provider_url``. Raises CapabilityMissing when neither."""
    own = getattr(driver, "provider_calls", None)
    if callable(own) and not isinstance(driver, HttpNotifications):
        return own()
    if provider_url:
        return Providers(provider_url, history=history if history is not None else driver.history).calls()
    from peakproof.capabilities import CapabilityMissing
    from .case import CAPABILITIES

    raise CapabilityMissing(next(c for c in CAPABILITIES if c.name == "providers_record"),
                            "no --provider-url, and the driver has no provider_calls")


def _calls(doc: Any) -> dict[str, Any]:
    d = json_object(doc)
    if not isinstance(d.get("calls"), list):
        raise TypeError("the providers' record must be {'calls': [...]}")
    return d


def _notification(doc: Any) -> dict[str, Any]:
    d = json_object(doc)
    if not isinstance(d.get("notification_id"), str) or d.get("status") not in ("queued", "sending", "delivered",
                                                                                 "failed"):
        raise ValueError(f"a notification needs notification_id and a status of the contract; got {d!r:.200}")
    for k in ("accepted_at", "delivered_at"):
        if d.get(k) is not None:
            d[k] = parse_time(d[k], k)
    for attempt in d.get("attempts") or ():
        if isinstance(attempt, dict) and attempt.get("at") is not None:
            attempt["at"] = parse_time(attempt["at"], "attempts[].at")
    return d


def notification_json(n: Any) -> dict[str, Any]:
    return {"notification_id": n.notification_id, "event_id": n.event_id, "recipient_id": n.recipient_id,
            "priority": n.priority, "status": n.status, "channel": n.channel, "accepted_at": n.accepted_at,
            "delivered_at": n.delivered_at,
            "attempts": [{"channel": a.channel, "outcome": a.outcome, "at": a.at} for a in n.attempts]}
