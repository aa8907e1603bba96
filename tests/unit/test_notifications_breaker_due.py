"""``breaker_opens_when_due`` over records built by hand: the moments the stated rules made a
breaker open, and how each ended (held, violated, undecided); a run in which none fell due did not
put the promise to the test."""

from __future__ import annotations

from typing import Any

from peakproof.cases.notifications import NotificationsAnalysis
from peakproof.cases.notifications.breaker import breaker_opens_when_due, due_openings
from peakproof.cases.notifications.checks import check_analysis
from peakproof.history import OK, Op

WINDOW, FAILURES, COOL_DOWN, TIMEOUT = 20, 4, 4.0, 0.5
T0 = 1_700_000_000.0  # epoch seconds: the record's clock


def recipient(rid: str, channels: list[str]) -> Op:
    return Op("setup", "put_recipient", {"recipient_id": rid, "channels": channels,
                                         "addresses": {"push_token": "t", "phone": "p", "email": "e"}}, 0, 0.0, type=OK)


def call(at: float, channel: str, outcome: str, event: str, rid: str = "fan", latency: float = 0.02) -> dict[str, Any]:
    return {"at": T0 + at, "channel": channel, "outcome": outcome, "recipient_id": rid, "event_id": event,
            "idempotency_key": f"{event}/{rid}", "latency": latency}


def analysis(calls: list[dict[str, Any]]) -> NotificationsAnalysis:
    return NotificationsAnalysis([recipient("fan", ["push", "sms", "email"])], calls, breaker_window=WINDOW,
                                 breaker_min_failures=FAILURES, answer_timeout=TIMEOUT, breaker_cool_down=COOL_DOWN)


def push_goes_down(failures: int = FAILURES) -> list[dict[str, Any]]:
    """Push answers ``failures`` first calls with a transient failure, 10 ms apart from 0.1 s; each
    cascade's next round goes to SMS (delivered)."""
    calls = [call(0.1 + 0.01 * i, "push", "transient", f"down{i}") for i in range(failures)]
    return calls + [call(0.4 + 0.01 * i, "sms", "ok", f"down{i}") for i in range(failures)]


def later(first: str, at: list[float]) -> list[dict[str, Any]]:
    """Notifications whose first call went to ``first`` at each of ``at`` (s after T0)."""
    return [call(t, first, "transient" if first == "push" else "ok", f"later{i}") for i, t in enumerate(at)]


def test_push_skipped_while_its_breaker_must_be_open_is_a_due_moment_that_held() -> None:
    r = breaker_opens_when_due(analysis(push_goes_down() + later("sms", [1.5, 2.0, 3.0])))
    assert r.valid is True and r.chances == 1, r
    (due,) = r.due
    assert due.ended == "held" and abs(due.at - (T0 + 0.1 + 0.01 * (FAILURES - 1) + 0.02)) < 1e-6, due
    assert "3 first calls skipped push" in due.detail


def test_push_still_called_first_once_its_breaker_fell_due_is_a_violation_naming_the_moment() -> None:
    r = breaker_opens_when_due(analysis(push_goes_down() + later("push", [1.5, 2.0, 3.0])))
    assert r.valid is False and r.counts["violations"] >= 1, r
    assert "push's breaker open (4 transient failures among its last 4 calls heard" in r.first_violation
    assert "fell due at " in r.first_violation and "UTC" in r.first_violation
    assert "3 of 3 first calls of recipients who prefer push went to it" in r.first_violation
    assert r.due[0].ended == "violated"


def test_one_call_let_through_may_be_a_probe_and_is_not_a_violation() -> None:
    r = breaker_opens_when_due(analysis(push_goes_down() + later("push", [1.5]) + later("sms", [2.0, 3.0])))
    assert r.valid is True, r
    assert "a probe, perhaps" in r.due[0].detail


def test_a_due_moment_with_no_recipient_to_skip_it_for_is_undecided_not_held() -> None:
    r = breaker_opens_when_due(analysis(push_goes_down()))
    assert r.valid == "unknown" and r.chances == 1, r
    assert r.due[0].ended == "undecided" and "no first call of a recipient who prefers push" in r.note


def test_calls_after_the_cool_down_are_not_judged_by_the_moment_before_it() -> None:
    # first calls to push after the cool-down: a probe and the channel's traffic again, once it answered
    calls = push_goes_down() + later("sms", [1.5]) + [call(4.3, "push", "ok", "probe")]
    r = breaker_opens_when_due(analysis(calls + later("push", [4.6, 4.7, 4.8])))
    assert r.valid is True and [d.ended for d in r.due] == ["held"], r


def test_a_failed_probe_makes_the_breaker_due_again() -> None:
    calls = push_goes_down() + [call(4.3, "push", "transient", "probe")]
    moments = [opening.at - T0 for opening in due_openings(analysis(calls), "push")]
    assert len(moments) == 2 and abs(moments[1] - 4.32) < 1e-6, moments


def test_too_few_transient_failures_or_permanent_ones_make_nothing_due() -> None:
    fewer = push_goes_down(FAILURES - 1)
    permanent = [call(0.1 + 0.01 * i, "push", "permanent", f"dead{i}") for i in range(2 * FAILURES)]
    spread = [c for i in range(FAILURES) for c in (call(0.1 + i, "push", "transient", f"t{i}"),
                                                   *(call(0.2 + i + 0.01 * j, "push", "ok", f"ok{i}-{j}")
                                                     for j in range(WINDOW)))]
    for calls in (fewer, permanent, spread):
        assert due_openings(analysis(calls), "push") == []
        r = breaker_opens_when_due(analysis(calls))
        assert r.valid == "unknown" and r.chances == 0 and "not exercised" in r.note, r


def test_a_run_that_drives_no_channel_down_reports_the_check_only_when_a_breaker_fell_due() -> None:
    quiet, down = analysis(later("push", [1.0, 2.0])), analysis(push_goes_down() + later("sms", [1.5]))
    assert "breaker_opens_when_due" not in {r.name for r in check_analysis(quiet, drives_down=False)}
    assert "breaker_opens_when_due" in {r.name for r in check_analysis(quiet, drives_down=True)}
    assert "breaker_opens_when_due" in {r.name for r in check_analysis(down, drives_down=False)}


def test_moments_that_fell_due_before_the_run_began_are_not_its_own() -> None:
    # the providers' record holds an earlier run's dead push (a breaker remembers it); this run starts later
    earlier = push_goes_down() + later("push", [1.5, 2.0])
    a = NotificationsAnalysis([Op("setup", "put_recipient", {"recipient_id": "fan", "channels": ["push", "sms"],
                                                             "addresses": {"push_token": "t", "phone": "p"}},
                                  0, T0 + 100.0, type=OK)],
                              [], channel_calls=earlier, breaker_window=WINDOW, breaker_min_failures=FAILURES,
                              answer_timeout=TIMEOUT, breaker_cool_down=COOL_DOWN)
    assert due_openings(a, "push")  # the moment is in the record...
    r = breaker_opens_when_due(a)
    assert r.chances == 0 and r.due == [], r  # ...but not this run's to judge


def test_answers_to_calls_made_before_the_cool_down_s_second_half_do_not_end_the_moment() -> None:
    # a live channel: an in-flight call and a retry answer soon after the moment (the retry's original, never
    # heard, is a failure at its answer timeout: the moment falls due at 0.6 s); later, a probe answers
    calls = push_goes_down() + [call(0.2, "push", "ok", "in-flight"), call(1.2, "push", "ok", "down0")]
    r = breaker_opens_when_due(analysis(calls + later("push", [1.8, 2.0])))
    assert r.valid is False and "2 of 2 first calls" in r.first_violation, r
    probe = [call(2.9, "push", "ok", "probe")]  # made past half the cool-down: an earlier opening's probe?
    r = breaker_opens_when_due(analysis(calls + probe + later("push", [3.0, 3.2])))
    assert r.valid == "unknown" and r.due[0].ended == "undecided", r


def test_a_stray_call_failing_late_in_the_cool_down_leaves_the_target_s_own_probe_free_to_close_it() -> None:
    # A target calls an open channel for a recipient every breaker fails, or retries an unknown outcome: such a
    # call failing late in the cool-down is no probe, and the target's own probe (push is back) closes the
    # breaker; its push-first calls after that are no violation of the moment the stray call made due.
    ok_again = [call(4.6 + 0.2 * i, "push", "ok", f"back{i}") for i in range(3)]
    calls = push_goes_down() + later("sms", [1.5]) + [call(3.3, "push", "transient", "stray"),
                                                      call(4.2, "push", "ok", "probe")]
    r = breaker_opens_when_due(analysis(calls + ok_again))
    assert [d.ended for d in r.due] == ["held", "undecided"] and r.valid is True, r
    assert "it may have closed before it could be judged" in r.due[1].detail, r.due[1]
    # the same moment with push still down: its failing calls are what the breaker had to prevent
    still_down = [call(4.6 + 0.2 * i, "push", "transient", f"down-again{i}") for i in range(3)]
    r = breaker_opens_when_due(analysis(push_goes_down() + later("sms", [1.5]) + [call(3.3, "push", "transient",
                                                                                      "stray")] + still_down))
    assert r.valid is False and r.due[1].ended == "violated", r


def sent(event: str, at: float) -> Op:
    return Op("client", "notify", {"event_id": event, "recipient_id": "fan"}, 0, T0 + at, type=OK)


def test_a_notification_sent_before_the_failure_was_heard_may_have_waited_in_a_queue_for_the_channel() -> None:
    # the first calls of notifications sent before the moment arrive late (a per-channel queue): their channel
    # was chosen before the breaker had to open, so they judge nothing; the same calls sent after are judged
    queued = later("push", [1.6, 1.8])
    for at_sent, ended in ((0.05, "undecided"), (0.5, "violated")):
        a = NotificationsAnalysis([recipient("fan", ["push", "sms", "email"]),
                                   *(sent(c["event_id"], at_sent) for c in queued)],
                                  push_goes_down() + queued, breaker_window=WINDOW, breaker_min_failures=FAILURES,
                                  answer_timeout=TIMEOUT, breaker_cool_down=COOL_DOWN)
        assert [d.ended for d in breaker_opens_when_due(a).due] == [ended], (at_sent, breaker_opens_when_due(a))


def test_a_target_slow_to_answer_the_harness_just_then_is_judged_only_after_that_delay() -> None:
    # push fell due at 0.15 s; the first calls through it at 1.5 s and 1.7 s break it on a target that
    # answered at once, but one that took 1.8 s to answer a notify sent at 0.2 s may have heard the
    # failures as late: what it let through before then says nothing of its breaker
    calls = push_goes_down() + later("push", [1.5, 1.7]) + [call(3.2, "sms", "ok", "skipped")]
    quick = breaker_opens_when_due(analysis(calls))
    assert quick.valid is False and "2 of 3 first calls" in quick.first_violation, quick
    slow_notify = Op("client", "notify", {"event_id": "slow", "recipient_id": "fan"}, 1, T0 + 0.2, type=OK,
                     complete_time=T0 + 2.0)
    a = NotificationsAnalysis([recipient("fan", ["push", "sms", "email"]), slow_notify], calls,
                              breaker_window=WINDOW, breaker_min_failures=FAILURES, answer_timeout=TIMEOUT,
                              breaker_cool_down=COOL_DOWN)
    slow = breaker_opens_when_due(a)
    assert slow.valid is True and slow.due[0].ended == "held", slow
    assert "1.80 s the target took to answer the harness" in slow.due[0].detail, slow.due[0]
