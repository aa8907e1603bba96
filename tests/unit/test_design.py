"""A product's own design, stated (peakproof.design): each statement leaves out exactly the checks it names,
whatever they found, and every other check is judged as before; unstated, a FAIL it would explain says so."""

from __future__ import annotations

import pytest

from peakproof.cases import all_cases
from peakproof.checks import CheckResult, assert_checks, current_tally
from peakproof.design import Statement, stated_design
from peakproof.errors import UsageError

STATEMENTS = [(case.name, s) for case in all_cases().values() for s in case.design]


def results_of(case_name: str, valid: bool) -> list[CheckResult]:
    """One result per check of the case, every one ``valid`` (a FAIL carries its violation)."""
    case = all_cases()[case_name]
    names = {c for s in case.design for c in s.leaves_out + s.explains} | set(registered(case_name))
    return [CheckResult(n, valid, {"violations": 0 if valid else 1}, None if valid else f"{n} broken", chances=3)
            for n in sorted(names)]


def registered(case_name: str) -> list[str]:
    import importlib

    checks = importlib.import_module(f"{all_cases()[case_name].package}.checks")
    return [n for v in vars(checks).values() if hasattr(v, "names") and callable(v.names) for n in v.names()]


def value_of(s: Statement) -> object:
    if s.kind is None and s.choices is None:
        return True
    if s.choices:
        return s.choices[0]
    try:
        return s.kind("1")  # a lag, a count
    except ValueError:
        return s.kind(s.metavar)  # a list its metavar shows (--channels sms,email)


def test_every_statement_names_checks_its_case_has_and_says_why() -> None:
    assert STATEMENTS, "no case states a design"
    for case_name, s in STATEMENTS:
        known = set(registered(case_name))
        assert set(s.leaves_out + s.explains) <= known, (case_name, s.name, set(s.leaves_out + s.explains) - known)
        assert s.says and (s.why or not s.leaves_out), s


@pytest.mark.parametrize("case_name, statement", STATEMENTS, ids=[f"{c}-{s.name}" for c, s in STATEMENTS])
def test_a_stated_design_leaves_out_exactly_its_checks_and_judges_every_other(case_name: str,
                                                                              statement: Statement) -> None:
    design = stated_design(all_cases()[case_name].design, {statement.name: value_of(statement)})
    judged = design.apply(results_of(case_name, valid=False))  # every check FAILed
    gone = {r.name for r in judged if r.valid == "waived"}
    assert gone == set(statement.left_out(value_of(statement))), gone
    for r in judged:
        if r.name in gone:  # left out whatever it found, saying which statement and why
            assert statement.flag in r.note and "not checked" in r.note and f"{r.name} broken" in r.note, r.note
        else:  # still judged: its FAIL stands
            assert r.valid is False, r
    lines = design.lines()
    assert len(lines) == 1 and statement.flag in lines[0] and all(c in lines[0] for c in gone), lines


@pytest.mark.parametrize("case_name, statement", STATEMENTS, ids=[f"{c}-{s.name}" for c, s in STATEMENTS])
def test_unstated_a_fail_it_would_explain_names_the_statement_and_a_pass_is_untouched(
        case_name: str, statement: Statement) -> None:
    design = stated_design(all_cases()[case_name].design, {})
    failed = {r.name: r for r in design.apply(results_of(case_name, valid=False))}
    for check in statement.leaves_out + statement.explains:
        assert failed[check].valid is False and statement.flag in (failed[check].note or ""), failed[check]
        assert "otherwise this is a finding" in failed[check].note
    held = design.apply(results_of(case_name, valid=True))
    assert all(r.valid is True and r.note is None for r in held)


def test_a_driver_carries_its_design_and_the_options_add_to_it() -> None:
    case = all_cases()["notifications"]

    class Beacon:
        design = {"no_breaker": True}

    design = stated_design(case.design, {"no_priority": True, "budget": 3}, Beacon)  # another option: ignored
    assert set(design.stated) == {"no_breaker", "no_priority"}
    assert set(design.left_out()) == {"breaker_opens_when_due", "breaker_counts_only_transient",
                                      "urgent_overtakes_reminder_backlog", "urgent_first_outside_a_backlog"}


def test_a_driver_design_naming_no_statement_is_a_usage_error_listing_the_ones_there_are() -> None:
    case = all_cases()["tickets"]

    class Shop:
        design = {"holds_never_expire": True}

    with pytest.raises(UsageError) as e:
        stated_design(case.design, {}, Shop)
    assert "holds_never_expire" in str(e.value) and "holds_never_lapse" in str(e.value)

    class Odd:
        design = ["holds_never_lapse"]

    with pytest.raises(UsageError, match="a mapping of statement names"):
        stated_design(case.design, {}, Odd)


def test_a_property_s_judgement_leaves_out_what_the_session_s_design_does() -> None:
    case = all_cases()["notifications"]
    broken = [CheckResult("breaker_opens_when_due", False, {"violations": 1}, "the breaker stayed shut", chances=2),
              CheckResult("one_delivery_per_event", True, {"violations": 0}, chances=5)]
    tally = current_tally()
    tally.designs["notifications"] = stated_design(case.design, {})
    try:
        with pytest.raises(AssertionError, match="--no-breaker"):  # unstated: the FAIL stands, and names it
            assert_checks(broken)
        tally.designs["notifications"] = stated_design(case.design, {"no_breaker": True})
        broken[0].chances = 7
        assert_checks(broken, decided=("breaker_opens_when_due", "one_delivery_per_event"))  # left out: no raise
        assert tally.exercised["breaker_opens_when_due"] == 2  # and its chances are not counted: it was not put to the test
    finally:
        del tally.designs["notifications"]


@pytest.mark.parametrize("case_name, statement", STATEMENTS, ids=[f"{c}-{s.name}" for c, s in STATEMENTS])
def test_unstated_a_check_left_undecided_that_the_statement_would_explain_names_it(
        case_name: str, statement: Statement) -> None:
    """A product whose holds never lapse gives a late payment no lapse to come after; one with one channel a
    notification never lets a dead address meet three: the check is undecided, not failed, and its reason says
    what to state; a check no statement explains gets no such hint."""
    design = stated_design(all_cases()[case_name].design, {})
    undecided = design.apply([CheckResult(n, "unknown", {}, note="not exercised", chances=0)
                              for n in {r.name for r in results_of(case_name, valid=True)}])
    for r in undecided:
        if r.name in statement.leaves_out:
            assert r.valid == "unknown" and statement.flag in r.note and "then not judged" in r.note, r
        elif r.name in statement.explains:
            assert r.valid == "unknown" and statement.flag in r.note and "judges by that design" in r.note, r
        elif not any(r.name in s.leaves_out + s.explains for s in all_cases()[case_name].design):
            assert r.note == "not exercised", r


def test_a_hint_suggests_a_value_that_differs_from_the_seed_s() -> None:
    """Unstated, a FAIL the cascade would explain suggests --cascade none, never the seed's own after-any."""
    design = stated_design(all_cases()["notifications"].design, {})
    hint = design.hint("preference_respected") or ""
    assert "state --cascade none" in hint and "--cascade after-any" not in hint, hint
