"""Case N's state machine against a URL, with the harness's nemesis (:class:`OverHttp`): Hypothesis sends,
replays and reads, and turns the providers' failures on and off, lane by lane."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule

from peakproof import nemesis
from peakproof.checks import current_tally
from peakproof.history import OK
from peakproof.pytest_plugin import Target
from peakproof.realtime import Violation, history_of

from .analysis import DeliveryRules
from .breaker import DECIDED_BEFORE
from .driver import Providers
from .properties_base import CHANNELS, FINAL_STATUSES, SendsNotifications, TEXTS, read_all_and_judge
from .properties_lanes import (ADDRESS_FIELD, FLOOD_BACKLOG, FLOOD_CLIENTS, FLOOD_LATENCY, FLOOD_MAX, FAULTS, LANE,
                               LANES, Lane, PREFERENCES, SharedFaults, URGENT_AFTER_FLOOD, WHO, all_rounds, at_once,
                               progress, settle_bound)


class OverHttp(SendsNotifications):
    """Against a URL, with the harness's nemesis: Hypothesis sends, replays and reads, and turns the
    providers' failures on and off (a channel down, lost answers, a recipient's address dead on a
    channel, failures multiplied, slow answers). Every fault is an op in the history
    (:mod:`peakproof.nemesis`), and every example starts from the simulator's whole default model.

    An example drives :data:`LANES` lanes at once (:class:`Lane`): recipient ``who`` is in lane
    ``who // 3``, and the faults a step puts in force are its lane's. A step that must wait for the
    target's rounds (a cascade through every round, a retry after a lost answer) starts its fault, sends,
    and leaves the fault to end on a timer; the next steps go on meanwhile, in other lanes or this one
    (a step that needs its lane clean waits for it). So an example costs about its longest wait, not the
    sum of them, and Hypothesis still draws and replays the whole example.

    Needs ``--target-url`` (the notifications API) and ``--provider-url`` (whose record of
    calls is the ground truth). Time is real: the target's rules must be stated (``--backoff``,
    ``--answer-timeout``, ...), and the shorter its rounds, the shorter the run.
    """

    target: Target  # a URL target with a provider URL (the case_target fixture)
    examples = 0
    max_examples = 10
    shared: SharedFaults  # the property's: every example's faults in force and finishers (set per test run)

    @initialize(first=st.lists(FAULTS, max_size=2), doomed=st.none() | st.integers(0, 2))
    def start(self, first: list[tuple[str, Any]], doomed: int | None) -> None:
        self.rules: DeliveryRules = self.target.rules or DeliveryRules()
        self.d = self.target.new_driver()
        self.providers = Providers(self.target.provider_url, history=self.d.history)  # the simulator: ours
        self.lifter = Providers(self.target.provider_url, history=self.d.history)  # the timers' own connection
        self.run = uuid.uuid4().hex[:8] + "-"
        self.lanes = [Lane(k, f"{self.run}l{k}-") for k in range(LANES)]
        self.multiplier = 1.0  # the model's, as the simulator started (the reset says)
        type(self).examples += 1
        progress(f"example {type(self).examples} of at most {type(self).max_examples}")
        # the whole model, as the simulator started, but for what earlier examples' finishers still have in force
        reset = self.shared.reset(self.providers, self.run)
        assert reset.type == OK, f"the providers refused a reset of their configuration: {reset!r}"
        if isinstance(reset.value, dict):
            self.multiplier = float(reset.value.get("multiplier", 1.0))
        self.recipients = []
        self.ids = {}
        self.settled: set[str] = set()  # read in a final status: read again at the example's end only (finish)
        for lane in self.lanes:
            for i, prefs in enumerate(PREFERENCES):
                rid = f"{lane.prefix}r{i}-{uuid.uuid4().hex[:6]}"
                op = self.d.put_recipient(rid, list(prefs), self.addresses(3 * lane.index + i))
                assert op.type == OK, op
                self.recipients.append(rid)
        if doomed is not None:  # in every lane, a recipient whose preferred channel's address is dead: the
            for lane in self.lanes:  # cascade must move on (no_retry_after_permanent_on_same_channel's chances)
                self.strike(lane.index, ("dead_address", (doomed, PREFERENCES[doomed][0])))
        for fault in first:  # faults already in force when the first notification goes out
            self.strike(0, fault)
        # Every run replays a notification at once, as a client that missed the answer would: a
        # service that treats the replay as a new message is then caught in the first example.
        self.replay(self.send(doomed or 0, False, "Hatırlatma", "sent, then sent again"))
        if doomed is not None:
            for lane in self.lanes[1:]:
                self.send(3 * lane.index + doomed, False, "Hatırlatma", "to a dead address")

    # The plain sends of :class:`SendsNotifications`, to any lane's recipients: each lane's faults meet them.
    @rule(target=SendsNotifications.events, who=WHO, urgent=st.booleans(), title=TEXTS, body=TEXTS,
          replayed=st.booleans())
    def send_a_notification(self, who: int, urgent: bool, title: str, body: str, replayed: bool) -> tuple[str, str]:
        return super().send_a_notification(who, urgent, title, body, replayed)

    @rule(target=SendsNotifications.events, key=SendsNotifications.events, who=WHO)
    def the_same_event_to_another_recipient(self, key: tuple[str, str], who: int) -> tuple[str, str]:
        return super().the_same_event_to_another_recipient(key, who)

    @rule(seconds=st.sampled_from([0.05, 0.4, 1.0, 2.5]))
    def time_passes(self, seconds: float) -> None:
        self.d.advance(seconds)

    @rule(lane=LANE, fault=FAULTS)
    def the_nemesis_strikes(self, lane: int, fault: tuple[str, Any]) -> None:
        self.strike(lane, fault)
        self.only_faults_changed = True

    def strike(self, lane: int, fault: tuple[str, Any]) -> None:
        """A fault for one lane's recipients (a dead address: for its recipient alone, whichever lane)."""
        kind, param = fault
        here = self.lanes[lane]
        config = dict(here.config)
        if kind == "channel_down":
            down = CHANNELS if param == "all" else sorted({*config.get("down", []), param})
            config["down"], params = list(down), {"channel": param}
        elif kind == "lost_answers":
            config["ack_lost"], params = param, {"share": param}
        elif kind == "dead_address":
            who, channel = param
            who = 3 * lane + who % 3
            address = self.addresses(who)[ADDRESS_FIELD[channel]]
            params = {"recipient": self.recipients[who], "channel": channel, "address": address}
            op = nemesis.inject(self.d.history, kind, lambda: self.shared.kill(
                self.providers, self.run, channel, [address]), **params)
            assert op.type == OK, f"the nemesis could not configure the providers: {op!r}"
            here.struck.append((kind, params))
            return
        elif kind == "failures_multiplied":
            config["multiplier"], params = param, {"multiplier": param}
        else:
            config["latency"], params = param, {"latency_s": param}
        params["lane"] = here.prefix
        op = nemesis.inject(self.d.history, kind, lambda: self.shared.lane(self.providers, here.prefix, config),
                            **params)
        assert op.type == OK, f"the nemesis could not configure the providers: {op!r}"
        here.config = config
        here.struck.append((kind, params))

    def lane_rests(self, lane: Lane, client: Providers | None = None) -> None:
        """Every fault of ``lane`` ends (the history records each end, as it recorded the start)."""
        client = client or self.providers
        struck, lane.config, lane.struck = lane.struck, {}, []
        ended = any(kind != "dead_address" for kind, _ in struck) and self.shared.lane(client, lane.prefix, None)
        for kind, params in struck:
            if kind == "dead_address":  # the recipient's address lives again
                nemesis.lift(self.d.history, kind, lambda: self.shared.revive(
                    client, self.run, params["channel"], params["address"]), **params)
            else:
                nemesis.lift(self.d.history, kind, lambda: ended, **params)

    def for_a_while(self, lane: Lane, seconds: float) -> None:
        """``lane``'s faults end in ``seconds``, on a timer: the example goes on meanwhile."""
        lane.until = time.monotonic() + seconds
        lane.timer = threading.Timer(seconds, self.lane_rests, (lane, self.lifter))
        lane.timer.daemon = True
        lane.timer.start()

    def idle(self, who: int) -> int:
        """``who``, or the recipient with the same preferences in the first lane after it whose timed fault is
        over: a step that needs a clean lane takes one that is free rather than wait out another's rounds (the
        draw still decides the preferences; which lane is bookkeeping). All busy: the one free soonest (it will
        wait for it)."""
        for step in range(LANES):
            lane = self.lanes[(who // 3 + step) % LANES]
            if lane.timer is None or not lane.timer.is_alive():
                return 3 * lane.index + who % 3
        return 3 * min(self.lanes, key=lambda lane: lane.until).index + who % 3

    def clean(self, who: int) -> Lane:
        """``who``'s lane, its timed fault over and every fault of it ended: nothing fails there by the nemesis."""
        lane = self.lanes[who // 3]
        lane.wait()
        self.lane_rests(lane)
        return lane

    def quiet(self, who: int) -> Lane:
        """``who``'s lane clean (:meth:`clean`), and no other lane's fault hides a failure from the record: a step
        whose check judges a channel's breaker (a flood, an urgent one and reminders, a dead address's burst)
        must know why the target skipped a channel. A lane's channels down fail visibly (503s the record holds,
        a fair reason the checks weigh), so such a timed fault runs on; every other fault ends (a lost or slow
        answer is a timeout to the target, which its breaker counts, while the record says when it was answered),
        a timed one once its wait is over (a lost answer's lasts an answer timeout)."""
        for other in self.lanes:
            if other.index == who // 3:
                continue
            if other.timer is not None and other.timer.is_alive():
                if set(other.config) - {"down", "multiplier"}:
                    other.wait()
            else:
                self.lane_rests(other)
        return self.clean(who)

    @rule(lane=LANE)
    def the_nemesis_rests(self, lane: int) -> None:
        """A lane's faults end (not a timed one: it ends when its wait is over)."""
        if self.lanes[lane].timer is None or not self.lanes[lane].timer.is_alive():
            self.lane_rests(self.lanes[lane])
        self.only_faults_changed = True

    @rule(who=WHO)
    def a_dead_address_meets_a_burst(self, who: int) -> None:
        """One recipient's preferred channel, healthy and then dead for them alone: a breaker that
        counted the dead address's permanent failures as the channel's would skip the channel for
        the last three notifications (breaker_counts_only_transient judges the skip).

        The channel's health is made known as far as it can be, so that the check can decide: the
        recipient's lane rests and nothing fails by chance while the step runs (a seeded transient
        failure would be a fair reason for a breaker to open, and the check would give the skip the
        benefit of the doubt); the channel's window is first filled with answered calls, so that what
        earlier faults left in it is gone; then as many notifications to the dead address as the
        stated breaker needs failures to open, and one more. Sized from the stated rules and paced by
        the providers' record, not by a sleep, so that the bug shows on a busy machine too. Other lanes
        go on as they were: a failure of theirs on the channel is a fair reason the check weighs, and
        waiting for their timed faults would cost the example their rounds."""
        who = self.idle(who)
        lane = self.quiet(who)
        channel = PREFERENCES[who % 3][0]
        op = nemesis.inject(self.d.history, "failures_multiplied",
                            lambda: self.providers.config(replace=False, multiplier=0.0).type == OK, multiplier=0.0)
        assert op.type == OK, f"the nemesis could not configure the providers: {op!r}"
        try:
            self.burst(who, channel)
        finally:
            nemesis.lift(self.d.history, "failures_multiplied",
                         lambda: self.providers.config(replace=False, multiplier=self.multiplier).type == OK,
                         multiplier=0.0)
            self.lane_rests(lane)

    def burst(self, who: int, channel: str) -> None:
        """The burst itself (:meth:`a_dead_address_meets_a_burst`); ``who``'s dead address lives again after it."""
        # Each stage must reach the channel in full: if the target skipped it meanwhile (its breaker
        # still open from an earlier fault, or opened by its own timeouts), the moment is not clean
        # and the step ends without the last three.
        clean = self.send_and_hear(who, channel, min(40, self.rules.breaker_window), "to a live address")
        if clean and self.rules.suppression_list:
            # a suppression list calls a dead address once: the permanent failures come from as many
            # recipients, each with a dead address of its own on the channel; the three after them go
            # to ``who``, whose address there lives (a breaker that counted them skips it all the same)
            clean = self.dead_addresses_one_each(channel, min(40, self.rules.breaker_min_failures + 1))
        elif clean:
            address = self.addresses(who)[ADDRESS_FIELD[channel]]
            op = nemesis.inject(self.d.history, "dead_address", lambda: self.shared.kill(
                self.providers, self.run, channel, [address]), recipient=self.recipients[who], channel=channel)
            assert op.type == OK, f"the nemesis could not configure the providers: {op!r}"
            try:
                clean = self.send_and_hear(who, channel, min(40, self.rules.breaker_min_failures + 1),
                                           "to a dead address")
                if clean:
                    self.the_last_three(who)
            finally:
                nemesis.lift(self.d.history, "dead_address", lambda: self.shared.revive(
                    self.providers, self.run, channel, address), recipient=self.recipients[who], channel=channel)
            return
        if clean:
            self.the_last_three(who)

    def the_last_three(self, who: int) -> None:
        time.sleep(DECIDED_BEFORE + 0.1)  # the target has heard them all before it decides the next
        for _ in range(3):
            self.send(who, False, "Hatırlatma", "to a dead address")
        time.sleep(0.3)

    def dead_addresses_one_each(self, channel: str, n: int) -> bool:
        """``n`` recipients who prefer ``channel``, each with an address of its own there, dead; one reminder
        each, until the providers answered them all on ``channel`` (bounded; False if not in time)."""
        tag = uuid.uuid4().hex[:6]
        prefs = [channel] + [c for c in CHANNELS if c != channel]
        rids, dead_here = [], []
        for i in range(n):
            rid = f"{self.run}dead{tag}-{i}"
            addresses = {"push_token": f"tokdead{tag}{i}", "phone": f"+90{int(tag[:5], 16) % 100_000:05d}{i:07d}",
                         "email": f"dead{tag}{i}@example.com"}
            op = self.d.put_recipient(rid, prefs, addresses)
            self.expect(op.type == OK, f"a valid recipient must be accepted. Actual: {op!r}")
            rids.append(rid)
            dead_here.append(addresses[ADDRESS_FIELD[channel]])
        op = nemesis.inject(self.d.history, "dead_address",
                            lambda: self.shared.kill(self.providers, self.run, channel, dead_here),
                            recipients=rids, channel=channel)
        assert op.type == OK, f"the nemesis could not configure the providers: {op!r}"
        for rid in rids:
            event = f"{self.run}ev-{uuid.uuid4().hex[:8]}"
            sent = self.d.notify(event, rid, "reminder", "Hatırlatma", "to a dead address")
            self.expect(sent.type == OK, f"a valid request must be accepted. Actual: {sent!r}")
            self.ids[(event, rid)] = sent.value["notification_id"]
        mine = set(rids)
        deadline = time.monotonic() + 2 * self.rules.answer_timeout + 2
        while sum(1 for c in self.providers.calls() if c.get("channel") == channel and c.get("recipient_id") in mine) < n:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def send_and_hear(self, who: int, channel: str, n: int, body: str) -> bool:
        """Send ``n`` reminders to recipient ``who`` and wait (bounded) until the providers have
        answered that many calls to them on ``channel``; False if they did not in time."""
        def answered() -> int:
            rid = self.recipients[who]
            return sum(1 for c in self.providers.calls() if c.get("channel") == channel
                       and c.get("recipient_id") == rid)
        before = answered()
        for _ in range(n):
            self.send(who, False, "Hatırlatma", body)
        deadline = time.monotonic() + 2 * self.rules.answer_timeout + 2
        while answered() - before < n:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    @rule(who=WHO)
    def an_answer_is_lost_then_answers_return(self, who: int) -> None:
        """Every answer lost while a notification for each of the lane's recipients goes out (delivered, the
        target hears nothing), then answers return: the target's retry must reach the provider under the
        same idempotency key, or the recipient hears twice (one_delivery_per_event judges it from the
        record). The answers return on a timer, once the target surely gave up on the first; its retry
        comes a round later, while the example goes on."""
        who = self.idle(who)
        lane = self.clean(who)
        self.strike(lane.index, ("lost_answers", 1.0))
        for i in range(3):  # each of the lane's recipients, ``who`` first: three retries for one wait
            self.send(3 * lane.index + (who + i) % 3, True, "Güvenlik kodu", "a lost answer")
        self.for_a_while(lane, self.rules.answer_timeout + 0.2)

    @rule(who=WHO)
    def every_channel_fails_for_a_while(self, who: int) -> None:
        """Every channel down, for this lane, while a notification for each of its recipients goes through every
        round its budget allows, and a few more: a target that spends more than its budget shows it
        (attempt_budget_respected). The channels come back on a timer."""
        who = self.idle(who)
        lane = self.clean(who)
        self.strike(lane.index, ("channel_down", "all"))
        for i in range(3):  # each of the lane's recipients, ``who`` first: three cascades for one wait
            self.send(3 * lane.index + (who + i) % 3, False, "Hatırlatma", "every channel down")
        self.for_a_while(lane, all_rounds(self.rules))

    @rule(who=WHO, reminders=st.integers(1, 3))
    def an_urgent_one_then_reminders_at_once(self, who: int, reminders: int) -> None:
        """An urgent notification, then reminders for the same recipient as soon as it is accepted,
        nothing queued and nothing failing: they go to the same channel, and none may be called before
        the urgent one (urgent_first_outside_a_backlog: a target that held urgent notifications back a
        round while reminders went at once shows it here, where no backlog forms)."""
        who = self.idle(who)
        self.quiet(who)
        self.send(who, True, "Acil: giriş kodu", "urgent, reminders right behind it")
        for i in range(reminders):
            self.send(who, False, "Hatırlatma", f"a reminder right behind an urgent one #{i}")
        time.sleep(min(self.rules.backoff, 1.0) + 0.1)  # the urgent one's round has come, whatever the target

    @rule(who=WHO, size=st.sampled_from([80, 160]))
    def a_reminder_flood_then_urgent_ones(self, who: int, size: int) -> None:
        """Reminders for one recipient faster than the target can deliver them (the providers slowed
        to FLOOD_LATENCY for the recipient's lane, nothing else failing there), then URGENT_AFTER_FLOOD urgent
        notifications for the same recipient: each must overtake the backlog, not queue behind it
        (urgent_overtakes_reminder_backlog judges it from the providers' record; whether the backlog
        formed is the check's chance count).

        The flood is sized by what the target delivers, measured here: after each wave the providers'
        record says how many of the reminders were already called; while that leaves no backlog (a
        target with many workers drains 80 reminders as fast as they come), the next wave is twice as
        big, up to FLOOD_MAX in all. A target with one FIFO for both priorities is then caught however
        fast it delivers."""
        who = self.idle(who)
        lane = self.quiet(who)
        self.strike(lane.index, ("slow_providers", FLOOD_LATENCY))
        rid, tag = self.recipients[who], uuid.uuid4().hex[:6]
        flood = self.target.new_driver(history=self.d.history)  # its own connections, the same history

        def called() -> int:
            return sum(1 for c in self.providers.calls() if c.get("recipient_id") == rid)

        before, sent, wave, refused = called(), 0, size, []
        with ThreadPoolExecutor(FLOOD_CLIENTS) as pool:
            while True:
                refused += at_once(pool, flood, [(f"{self.run}flood{tag}-{i}", rid) for i in range(sent, sent + wave)],
                                   "flood")
                sent += wave
                backlog = sent - (called() - before)
                if backlog >= max(FLOOD_BACKLOG, sent // 4) or sent + 2 * wave > FLOOD_MAX:
                    break
                wave *= 2
        self.expect(not refused, f"a valid reminder must be accepted. Actual: {refused[:1]!r}")
        note(f"reminder flood: {sent} sent, {backlog} not yet called when the urgent ones went")
        for i in range(URGENT_AFTER_FLOOD):  # not just the first: a target with one priority slot lets the rest queue
            self.send(who, True, "Acil: güvenlik kodu", f"urgent #{i}, sent after the flood")

    @invariant()
    def every_check_holds(self) -> None:
        # After a step that only turned the providers' faults on or off (a few ms), the example is where its last
        # judgement left it: judging it again costs a read of everything (0.2 s a step) and shows nothing the next
        # step's judgement, or the example's last one, would not (the checks judge the whole history each time).
        if getattr(self, "only_faults_changed", False):
            self.only_faults_changed = False
            return
        if hasattr(self, "d"):
            self.expect(lambda: read_all_and_judge(self.d, self.ids.values(), self.run, self.rules, self.providers,
                                                   self.target, settled=self.settled))

    def teardown(self) -> None:
        """The example's end is judged once its cascades finished (a retry after a lost answer, a round beyond the
        budget, come after the last step): by a finisher, while the next examples run, so that no example waits
        for the rounds of the one before (:meth:`SharedFaults.finish` waits for them all; their verdicts are the
        property's). An example a step already failed is not judged again: that failure is the verdict."""
        if not hasattr(self, "d") or not hasattr(self, "ids"):  # set-up failed: its own error says why
            return
        if sys.exc_info()[1] is not None:  # Hypothesis calls teardown in a ``finally``: a step's error is in flight
            return
        # A fault no timer holds ends with its example, as the next example's reset once ended it: left in
        # force while the finisher waits, a lost or slow answer would time the target out during the next
        # example's steps, and its breaker would skip a channel for a reason that example cannot see.
        for lane in self.lanes:
            if lane.timer is None or not lane.timer.is_alive():
                self.lane_rests(lane)
        finisher = threading.Thread(target=self.finish, name=f"finisher-{self.run}", daemon=True)
        self.shared.finishers.append(finisher)
        finisher.start()

    def finish(self) -> None:
        """Wait for the lanes' timed faults to end, let every cascade finish (bounded), then judge once more."""
        try:
            for lane in self.lanes:  # every timed fault over: the cascades it held back then finish
                lane.wait()
            deadline, final = time.monotonic() + self.settle_seconds, set(self.settled)
            while time.monotonic() < deadline:  # each poll reads what was not yet final; the judgement, all of them
                for nid in self.ids.values():
                    if nid not in final:
                        op = self.d.get_notification(nid, process="poll")
                        if op.type == OK and op.value["status"] in FINAL_STATUSES:
                            final.add(nid)
                if final.issuperset(self.ids.values()):
                    break
                time.sleep(0.2)
            read_all_and_judge(self.d, self.ids.values(), self.run, self.rules, self.providers, self.target)
        except AssertionError as e:
            type(self).found.append(str(e))
            checks = tuple(getattr(e, "checks", ()))
            self.shared.violations.append(Violation(str(e), history_of(self), checks=checks))
            excused = current_tally().excused  # judged on their own from here: later examples judge every other
            for c in checks:
                excused.setdefault(c, f"not judged again: {c} was found broken earlier in this run (its first "
                                      f"violation kept); every other promise is judged on its own")
        except BaseException as e:  # the harness's (a record it could not read): never the target's verdict
            self.shared.errors.append(e)
        finally:
            for lane in self.lanes:  # tidy: the faults a step left in force end with the example
                self.lane_rests(lane)

    @property
    def settle_seconds(self) -> float:
        return settle_bound(self.rules)
