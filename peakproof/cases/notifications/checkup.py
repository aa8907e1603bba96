"""``peakproof driver check notifications``: each operation once for a recipient of its own."""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable, Iterator

from peakproof.operation_table import Step
from peakproof.history import FAIL, OK
from peakproof.operation_table import OperationSpec, tables

OPERATIONS = (
    OperationSpec("notify", ("event_id", "recipient_id", "priority", "title", "body"),
                  "Accept a notification; `priority` is `urgent` or `reminder`; a replay of (event, recipient) "
                  "answers the same notification. An unknown recipient: fail `unknown_recipient`; a bad request: "
                  "fail `invalid_request`.", '`{"notification_id", "status"}`', ("notification_id", "status"),
                  "accepted"),
    OperationSpec("get_notification", ("notification_id",), "The notification as it stands; `attempts` is shown, "
                  "not judged (the providers' record is the ground truth for every call).",
                  '`{"notification_id", "event_id", "recipient_id", "priority", "status", "channel", "accepted_at", '
                  '"delivered_at", "attempts": [{"channel", "outcome", "at"}]}`; `status` is `queued`, `sending`, '
                  "`delivered` or `failed`, times epoch seconds (`parse_time`) or None",
                  ("notification_id", "event_id", "recipient_id", "priority", "status", "channel", "accepted_at",
                   "delivered_at", "attempts"), "notification"),
    OperationSpec("put_recipient", ("recipient_id", "channels", "addresses"),
                  "Register the recipient: `channels` is the ordered preference (`push`, `sms`, `email`; the cascade "
                  "goes through it in order), `addresses` `{\"push_token\", \"phone\", \"email\"}`.",
                  capability="setup"),
    OperationSpec("provider_calls", (), "Every call your service made to its providers (not an op: a list). By "
                  "default the harness reads the simulator at `--provider-url` itself: point your service at "
                  "`peakproof serve providers` and leave this out.",
                  '`[{"channel", "event_id", "recipient_id", "outcome", "at", ...}]`', capability="providers_record"),
    OperationSpec("breakers", (), "The reference target's breaker transitions (a chart only: without it nothing is "
                  "undecided); delete it.", "a dict, or None", capability="stats"),
)
ARGS, VALUES, PARSERS, DOCS = tables(OPERATIONS)
STATUS_HINT = {404: "unknown_recipient", 422: "invalid_request"}
SKELETON = {
    "provider_calls": '''
        def provider_calls(self) -> list[dict[str, Any]]:
            """Every call your service made to its providers, [{"channel", "event_id", "recipient_id", "outcome",
            "at", ...}]. Delete this if your service delivers through peakproof's simulator (--provider-url):
            the harness reads its record itself."""
            raise NotImplementedError
    ''',
    "breakers": '''
        def breakers(self) -> dict[str, Any] | None:
            """The reference target's breaker transitions (a chart only): delete this."""
            return None
    ''',
}


def steps(d: Any, spec: Any, offered: Callable[[str], bool]) -> Iterator[Step]:
    from .driver import provider_record

    run = uuid.uuid4().hex[:8]
    rid, ev = f"check-{run}", f"check-{run}-ev"
    if not offered("setup"):
        yield Step("put_recipient", expect="the 'setup' capability (put_recipient)", holds=False,
                   detail="without it no scenario and no property can run")
        return
    phone = f"+90{int(run[:5], 16) % 100_000:05d}0000000"  # the run's own: a suppression list keeps dead ones
    op = d.put_recipient(rid, ["push", "sms", "email"], {"push_token": f"tok{run}", "phone": phone,
                                                        "email": f"{run}@example.com"})
    yield Step(f"put_recipient({rid!r}, push > sms > email)", op, "ok", op.type == OK)
    op = d.notify(ev, rid, "urgent", "Güvenlik kodu", "driver check")
    nid = op.value.get("notification_id") if op.type == OK else None
    yield Step("notify(urgent)", op, "ok, with notification_id and a status", op.type == OK and nid is not None)
    again = d.notify(ev, rid, "urgent", "Güvenlik kodu", "driver check")
    from .case import rules_of

    if rules_of(spec, type(d)).no_idempotency_key:  # stated: each notify is a notification of its own
        yield Step("notify again, same (event, recipient)", again, "ok (a notification of its own: you stated "
                   "--no-idempotency-key)", again.type == OK)
    else:
        yield Step("notify again, same (event, recipient)", again, f"ok, the same notification {nid!r}",
                   again.type == OK and again.value.get("notification_id") == nid, promise="one_delivery_per_event")
    if nid is not None:  # an id is opaque: 0 is one
        deadline = time.time() + 15
        op = d.get_notification(nid)
        while op.type == OK and op.value.get("status") in ("queued", "sending") and time.time() < deadline:
            time.sleep(0.3)
            op = d.get_notification(nid)
        v = op.value if op.type == OK else {}
        times_ok = all(v.get(k) is None or isinstance(v.get(k), (int, float)) for k in ("accepted_at", "delivered_at"))
        yield Step("get_notification (polled up to 15 s)", op, "ok, status 'delivered' (or 'failed'), times as "
                   "epoch seconds", op.type == OK and v.get("status") in ("delivered", "failed") and times_ok,
                   "" if times_ok else "accepted_at / delivered_at must be epoch seconds (parse_time)")
    try:
        calls = [c for c in provider_record(d, spec.opt("provider_url")) if c.get("event_id") == ev]
        yield Step("the providers' record", None, "at least one call for this event, naming its recipient",
                   bool(calls) and all(c.get("recipient_id") == rid for c in calls),
                   f"{len(calls)} call(s) for {ev!r}: " + ", ".join(f"{c.get('channel')} {c.get('outcome')}"
                                                                    for c in calls[:3]))
    except Exception as e:  # noqa: BLE001  (no record, or it could not be read: say why)
        yield Step("the providers' record", None, "readable", False, str(e)[:300])
    op = d.notify(f"{ev}-2", f"check-nobody-{run}", "reminder", "t", "b")
    yield Step("notify to an unknown recipient", op, "fail 'unknown_recipient' (or 'invalid_request')",
               op.type == FAIL and op.value in ("unknown_recipient", "invalid_request"),
               "" if op.type != FAIL or op.value in ("unknown_recipient", "invalid_request") else
               f"code {op.value!r}: map your unknown-recipient answer to 'unknown_recipient' in errors")
