"""Case N invariants, stated as properties.

A state machine in virtual time where Hypothesis decides what every provider call
answers (ok, transient, permanent, ack lost), when requests are replayed, how far the
clock moves and which channel goes down. After every step the notification checks judge
the history against the providers' record. In-process (the reference core and the
provider simulator in one virtual clock) by default.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable

import pytest
from hypothesis import Phase, note
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from peakproof.cases.notifications import (IN_VIRTUAL_TIME, DeliveryRules, NotificationsAnalysis, Providers,
                                           check_notifications, provider_record)
from peakproof import nemesis
from peakproof.cases.notifications.breaker import DECIDED_BEFORE, HEARD_LATE, due_openings
from peakproof.checks import assert_checks
from peakproof.history import FAIL, OK, Op
from peakproof.pytest_plugin import (Pace, Target, announce, assert_contract_kept, contract_for,
                                     hypothesis_small_examples)
from peakproof.realtime import PropertyViolated, Violation, history_of, run_machine

CHANNELS = ["push", "sms", "email"]
# Any text a client may send, NUL aside: PostgreSQL's text cannot hold it, and a service that refuses it (the Beacon
# stack: 400) breaks no promise of the design; its refusal is the contract stage's to note. (A title with NUL
# FAILed the stack's properties as "a valid request must be accepted", one run in a few under the dev profile.)
TEXTS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="\x00"),
                max_size=400) | st.sampled_from([
    "Siparişiniz yolda: kargo bugün teslim edilecek, İstanbul şubesi.", "<script>alert(1)</script> & more",
    "Çağrı merkezi: ığüşöç ĞÜŞİÖÇ " * 20, "plain ascii", "Subject\r\nBcc: evil@example.com"])


def read_all_and_judge(d: Any, ids: Iterable[str], prefix: str = "", rules: DeliveryRules = DeliveryRules(),
                       providers: Providers | None = None, target: Target | None = None,
                       leave_out: tuple[str, ...] = (), **options: Any) -> None:
    """Read every notification (their statuses join the history), *then* the providers' record
    (read first, a delivery between the two would look missing), and judge. ``prefix``: this
    run's ids, when the providers served other runs too (every call still counts for the
    breakers). The delivery ratio is left out: a ratio is for a load, not for adversarial answers.
    With ``target``, its requests are judged too (``no_server_errors``). ``leave_out``: checks this
    machine cannot give a chance (not judged, so not claimed)."""
    for nid in ids:
        d.get_notification(nid, process="reader")
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


class NotificationsMachine(SendsNotifications):
    """A few recipients, events sent and replayed; Hypothesis answers for the providers (in process)."""

    target: Target = Target("notifications")  # set per test run (the notifications_target fixture)

    @initialize(data=st.data())
    def start(self, data: st.DataObject) -> None:
        self.outcomes: list[str] = []
        self.down: set[str] = set()
        self.data = data

        def provider(call: object) -> str:
            ch = getattr(call, "channel")
            if ch in self.down:
                return "transient"
            return self.data.draw(st.sampled_from(["ok", "ok", "transient", "permanent", "ack_lost"]),
                                   label=f"{ch} answers")

        self.d = self.target.new_driver(outcome=provider, backoff=30.0)
        self.set_up_recipients([list(data.draw(st.permutations(CHANNELS), label=f"preferences of r{i}"))
                                for i in range(3)])

    @rule(key=SendsNotifications.events)
    def look_it_up(self, key: tuple[str, str]) -> None:
        op = self.d.get_notification(self.ids[key])
        assert op.type == OK, op

    @rule(seconds=st.sampled_from([0.5, 5.0, 31.0, 61.0]))
    def time_passes(self, seconds: float) -> None:
        self.d.advance(seconds)

    @rule(who=st.integers(0, 2))
    def an_urgent_one_then_a_reminder_right_behind_it(self, who: int) -> None:
        """A reminder for the same recipient half a second after an urgent one: it must not be called
        first (urgent_first_outside_a_backlog's chance, which no other step makes for sure)."""
        self.send(who, True, "Acil: giriş kodu", "urgent")
        self.d.advance(0.5)
        self.send(who, False, "Hatırlatma", "a reminder right behind an urgent one")

    @rule(channel=st.sampled_from([*CHANNELS, None]))
    def a_channel_goes_down_or_all_recover(self, channel: str | None) -> None:
        if channel is None:
            self.down.clear()  # every channel is back
        else:
            self.down.add(channel)

    @invariant()
    def every_check_holds(self) -> None:
        if hasattr(self, "d"):  # virtual time: a lost answer is given up on at once
            # Not claimed here: a backlog needs delivery to saturate and the breaker check a dead address
            # meeting a burst, neither of which this machine's steps build (the URL properties with the
            # nemesis do, and tests/unit/test_notifications_breaker.py; the load gives both their chances)
            read_all_and_judge(self.d, self.ids.values(), rules=IN_VIRTUAL_TIME, target=self.target,
                               leave_out=IN_PROCESS_UNCLAIMED, answer_latency=0.0)

    def teardown(self) -> None:
        if hasattr(self, "d"):
            note("provider calls:\n" + "\n".join(f"  {c['at']:.1f} {c['channel']} {c['event_id']} {c['outcome']}"
                                                 for c in self.d.provider_calls()[-30:]))


ADDRESS_FIELD = {"push": "push_token", "sms": "phone", "email": "email"}
# A flood: the providers answer in 100 ms, slow enough that a few hundred reminders outrun a
# channel's workers, fast enough that the backlog drains in seconds; sent by 32 clients at once.
FLOOD_LATENCY, FLOOD_CLIENTS = 0.1, 32
URGENT_AFTER_FLOOD = 3  # urgent notifications sent one after another behind a flood's backlog
# The flood grows until this many reminders (and a quarter of those sent) wait uncalled, or FLOOD_MAX went.
FLOOD_BACKLOG, FLOOD_MAX = 40, 2_560
PREFERENCES = [["push", "sms", "email"], ["sms", "email", "push"], ["email", "push", "sms"]]
FAULTS = st.one_of(
    st.tuples(st.just("channel_down"), st.sampled_from([*CHANNELS, "all"])),
    st.tuples(st.just("lost_answers"), st.sampled_from([0.3, 1.0])),
    st.tuples(st.just("dead_address"), st.tuples(st.integers(0, 2), st.sampled_from(CHANNELS))),
    st.tuples(st.just("failures_multiplied"), st.sampled_from([3.0, 10.0])),
    st.tuples(st.just("slow_providers"), st.sampled_from([0.2, 0.6])),
)
# Over a URL, an example drives this many lanes at once (OverHttp): independent groups of three recipients
# whose waits overlap. A few: enough that one lane's wait for the target's rounds leaves steps for the others,
# few enough that the steps of an example still meet in one lane (the properties test behaviour, not capacity).
LANES = 3
LANE = st.integers(0, LANES - 1)
WHO = st.integers(0, 3 * LANES - 1)  # a recipient: lane who // 3, preferences PREFERENCES[who % 3]


def all_rounds(rules: DeliveryRules) -> float:
    """How long every channel stays down for a notification to go through every round its budget allows, and one
    more: (budget + 1) rounds of the stated backoff, and a hair."""
    return (rules.budget + 1) * (rules.backoff + 0.05) + 0.2


def progress(text: str) -> None:
    """A line on the terminal as the property goes (pytest captures print; a real-time run must show life)."""
    if PYTEST_CONFIG:
        announce(PYTEST_CONFIG[0], f"peakproof: notifications over HTTP: {text}")


PYTEST_CONFIG: list[Any] = []  # the session's config, for progress lines (set by the test)


def step_seconds(rules: DeliveryRules) -> dict[str, float]:
    """What each real-time rule of :class:`OverHttp` holds its step for, from the target's stated rules: the
    longest its sleeps and bounded waits make it (each rule's typical wait is about this; the bounded polls end
    sooner). The waits for the target's rounds are not here: they run on timers (:func:`timed_seconds`)."""
    return {"a_dead_address_meets_a_burst": DECIDED_BEFORE + 0.4 + BURST_SECONDS, "time_passes": 0.99,
            "an_urgent_one_then_reminders_at_once": min(rules.backoff, 1.0) + 0.1,
            "a_reminder_flood_then_urgent_ones": FLOOD_SECONDS}


def timed_seconds(rules: DeliveryRules) -> dict[str, float]:
    """The faults that end on a timer while the example goes on (:meth:`OverHttp.for_a_while`), and how long."""
    return {"every_channel_fails_for_a_while": all_rounds(rules),
            "an_answer_is_lost_then_answers_return": rules.answer_timeout + 0.2}


def example_model(rules: DeliveryRules, steps: int, round_trip: float, n_rules: int) -> tuple[float, float, float]:
    """How long :class:`OverHttp` takes, as modelled before any example ran: (an example's typical seconds, the
    tail, an example's longest). Typical: the rules drawn about evenly (``n_rules`` of them), each step's own
    waits as :func:`step_seconds` says, and its requests: its own sends and the invariant's reads, every
    notification of the example so far, REQUESTS_A_STEP round trips on average. The timed waits overlap the
    steps and the examples after (each example's end is judged by a finisher, :meth:`OverHttp.teardown`): the
    test ends by waiting for the last one's, the longest timed wait (a few examples almost surely draw it) and a
    settle of a round or two: the tail. Longest: every step the longest wait (a step waits for its lane's timed
    fault), and its settle's bound: a floor of the harness's time limit, not a duration."""
    each, timed = step_seconds(rules), timed_seconds(rules)
    # no judgement after a step that only turned faults on or off (OverHttp.every_check_holds)
    requests = REQUESTS_A_STEP * max(round_trip, 0.002) + JUDGE_SECONDS * (n_rules - len(FAULTS_ONLY)) / n_rules
    settle = settle_bound(rules)
    typical = steps * (sum(each.values()) / n_rules + requests)
    tail = max(timed.values()) + min(settle, rules.backoff + rules.answer_timeout)
    longest = steps * (max([*each.values(), *timed.values()]) + 2 * rules.answer_timeout + 2 + requests) + settle
    return typical, tail, longest


# A step's requests over a URL: its sends, the providers' record, and a read of every notification of the
# example so far (the invariant): about this many round trips a step, over an example of 15 steps.
REQUESTS_A_STEP = 8
# Measured on 2 cores against the served reference and the stdlib server (a step-timing run of 150 steps, 5 s
# rounds): the invariant's judgement after each step, its reads of every notification and of the providers' growing
# record and the checks over them, 0.21 s a step; a flood, its waves and the record read after each, 1.36 s; a dead
# address's burst, its sends and the record polled until they were heard, 0.9 s (0.3 s beside its sleeps). Without
# them the first figure said 32.6 s for a run of 77 s (benchmarks/bench_announced_durations.py).
JUDGE_SECONDS, FLOOD_SECONDS, BURST_SECONDS = 0.2, 1.4, 0.3
FAULTS_ONLY = ("the_nemesis_strikes", "the_nemesis_rests")  # OverHttp's rules that only turn faults on or off


def settle_bound(rules: DeliveryRules) -> float:
    """Five rounds of the target's (backoff plus a lost answer's timeout), 2 to 10 s: how long an example's end
    waits at most for its cascades to finish (a target with the seed's 30 s rounds cannot finish them within a
    property's step anyway)."""
    return min(10.0, max(2.0, 5 * (rules.backoff + rules.answer_timeout)))


def rule_count(machine: type) -> int:
    """How many rules a state machine draws from (its initialize rules aside)."""
    return sum(1 for name in dir(machine) if getattr(getattr(machine, name, None), "hypothesis_stateful_rule", None))


def announce_duration(item: pytest.Item, rules: DeliveryRules, examples: int, steps: int, url: str,
                      round_trip: float, n_rules: int) -> Pace:
    """Say how long the machine will take, worked out from the rules and the round trip, then again from
    what its examples measured (:class:`Pace`), and what to state when it is long."""
    typical, tail, longest = example_model(rules, steps, round_trip, n_rules)
    how = (f"{url}: {examples} examples x {steps} steps; the target's rules (backoff {rules.backoff:g} s, answer "
           f"timeout {rules.answer_timeout:g} s, budget {rules.budget}) and a {round_trip * 1000:.0f} ms round trip")
    if examples * typical + tail > 600:
        how += ("; that is long: if your target's rounds are shorter than the seed's, state them (--backoff, "
                "--call-timeout, --budget); HYPOTHESIS_PROFILE=dev runs fewer examples; or leave these rules to the "
                "load (peakproof run --skip-properties)")
    return Pace(item, "notifications over HTTP", how, examples, typical, bound=longest,
                small=hypothesis_small_examples(examples), tail=tail)


def at_once(pool: ThreadPoolExecutor, driver: Any, keys: list[tuple[str, str]], process: str) -> list[Op]:
    """A reminder for each (event, recipient) of ``keys``, sent by ``pool``'s clients at once through ``driver``;
    the refused ones. Only a refusal is a broken promise here: a timeout (info) is an outcome unknown, which the
    checks already judge as "maybe accepted" (32 clients on a shared machine can meet one)."""
    def remind(i: int) -> Op:
        event, rid = keys[i]
        return driver.notify(event, rid, "reminder", "Hatırlatma", f"#{i}", process=process)
    return [op for op in pool.map(remind, range(len(keys))) if op.type == FAIL]


class SharedFaults:
    """The providers' faults of one property's examples, which overlap: an example ends while its timed faults
    still run and its cascades finish (:meth:`OverHttp.teardown` leaves them to a finisher), and the next
    starts. So an example's reset of the simulator keeps what earlier examples still have in force: their
    lanes' faults and their dead addresses (each lane keyed by its recipients' prefix, each address unique to
    its recipient, so neither touches the new example). Every change goes through here, under one lock, and
    so does every finisher (:meth:`finish` waits for them: the property's verdict includes theirs)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lanes: dict[str, dict[str, Any]] = {}  # lane prefix -> its faults, while in force
        self.dead: dict[str, dict[str, list[str]]] = {}  # example (run) -> channel -> addresses the nemesis killed
        self.finishers: list[threading.Thread] = []
        self.violations: list[Violation] = []  # what the finishers judged broken, in the order they judged
        self.errors: list[BaseException] = []  # what else they raised (the harness's, never the target's)

    def reset(self, client: Providers, run: str) -> Op:
        """The simulator's model as it started, but for what other examples still have in force; ``run``'s
        dead addresses end too."""
        with self.lock:
            self.dead.pop(run, None)
            return client.config(lanes=self.lanes, dead=self.killed())

    def killed(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for channels in self.dead.values():
            for channel, addresses in channels.items():
                out.setdefault(channel, []).extend(addresses)
        return out

    def lane(self, client: Providers, prefix: str, faults: dict[str, Any] | None) -> bool:
        """``prefix``'s faults become ``faults`` (None: they end)."""
        with self.lock:
            if faults:
                self.lanes[prefix] = faults
            else:
                self.lanes.pop(prefix, None)
            return client.config(replace=False, lanes={prefix: faults or None}).type == OK

    def kill(self, client: Providers, run: str, channel: str, addresses: list[str]) -> bool:
        with self.lock:
            self.dead.setdefault(run, {}).setdefault(channel, []).extend(addresses)
            return client.config(replace=False, dead=self.killed()).type == OK

    def revive(self, client: Providers, run: str, channel: str, address: str) -> bool:
        with self.lock:
            kept = self.dead.get(run, {}).get(channel, [])
            if address in kept:
                kept.remove(address)
            return client.config(replace=False, dead=self.killed()).type == OK

    def finish(self) -> None:
        """Wait for every example's finisher (each bounded by its own waits)."""
        for finisher in self.finishers:
            finisher.join()


class Lane:
    """One independent group of recipients in an example (one per preference order), with faults of its own:
    the providers answer its recipients by its faults alone (the simulator's ``lanes``). A fault that must
    last (every channel down for the cascade's rounds, answers lost until a timeout) ends on a timer, so
    that while one lane waits the example goes on in the others: the waits of an example overlap."""

    def __init__(self, index: int, prefix: str) -> None:
        self.index, self.prefix = index, prefix
        self.config: dict[str, Any] = {}  # what the simulator answers this lane's recipients with
        self.struck: list[tuple[str, dict[str, Any]]] = []  # the faults in force, as the history recorded them
        self.timer: threading.Timer | None = None  # the timed fault's end (None: no fault is timed)
        self.until = 0.0  # when it ends (time.monotonic)

    def wait(self) -> None:
        """Until the lane's timed fault has ended (bounded by the wait it was given)."""
        if self.timer is not None:
            self.timer.join()
            self.timer = None


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

    target: Target  # a URL target with a provider URL (the notifications_target fixture)
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
            self.expect(read_all_and_judge, self.d, self.ids.values(), self.run, self.rules, self.providers, self.target)

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
            deadline = time.monotonic() + self.settle_seconds
            while time.monotonic() < deadline:
                ops = [self.d.get_notification(nid, process="poll") for nid in self.ids.values()]
                if all(op.type == OK and op.value["status"] in ("delivered", "failed") for op in ops):
                    break
                time.sleep(0.2)
            read_all_and_judge(self.d, self.ids.values(), self.run, self.rules, self.providers, self.target)
        except AssertionError as e:
            type(self).found.append(str(e))
            self.shared.violations.append(Violation(str(e), history_of(self)))
        except BaseException as e:  # the harness's (a record it could not read): never the target's verdict
            self.shared.errors.append(e)
        finally:
            for lane in self.lanes:  # tidy: the faults a step left in force end with the example
                self.lane_rests(lane)

    @property
    def settle_seconds(self) -> float:
        return settle_bound(self.rules)


def test_a_channel_that_keeps_failing_is_skipped_once_its_breaker_is_due(notifications_target: Target,
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
    t = notifications_target
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
        Pace(request.node, "notifications over HTTP", f"a channel that keeps failing: waits for push's breaker to "
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


def test_a_served_target_keeps_every_invariant_over_http(notifications_target: Target,
                                                         request: pytest.FixtureRequest) -> None:
    from hypothesis import settings

    PYTEST_CONFIG[:] = [request.config]
    if notifications_target.in_process or not notifications_target.provider_url:
        pytest.skip("needs --target-url .../notifications and --provider-url")
    d = notifications_target.new_driver()
    notifications_target.require(d, "setup")
    probe = d.put_recipient(f"preflight-{uuid.uuid4().hex[:8]}", ["email"], {"email": "preflight@example.com"})
    notifications_target.off_contract(probe, "PUT recipient (set-up)")
    assert probe.type == OK, f"target_setup_succeeded: the driver could not set up a recipient: {probe!r}"
    # the round trip: the median of a few warm reads (a first request pays for a connection and a cold pool)
    reads = sorted(op.latency for op in (d.get_notification(f"preflight-{uuid.uuid4().hex[:8]}", process="poll")
                                         for _ in range(5)) if op.done)
    round_trip = reads[len(reads) // 2] if reads else probe.latency
    examples, steps = min(settings.default.max_examples, 10), 15
    rules = notifications_target.rules or DeliveryRules()
    pace = announce_duration(request.node, rules, examples, steps, notifications_target.url or "", round_trip,
                             rule_count(OverHttp))

    class Machine(OverHttp):
        target = notifications_target
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
    # finishers judged once their cascades finished (the first of theirs, whole)
    try:
        run_machine(notifications_target, Machine, settings=settings(settings.default, max_examples=examples,
                                                                     stateful_step_count=steps,
                                                                     phases=[Phase.explicit, Phase.reuse,
                                                                             Phase.generate]))
    finally:
        Machine.shared.finish()
    if Machine.shared.violations:
        raise PropertyViolated(Machine.shared.violations[0], "(judged at its example's end, once its cascades had "
                                                             "finished, while the next examples ran)")
    if Machine.shared.errors:
        raise Machine.shared.errors[0]


def test_notifications_keep_every_invariant_whatever_the_providers_answer(
        notifications_target: Target, in_process_only: None) -> None:
    class Machine(NotificationsMachine):
        target = notifications_target

    run_state_machine_as_test(Machine)


def test_each_notification_stays_within_its_budget_and_status_only_moves_forward(
        notifications_target: Target, in_process_only: None) -> None:
    # the same machine, judged at its end: every notification has finished within 3 rounds
    class Finishing(NotificationsMachine):
        target = notifications_target

        def teardown(self) -> None:
            if hasattr(self, "d"):
                self.d.outcome = None  # no drawing in teardown: the simulator's own failure model answers
                self.d.advance(200)
                for nid in self.ids.values():
                    op = self.d.get_notification(nid)
                    last = op.value["attempts"][-1]["outcome"] if op.value["attempts"] else None
                    assert op.value["status"] in ("delivered", "failed") or last == "unknown", op
                    assert len(op.value["attempts"]) <= 3, op
                a = NotificationsAnalysis(self.d.history, self.d.provider_calls())
                assert_checks(r for r in check_notifications(a.ops, a.calls, rules=IN_VIRTUAL_TIME, answer_latency=0.0)
                              if r.name != "delivery_ratio_at_least" and r.name not in IN_PROCESS_UNCLAIMED)
            super().teardown()

    run_state_machine_as_test(Finishing)


# -- the contract, checked by a peer tool ---------------------------------------------------------------
# Last in the file: Over a URL it leaves recipients and notifications of its own behind (delivered, too, so it runs after every property that judges the providers' calls).

def test_the_target_answers_every_request_as_its_openapi_contract_says(request: pytest.FixtureRequest,
                                                                        tmp_path: Path) -> None:
    assert_contract_kept(contract_for("notifications", request.config, tmp_path))
