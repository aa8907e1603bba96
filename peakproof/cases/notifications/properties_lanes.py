"""Case N's properties over a URL, the ground they stand on: the providers' faults a step puts in force, the
lanes an example drives at once (:class:`SharedFaults`, :class:`Lane`) and the pacing a run is announced and
bounded by."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import strategies as st

from peakproof.history import FAIL, OK, Op
from peakproof.pytest_plugin import Pace, announce, hypothesis_small_examples
from peakproof.realtime import Violation

from .analysis import DeliveryRules
from .breaker import DECIDED_BEFORE
from .case import CASE
from .driver import Providers
from .properties_base import CHANNELS


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
        announce(PYTEST_CONFIG[0], f"peakproof: {CASE.name} over HTTP: {text}")


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
    return Pace(item, f"{CASE.name} over HTTP", how, examples, typical, bound=longest,
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
