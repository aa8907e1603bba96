"""A peakproof driver for Courier, our notification service (examples/notifications/service.py).

Check it: peakproof driver check notifications --driver examples/notifications/driver.py:Courier \
              --target-url URL --provider-url http://127.0.0.1:P
Courier delivers through peakproof's provider simulator (--providers), so the harness reads the
providers' record there itself: this driver has no provider_calls. Courier has no breaker counters
endpoint either: no breakers (stats).

Courier's API:
    POST /v1/users/{id}/contact  {"prefs": [...], "push_token", "phone", "email"}
    POST /v1/messages            {"dedupe_key", "to", "urgency": "high"|"low", "subject", "text"}
    GET  /v1/messages/{id}       {"message": {"id", "dedupe_key", "to", "urgency", "state", "via",
                                              "created", "sent", "tries": [{"via", "result", "time"}]}}
Errors are {"detail": "<free text>"}: 404 "unknown user" / "unknown message" / "no such route", 422 invalid.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from peakproof.driver import ErrorMap, HttpDriver, translate
from peakproof.history import Op
from peakproof.timefmt import parse_time

CHANNELS = ("push", "sms", "email")
ADDRESS = {"push": "push_token", "sms": "phone", "email": "email"}  # the contract's names are Courier's

STATES = {"PENDING": "queued", "IN_FLIGHT": "sending", "SENT": "delivered", "GAVE_UP": "failed"}
URGENCY = {"urgent": "high", "reminder": "low"}
PRIORITY = {v: k for k, v in URGENCY.items()}
# Courier's tries say only ok / unknown / error: an "error" is a provider answer that was not a
# delivery (a 503 or a 422 alike). It certainly did not deliver, so never "unknown"; the record of
# which kind it was is the providers' (GET /calls), which the checks read as the ground truth.
RESULTS = {"ok": "ok", "unknown": "unknown", "error": "transient"}


class Courier(HttpDriver):
    """Courier as the notifications case's operations."""

    # Courier's errors carry only a free-text "detail"; its texts for the two unknowns are fixed.
    errors = ErrorMap(field="detail",
                      codes={"unknown user": "unknown_recipient", "unknown message": "unknown_notification"},
                      statuses={422: "invalid_request", 413: "invalid_request"})

    def notify(self, event_id: str, recipient_id: str, priority: str, title: str, body: str, *,
               process: Any = 0, intended_time: float | None = None) -> Op:
        args = {"event_id": event_id, "recipient_id": recipient_id, "priority": priority, "title": title, "body": body}
        doc = {"dedupe_key": event_id, "to": recipient_id, "urgency": URGENCY.get(priority, priority),
               "subject": title, "text": body}
        return self._call("notify", args, "POST", "/messages", doc, accepted,
                          process=process, intended_time=intended_time)

    def get_notification(self, notification_id: str, *, process: Any = 0,
                         intended_time: float | None = None) -> Op:
        args = {"notification_id": notification_id}
        return self._call("get_notification", args, "GET", f"/messages/{quote(notification_id, safe='')}", None,
                          notification, process=process, intended_time=intended_time)

    # capability 'setup'
    def put_recipient(self, recipient_id: str, channels: list[str], addresses: dict[str, str], *,
                      process: Any = 0) -> Op:
        args = {"recipient_id": recipient_id, "channels": channels, "addresses": addresses}
        # Courier only knows the channels in "prefs" (each needs its address); the contract's cascade
        # goes through the recipient's own list, then any other channel they have an address for.
        addresses = {k: v for k, v in (addresses or {}).items() if v}
        prefs = [c for c in channels if addresses.get(ADDRESS.get(c, ""))]
        prefs += [c for c in CHANNELS if c not in prefs and addresses.get(ADDRESS[c])]
        doc = {"prefs": prefs, **{ADDRESS[c]: addresses[ADDRESS[c]] for c in prefs}}
        return self._call("put_recipient", args, "POST", f"/users/{quote(recipient_id, safe='')}/contact", doc,
                          lambda d: d if isinstance(d, dict) else {}, process=process)


# Courier's JSON -> the values the checks read. A wrong shape raises: the op is info.

def _time(value: Any) -> float | None:
    return None if value is None else parse_time(value)


def _attempts(tries: Any) -> list[dict[str, Any]]:
    if not isinstance(tries, list):
        raise TypeError(f"tries must be a list, not {type(tries).__name__}")
    return [translate(t, {"channel": "via", "outcome": ("result", RESULTS), "at": ("time", parse_time)})
            for t in tries]


def accepted(doc: Any) -> dict[str, Any]:
    return translate(doc, {"notification_id": "id", "status": ("state", STATES)}, at="message")


def notification(doc: Any) -> dict[str, Any]:
    return translate(doc, {"notification_id": "id",
                           "event_id": "dedupe_key",
                           "recipient_id": "to",
                           "priority": ("urgency", PRIORITY),
                           "status": ("state", STATES),
                           "channel": "via",
                           "accepted_at": ("created", _time),
                           "delivered_at": ("sent", _time),
                           "attempts": ("tries", _attempts)}, at="message")
