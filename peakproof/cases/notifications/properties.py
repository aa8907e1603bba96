"""Case N invariants, stated as properties (``properties/test_notifications.py`` hands pytest over to them).

A state machine in virtual time where Hypothesis decides what every provider call
answers (ok, transient, permanent, ack lost), when requests are replayed, how far the
clock moves and which channel goes down. After every step the notification checks judge
the history against the providers' record. In-process (the reference core and the
provider simulator in one virtual clock) by default.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule, run_state_machine_as_test

from peakproof.checks import assert_checks
from peakproof.history import OK
from peakproof.profiles import load_profile
from peakproof.pytest_plugin import Target, assert_contract_kept, contract_for

from .analysis import IN_VIRTUAL_TIME, NotificationsAnalysis
from .case import CASE
from .checks import check_notifications
from .properties_base import CHANNELS, IN_PROCESS_UNCLAIMED, SendsNotifications, read_all_and_judge  # noqa: F401

load_profile()  # HYPOTHESIS_PROFILE, run from properties/ (its conftest loads it too) or by this file's path


@pytest.fixture(scope="session")
def case_target(request: pytest.FixtureRequest) -> Target:
    """This case's target: the plugin's ``<case>_target`` fixture, by the name of the case this folder is."""
    return request.getfixturevalue(f"{CASE.name}_target")


class NotificationsMachine(SendsNotifications):
    """A few recipients, events sent and replayed; Hypothesis answers for the providers (in process)."""

    target: Target = Target(CASE.name)  # set per test run (the case_target fixture)

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


# Over a URL: their own modules, collected here.
from .properties_http import *  # noqa: E402,F401,F403


def test_notifications_keep_every_invariant_whatever_the_providers_answer(
        case_target: Target, in_process_only: None) -> None:
    class Machine(NotificationsMachine):
        target = case_target

    run_state_machine_as_test(Machine)


def test_each_notification_stays_within_its_budget_and_status_only_moves_forward(
        case_target: Target, in_process_only: None) -> None:
    # the same machine, judged at its end: every notification has finished within 3 rounds
    class Finishing(NotificationsMachine):
        target = case_target

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
    assert_contract_kept(contract_for(CASE.name, request.config, tmp_path))
