"""Properties against a live target: the verdict is the first violating run's, whatever Hypothesis's
replay does; a flaky replay with nothing found, the harness's own limit and its crashes are never FAIL."""

from __future__ import annotations

import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from peakproof.history import History
from peakproof.realtime import failure_kind
from peakproof.realtime import PropertyViolated, Undecided, run_machine

LIVE = settings(max_examples=20, stateful_step_count=5, database=None, derandomize=True,
                phases=[Phase.explicit, Phase.generate])


class Live:
    in_process = False


class Driver:
    def __init__(self) -> None:
        self.history = History(lambda: 0.0)


def machine_failing_on(runs: set[int], counter: list[int], message: str = "no_oversell: FAIL (2 units oversold)"):
    """A machine whose run number ``n`` (counted across Hypothesis's runs, its replay included) breaks a
    promise at its second step when ``n`` is in ``runs``: a target answering in its own time."""

    class M(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            counter[0] += 1
            self.run, self.steps = counter[0], 0
            self.d = Driver()

        @rule(n=st.integers(0, 3))
        def step(self, n: int) -> None:
            op = self.d.history.invoke("buyer", "reserve", {"n": n, "run": self.run})
            self.d.history.complete(op, "ok", {"run": self.run})
            self.steps += 1
            if self.run in runs and self.steps == 2:
                raise AssertionError(message)

    return M


def test_a_violation_whose_replay_passes_is_reported_from_the_run_that_broke_it() -> None:
    counter = [0]
    with pytest.raises(PropertyViolated) as e:
        run_machine(Live(), machine_failing_on({3}, counter), LIVE)
    text = str(e.value)
    assert e.value.reason == "no_oversell: FAIL (2 units oversold)"
    assert "the violating run's history (2 operations" in text and "'run': 3" in text  # run 3's, not the replay's
    assert "went differently" in text and counter[0] > 3


def test_a_flaky_replay_with_no_violation_kept_is_undecided_not_fail() -> None:
    runs = [0]

    class OnceBroken(RuleBasedStateMachine):  # the first run meets a glitch that is no promise; the replay not
        def __init__(self) -> None:
            super().__init__()
            runs[0] += 1

        @rule()
        def step(self) -> None:
            if runs[0] == 1:
                raise ConnectionResetError("a glitch of the moment")

    with pytest.raises(Undecided) as e:
        run_machine(Live(), OnceBroken, LIVE)
    assert "went differently" in str(e.value) and "nothing was decided" in str(e.value)
    assert failure_kind(e.value)[0] == "undecided"


def test_in_virtual_time_hypothesis_s_own_rules_stand() -> None:
    class InProcess:
        in_process = True

    counter = [0]
    with pytest.raises(BaseException) as e:  # replay differs: Hypothesis says flaky, as it should in process
        run_machine(InProcess(), machine_failing_on({3}, counter), LIVE)
    assert not isinstance(e.value, PropertyViolated)


@pytest.mark.parametrize("error, kind", [
    (AssertionError("expired_hold_is_never_sold: FAIL (1)"), "violation"),
    (pytest.fail.Exception("Timeout (>300.0s) from pytest-timeout."), "undecided"),
    (KeyError("reservation_id"), "harness"),
])
def test_only_a_broken_promise_is_the_target_s_failure(error: BaseException, kind: str) -> None:
    got, reason = failure_kind(error)
    assert got == kind, reason
    if kind == "violation":
        assert reason == str(error)  # whole, never cut
    if kind == "undecided":
        assert "harness's own limit" in reason and "300.0" in reason


def test_a_limit_of_the_harness_inside_a_flaky_replay_is_still_the_harness_s() -> None:
    from hypothesis.errors import FlakyFailure

    timeout = pytest.fail.Exception("Timeout (>300.0s) from pytest-timeout.")
    assert failure_kind(FlakyFailure("Inconsistent results", [timeout]))[0] == "undecided"


def test_a_second_broken_promise_beside_the_first_is_found_and_each_is_kept_once() -> None:
    """Once a run broke a check, the machine runs again with that check left out (its first violation kept),
    so a second broken promise is found too; a check broken again is not reported twice."""
    from peakproof.checks import CheckResult, assert_checks, current_tally

    class Judged(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.d = Driver()

        @rule(n=st.integers(0, 3))
        def step(self, n: int) -> None:
            op = self.d.history.invoke("buyer", "reserve", {"n": n})
            self.d.history.complete(op, "ok", {})
            # no_oversell breaks in every run; stock_is_conserved only once a step drew n == 3
            assert_checks([CheckResult("no_oversell", False, {"violations": 1}, "2 units oversold", chances=1),
                           CheckResult("stock_is_conserved", n != 3, {}, None if n != 3 else "a unit lost",
                                       chances=1)])

    excused = current_tally().excused
    try:
        with pytest.raises(PropertyViolated) as e:
            run_machine(Live(), Judged, LIVE)
        found = [e.value.violation, *e.value.also]
        assert [v.checks for v in found] == [("no_oversell",), ("stock_is_conserved",)], [v.checks for v in found]
        assert "judged on its own once the promise above was found broken" in str(e.value)
        assert set(excused) == {"no_oversell", "stock_is_conserved"}
    finally:
        excused.clear()


def test_a_later_round_left_undecided_keeps_the_promises_found_broken_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second round (the broken check left out) hit a flaky replay and found nothing new: the first round's
    violation is the verdict, not INCONCLUSIVE "no run broke a promise" (a fan-out worker's feed came out so)."""
    import peakproof.realtime as realtime
    from peakproof.checks import current_tally
    from peakproof.realtime import Violation

    rounds: list[int] = []

    def one_round(machine: type, settings: object) -> None:
        rounds.append(1)
        if len(rounds) == 1:
            raise PropertyViolated(Violation("no_oversell: FAIL (2 units oversold)", checks=("no_oversell",)))
        raise Undecided("Hypothesis's replay of a run against the live target went differently")

    monkeypatch.setattr(realtime, "_one_round", one_round)
    excused = current_tally().excused
    try:
        with pytest.raises(PropertyViolated) as e:
            run_machine(Live(), RuleBasedStateMachine, LIVE)
        assert e.value.violation.checks == ("no_oversell",) and len(rounds) == 2
    finally:
        excused.clear()
    rounds.clear()
    with pytest.raises(Undecided):  # nothing found before it: still undecided
        monkeypatch.setattr(realtime, "_one_round", lambda m, s: (_ for _ in ()).throw(Undecided("flaky")))
        run_machine(Live(), RuleBasedStateMachine, LIVE)
