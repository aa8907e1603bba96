"""``assert_checks``: a failed check always raises; with ``decided`` a check the test relies on
must also have been decided and exercised (an "unknown" one, or one with no chance to fail,
says nothing, so a test that leans on it must not pass)."""

from __future__ import annotations

from typing import Iterator

import pytest

from peakproof import checks
from peakproof.checks import CheckResult, Violations, assert_checks

HELD = CheckResult("no_oversell", True, chances=12, chance_kind="reads")
UNKNOWN = CheckResult("stock_is_conserved", "unknown", note="info operations could explain it either way", chances=3)
UNEXERCISED = Violations().result("expired_hold_is_never_sold", {}, chances=0, chance_kind="late confirms")
NOT_COUNTED = CheckResult("reservation_is_idempotent", True)  # chances None: not counted, not zero
BROKEN = CheckResult("units_return_exactly_once", False, {"violations": 1}, "units returned twice")


@pytest.fixture(autouse=True)
def _own_chances() -> Iterator[checks.ChanceTally]:
    """These made-up results stay out of the run's chances summary: they go to a tally of their own."""
    tally = checks.ChanceTally()
    checks.push_tally(tally)
    yield tally
    checks.pop_tally(tally)


def test_by_default_only_a_failed_check_raises() -> None:
    assert_checks([HELD, UNKNOWN, UNEXERCISED, NOT_COUNTED])
    with pytest.raises(AssertionError, match=r"^units_return_exactly_once: FAIL"):
        assert_checks([HELD, UNKNOWN, BROKEN])


def test_a_named_check_that_came_out_unknown_or_had_no_chance_raises_and_says_so() -> None:
    assert_checks([HELD, UNKNOWN, NOT_COUNTED], decided=("no_oversell", "reservation_is_idempotent"))
    with pytest.raises(AssertionError, match=r"(?s)not decided.*stock_is_conserved: unknown.*either way") as e:
        assert_checks([HELD, UNKNOWN], decided=("no_oversell", "stock_is_conserved"))
    assert "no_oversell" not in str(e.value)
    with pytest.raises(AssertionError, match=r"(?s)expired_hold_is_never_sold: unknown.*chances: 0 late confirms"):
        assert_checks([HELD, UNEXERCISED], decided="expired_hold_is_never_sold")


def test_a_test_that_decided_nothing_is_inconclusive_to_the_properties_and_one_that_broke_a_promise_fails() -> None:
    from peakproof.realtime import failure_kind

    with pytest.raises(checks.NotDecided) as undecided:
        assert_checks([HELD, UNKNOWN], decided="stock_is_conserved")
    with pytest.raises(AssertionError) as broken:
        assert_checks([UNKNOWN, BROKEN], decided="stock_is_conserved")
    assert not isinstance(broken.value, checks.NotDecided)
    assert failure_kind(undecided.value)[0] == "undecided" and failure_kind(broken.value)[0] == "violation"


def test_a_named_check_missing_from_the_results_raises() -> None:
    with pytest.raises(AssertionError, match=r"not among the results: no_overselll \(the results are: no_oversell\)"):
        assert_checks([HELD], decided=("no_overselll",))


def test_decided_true_asks_it_of_every_result_and_failures_are_reported_first() -> None:
    assert_checks([HELD, NOT_COUNTED], decided=True)
    with pytest.raises(AssertionError) as e:
        assert_checks([HELD, UNKNOWN, BROKEN], decided=True)
    text = str(e.value)
    assert text.startswith("units_return_exactly_once: FAIL") and "stock_is_conserved: unknown" in text


def test_judgements_are_tallied_by_the_session_that_made_them(_own_chances: checks.ChanceTally) -> None:
    assert_checks([HELD, UNEXERCISED])
    inner = checks.ChanceTally(in_property=True)  # a pytester session inside this one
    checks.push_tally(inner)
    try:
        assert_checks([CheckResult("no_oversell", True, chances=40, chance_kind="reads")])
    finally:
        checks.pop_tally(inner)
    assert inner.exercised == {"no_oversell": 40} and inner.in_properties == {"no_oversell": (40, "reads")}
    assert _own_chances.exercised == {"no_oversell": 12, "expired_hold_is_never_sold": 0}
    assert _own_chances.in_properties == {}  # not judged while a property ran


def test_the_tally_adds_up_each_hypothesis_example_s_most_and_each_judgement_made_outside_one(
        _own_chances: checks.ChanceTally) -> None:
    from hypothesis import given, settings, strategies as st

    judged: list[list[int]] = []

    @settings(max_examples=5, derandomize=True, database=None)
    @given(st.lists(st.integers(0, 9), min_size=1, max_size=4))
    def an_example_judged_as_it_grows(steps: list[int]) -> None:
        seen, total = [], 0
        for n in steps:  # a judgement per step, of the history so far: its chances only grow
            total += n
            seen.append(total)
            assert_checks([CheckResult("no_oversell", True, chances=total, chance_kind="reads")])
        judged.append(seen)

    an_example_judged_as_it_grows()
    assert len(judged) >= 2
    assert _own_chances.summed_over_examples() == {"no_oversell": sum(seen[-1] for seen in judged)}
    assert _own_chances.exercised == {"no_oversell": max(seen[-1] for seen in judged)}
    assert_checks([HELD])  # outside any example: each judgement on its own
    assert_checks([HELD])
    assert _own_chances.summed_over_examples()["no_oversell"] == sum(seen[-1] for seen in judged) + 2 * HELD.chances
