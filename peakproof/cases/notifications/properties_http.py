"""Case N's properties over a URL: a channel that keeps failing is skipped once its breaker is due, and a
served target keeps every invariant under the nemesis (collected with the rest in :mod:`.properties`)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import Phase

from peakproof import nemesis
from peakproof.checks import assert_checks
from peakproof.history import OK
from peakproof.pytest_plugin import Pace, Target
from peakproof.realtime import PropertyViolated, run_machine

from .analysis import IN_VIRTUAL_TIME, DeliveryRules, NotificationsAnalysis
from .breaker import DECIDED_BEFORE, HEARD_LATE, due_openings
from .case import CASE
from .checks import check_notifications
from .driver import Providers, provider_record
from .properties_lanes import PYTEST_CONFIG, SharedFaults, announce_duration, rule_count
from .properties_over_http import OverHttp


def test_a_channel_that_keeps_failing_is_skipped_once_its_breaker_is_due(case_target: Target,
                                                                          request: pytest.FixtureRequest) -> None:
    """Push down while the notifications of recipients who prefer it keep coming, every run: the state
    machines drive a channel down only now and then, and never for sure long enough, so whether a
    breaker ever fell due was chance. Here it always does: push fails every call, as many
    notifications go out as the stated breaker needs failures to open (and a few more); once the
    providers' record shows the moment it fell due, more notifications for those recipients go out
    while it must still be open, and ``breaker_opens_when_due`` judges that moment, as every history.

    Over a URL it waits on real time: for the calls to reach the providers, for the moment the breaker fell
    due, for the target to hear it (and, when that moment was missed, a cool-down): it says how long before
    it waits, and re-arms the harness's time limit above its bounded waits."""
    t = case_target
    t.left_out("breaker_opens_when_due")  # no breaker stated: nothing falls due, and no wait for it
    down: set[str] = set()
    if t.in_process:
        rules = IN_VIRTUAL_TIME
        d = t.new_driver(outcome=lambda call: "transient" if getattr(call, "channel") in down else "ok", backoff=30.0)
        providers = None
        record = d.provider_calls
    else:
        if not t.provider_url:
            pytest.skip("needs --target-url .../notifications and --provider-url")
        rules = t.rules or DeliveryRules()
        d = t.new_driver()
        t.require(d, "setup")
        providers = Providers(t.provider_url, history=d.history)
        assert providers.config().type == OK, "the providers refused a reset of their configuration"
        record = lambda: provider_record(d, providers.base, d.history)  # noqa: E731
    run = f"due-{uuid.uuid4().hex[:8]}-"
    people = []
    for i in range(4):  # push first, and two healthy channels to go to instead
        rid = f"{run}r{i}"
        op = d.put_recipient(rid, ["push", "sms", "email"], {"push_token": f"tok{run}{i}",
                                                             "phone": f"+90{int(run[4:9], 16) % 100_000:05d}{i:07d}",
                                                             "email": f"r{i}{run}@example.com"})
        t.off_contract(op, "PUT recipient (set-up)")
        assert op.type == OK, f"could not set up a recipient: {op!r}"
        people.append(rid)
    sent = 0

    def send(n: int, why: str, priority: str = "reminder") -> None:
        nonlocal sent
        for _ in range(n):
            op = d.notify(f"{run}ev{sent}", people[sent % len(people)], priority, "Hatırlatma", why)
            assert op.type == OK, f"a valid notification must be accepted. Actual: {op!r}"
            sent += 1
            if providers is None:
                d.advance(0.01)  # virtual time: one call after another, as real time has them

    def recent() -> list[dict[str, Any]]:
        """The record since shortly before this test: a breaker's memory of earlier runs (a long-lived
        simulator holds every run's calls) matters only for a few cool-downs; older calls cost each poll."""
        since = started - max(60.0, 3 * rules.breaker_cool_down + rules.answer_timeout)
        return [c for c in record() if c["at"] >= since]

    def due_moments() -> list[float]:
        everything = recent()
        a = NotificationsAnalysis(d.history, [c for c in everything if c["recipient_id"].startswith(run)],
                                  channel_calls=everything, **rules.judging())
        return [opening.at for opening in due_openings(a, "push")]

    if providers is None:
        down.add("push")
    else:
        op = nemesis.inject(d.history, "channel_down", lambda: providers.config(replace=False, down=["push"]).type == OK,
                            channel="push")
        assert op.type == OK, f"the nemesis could not take push down: {op!r}"
    def judged() -> list[Any]:
        everything = recent()
        mine = [c for c in everything if c["recipient_id"].startswith(run)]
        # The delivery ratio is for a load, not for a channel held down on purpose; a check this history gave
        # no chance said nothing here (no permanent failure, no backlog, no status read), and is not claimed.
        return [*(r for r in check_notifications(d.history, mine, channel_calls=everything, rules=rules,
                                                 **({"answer_latency": 0.0} if providers is None else {}))
                  if r.name != "delivery_ratio_at_least" and (r.failed or r.chances != 0)),
                t.server_errors(d.history.ops)]

    # From when the target surely heard the failure and decided anew (the check's own margin), plus a hair.
    after = max(HEARD_LATE + DECIDED_BEFORE, min(1.0, 0.25 * rules.breaker_cool_down)) + 0.05
    if providers is not None:
        # typical: the first round finds its moment: the sends, the calls reaching the providers, the wait past
        # the moment, the record read a few times; bounded: the backlog's 60 s, then three rounds of every wait
        done = sorted(op.latency for op in d.history.ops if op.done)  # the set-up's: a round trip, their median
        rt = done[len(done) // 2] if done else 0.01
        sends = rules.breaker_min_failures + 4
        typical = after + 0.3 + HEARD_LATE + (sends + 6 + 10) * max(rt, 0.002)
        bound = 60.0 + 3 * (2 * rules.answer_timeout + 5.0 + 2 * rules.breaker_cool_down + 0.6 + after + 0.3
                            + (sends + 8) * max(rt, 0.002))
        Pace(request.node, f"{CASE.name} over HTTP", f"a channel that keeps failing: waits for push's breaker to "
             f"fall due ({sends} failures, the stated --breaker-failures {rules.breaker_min_failures} and 4 more), "
             f"then {after:.2f} s past it (at most {bound:.0f} s, when earlier traffic kept the breaker open: its "
             f"cool-down, {rules.breaker_cool_down:g} s)", 1, typical, unit="wait", bound=bound)
    started = d.now()  # the providers' record may hold earlier runs: only this test's moments are its own
    send(rules.breaker_min_failures + 4, "push is down")
    # A target still working off an earlier backlog (a load just before) calls them late: wait (bounded) until
    # every one of them reached a provider, then for the moment its breaker fell due.
    deadline = d.now() + 60.0
    while len({c["event_id"] for c in recent() if c["recipient_id"].startswith(run)}) < sent and d.now() < deadline:
        d.advance(0.2)
    seen: list[float] = []
    for _ in range(3):  # bounded: a moment whose skips came too late to judge (a busy machine) gets another
        deadline = d.now() + 2 * rules.answer_timeout + 5.0  # a target that never calls push makes none due
        while not (moments := [m for m in due_moments() if m >= started and m not in seen]) and d.now() < deadline:
            d.advance(0.1)
        if not moments:
            # push's breaker may have been open already (earlier traffic), so these went elsewhere: past its
            # cool-down, more of them; the probe among them fails, and the breaker falls due again
            d.advance(rules.breaker_cool_down + 0.5)
            send(rules.breaker_min_failures + 4, "push is down, again")
            continue
        seen += moments
        d.advance(max(0.0, moments[-1] + after - d.now()))  # while it must be open
        send(6, "push is down, its breaker due", "urgent")  # urgent: ahead of any reminders still queued
        d.advance(0.3 if providers is not None else 0.0)  # their first calls reach the providers
        verdict = next((r for r in judged() if r.name == "breaker_opens_when_due"), None)
        if verdict is not None and verdict.decided:  # none: no moment of this run's own yet (0 chances)
            break
        # past the cool-down, a notification for push: the probe (down, it fails) makes the breaker due again
        d.advance(max(0.0, moments[-1] + rules.breaker_cool_down + 0.1 - d.now()))
        send(2, "push is down, its cool-down over")
    if providers is None:
        down.clear()
    else:
        nemesis.lift(d.history, nemesis.ALL, lambda: providers.config().type == OK)
    assert_checks(judged(), decided=("breaker_opens_when_due",))


def test_a_served_target_keeps_every_invariant_over_http(case_target: Target,
                                                         request: pytest.FixtureRequest) -> None:
    from hypothesis import settings

    PYTEST_CONFIG[:] = [request.config]
    if case_target.in_process or not case_target.provider_url:
        pytest.skip("needs --target-url .../notifications and --provider-url")
    d = case_target.new_driver()
    case_target.require(d, "setup")
    probe = d.put_recipient(f"preflight-{uuid.uuid4().hex[:8]}", ["email"], {"email": "preflight@example.com"})
    case_target.off_contract(probe, "PUT recipient (set-up)")
    assert probe.type == OK, f"target_setup_succeeded: the driver could not set up a recipient: {probe!r}"
    # the round trip: the median of a few warm reads (a first request pays for a connection and a cold pool)
    reads = sorted(op.latency for op in (d.get_notification(f"preflight-{uuid.uuid4().hex[:8]}", process="poll")
                                         for _ in range(5)) if op.done)
    round_trip = reads[len(reads) // 2] if reads else probe.latency
    examples, steps = min(settings.default.max_examples, 10), 15
    rules = case_target.rules or DeliveryRules()
    pace = announce_duration(request.node, rules, examples, steps, case_target.url or "", round_trip,
                             rule_count(OverHttp))

    class Machine(OverHttp):
        target = case_target
        found: list[str] = []
        max_examples = examples
        shared = SharedFaults()

        def teardown(self) -> None:
            try:
                super().teardown()
            finally:
                pace.done()

    # real time: at most 10 examples of 15 steps; the first violating run is the verdict, whatever
    # Hypothesis's replay of it does against the live target (run_machine), and then what the examples'
    # finishers judged once their cascades finished (the first of theirs, whole); each broken check once, judged
    # on its own (later examples and rounds leave it out)
    seen: PropertyViolated | None = None
    try:
        run_machine(case_target, Machine, settings=settings(settings.default, max_examples=examples,
                                                                     stateful_step_count=steps,
                                                                     phases=[Phase.explicit, Phase.reuse,
                                                                             Phase.generate]))
    except PropertyViolated as e:
        seen = e
    finally:
        Machine.shared.finish()
    if seen is not None:
        raise PropertyViolated(seen.violation, seen.violation.replay, seen.also + Machine.shared.violations)
    if Machine.shared.violations:
        v = Machine.shared.violations
        raise PropertyViolated(v[0], "(judged at its example's end, once its cascades had finished, while the next "
                                     "examples ran)", v[1:])
    if Machine.shared.errors:
        raise Machine.shared.errors[0]
