"""The breaker checks over a live target's record, built by hand: which skips of a preferred
channel are the bug (a breaker that counted permanent failures), which a fair breaker excuses,
and which first calls count as chances to tell the two apart."""

from __future__ import annotations

from typing import Any

from peakproof.cases.notifications import NotificationsAnalysis
from peakproof.cases.notifications.breaker import _could_be_open, breaker_counts_only_transient, preference_respected
from peakproof.history import OK, Op

WINDOW, FAILURES, COOL_DOWN, TIMEOUT = 20, 4, 1.0, 0.5


def recipient(rid: str, channels: list[str]) -> Op:
    return Op("setup", "put_recipient", {"recipient_id": rid, "channels": channels}, 0, 0.0, type=OK)


def call(at: float, channel: str, outcome: str, rid: str, event: str, latency: float = 0.02) -> dict[str, Any]:
    return {"at": at, "channel": channel, "outcome": outcome, "recipient_id": rid, "event_id": event,
            "idempotency_key": f"{event}/{rid}", "latency": latency}


def analysis(calls: list[dict[str, Any]]) -> NotificationsAnalysis:
    ops = [recipient("healthy", ["sms", "email"]), recipient("doomed", ["sms", "email"])]
    return NotificationsAnalysis(ops, calls, breaker_window=WINDOW, breaker_min_failures=FAILURES,
                                 answer_timeout=TIMEOUT, breaker_cool_down=COOL_DOWN)


def a_dead_address_burst(then: str, noise: list[dict[str, Any]] = ()) -> list[dict[str, Any]]:  # type: ignore[assignment]
    """SMS healthy for a window, five permanent failures for one recipient, then three more of
    theirs whose first calls go to ``then``."""
    calls = [call(0.1 * i, "sms", "ok", "healthy", f"h{i}") for i in range(WINDOW)]
    calls += [call(3.0 + 0.001 * i, "sms", "permanent", "doomed", f"d{i}") for i in range(FAILURES + 1)]
    calls += [call(3.0 + 0.001 * i + 0.03, "email", "ok", "doomed", f"d{i}") for i in range(FAILURES + 1)]
    calls += [call(3.5 + 0.001 * i, then, "ok", "doomed", f"late{i}") for i in range(3)]
    return calls + list(noise)


def test_skipping_a_channel_after_permanent_failures_alone_is_the_bug() -> None:
    r = breaker_counts_only_transient(analysis(a_dead_address_burst(then="email")))
    assert r.valid is False and r.counts["violations"] == 3, r
    assert "counting permanent ones" in r.first_violation and "only 0 transient" in r.first_violation
    assert r.chances == 3  # the three late first calls, and nothing before the burst


def test_the_same_moment_with_the_preferred_channel_called_is_a_chance_that_held() -> None:
    r = breaker_counts_only_transient(analysis(a_dead_address_burst(then="sms")))
    assert r.valid is True and r.chances == 3, r


def test_a_skip_just_after_transient_failures_opened_a_fair_breaker_is_excused() -> None:
    # four transient failures on SMS heard just before the late notifications: a fair breaker opens
    sick = [call(3.2 + 0.01 * i, "sms", "transient", "healthy", f"t{i}") for i in range(FAILURES)]
    a = analysis(a_dead_address_burst(then="email", noise=sick))
    assert breaker_counts_only_transient(a).valid is not False
    assert preference_respected(a).valid is not False


def opened_then_probed(probe: str) -> list[dict[str, Any]]:
    """Four transient failures open a fair SMS breaker at about 0.1 s; its probe after the
    cool-down (at 2.0 s) answers ``probe``; then SMS carries healthy traffic, 50 calls a second
    (the fair window soon holds no failure: only the breaker's state can excuse a skip)."""
    calls = [call(0.1 + 0.01 * i, "sms", "transient", "healthy", f"t{i}") for i in range(FAILURES)]
    calls += [call(2.0, "sms", probe, "healthy", "probe")]
    return calls + [call(2.1 + 0.02 * i, "sms", "ok", "healthy", f"h{i}") for i in range(170)]


def test_a_skip_long_after_a_fair_breaker_opened_and_its_probe_came_back_is_not_excused() -> None:
    calls = opened_then_probed("ok") + [call(5.5, "email", "ok", "doomed", "late")]
    r = preference_respected(analysis(calls))
    assert r.valid is False and r.counts["violations"] == 1, r


def test_a_failed_probe_reopens_the_breaker_for_another_cool_down_and_an_answered_one_closes_it() -> None:
    def could_be_open(probe: str, at: float) -> bool:
        calls = opened_then_probed(probe)[:FAILURES + 1]  # the failures and the probe, no traffic after
        return _could_be_open(analysis(calls), "sms", at)

    assert could_be_open("transient", 3.0)  # reopened at 2.02 s: open until about 3.5 s
    assert not could_be_open("transient", 5.5)  # half-open again, and no probe out: it must let a call through
    assert not could_be_open("ok", 3.0)  # the probe's answer closed it
    assert could_be_open("ok", 1.0)  # within the first cool-down


def test_a_skip_after_a_probe_came_back_permanent_is_the_bug_and_after_one_that_came_back_ok_no_chance() -> None:
    # A fair breaker closes on a permanent answer to its probe (the channel is up); one that
    # counts permanent failures reopens on it and skips the channel for another cool-down.
    def judged(probe: str) -> Any:
        calls = opened_then_probed(probe)[:FAILURES + 1]  # the failures and the probe at 2.0 s
        # a window of answered calls after it (a fair breaker's window holds no failure), then a skip
        calls += [call(2.05 + 0.01 * i, "sms", "ok", "healthy", f"h{i}") for i in range(WINDOW)]
        calls += [call(2.4, "email", "ok", "doomed", "late")]
        return breaker_counts_only_transient(analysis(calls))

    r = judged("permanent")
    assert r.valid is False and r.chances == 1 and "probe came back permanent" in r.first_violation, r
    assert judged("ok").chances == 0  # nothing a counting breaker would do differently: preference_respected's


def lost_answers_then_a_burst(email_lost_too: bool) -> list[dict[str, Any]]:
    """Answers lost on SMS (and on e-mail too, or not) open a fair breaker when the target gives up
    on them at 0.5 s; SMS then carries a window of first calls of a recipient who prefers it; a dead
    address answers five times; at 1.3 s (within the cool-down) a first call skips SMS for e-mail."""
    channels = ["sms", "email"] if email_lost_too else ["sms"]
    calls = [call(0.001 * i, c, "ack_lost", "healthy", f"lost-{c}{i}") for c in channels for i in range(FAILURES)]
    calls += [call(0.8 + 0.005 * i, "sms", "ok", "healthy", f"h{i}") for i in range(WINDOW)]
    calls += [call(1.0 + 0.001 * i, "sms", "permanent", "doomed", f"d{i}") for i in range(FAILURES + 1)]
    calls += [call(1.03 + 0.001 * i, "email", "ok", "doomed", f"d{i}") for i in range(FAILURES + 1)]
    return calls + [call(1.3, "email", "ok", "doomed", "late")]


def test_first_calls_let_through_while_every_other_channel_could_be_open_prove_nothing() -> None:
    # With every breaker it could use open, a target may call the preferred channel all the same
    # (the reference does: a notification still gets its round); those calls do not show the SMS
    # breaker closed, and the skip within its cool-down is excused.
    a = analysis(lost_answers_then_a_burst(email_lost_too=True))
    assert breaker_counts_only_transient(a).valid is not False
    assert preference_respected(a).valid is not False


def test_first_calls_let_through_while_another_channel_was_surely_closed_prove_the_breaker_closed() -> None:
    # E-mail healthy all along: SMS was chosen over it, twenty times, so SMS's breaker let calls
    # through; the window then held no transient failure, and the skip is the bug.
    r = breaker_counts_only_transient(analysis(lost_answers_then_a_burst(email_lost_too=False)))
    assert r.valid is False and r.counts["violations"] == 1, r


# -- a suppression list, stated: a dead address's skip is the list's, a live address's is still the breaker's --

def addressed(rid: str) -> Op:
    return Op("setup", "put_recipient", {"recipient_id": rid, "channels": ["sms", "email"],
                                         "addresses": {"phone": f"+90{rid}", "email": f"{rid}@example.com"}},
              0, 0.0, type=OK)


def suppressed_analysis(calls: list[dict[str, Any]], suppression_list: bool) -> NotificationsAnalysis:
    for c in calls:
        c["to"] = f"+90{c['recipient_id']}" if c["channel"] == "sms" else f"{c['recipient_id']}@example.com"
    return NotificationsAnalysis([addressed("healthy"), addressed("doomed")], calls, breaker_window=WINDOW,
                                 breaker_min_failures=FAILURES, answer_timeout=TIMEOUT, breaker_cool_down=COOL_DOWN,
                                 suppression_list=suppression_list)


def test_with_a_suppression_list_stated_a_dead_address_s_later_notifications_may_skip_it() -> None:
    a = suppressed_analysis(a_dead_address_burst(then="email"), suppression_list=True)
    assert breaker_counts_only_transient(a).valid is not False
    r = preference_respected(a)
    assert r.valid is True and r.chances > 0, r
    unstated = breaker_counts_only_transient(suppressed_analysis(a_dead_address_burst(then="email"),
                                                                 suppression_list=False))
    assert unstated.valid is False  # the same skips, no rule stated: the breaker's, and the message says what else
    assert "state --suppression-list" in unstated.first_violation, unstated.first_violation


def test_a_first_call_to_an_address_heard_dead_just_before_it_arrived_was_chosen_before_and_is_no_violation() -> None:
    # the doomed recipient's SMS address is heard dead at 3.02 s; a round that chose SMS before that reaches the
    # providers at 3.1 s (a target decides up to DECIDED_BEFORE before its call arrives); one at 3.5 s knew.
    # E-mail answers a recipient who prefers it all along: the breaker let it through, nothing excuses a skip.
    def judged(late_sms_at: float) -> Any:
        calls = [call(0.1 * i, "sms", "ok", "healthy", f"h{i}") for i in range(WINDOW)]
        calls += [call(2.0 + 0.05 * i, "email", "ok", "mailer", f"m{i}") for i in range(30)]
        calls += [call(3.0, "sms", "permanent", "doomed", "d0"), call(3.03, "email", "ok", "doomed", "d0"),
                  call(late_sms_at, "sms", "ok", "doomed", "d1")]
        for c in calls:
            c["to"] = f"+90{c['recipient_id']}" if c["channel"] == "sms" else f"{c['recipient_id']}@example.com"
        mailer = Op("setup", "put_recipient", {"recipient_id": "mailer", "channels": ["email", "sms"],
                                               "addresses": {"phone": "+90mailer", "email": "mailer@example.com"}},
                    0, 0.0, type=OK)
        return preference_respected(NotificationsAnalysis(
            [addressed("healthy"), addressed("doomed"), mailer], sorted(calls, key=lambda c: c["at"]),
            breaker_window=WINDOW, breaker_min_failures=FAILURES, answer_timeout=TIMEOUT,
            breaker_cool_down=COOL_DOWN, suppression_list=True))

    chosen_before = judged(3.1)
    assert chosen_before.valid is True, chosen_before
    knew = judged(3.5)
    assert knew.valid is False and "not the preferred email" in knew.first_violation, knew


def test_with_a_suppression_list_stated_a_live_address_skipped_after_others_died_is_still_the_breaker_s() -> None:
    calls = a_dead_address_burst(then="sms")
    calls += [call(3.5 + 0.001 * i, "email", "ok", "healthy", f"live{i}") for i in range(3)]  # sms skipped
    r = breaker_counts_only_transient(suppressed_analysis(calls, suppression_list=True))
    assert r.valid is False and "counted permanent failures" in r.first_violation, r


def test_each_run_s_recipients_get_addresses_of_their_own() -> None:
    from peakproof.cases.notifications.workload import addressed_for_run, peak_minute

    people = peak_minute(300, 7)
    one, two = addressed_for_run(people, "run00001"), addressed_for_run(people, "run00002")
    addresses = lambda ps: [a for _, _, adr, _ in ps for a in adr.values()]  # noqa: E731
    assert len(set(addresses(one))) == len(addresses(one))  # never one address for two recipients
    assert not set(addresses(one)) & set(addresses(two))  # never the last run's
    assert [p[:2] + p[3:] for p in one] == [p[:2] + p[3:] for p in people]  # the same recipients otherwise


def test_a_blamed_breaker_comes_with_the_channel_s_calls_the_inferred_state_and_the_address() -> None:
    r = breaker_counts_only_transient(suppressed_analysis(a_dead_address_burst(then="email"), suppression_list=False))
    story = r.examples[0]
    assert isinstance(story, str) and story.startswith("sms as the harness saw it"), story
    assert story.count(": permanent") == FAILURES + 1 and ": answered" in story  # the burst and the healthy calls
    assert "0 transient failures" in story and f"opens at {FAILURES}" in story
    assert "could not be open" in story and "answered permanent" in story, story



def test_a_run_that_drives_no_channel_down_reports_the_permanent_failures_check_only_when_it_had_a_chance() -> None:
    from peakproof.cases.notifications.checks import check_analysis

    def named(a: NotificationsAnalysis, drives_down: bool) -> dict[str, Any]:
        return {r.name: r.valid for r in check_analysis(a, drives_down=drives_down)}

    # no permanent failures at all: a breaker that counted them could never have been told apart from a fair one
    healthy = analysis([call(0.1 * i, "sms", "ok", "healthy", f"h{i}") for i in range(WINDOW)])
    assert "breaker_counts_only_transient" not in named(healthy, drives_down=False)
    assert named(healthy, drives_down=True)["breaker_counts_only_transient"] == "unknown"  # a fault run must
    # a dead address's burst met in a peak all the same: judged, and its bug still FAILs
    assert named(analysis(a_dead_address_burst(then="sms")), drives_down=False)["breaker_counts_only_transient"] is True
    assert named(analysis(a_dead_address_burst(then="email")), drives_down=False)["breaker_counts_only_transient"] is False


def forced_through_then_a_lost_probe() -> tuple[list[Op], list[dict[str, Any]]]:
    """The pattern of a reference FAILed over a live target (its record, times shifted): every channel's
    breaker opens on lost answers at about 0.5 s; from 1.05 s (push still open, the others too) a
    window of calls goes to push all the same (a notification still gets its round); at 1.6 s, push half-open,
    its probe's answer is lost: the target gives up at 2.1 s and push opens again; at 3.2 s, the
    cool-down over, push's probe is out and the next notification of a push-first recipient goes
    to sms."""
    ops = [recipient(r, ["push", "sms", "email"]) for r in ("flood", "forced", "first")]
    calls = [call(0.001 * i, ch, "ack_lost", "flood", f"lost-{ch}{i}") for ch in ("push", "sms", "email")
             for i in range(FAILURES)]
    calls += [call(1.05 + 0.01 * i, "push", "ok", "forced", f"f{i}") for i in range(WINDOW)]
    calls += [call(1.6, "push", "ack_lost", "first", "probe")]
    calls += [call(3.19, "push", "permanent", "first", "probe2"), call(3.2, "sms", "ok", "first", "late")]
    return ops, sorted(calls, key=lambda c: c["at"])


def test_calls_forced_through_an_open_breaker_are_not_its_probe_and_a_lost_probe_reopens_it() -> None:
    ops, calls = forced_through_then_a_lost_probe()
    a = NotificationsAnalysis(ops, calls, breaker_window=WINDOW, breaker_min_failures=FAILURES,
                              answer_timeout=TIMEOUT, breaker_cool_down=COOL_DOWN)
    assert _could_be_open(a, "push", 3.2)  # reopened at 2.1 s (its probe, lost), probing again at 3.19 s
    assert preference_respected(a).valid is not False
    assert breaker_counts_only_transient(a).valid is not False
    # the same calls chosen (e-mail healthy all along, the forced ones had a choice): they were the probe,
    # answered; push closed at about 1 s, and a skip at 3.2 s with no transient failure since is the bug
    chosen = [c for c in calls if not (c["channel"] == "email" and c["outcome"] == "ack_lost")]
    b = NotificationsAnalysis(ops, chosen, breaker_window=WINDOW, breaker_min_failures=FAILURES,
                              answer_timeout=TIMEOUT, breaker_cool_down=COOL_DOWN)
    assert not _could_be_open(b, "push", 3.2)


def test_permanent_answers_to_calls_forced_through_an_open_breaker_do_not_make_its_skip_the_bug() -> None:
    # The breaker reopens on its lost probe (heard at 2.1 s); a dead address's calls are forced through it at
    # 2.5 s (every other channel failing too) and answer permanent; at 3.6 s a call is out on push (its
    # probe), and a first call at 3.7 s goes to sms. Permanent answers alone in the last cool-down would be
    # the bug, were those calls the target's choice: forced, they say nothing, and the skip is excused.
    ops, calls = forced_through_then_a_lost_probe()
    ops += [recipient("doomed", ["push", "sms", "email"])]
    calls = [c for c in calls if c["event_id"] not in ("probe2", "late")]
    calls += [call(1.5 + 0.001 * i, ch, "ack_lost", "flood", f"again-{ch}{i}") for ch in ("sms", "email")
              for i in range(FAILURES)]
    calls += [call(2.5 + 0.001 * i, "push", "permanent", "doomed", f"d{i}") for i in range(FAILURES + 1)]
    calls += [call(3.6, "push", "ok", "first", "probe2"), call(3.7, "sms", "ok", "first", "late")]
    a = NotificationsAnalysis(ops, sorted(calls, key=lambda c: c["at"]), breaker_window=WINDOW,
                              breaker_min_failures=FAILURES, answer_timeout=TIMEOUT, breaker_cool_down=COOL_DOWN)
    assert preference_respected(a).valid is not False
    assert breaker_counts_only_transient(a).valid is not False


def test_a_few_transient_failures_elsewhere_do_not_make_calls_forced_and_hide_the_bug() -> None:
    # e-mail fails transiently now and then (below its breaker's count): it could not have been open, so SMS's
    # calls were still the target's choice, and the skip after permanent answers alone is still the bug
    noise = [call(2.9 + 0.01 * i, "email", "transient", "healthy", f"n{i}") for i in range(FAILURES - 2)]
    r = breaker_counts_only_transient(analysis(a_dead_address_burst(then="email", noise=noise)))
    assert r.valid is False and "counting permanent ones" in r.first_violation, r
