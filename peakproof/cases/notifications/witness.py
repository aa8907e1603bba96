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

from peakproof.checks import CheckResult
from peakproof.history import OK, Op
from peakproof.witness import CaseWitness, Step

_EVENT = re.compile(r"event '([^']+)'")
_RECIPIENT = re.compile(r"recipient '([^']+)'")
ADDRESS = {"push": "push_token", "sms": "phone", "email": "email"}  # the protocol's address of each channel
# promises about what a notification met (a backlog it waited behind, the failures a breaker counted, a channel
# skipped): their witness holds the notifications accepted shortly before it too
WHAT_IT_MET = frozenset({"urgent_overtakes_reminder_backlog", "urgent_first_outside_a_backlog",
                         "breaker_counts_only_transient", "breaker_opens_when_due", "preference_respected"})
LOOKBACK = 10.0  # s of notifications before one a priority or breaker promise names: what it met
SETTLE_MAX = 20.0  # s a replay waits for its deliveries to settle: rounds the rules allow beyond it are missed


class NotificationsWitness(CaseWitness):
    fresh = ("event_id", "recipient_id")
    produced = {"notification_id": "notification_id"}
    setup = ("put_recipient",)

    def find(self, history: Sequence[Op], result: CheckResult) -> tuple[Any, ...] | None:
        """The notifications the violation names: an (event, recipient) it names or cites; an event alone
        (a priority or a breaker promise) with every notification accepted in the :data:`LOOKBACK` before it
        (the backlog it waited behind, the failures a breaker counted). Each with its recipient's set-up and
        its reads; the providers' calls the violation cites as found."""
        text = result.first_violation or ""
        cited = [x for e in result.examples for x in (e if isinstance(e, tuple) else (e,))]
        keys = {(op.args["event_id"], op.args["recipient_id"]) for op in cited if isinstance(op, Op)
                and "event_id" in op.args and "recipient_id" in op.args}
        keys |= {e for e in result.examples if isinstance(e, tuple) and len(e) == 2 and all(isinstance(x, str)
                                                                                          for x in e)}
        events, recipients = _EVENT.findall(text), _RECIPIENT.findall(text)
        if events and recipients:
            keys.add((events[0], recipients[0]))
        notifies = [op for op in history if op.f == "notify"]
        named = [op for op in notifies if (op.args.get("event_id"), op.args.get("recipient_id")) in keys
                 or (not keys and op.args.get("event_id") in events[:1])]
        if not named:
            return None
        key = (named[0].args["event_id"], named[0].args["recipient_id"])
        alone = result.name in WHAT_IT_MET
        if alone:  # what the named notification met: every notification accepted shortly before it
            until = max(op.complete_seq for op in named)
            since = min(op.invoke_time for op in named) - LOOKBACK
            named += [op for op in notifies if op not in named and op.invoke_seq <= until and op.invoke_time >= since]
        ids = {op.value.get("notification_id") for op in named if op.type == OK and isinstance(op.value, dict)}
        people = {op.args["recipient_id"] for op in named}
        puts: dict[str, Op] = {}
        for op in history:
            if op.f == "put_recipient" and op.type == OK and op.args.get("recipient_id") in people:
                puts[op.args["recipient_id"]] = op  # each recipient's last set-up
        ops = list(puts.values()) + sorted(named, key=lambda o: o.invoke_seq) + [
            op for op in history if op.f == "get_notification" and op.args.get("notification_id") in ids]
        calls = [f"{e[0]} call at {time.strftime('%H:%M:%S', time.localtime(e[1]))}.{int(e[1] % 1 * 1000):03d}"
                 for e in cited if isinstance(e, tuple) and len(e) == 2 and isinstance(e[1], float)]
        what = (f"event {key[0]!r} to recipient {key[1]!r}" + (
                f", with the {len(named) - 1:,} notification(s) accepted in the {LOOKBACK:g} s before it" if alone
                else ""))
        return what, ops, [f"the providers' record: {', '.join(calls)}"] if calls else []

    def state(self, spec: Any, ops: list[Op]) -> dict[str, Any]:
        """Per recipient, the channels on which the providers answered its found notifications ``permanent``
        (its address is dead there; a suppression list remembers it) and those that answered every call
        ``transient`` (down for it), from the providers' record; a note when the record cannot be read."""
        from peakproof.history import History
        from .driver import Providers

        url = spec.opt("provider_url")
        keys = {(op.args.get("event_id"), op.args.get("recipient_id")) for op in ops if op.f == "notify"}
        if not url or not keys:
            return {}
        try:
            record = Providers(url, history=History(time.time)).calls()
        except Exception:  # noqa: BLE001 - no record: the replay meets the providers' own model, said so
            return {"note": f"the providers' record at {url} could not be read: their answers are not rebuilt"}
        answers: dict[str, dict[str, set[str]]] = {}
        for c in record:
            if (c.get("event_id"), c.get("recipient_id")) in keys:
                answers.setdefault(c["recipient_id"], {}).setdefault(c["channel"], set()).add(c.get("outcome", ""))
        out = {rid: {"permanent": sorted(ch for ch, seen in by.items() if "permanent" in seen),
                     "down": sorted(ch for ch, seen in by.items() if seen == {"transient"})}
               for rid, by in answers.items()}
        return {"recipients": {rid: st for rid, st in out.items() if st["permanent"] or st["down"]}}

    def rewrite(self, step: Step, args: dict[str, Any], tag: str, state: dict[str, Any]) -> dict[str, Any]:
        """A dead address of the found run, made fresh in its own format (a suppression list remembers the
        found one: a replay to it would skip the channel the found run called)."""
        dead = (state.get("recipients") or {}).get(step.args.get("recipient_id"), {}).get("permanent")
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
        """The providers told to answer this try's recipients as the found ones were answered: the fresh
        addresses dead where the found ones answered permanent, a channel down where every call failed."""
        from peakproof.history import History
        from .driver import Providers

        url, found = spec.opt("provider_url"), state.get("recipients") or {}
        people = [(found[a["recipient_id"].rsplit("-", 1)[0]], a) for a in setup if isinstance(a.get("addresses"), dict)
                  and a["recipient_id"].rsplit("-", 1)[0] in found]
        if not url or not people:
            return
        providers = Providers(url, history=History(time.time))
        change: dict[str, Any] = {}
        if any(st["permanent"] for st, _ in people):
            _, now = providers.side_call("provider_config", "GET", f"{providers.base}/config")
            dead = {c: list(v) for c, v in ((now or {}).get("dead") or {}).items()}
            for st, a in people:
                for channel in st["permanent"]:
                    address = a["addresses"].get(ADDRESS.get(channel, ""))
                    if address:
                        dead.setdefault(channel, []).append(address)
            change["dead"] = dead
        lanes = {a["recipient_id"]: {"down": list(st["down"])} for st, a in people if st["down"]}
        if lanes:
            change["lanes"] = lanes
        providers.config(replace=False, **change)

    def checks(self, driver: Any, ops: list[Op], spec: Any) -> list[CheckResult]:
        """The case's checks, once the providers' record of these recipients has been quiet for a round (a
        backoff and an answer's wait: a retry due would have come), or after :data:`SETTLE_MAX`."""
        from peakproof.history import History
        from .case import rules_of
        from .checks import check_notifications
        from .driver import provider_record

        rules = rules_of(spec)
        people = {op.args.get("recipient_id") for op in ops if op.f in ("notify", "put_recipient")}
        quiet, since = rules.backoff + rules.answer_timeout + 0.25, time.monotonic()
        seen, changed = -1, since
        while True:
            record = provider_record(driver, spec.opt("provider_url"), History(time.time))  # not a replay's op
            calls = [c for c in record if c.get("recipient_id") in people]
            now = time.monotonic()
            if len(calls) != seen:
                seen, changed = len(calls), now
            elif now - changed >= quiet or now - since >= SETTLE_MAX:
                break
            time.sleep(0.2)
        return check_notifications(ops, calls, rules=rules, channel_calls=record)


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
