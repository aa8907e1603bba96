"""Case N, notifications: the driver protocol, the in-process driver (virtual time), the workload.

The checks live in :mod:`peakproof.cases.notifications_checks` and are re-exported here.
The in-process driver runs the reference core against the provider simulator: ``advance``
moves virtual time and pumps every provider call that falls due (rounds 30 s apart, the
breakers' cool-down), in time order.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Protocol

from ..clock import VirtualClock
from ..history import FAIL, INFO, OK, History, Op
from ..http import json_object
from ..providers import ProviderConfig, ProviderSim
from .notifications_checks import (NOTIFICATION_CHECKS, NotificationsAnalysis, check_notifications,
                                   delivery_ratio_at_least, urgent_mean_latency)

__all__ = ["NotificationsDriver", "InProcessNotifications", "HttpNotifications", "NOTIFICATION_CHECKS", "NotificationsAnalysis",
           "check_notifications", "delivery_ratio_at_least", "urgent_mean_latency", "peak_minute"]


class NotificationsDriver(Protocol):
    history: History

    def put_recipient(self, recipient_id: str, channels: list[str], addresses: dict[str, str], *,
                      process: Any = 0) -> Op: ...
    def notify(self, event_id: str, recipient_id: str, priority: str, title: str, body: str, *,
               process: Any = 0, intended_time: float | None = None) -> Op: ...
    def get_notification(self, notification_id: str, *, process: Any = 0) -> Op: ...
    def provider_calls(self) -> list[dict[str, Any]]: ...
    def advance(self, seconds: float) -> None: ...


class InProcessNotifications:
    """The reference core and the provider simulator in one virtual clock."""

    def __init__(self, *, policy: str = "cascade", providers: ProviderConfig | None = None,
                 call_latency: float = 0.2, history: History | None = None, core: Any = None,
                 outcome: Callable[[Any], str] | None = None, capacity: dict[str, float] | None = None,
                 **core_options: Any) -> None:
        from targets.notifications import InMemoryStore, NotificationError, NotificationsCore

        self.clock = VirtualClock()
        self.core = core or NotificationsCore(InMemoryStore(), self.clock, policy=policy, **core_options)
        self.sim = ProviderSim(providers, self.clock)
        self.call_latency = call_latency
        self.outcome = outcome  # a test may decide provider outcomes itself (Hypothesis does)
        self.history = history if history is not None else History(self.clock)
        self._error = NotificationError
        # Bulkheads: provider calls each channel may start per virtual second (None: unbounded).
        self.capacity = capacity
        from collections import deque

        self._lanes = {c: {"urgent": deque(), "reminder": deque()} for c in ("push", "sms", "email")}
        self._free = {c: 0.0 for c in ("push", "sms", "email")}

    def _do(self, f: str, args: dict[str, Any], fn: Callable[[], Any], process: Any,
            intended_time: float | None = None) -> Op:
        op = self.history.invoke(process, f, args, intended_time)
        try:
            value = fn()
        except self._error as e:
            return self.history.complete(op, FAIL if e.status < 500 else INFO, e.code, e.message)
        return self.history.complete(op, OK, value)

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
            return {"notification_id": n.notification_id, "status": n.status, "created": created}

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


class HttpNotifications:
    """Drives any server that implements the notifications contract; reads the providers' record.

    ``provider_url`` serves ``GET /calls`` (the simulator does); against real providers,
    pass ``calls`` yourself to the checks.
    """

    def __init__(self, base_url: str, provider_url: str | None = None, *, session: Any = None,
                 timeout: float = 5.0, history: History | None = None, transport: Any = None) -> None:
        import time as _time

        from ..http import RequestsTransport

        self.base = base_url.rstrip("/")
        self.provider_url = provider_url.rstrip("/") if provider_url else None
        self.transport = transport or RequestsTransport(session, timeout)
        self.history = history if history is not None else History(_time.time)

    def put_recipient(self, recipient_id: str, channels: list[str], addresses: dict[str, str], *,
                      process: Any = 0) -> Op:
        from ..http import call

        args = {"recipient_id": recipient_id, "channels": list(channels), "addresses": dict(addresses)}
        return call(self.history, self.transport, "put_recipient", args, "PUT", f"{self.base}/recipients/{recipient_id}",
                    {"channels": list(channels), **addresses}, process, json_object, name="PUT recipient")

    def notify(self, event_id: str, recipient_id: str, priority: str, title: str, body: str, *,
               process: Any = 0, intended_time: float | None = None) -> Op:
        from ..http import call

        args = {"event_id": event_id, "recipient_id": recipient_id, "priority": priority, "title": title, "body": body}
        return call(self.history, self.transport, "notify", args, "POST", f"{self.base}/notifications", args, process,
                    _notification, intended_time=intended_time, name="POST notification")

    def get_notification(self, notification_id: str, *, process: Any = 0, intended_time: float | None = None) -> Op:
        from ..http import call

        return call(self.history, self.transport, "get_notification", {"notification_id": notification_id}, "GET",
                    f"{self.base}/notifications/{notification_id}", None, process, _notification,
                    intended_time=intended_time, name="GET notification")

    def provider_calls(self) -> list[dict[str, Any]]:
        import requests

        if not self.provider_url:
            return []
        return requests.get(f"{self.provider_url}/calls", timeout=30).json()["calls"]

    def advance(self, seconds: float) -> None:
        import time as _time

        _time.sleep(seconds)


def _notification(doc: Any) -> dict[str, Any]:
    d = json_object(doc)
    if not isinstance(d.get("notification_id"), str) or d.get("status") not in ("queued", "sending", "delivered",
                                                                                 "failed"):
        raise ValueError(f"a notification needs notification_id and a status of the contract; got {d!r:.200}")
    return d


def notification_json(n: Any) -> dict[str, Any]:
    return {"notification_id": n.notification_id, "event_id": n.event_id, "recipient_id": n.recipient_id,
            "priority": n.priority, "status": n.status, "channel": n.channel, "accepted_at": n.accepted_at,
            "delivered_at": n.delivered_at,
            "attempts": [{"channel": a.channel, "outcome": a.outcome, "at": a.at} for a in n.attempts]}


def peak_minute(n: int, seed: int = 20260730, urgent_share: float = 0.3,
                shares: tuple[float, float, float] = (0.55, 0.25, 0.20)) -> list[tuple[str, list[str], dict[str, str], str]]:
    """``n`` recipients with a preferred channel drawn by the seed's shares (BI4), each with all
    three addresses (the cascade needs somewhere to go), and a priority.

    Returns (recipient id, channel preference order, addresses, priority). Faker provides
    names for the addresses, Turkish among them.
    """
    from faker import Faker

    fake = Faker(["tr_TR", "en_US"])
    fake.seed_instance(seed)
    rnd = random.Random(seed)
    names = [fake.user_name() for _ in range(min(n, 2_000))]
    out = []
    order = ("push", "sms", "email")
    for i in range(n):
        u, pref = rnd.random(), "email"
        for ch, share in zip(order, shares):
            if u < share:
                pref = ch
                break
            u -= share
        channels = [pref] + [c for c in order if c != pref]
        name = f"{names[i % len(names)]}{i}"
        addresses = {"push_token": f"tok-{name}", "phone": f"+90555{i:07d}", "email": f"{name}@example.com"}
        out.append((f"r{i}", channels, addresses, "urgent" if rnd.random() < urgent_share else "reminder"))
    return out
