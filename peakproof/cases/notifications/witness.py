"""Case N's witnesses: a violation bears on one (event, recipient), or on the notifications it cites; its
witness is the recipient's set-up and those notifications' calls, with the providers' calls for them as
found. A replay puts the recipient again on fresh ids, sends the notification, waits the rounds the stated
rules allow, and judges by the providers' record of the fresh recipient's calls (the provider simulator's
failure model is the run's: a failure the found run met is drawn again, not forced)."""

from __future__ import annotations

import hashlib
import re
import time
from typing import Any, Sequence

from ...checks import CheckResult
from ...history import OK, Op
from ...witness import CaseWitness, Step

_EVENT = re.compile(r"event '([^']+)'")
_RECIPIENT = re.compile(r"recipient '([^']+)'")
ADDRESS = {"push": "push_token", "sms": "phone", "email": "email"}  # the protocol's address of each channel
SETTLE_MAX = 20.0  # s: a replay judged later than this misses rounds the rules allow beyond it (a long backoff)


class NotificationsWitness(CaseWitness):
    fresh = ("event_id", "recipient_id")
    produced = {"notification_id": "notification_id"}
    setup = ("put_recipient",)

    def find(self, history: Sequence[Op], result: CheckResult) -> tuple[Any, ...] | None:
        text = result.first_violation or ""
        cited = [op for e in result.examples for op in (e if isinstance(e, tuple) else (e,)) if isinstance(op, Op)]
        keys = {(op.args["event_id"], op.args["recipient_id"]) for op in cited
                if "event_id" in op.args and "recipient_id" in op.args}
        events, recipients = _EVENT.findall(text), _RECIPIENT.findall(text)
        if events and recipients:
            keys.add((events[0], recipients[0]))
        if not keys:
            return None
        key = sorted(keys)[0]
        notified = [op for op in history if op.f == "notify" and (op.args.get("event_id"), op.args.get("recipient_id"))
                    in keys]
        ids = {op.value.get("notification_id") for op in notified if op.type == OK and isinstance(op.value, dict)}
        people = {r for _, r in keys}
        ops = [op for op in history if (op.f == "put_recipient" and op.args.get("recipient_id") in people
                                        and op.type == OK)
               or op in notified or (op.f == "get_notification" and op.args.get("notification_id") in ids)]
        put = [op for op in ops if op.f == "put_recipient"]
        ops = [op for op in ops if op.f != "put_recipient"] + put[-1:] if put else ops
        calls = [f"{e[0]} call at {time.strftime('%H:%M:%S', time.localtime(e[1]))}.{int(e[1] % 1 * 1000):03d}"
                 if isinstance(e, tuple) and len(e) == 2 and isinstance(e[1], float) else repr(e)
                 for example in result.examples[:1]
                 for e in (example if isinstance(example, tuple) else (example,))]
        what = (f"event {key[0]!r} to recipient {key[1]!r}" if len(keys) == 1 else
                f"{len(keys)} notifications, the first event {key[0]!r} to recipient {key[1]!r}")
        return what, ops, [f"the providers' record: {', '.join(calls)}"] if calls else []

    def state(self, spec: Any, ops: list[Op]) -> dict[str, Any]:
        """The channels on which the providers answered the found notifications ``permanent`` (its address is
        dead there; a suppression list remembers it) and those that answered every call ``transient`` (down
        for it), from the providers' record; {} when the record cannot be read."""
        from ...history import History
        from .driver import Providers

        url = spec.opt("provider_url")
        keys = {(op.args.get("event_id"), op.args.get("recipient_id")) for op in ops if op.f == "notify"}
        if not url or not keys:
            return {}
        try:
            record = Providers(url, history=History(time.time)).calls()
        except Exception:  # noqa: BLE001 - no record: the replay meets the providers' own model, said so
            return {"note": f"the providers' record at {url} could not be read: their answers are not rebuilt"}
        answers: dict[str, set[str]] = {}
        for c in record:
            if (c.get("event_id"), c.get("recipient_id")) in keys:
                answers.setdefault(c["channel"], set()).add(c.get("outcome", ""))
        return {"permanent": sorted(ch for ch, seen in answers.items() if "permanent" in seen),
                "down": sorted(ch for ch, seen in answers.items() if seen == {"transient"})}

    def rewrite(self, step: Step, args: dict[str, Any], tag: str, state: dict[str, Any]) -> dict[str, Any]:
        """A dead address of the found run, made fresh in its own format (a suppression list remembers the
        found one: a replay to it would skip the channel the found run called)."""
        dead = state.get("permanent") or []
        addresses = args.get("addresses")
        if step.f != "put_recipient" or not dead or not isinstance(addresses, dict):
            return args
        fresh = dict(addresses)
        for channel in dead:
            key = ADDRESS.get(channel)
            if isinstance(fresh.get(key), str):
                fresh[key] = _fresh_address(channel, fresh[key], tag)
        return {**args, "addresses": fresh}

    def prepare(self, spec: Any, state: dict[str, Any], setup: list[dict[str, Any]]) -> None:
        """The providers told to answer this try's recipient as the found one was answered: its fresh
        addresses dead where the found ones answered permanent, its channels down where every call failed."""
        from ...history import History
        from .driver import Providers

        url = spec.opt("provider_url")
        people = [a for a in setup if isinstance(a.get("addresses"), dict)]
        if not url or not people or not (state.get("permanent") or state.get("down")):
            return
        providers = Providers(url, history=History(time.time))
        change: dict[str, Any] = {}
        if state.get("permanent"):
            _, now = providers.side_call("provider_config", "GET", f"{providers.base}/config")
            dead = {c: list(v) for c, v in ((now or {}).get("dead") or {}).items()}
            for a in people:
                for channel in state["permanent"]:
                    address = a["addresses"].get(ADDRESS.get(channel, ""))
                    if address:
                        dead.setdefault(channel, []).append(address)
            change["dead"] = dead
        if state.get("down"):
            change["lanes"] = {a["recipient_id"]: {"down": list(state["down"])} for a in people}
        providers.config(replace=False, **change)

    def settle(self, spec: Any) -> float:
        from .case import rules_of

        rules = rules_of(spec)  # every round the rules allow, each waiting its backoff and its answer; at most
        return min(SETTLE_MAX, rules.budget * (rules.backoff + rules.answer_timeout) + 1.0)  # SETTLE_MAX a try

    def checks(self, driver: Any, ops: list[Op], spec: Any) -> list[CheckResult]:
        from ...history import History
        from .case import rules_of
        from .checks import check_notifications
        from .driver import provider_record

        people = {op.args.get("recipient_id") for op in ops if op.f in ("notify", "put_recipient")}
        record = provider_record(driver, spec.opt("provider_url"), History(time.time))  # not among the replay's ops
        calls = [c for c in record if c.get("recipient_id") in people]
        return check_notifications(ops, calls, rules=rules_of(spec), saturated=False, drives_down=False)


def _fresh_address(channel: str, address: str, tag: str) -> str:
    """``address`` made unique to one try, in its channel's format: an e-mail's local part tagged, a phone
    number's last digits, a push token suffixed."""
    if channel == "email" and "@" in address:
        local, domain = address.split("@", 1)
        return f"{local}+{tag}@{domain}"
    if channel == "sms":
        digits = str(int(hashlib.sha256(tag.encode()).hexdigest(), 16))[-4:]
        return address[:-4] + digits if len(address) > 6 else address + digits
    return f"{address}-{tag}"


WITNESS = NotificationsWitness()
