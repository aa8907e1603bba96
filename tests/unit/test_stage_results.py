"""A stage's outcome is judged once, where its checks ran, from what it counted (never from text
another process printed): the properties' result from pytest's own reports."""

from __future__ import annotations

from peakproof.pytest_plugin import properties_result
from peakproof.spec import StageResult


def counts(passed: int = 0, failed: int = 0, skipped: int = 0, errors: int = 0) -> dict[str, int]:
    return {"passed": passed, "failed": failed, "skipped": skipped, "errors": errors}


def test_a_failed_property_is_the_target_s_fail_and_names_the_first_failure() -> None:
    r = properties_result(1, counts(passed=3, failed=1), "test_x: no_oversell: FAIL (2 units oversold)", {})
    assert r.outcome == "FAIL" and r.reasons == ["test_x: no_oversell: FAIL (2 units oversold)"]


def test_properties_that_ran_and_held_pass_and_say_what_they_did_not_exercise() -> None:
    r = properties_result(0, counts(passed=4, skipped=2), "", {"no_oversell": 12, "inbox_capped": 0})
    assert r.outcome == "PASS" and r.detail == "4 passed, 2 skipped"
    assert r.data["chances"] == {"no_oversell": 12, "inbox_capped": 0}


def test_no_property_run_is_inconclusive_not_a_pass() -> None:
    for status in (0, 5):  # all skipped, or none collected: nothing was decided
        r = properties_result(status, counts(skipped=3), "", {})
        assert r.outcome == "INCONCLUSIVE" and "no property ran" in r.reasons[0]


def test_pytest_going_wrong_is_inconclusive_with_its_exit_status() -> None:
    r = properties_result(4, counts(errors=1), "conftest.py: bad option", {})
    assert r.outcome == "INCONCLUSIVE" and "pytest exited 4" in r.reasons[0] and "bad option" in r.reasons[0]
    r = properties_result(2, counts(passed=2, errors=1), "setup of test_y: refused", {})  # a fixture error
    assert r.outcome == "INCONCLUSIVE"


def test_a_skipped_contract_stage_is_shown_skipped_never_ok(tmp_path) -> None:
    from peakproof.cases import get_case
    from peakproof.contract import ContractResult
    from peakproof.runner import _contract_part
    from peakproof.spec import RunSpec

    skipped = ContractResult("tickets", "-", "http://127.0.0.1:9/tickets", skipped="--driver speaks your own API")
    StageResult("properties", "PASS", [], data={"contract": [skipped.to_json()]}).dump(tmp_path / "properties-result.json")
    part = _contract_part(get_case("tickets"), RunSpec(case="tickets", report_dir=str(tmp_path)), tmp_path)
    assert part is not None and part.mark == "skipped" and "your own API" in part.reasons[0]


def test_a_property_that_ran_but_decided_nothing_is_inconclusive_naming_why() -> None:
    why = "properties/test_tickets.py::test_x: stopped by the harness's own limit, not the target: Timeout (>300.0s)"
    r = properties_result(0, counts(passed=3, skipped=1), "", {"no_oversell": 12}, undecided=[why])
    assert r.outcome == "INCONCLUSIVE" and r.reasons[0] == why


def test_a_stage_s_output_is_shown_by_whole_lines_so_no_line_loses_the_check_it_names() -> None:
    from peakproof.runner import last_lines

    out = "\n".join(f"  check_{i}: no chance to fail over the whole property run" for i in range(200))
    shown = last_lines(out, 3000)
    assert len(shown) <= 3000 and shown.startswith("  check_") and out.endswith(shown)
    assert all(line.startswith("  check_") for line in shown.splitlines())
    assert last_lines("short", 3000) == "short"
