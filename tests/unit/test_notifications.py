"""Case N in virtual time: the seed's failure scenarios against the reference core and the simulator."""

from __future__ import annotations

from typing import Any

import pytest

from peakproof.cases.notifications import (InProcessNotifications, NotificationsAnalysis,
                                           urgent_overtakes_reminder_backlog)
from peakproof.providers import ProviderConfig
from peakproof.targets.notifications import BreakerConfig
from peakproof.targets.notifications import formatting as fm
from tests.support.notifications_peak import PEAK, run_peak


def assert_held_except_unread_statuses(r: dict) -> None:
    """Nothing failed; every check held but the status ones, which these runs never read (not exercised)."""
    assert not any(x.failed for x in r.values()), [x.summary() for x in r.values() if x.failed]
    undecided = {k for k, x in r.items() if x.valid is not True}
    assert undecided <= {"status_matches_providers", "status_moves_forward"}, [r[k].summary() for k in undecided]
def test_cascade_delivers_at_least_99_percent_once_each_at_the_seed_s_call_rate() -> None:
    d, r = run_peak(10_000)
    assert r["delivery_ratio_at_least"].valid is True
    assert_held_except_unread_statuses(r)
    per_notification = len(d.provider_calls()) / 10_000
    assert 1.0 < per_notification < 1.12  # the seed's cascade: 1.079
def test_with_push_down_the_cascade_holds_and_the_breaker_saves_the_wasted_calls() -> None:
    down = ProviderConfig(down=("push",))
    d_on, r_on = run_peak(10_000, providers=down)
    never = BreakerConfig(min_failures=10**9)  # a breaker that never opens
    d_off, r_off = run_peak(10_000, providers=down, breaker=never)
    calls_on, calls_off = len(d_on.provider_calls()), len(d_off.provider_calls())
    print(f"push down: calls with the breaker {calls_on:,}, without {calls_off:,} "
          f"(saved {calls_off - calls_on:,}; the seed at 104,167: 112,357 vs 166,806)")
    assert r_on["delivery_ratio_at_least"].valid is True and r_off["delivery_ratio_at_least"].valid is True
    assert calls_off - calls_on > 0.4 * 10_000 * 0.55  # most push-first notifications skip the dead channel
    assert r_on["one_delivery_per_event"].valid is True
    # the breaker fell due (push down): with it, each moment held; without it, the moment is a violation
    on, off = r_on["breaker_opens_when_due"], r_off["breaker_opens_when_due"]
    assert on.valid is True and on.chances >= 1 and on.due_ended()["violated"] == 0, on.summary()
    assert off.valid is False and off.due_ended()["violated"] >= 1, off.summary()
def test_lost_acknowledgements_never_cause_a_second_delivery() -> None:
    d, r = run_peak(10_000, providers=ProviderConfig(ack_lost=0.05))
    lost = sum(c["outcome"] == "ack_lost" for c in d.provider_calls())
    assert lost > 300
    assert r["one_delivery_per_event"].valid is True, r["one_delivery_per_event"].summary()
    assert r["one_delivery_per_event"].counts["duplicate_deliveries"] == 0
    assert_held_except_unread_statuses(r)
def test_a_reminder_flood_does_not_delay_urgent_notifications() -> None:
    # bulkheads sized by the seed's peak call rates; reminders arrive at 3x the peak
    capacity = {"push": 954.86, "sms": 434.03, "email": 347.22}
    d, r = run_peak(12_000, urgent_share=0.02, capacity=capacity, rate=3 * PEAK)
    reminders = [op for op in d.history.ops if op.f == "notify" and op.args["priority"] == "reminder"]
    assert r["urgent"].valid is True, r["urgent"].summary()
    assert r["urgent"].actual.value <= 5.0
    a = NotificationsAnalysis(d.history, d.provider_calls())
    rem = [min(x["at"] for x in a.delivered[(o.args["event_id"], o.args["recipient_id"])]) - o.invoke_time
           for o in reminders if a.delivered.get((o.args["event_id"], o.args["recipient_id"]))]
    print(f"reminder mean {sum(rem) / len(rem):.2f} s vs urgent {r['urgent'].actual.value:.2f} s")
    assert sum(rem) / len(rem) > r["urgent"].actual.value  # the flood waits, urgent does not


def test_turkish_sms_goes_as_ucs2_and_never_beyond_three_segments() -> None:
    m = fm.format_sms("Sipariş", "ğüşıöç " * 200)
    assert m["encoding"] == "UCS-2" and m["segments"] <= 3 and str(m["text"]).endswith("…")
    assert fm.sms_segments(str(m["text"])) == ("UCS-2", m["segments"])
    ascii_msg = fm.format_sms("Hi", "plain text")
    assert ascii_msg["encoding"] == "GSM-7" and ascii_msg["segments"] == 1


def test_gsm7_extension_characters_take_two_septets() -> None:
    assert fm.sms_units("€" * 80, "GSM-7") == 160 and fm.sms_segments("€" * 80) == ("GSM-7", 1)
    assert fm.sms_segments("€" * 81)[1] == 2


def test_email_subjects_stay_on_one_line_and_bodies_are_escaped() -> None:
    m = fm.format_email("Hello\r\nBcc: evil@example.com", "<script>alert(1)</script>")
    assert "\n" not in m["subject"] and "\r" not in m["subject"]
    assert "<script>" not in m["html"] and "&lt;script&gt;" in m["html"]


def test_push_payloads_fit_4096_bytes_whatever_the_text() -> None:
    m = fm.format_push("T" * 500, "ğ" * 5000)
    import json

    assert len(json.dumps(m, ensure_ascii=False).encode()) <= 4096 and len(m["title"]) <= 100


def _flood(urgent_called_after: int, backlog: int = 60) -> Any:
    """``backlog`` reminders for one recipient accepted at once, then an urgent one; the providers'
    record calls the urgent one after ``urgent_called_after`` of the reminders (one worker, 10 ms a call)."""
    from peakproof.history import HandHistory

    h = HandHistory()
    h.at(0.0).ok("put_recipient", {"recipient_id": "r", "channels": ["sms"], "addresses": {"phone": "+90"}})
    for i in range(backlog):
        h.at(0.001 * i).ok("notify", {"event_id": f"rem{i}", "recipient_id": "r", "priority": "reminder"},
                           {"notification_id": f"n{i}"})
    h.at(0.5).ok("notify", {"event_id": "code", "recipient_id": "r", "priority": "urgent"}, {"notification_id": "u"})
    order = [f"rem{i}" for i in range(backlog)]
    order.insert(urgent_called_after, "code")
    calls = [{"channel": "sms", "event_id": e, "recipient_id": "r", "at": 1.0 + 0.01 * k, "outcome": "ok",
              "latency": 0.01, "idempotency_key": f"{e}/r", "message": {}} for k, e in enumerate(order)]
    return urgent_overtakes_reminder_backlog(NotificationsAnalysis(h.history, calls))


def test_an_urgent_notification_that_queues_behind_the_whole_reminder_backlog_breaks_priority() -> None:
    r = _flood(urgent_called_after=60)
    assert r.valid is False and r.chances == 1 and "waited behind 60 of the 60" in r.first_violation


def test_an_urgent_notification_that_overtakes_the_backlog_keeps_priority() -> None:
    r = _flood(urgent_called_after=3)  # a few already held by the target's workers: allowed
    assert r.valid is True and r.chances == 1


def test_a_backlog_too_short_to_matter_leaves_priority_unexercised() -> None:
    r = _flood(urgent_called_after=10, backlog=10)  # within what any target may hold: no chance
    assert r.valid == "unknown" and r.chances == 0


# -- the dispatcher's bulkhead room: taken whole, given back when a round fails ---------------------


def _core(policy: str = "cascade") -> Any:
    from peakproof.clock import VirtualClock
    from peakproof.targets.notifications import InMemoryStore, NotificationsCore

    core = NotificationsCore(InMemoryStore(), VirtualClock(), policy=policy)
    core.put_recipient("r", ["push", "sms", "email"], {"push_token": "t", "phone": "+905550000000",
                                                        "email": "r@example.com"})
    return core


def test_a_round_refused_by_one_bulkhead_takes_no_room_on_the_others() -> None:
    core = _core("parallel")
    core.accept("e1", "r", "urgent", "t", "b")
    asked: list[list[str]] = []
    assert core.due_calls(room=lambda chans: asked.append(chans) or False) == []
    assert asked == [["push", "sms", "email"]]  # one question for the whole round, not one per channel
    assert len(core.due_calls(room=lambda chans: True)) == 3  # it stayed queued


def test_a_round_that_fails_to_be_built_gives_its_room_back_and_stays_queued() -> None:
    core = _core()
    core.accept("e1", "r", "urgent", "t", "b")
    taken: dict[str, int] = {"push": 0, "sms": 0, "email": 0}

    def room(chans: list[str]) -> bool:
        for c in chans:
            taken[c] += 1
        return True

    def release(chans: list[str]) -> None:
        for c in chans:
            taken[c] -= 1

    save, calls = core.store.save, []
    core.store.save = lambda n: (_ for _ in ()).throw(OSError("disk full"))  # the round's write fails
    with pytest.raises(OSError, match="disk full"):
        core.due_calls(room=room, release=release)
    assert taken == {"push": 0, "sms": 0, "email": 0}
    core.store.save = save
    calls = core.due_calls(room=room, release=release)
    assert [(c.channel, c.call_no) for c in calls] == [("push", 1)] and taken["push"] == 1  # no phantom attempt


def test_one_event_to_two_recipients_gets_two_notifications_each_about_its_recipient() -> None:
    from peakproof.cases.notifications.checks import answers_belong_to_who_asked

    d = InProcessNotifications()
    for rid, phone in (("ayse", "+90 555 301 60 01"), ("mehmet", "+905553016002")):
        d.put_recipient(rid, ["sms"], {"phone": phone})
    one, two = d.notify("ev1", "ayse", "urgent", "Duyuru", "x"), d.notify("ev1", "mehmet", "urgent", "Duyuru", "x")
    d.advance(5)
    assert one.value["notification_id"] != two.value["notification_id"]
    a = NotificationsAnalysis(d.history, d.provider_calls())
    r = answers_belong_to_who_asked(a)
    assert r.valid is True and r.chances == 4, r.summary()  # two answers, two calls to known addresses
    # a call for ayşe that went to mehmet's phone
    calls = [{**c, "to": "+905553016002"} if c["recipient_id"] == "ayse" else c for c in d.provider_calls()]
    r = answers_belong_to_who_asked(NotificationsAnalysis(d.history, calls))
    assert r.valid is False and "not one of that recipient's addresses" in r.first_violation
    # a service deduplicating on the event alone answers mehmet with ayşe's notification
    d.history.invoke(0, "notify", {"event_id": "ev1", "recipient_id": "mehmet"})
    d.history.complete(d.history.ops[-1], "ok", {**one.value})
    r = answers_belong_to_who_asked(NotificationsAnalysis(d.history, d.provider_calls()))
    assert r.valid is False and "recipient_id asked 'mehmet', answered 'ayse'" in r.first_violation


def _urgent_then_reminders(urgent_called_at: float, reminders_called_at: float, *, backoff: float = 0.3,
                           reminder_channel: str = "sms", reminders: int = 3, urgent_channel: str = "sms",
                           slow_answer: float = 0.0) -> Any:
    """An urgent notification accepted at 1.0, then reminders sent just after it for the same recipient;
    the providers' record calls the urgent one and the reminders at the times given. ``slow_answer``: how
    long the target took to answer a status read the harness sent at 1.02 (a target short of CPU)."""
    from peakproof.cases.notifications import urgent_first_outside_a_backlog
    from peakproof.history import HandHistory

    h = HandHistory()
    h.at(0.0).ok("put_recipient", {"recipient_id": "r", "channels": ["sms", "email"],
                                   "addresses": {"phone": "+90", "email": "r@example.com"}})
    h.at(1.0).ok("notify", {"event_id": "code", "recipient_id": "r", "priority": "urgent"}, {"notification_id": "u"})
    for i in range(reminders):
        h.at(1.01 + 0.001 * i).ok("notify", {"event_id": f"rem{i}", "recipient_id": "r", "priority": "reminder"},
                                  {"notification_id": f"n{i}"})
    if slow_answer:
        read = h.at(1.02).ok("get_notification", {"notification_id": "u"}, {"status": "pending"}, pending=True)
        h.at(1.02 + slow_answer).finish(read)
    calls = [{"channel": urgent_channel, "event_id": "code", "recipient_id": "r", "at": urgent_called_at, "outcome": "ok",
              "latency": 0.01, "idempotency_key": "code/r", "message": {}}]
    calls += [{"channel": reminder_channel, "event_id": f"rem{i}", "recipient_id": "r",
               "at": reminders_called_at + 0.001 * i, "outcome": "ok", "latency": 0.01,
               "idempotency_key": f"rem{i}/r", "message": {}} for i in range(reminders)]
    return urgent_first_outside_a_backlog(NotificationsAnalysis(h.history, calls, backoff=backoff))


def test_an_urgent_notification_held_a_round_while_later_reminders_go_at_once_breaks_priority() -> None:
    held = _urgent_then_reminders(urgent_called_at=1.32, reminders_called_at=1.02)
    assert held.valid is False and held.chances == 1, held.summary()
    assert "'code'" in held.first_violation and "before it" in held.first_violation


def test_an_urgent_notification_late_by_no_more_than_the_target_took_to_answer_the_harness_then_is_not_blamed(
        ) -> None:
    # a Celery stack beside a load: its web and workers short of CPU alike; the reminder's worker ran first
    starved = _urgent_then_reminders(urgent_called_at=1.32, reminders_called_at=1.02, slow_answer=0.35)
    assert starved.valid is True and starved.chances == 1, starved.summary()
    # a hold longer than that stall is still the target's
    held = _urgent_then_reminders(urgent_called_at=1.32, reminders_called_at=1.02, slow_answer=0.05)
    assert held.valid is False and "0.050 s the target took to answer the harness" in held.first_violation


def test_reminders_called_with_the_urgent_one_within_the_slack_or_after_it_keep_priority() -> None:
    together = _urgent_then_reminders(urgent_called_at=1.05, reminders_called_at=1.02)  # 30 ms: dispatched together
    after = _urgent_then_reminders(urgent_called_at=1.02, reminders_called_at=1.03)
    assert together.valid is True and after.valid is True and together.chances == after.chances == 1


def test_a_reminder_on_another_channel_or_sent_a_round_later_is_no_chance() -> None:
    other = _urgent_then_reminders(urgent_called_at=1.32, reminders_called_at=1.02, reminder_channel="email")
    assert other.chances == 0 and other.valid == "unknown"  # no chance: said, not passed
    # the slack is half the round, at most 0.25 s: with 30 s rounds a 0.3 s hold still shows
    long_round = _urgent_then_reminders(urgent_called_at=1.32, reminders_called_at=1.02, backoff=30.0)
    assert long_round.valid is False  # the slack is at most 0.25 s, whatever the round


def test_an_urgent_notification_that_ended_on_another_than_its_preferred_channel_is_no_chance() -> None:
    # held for sms (its preferred channel: a full bulkhead, a probe out), then sent by e-mail when that changed:
    # reminders called on e-mail meanwhile owed it nothing
    moved = _urgent_then_reminders(urgent_called_at=1.32, reminders_called_at=1.02, reminder_channel="email",
                                   urgent_channel="email")
    assert moved.chances == 0 and moved.valid == "unknown", moved.summary()


def test_without_an_idempotency_key_one_delivery_is_owed_per_request_the_client_made() -> None:
    """--no-idempotency-key (a design statement): a notify the client replays is a notification of its own, so a
    second delivery for a second request is the design; a second delivery for one request is still a duplicate."""
    from peakproof.history import HandHistory

    def judged(requests: int, deliveries: int, stated: bool) -> Any:
        from peakproof.cases.notifications.delivery import one_delivery_per_event

        h = HandHistory()
        h.at(0.0).ok("put_recipient", {"recipient_id": "r", "channels": ["sms"], "addresses": {"phone": "+90"}})
        for i in range(requests):
            h.at(0.1 * i).ok("notify", {"event_id": "e", "recipient_id": "r", "priority": "urgent"},
                             {"notification_id": f"n{i}"})
        calls = [{"channel": "sms", "event_id": "e", "recipient_id": "r", "at": 1.0 + k, "outcome": "ok",
                  "latency": 0.01, "idempotency_key": f"e/r/{k}", "message": {}} for k in range(deliveries)]
        return one_delivery_per_event(NotificationsAnalysis(h.history, calls, no_idempotency_key=stated))

    assert judged(2, 2, stated=False).valid is False  # the seed: once per (event, recipient), whatever was sent
    assert judged(2, 2, stated=True).valid is True  # two requests, two notifications
    broken = judged(1, 2, stated=True)
    assert broken.valid is False and "2 times for 1 request(s) the client made" in broken.first_violation


def test_without_a_cascade_a_dead_address_on_the_one_channel_is_undeliverable_by_design_not_a_missed_delivery() -> None:
    """--cascade none (a design statement): a notification goes to one channel; when that address is dead the
    service cannot rescue it, so it leaves the delivery ratio (said in its counts) and puts the budget and "never
    the same dead channel again" to the test, where the seed's cascade would have tried every channel first."""
    from peakproof.cases.notifications.delivery import delivery_ratio_at_least
    from peakproof.cases.notifications.delivery import dead_address_met_every_channel
    from peakproof.history import HandHistory

    h = HandHistory()
    h.at(0.0).ok("put_recipient", {"recipient_id": "r", "channels": ["sms"], "addresses": {"phone": "+90"}})
    calls = []
    for i in range(10):
        h.at(0.1 * i).ok("notify", {"event_id": f"e{i}", "recipient_id": "r", "priority": "urgent"},
                         {"notification_id": f"n{i}"})
        calls.append({"channel": "sms", "event_id": f"e{i}", "recipient_id": "r", "at": 1.0 + i,
                      "outcome": "permanent" if i == 0 else "ok", "latency": 0.01, "idempotency_key": f"e{i}/r",
                      "message": {}})
    seed = NotificationsAnalysis(h.history, calls)
    stated = NotificationsAnalysis(h.history, calls, cascade="none")
    assert delivery_ratio_at_least(seed).valid is False  # 9 of 10: the seed's cascade would have tried email
    held = delivery_ratio_at_least(stated)
    assert held.valid is True and held.counts["undeliverable_by_design"] == 1 and held.chances == 9
    assert dead_address_met_every_channel(seed) == 0 and dead_address_met_every_channel(stated) == 1
    calls[1]["outcome"] = "transient"  # a channel that failed for a while is not a dead address: still a miss
    assert delivery_ratio_at_least(NotificationsAnalysis(h.history, calls, cascade="none")).valid is False


def test_a_service_without_push_meets_a_push_first_recipient_on_their_next_choice_when_its_channels_are_stated() -> None:
    """--channels sms,email (a design statement): a recipient who prefers push is, to a service without push, an
    SMS-first recipient; unstated, the same first call is a preference ignored. A channel it has, skipped, is
    still one."""
    from peakproof.cases.notifications.breaker import preference_respected
    from peakproof.cases.notifications.delivery import dead_address_met_every_channel
    from peakproof.cases.notifications.analysis import service_channels
    from peakproof.history import HandHistory

    def judged(first: str, channels: tuple[str, ...] | None) -> Any:
        h = HandHistory()
        h.at(0.0).ok("put_recipient", {"recipient_id": "r", "channels": ["push", "sms", "email"],
                                       "addresses": {"push_token": "t", "phone": "+90", "email": "r@x"}})
        h.at(0.1).ok("notify", {"event_id": "e", "recipient_id": "r", "priority": "urgent"}, {"notification_id": "n"})
        calls = [{"channel": first, "event_id": "e", "recipient_id": "r", "at": 0.5, "outcome": "ok", "latency": 0.01,
                  "idempotency_key": "e/r", "message": {}}]
        kw = {"channels": channels} if channels else {}
        return NotificationsAnalysis(h.history, calls, **kw)

    no_push = service_channels("email,sms")
    assert no_push == ("sms", "email")  # in the seed's order, whatever order it was stated in
    assert preference_respected(judged("sms", None)).valid is False  # the seed's: push first
    assert preference_respected(judged("sms", no_push)).valid is True
    assert preference_respected(judged("email", no_push)).valid is False  # sms it has, and skipped
    assert judged("sms", no_push).recipients["r"]["addresses"] == {"phone": "+90", "email": "r@x"}
    with pytest.raises(ValueError, match="among push, sms, email"):
        service_channels("sms,fax")
    assert dead_address_met_every_channel(judged("sms", no_push)) == 0
