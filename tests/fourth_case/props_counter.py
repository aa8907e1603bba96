"""The counter's promises as properties: a Hypothesis state machine through ``counter_target``.

Increments (valid and refused), reads and bursts of concurrent increments, with both
checks asserted over the whole history after every step. In process (no ``--target-url``)
the burst interleaves explicitly; over a URL (what ``peakproof run counter`` passes) it is
sent from threads at once.

Not named ``test_*.py``: the main suite does not collect it (without
``PEAKPROOF_CASES=counter_case`` there is no ``counter_target``). Run it by path.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import Phase, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from counter_case import MAX_BY, check_counter
from peakproof.checks import assert_checks
from peakproof.history import FAIL, OK
from peakproof.pytest_plugin import Target

REFUSED = [0, -1, MAX_BY + 1, "3", 2.5, None, True]


class CounterMachine(RuleBasedStateMachine):
    """One counter, a few clients; the checks judge the history after every step."""

    target: Target  # set per test run (the counter_target fixture)

    @initialize()
    def first_read(self) -> None:
        self.d = self.target.new_driver()
        op = self.d.read(process="reader")  # the baseline: a URL's counter does not start at 0
        assert op.type == OK, f"the counter must be readable: {op!r}"

    @rule(by=st.integers(1, 20), client=st.sampled_from(["ayse", "mehmet", "zeynep"]))
    def increment(self, by: int, client: str) -> None:
        op = self.d.increment(by, process=client)
        assert op.type == OK, f"a valid increment must be accepted: {op!r}"

    @rule(by=st.sampled_from(REFUSED))
    def refused_increment(self, by: Any) -> None:
        op = self.d.increment(by, process="careless")
        assert op.type == FAIL and op.value == "invalid_by", f"increment by {by!r} must be refused (invalid_by): {op!r}"

    @rule(bys=st.lists(st.integers(1, 5), min_size=2, max_size=6))
    def burst(self, bys: list[int]) -> None:
        burst = getattr(self.d, "concurrent_increments", None)
        if burst is not None:  # a --driver of your own may not have one
            burst(bys)

    @rule()
    def read(self) -> None:
        self.d.read(process="reader")

    @invariant()
    def every_check_holds(self) -> None:
        if not hasattr(self, "d"):
            return
        self.d.read(process="reader")
        assert_checks(check_counter(self.d.history))

    def teardown(self) -> None:
        if hasattr(self, "d"):
            note("history:\n" + "\n".join(repr(op) for op in self.d.history.ops[-40:]))


def test_the_counter_keeps_its_promises_through_any_sequence_of_operations(counter_target: Target) -> None:
    class Machine(CounterMachine):
        target = counter_target

    # a URL runs in real time: fewer, shorter runs, and the first failure is reported as found
    run_state_machine_as_test(Machine, settings=None if counter_target.in_process else settings(
        settings.default, max_examples=min(settings.default.max_examples, 15), stateful_step_count=20,
        phases=[Phase.explicit, Phase.reuse, Phase.generate]))


def test_a_burst_of_concurrent_increments_loses_none(counter_target: Target) -> None:
    d = counter_target.new_driver()
    d.read(process="reader")
    if not hasattr(d, "concurrent_increments"):
        pytest.skip("[not-applicable] this driver sends no concurrent increments")
    for _ in range(5):
        d.concurrent_increments([1, 2, 3, 4, 5, 6, 7, 8])
    d.read(process="reader")
    assert_checks(check_counter(d.history), decided=True)
