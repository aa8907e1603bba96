"""A peakproof driver for Beacon, the notifications stack (Flask + Celery + Redis + PostgreSQL).

    peakproof driver check notifications --driver examples/stacks/notifications/driver.py:Beacon \
        --target-url http://127.0.0.1:P/api/v2 --provider-url http://127.0.0.1:Q

Beacon delivers through the provider simulator, so the harness reads the providers' record there
itself (no provider_calls); it has no breaker endpoint (no stats). Notification ids are Beacon's own
bigserial integers, carried as they come.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from peakproof.driver import ErrorMap, HttpDriver, translate
from peakproof.history import Op
from peakproof.timefmt import parse_time

CHANNELS = ("push", "sms", "email")
CONTACT = {"push_token": "push", "phone": "sms", "email": "email"}  # the contract's address names -> Beacon's channels
STATES = {"QUEUED": "queued", "SENDING": "sending", "DELIVERED": "delivered", "FAILED": "failed"}
PRIORITY = {"urgent": "high", "reminder": "normal"}
PRIORITY_BACK = {v: k for k, v in PRIORITY.items()}
RESULTS = {"delivered": "ok", "retryable": "transient", "rejected": "permanent", "no_answer": "unknown"}


class Beacon(HttpDriver):
    errors = ErrorMap(field="error.code", message="error.message",
                      codes={"RECIPIENT_NOT_FOUND": "unknown_recipient", "NOTIFICATION_NOT_FOUND": "unknown_notification",
                             "VALIDATION_FAILED": "invalid_request"},
                      statuses={400: "invalid_request", 413: "invalid_request"})

    def notify(self, event_id: str, recipient_id: str, priority: str, title: str, body: str, *,
               process: Any = 0, intended_time: float | None = None) -> Op:
        args = {"event_id": event_id, "recipient_id": recipient_id, "priority": priority, "title": title, "body": body}
        doc = {"event": event_id, "recipient": recipient_id, "priority": PRIORITY.get(priority, priority),
               "title": title, "body": body}
        return self._call("notify", args, "POST", "/notifications", doc, accepted,
                          process=process, intended_time=intended_time)

    def get_notification(self, notification_id: Any, *, process: Any = 0, intended_time: float | None = None) -> Op:
        args = {"notification_id": notification_id}
        return self._call("get_notification", args, "GET", f"/notifications/{quote(str(notification_id), safe='')}",
                          None, notification, process=process, intended_time=intended_time)

    # capability 'setup'
    def put_recipient(self, recipient_id: str, channels: list[str], addresses: dict[str, str], *,
                      process: Any = 0) -> Op:
        args = {"recipient_id": recipient_id, "channels": channels, "addresses": addresses}
        contacts = {CONTACT[k]: v for k, v in (addresses or {}).items() if k in CONTACT and v}
        doc = {"preferences": list(channels), "contacts": contacts}
        return self._call("put_recipient", args, "PUT", f"/recipients/{quote(recipient_id, safe='')}", doc,
                          lambda d: d if isinstance(d, dict) else {}, process=process)


def _time(value: Any) -> float | None:
    return None if value is None else parse_time(value)


def _attempts(items: Any) -> list[dict[str, Any]]:
    if not isinstance(items, list):
        raise TypeError(f"attempts must be a list, not {type(items).__name__}")
    return [translate(a, {"channel": "channel", "outcome": ("result", RESULTS), "at": ("at", _time)}) for a in items]


def accepted(doc: Any) -> dict[str, Any]:
    return translate(doc, {"notification_id": "id", "status": ("state", STATES)}, at="notification")


def notification(doc: Any) -> dict[str, Any]:
    return translate(doc, {"notification_id": "id", "event_id": "event", "recipient_id": "recipient",
                           "priority": ("priority", PRIORITY_BACK), "status": ("state", STATES), "channel": "channel",
                           "accepted_at": ("accepted_at", _time), "delivered_at": ("delivered_at", _time),
                           "attempts": ("attempts", _attempts)}, at="notification")


class BeaconOwnDesign(Beacon):
    """Beacon deployed as a design of its own (``python -m examples.stacks.notifications --channels sms,email
    --one-channel --no-breaker``): SMS and e-mail only, one channel per notification, no circuit breaker. The
    driver carries what its team knows of it, as options would state it: peakproof then leaves out the checks
    that design makes meaningless and judges every other promise."""

    design = {"channels": "sms,email", "cascade": "none", "no_breaker": True}
