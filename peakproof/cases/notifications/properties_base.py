"""Case N's properties, their shared part: the machine that sends, replays and reads notifications and the
judgement of a run's history against the providers' record (:mod:`.properties` in process,
:mod:`.properties_over_http` against a URL)."""

from __future__ import annotations

import uuid
from typing import Any, Iterable

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, rule

from peakproof.checks import assert_checks
from peakproof.history import OK
from peakproof.pytest_plugin import Target

from .analysis import DeliveryRules
from .checks import check_notifications
from .driver import Providers, provider_record


CHANNELS = ["push", "sms", "email"]
FINAL_STATUSES = ("delivered", "failed")  # the contract's last statuses: nothing follows either
# Any text a client may send, NUL aside: PostgreSQL's text cannot hold it, and a service that refuses it (the Beacon
# stack: 400) breaks no promise of the design; its refusal is the contract stage's to note. (A title with NUL
# FAILed the stack's properties as "a valid request must be accepted", one run in a few under the dev profile.)
TEXTS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="\x00"),
                max_size=400) | st.sampled_from([
    "Siparişiniz yolda: kargo bugün teslim edilecek, İstanbul şubesi.", "<script>alert(1)</script> & more",
    "Çağrı merkezi: ığüşöç ĞÜŞİÖÇ " * 20, "plain ascii", "Subject\r\nBcc: evil@example.com"])


def read_all_and_judge(d: Any, ids: Iterable[str], prefix: str = "", rules: DeliveryRules = DeliveryRules(),
                       providers: Providers | None = None, target: Target | None = None,
                       leave_out: tuple[str, ...] = (), settled: set[str] | None = None, **options: Any) -> None:
    """Read every notification (their statuses join the history), *then* the providers' record
    (read first, a delivery between the two would look missing), and judge. ``prefix``: this
    run's ids, when the providers served other runs too (every call still counts for the
    breakers). The delivery ratio is left out: a ratio is for a load, not for adversarial answers.
    With ``target``, its requests are judged too (``no_server_errors``). ``leave_out``: checks this
    machine cannot give a chance (not judged, so not claimed).

    ``settled``: the ids already read in a final status (delivered, failed), skipped here and added to as
    reads find more; the caller reads them all again once (an example's end), where a final status that
    moved back is seen. Read at every step, they made an example's reads grow with the square of its
    notifications: 7,857 GETs of a URL property run's 9,716 requests, most of its target's CPU."""
    for nid in ids:
        if settled is not None and nid in settled:
            continue
        op = d.get_notification(nid, process="reader")
        if settled is not None and op.type == OK and op.value.get("status") in FINAL_STATUSES:
            settled.add(nid)
    everything = d.provider_calls() if providers is None else provider_record(d, providers.base, d.history)
    mine = [c for c in everything if c["recipient_id"].startswith(prefix)] if prefix else everything
    served = [target.server_errors(d.history.ops)] if target is not None else []
    assert_checks([*(r for r in check_notifications(d.history, mine, channel_calls=everything, rules=rules, **options)
                     if r.name != "delivery_ratio_at_least" and r.name not in leave_out), *served])


class SendsNotifications(RuleBasedStateMachine):
    """What both machines do: send notifications to their three recipients and replay them
    (a replay of (event, recipient) returns the same notification). ``run`` prefixes ids, so
    runs sharing a server or a providers' record stay apart."""

    target: Target
    events = Bundle("events")
    run = ""
    found: list[str] = []  # every failure seen, in order (a live target may not fail the same way twice)

    def expect(self, holds: Any, *args: Any) -> None:
        """Assert ``holds`` (a bool, with a message) or run a judge (a callable and its arguments);
        either way a failure is remembered in :attr:`found` before it propagates."""
        try:
            if callable(holds):
                holds(*args)
            else:
                assert holds, args[0]
        except AssertionError as e:
            type(self).found.append(str(e))
            raise

    def addresses(self, i: int) -> dict[str, str]:
        """Recipient ``i``'s addresses, unique to this run (the nemesis may kill one)."""
        tag = self.run.rstrip("-")
        return {"push_token": f"tok{tag}{i}", "phone": f"+90555{abs(hash(tag)) % 10_000:04d}{i:03d}",
                "email": f"r{i}{tag}@example.com"}

    def set_up_recipients(self, preferences: list[list[str]]) -> None:
        self.recipients: list[str] = []
        for i, prefs in enumerate(preferences):
            rid = f"{self.run}r{i}-{uuid.uuid4().hex[:6]}"
            op = self.d.put_recipient(rid, list(prefs), self.addresses(i))
            assert op.type == OK, op
            self.recipients.append(rid)
        self.ids: dict[tuple[str, str], str] = {}

    @rule(target=events, who=st.integers(0, 2), urgent=st.booleans(), title=TEXTS, body=TEXTS,
          replayed=st.booleans())
    def send_a_notification(self, who: int, urgent: bool, title: str, body: str, replayed: bool) -> tuple[str, str]:
        """Send one (and, as a client that did not hear the answer would, maybe at once again)."""
        key = self.send(who, urgent, title, body)
        if replayed:
            self.replay(key)
        return key

    def send(self, who: int, urgent: bool, title: str, body: str) -> tuple[str, str]:
        event, rid = f"{self.run}ev-{uuid.uuid4().hex[:8]}", self.recipients[who]
        op = self.d.notify(event, rid, "urgent" if urgent else "reminder", title, body)
        self.expect(op.type == OK, f"a valid request must be accepted. Actual: {op!r}")
        self.ids[(event, rid)] = op.value["notification_id"]
        return event, rid

    @rule(key=events)
    def replay_it(self, key: tuple[str, str]) -> None:
        self.replay(key)

    @rule(target=events, key=events, who=st.integers(0, 2))
    def the_same_event_to_another_recipient(self, key: tuple[str, str], who: int) -> tuple[str, str]:
        """A broadcast: one event, one more recipient; a notification of its own (deduplication is per
        event *and* recipient: answers_belong_to_who_asked gets its chance)."""
        rid = self.recipients[who]
        if (key[0], rid) in self.ids:
            return key[0], rid
        op = self.d.notify(key[0], rid, "reminder", "Duyuru", "one event, many recipients")
        self.expect(op.type == OK, f"a valid request must be accepted. Actual: {op!r}")
        self.ids[(key[0], rid)] = op.value["notification_id"]
        return key[0], rid

    def replay(self, key: tuple[str, str]) -> None:
        op = self.d.notify(key[0], key[1], "urgent", "again", "again")
        self.expect(op.type == OK and op.value["notification_id"] == self.ids[key],
                    f"a replay of (event, recipient) must return the same notification. Actual: {op!r}")


IN_PROCESS_UNCLAIMED = ("urgent_overtakes_reminder_backlog", "breaker_counts_only_transient")
