"""Quality: the counter's checks catch what they claim, in process (virtual time, no server).

* a core that drops every third increment fails ``every_increment_counted``, by the checks
  and through the property machine;
* the ``racy`` policy loses concurrent increments and is caught;
* a counter that goes back fails ``counter_never_goes_back``; one that counts what nobody asked
  fails ``every_increment_counted``;
* unknown (info) increments widen what a read may show, never what it must;
* the reference, under the same operations, passes with both checks decided.

Run by path with ``PEAKPROOF_CASES=counter_case`` (the registry must hold the case).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from counter_case import CounterCore, InProcessCounter, Pending, check_counter
from peakproof.cases import all_cases
from peakproof.checks import assert_checks
from peakproof.history import HandHistory
from peakproof.pytest_plugin import Target
from props_counter import CounterMachine


class DropsEveryThird(CounterCore):
    """A broken core: every third commit answers as if it counted, and counts nothing."""

    def commit(self, pending: Pending) -> int:
        self.commits += 1
        if self.commits % 3 == 0:
            return self.value + pending.by  # answers the right value, keeps the wrong one
        self.value += pending.by
        return self.value


def by_name(history: object) -> dict:
    return {r.name: r for r in check_counter(history)}  # type: ignore[arg-type]


def sequential(d: InProcessCounter) -> None:
    d.read()
    for by in (1, 2, 3, 4, 5, 6):
        d.increment(by)
        d.read()


def test_the_case_is_registered_through_the_environment() -> None:
    case = all_cases()["counter"]
    assert case.package == "counter_case" and case.path == "/counter"
    assert Target("counter").new_driver().__class__ is InProcessCounter


def test_the_checks_catch_a_core_that_drops_every_third_increment() -> None:
    d = Target("counter").new_driver(core_factory=lambda clock: DropsEveryThird())
    sequential(d)
    results = by_name(d.history)
    assert results["every_increment_counted"].valid is False
    assert "lost" in (results["every_increment_counted"].first_violation or "")
    with pytest.raises(AssertionError, match="every_increment_counted"):
        assert_checks(results.values())


def test_the_property_machine_catches_a_core_that_drops_every_third_increment() -> None:
    class Machine(CounterMachine):
        target = Target("counter", in_process_options={"core_factory": lambda clock: DropsEveryThird()})

    with pytest.raises(AssertionError, match="every_increment_counted"):
        run_state_machine_as_test(Machine, settings=settings(max_examples=100, stateful_step_count=20, database=None,
                                                             deadline=None, phases=[Phase.generate, Phase.shrink],
                                                             suppress_health_check=list(HealthCheck)))


def test_the_checks_catch_the_racy_policy_losing_concurrent_increments() -> None:
    d = Target("counter", policy="racy").new_driver()
    d.read()
    d.concurrent_increments([1, 2, 3])
    d.read()
    results = by_name(d.history)
    assert results["every_increment_counted"].valid is False
    assert results["counter_never_goes_back"].valid is True  # the values only fall behind, never back


def test_the_reference_passes_the_same_operations_with_both_checks_decided() -> None:
    d = Target("counter").new_driver()
    sequential(d)
    d.concurrent_increments([1, 2, 3])
    d.read()
    assert_checks(check_counter(d.history), decided=True)


def test_a_counter_that_goes_back_is_caught() -> None:
    h = HandHistory()
    h.ok("read", {}, {"value": 5})
    h.ok("read", {}, {"value": 3})
    r = by_name(h.history)["counter_never_goes_back"]
    assert r.valid is False and r.chances == 1


def test_a_count_nobody_asked_for_is_caught() -> None:
    h = HandHistory()
    h.ok("read", {}, {"value": 10})
    h.ok("increment", {"by": 2}, {"value": 12})
    h.ok("read", {}, {"value": 15})
    r = by_name(h.history)["every_increment_counted"]
    assert r.valid is False and "nobody asked" in (r.first_violation or "")


@pytest.mark.parametrize("final, valid", [(2, True), (5, True), (1, False), (6, False)])
def test_unknown_increments_widen_what_a_read_may_show_never_what_it_must(final: int, valid: bool) -> None:
    h = HandHistory()
    h.ok("read", {}, {"value": 0})
    h.ok("increment", {"by": 2}, {"value": 2})
    h.info("increment", {"by": 3}, "timeout")
    h.fail("increment", {"by": 100}, "invalid_by")  # certainly did not happen: in neither bound
    h.ok("read", {}, {"value": final})
    assert by_name(h.history)["every_increment_counted"].valid is valid


def test_without_a_baseline_the_count_is_unknown_not_a_pass() -> None:
    h = HandHistory()
    h.ok("increment", {"by": 2}, {"value": 7})
    h.ok("read", {}, {"value": 7})
    assert by_name(h.history)["every_increment_counted"].valid == "unknown"
    assert check_counter(h.history, initial=5)[1].valid is True
