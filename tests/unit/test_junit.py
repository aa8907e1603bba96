"""The verdict as JUnit XML (peakproof.junit): one test case per check and service level per stage, as
GitLab reads it; every document validated against tests/support/junit.xsd (GitLab's parser's structure)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from peakproof import junit
from peakproof.checks import CheckResult, Measure
from peakproof.verdict import Outcome
from tests.support.junit_report import validated

pytest.importorskip("xmlschema", reason="[platform] the test extra: pip install -e '.[test]'")


def latency(valid: object, actual: float) -> CheckResult:
    return CheckResult("reserve p99 latency (intended)", valid, actual=Measure(actual, "s"),
                       limit=Measure(0.1, "s", "<="), chances=5_000, chance_kind="completed reserve operations",
                       note=None if valid != "unknown" else "a neighbour took the CPU the run waited for")


def test_each_check_is_a_test_case_a_broken_promise_a_failure_with_actual_and_limit(tmp_path: Path) -> None:
    oversold = CheckResult("no_oversell", False, {"violations": 2}, "quota 'q1': sold 5,002 of 5,000", chances=9)
    stages = [junit.Stage("load scenario tickets-opening (Locust, open model)", Outcome.FAIL,
                          [oversold, latency(True, 0.004)], ["no_oversell: quota 'q1': sold 5,002 of 5,000"],
                          seconds=21.5)]
    path = junit.write(tmp_path / "out" / "verdict.xml", "tickets", stages, Outcome.FAIL, 30.0)
    got = validated(path)
    cls = "peakproof.tickets.load_scenario_tickets_opening_locust_open_model"
    status, text = got[(cls, "no_oversell")]
    assert status == "failed" and "Actual 2 violations / Limit 0 violations" in text, text
    assert "sold 5,002 of 5,000" in text
    assert got[(cls, "reserve p99 latency (intended)")][0] == "success"
    assert len(got) == 2  # the stage's outcome is its checks': no test case of its own
    root = ET.parse(path).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("2", "1", "0")
    assert root.get("name") == "peakproof tickets: FAIL"


def test_an_undecided_check_is_skipped_with_its_reason_never_passed_nor_failed(tmp_path: Path) -> None:
    stages = [junit.Stage("load scenario tickets-opening (Locust, open model)", Outcome.INCONCLUSIVE,
                          [latency("unknown", 0.4)], ["reserve p99 latency undecided: a neighbour took the CPU"])]
    path = junit.write(tmp_path / "v.xml", "tickets", stages, Outcome.INCONCLUSIVE, 1.0)
    ((status, text),) = validated(path).values()
    assert status == "skipped" and text.startswith("INCONCLUSIVE: a neighbour took the CPU"), text


def test_a_stage_whose_outcome_its_checks_do_not_show_gets_a_test_case_carrying_it(tmp_path: Path) -> None:
    # every check held, but the generator fell behind its curve: the stage is INCONCLUSIVE, and says why
    behind = junit.Stage("load scenario tickets-opening (Locust, open model)", Outcome.INCONCLUSIVE,
                         [latency(True, 0.003)], ["the generator offered 61% of the curve: this machine, not the "
                                                  "target"], detail="12,000 requests")
    not_run = junit.Stage("contract (Schemathesis)", Outcome.PASS, [], ["contract skipped: --driver"], skipped=True)
    path = junit.write(tmp_path / "v.xml", "tickets", [behind, not_run], Outcome.INCONCLUSIVE, 1.0)
    got = validated(path)
    stage = got[("peakproof.tickets.load_scenario_tickets_opening_locust_open_model",
                 "load scenario tickets-opening (Locust, open model)")]
    assert stage[0] == "skipped" and "the generator offered 61% of the curve" in stage[1], stage
    assert got[("peakproof.tickets.contract_schemathesis", "contract (Schemathesis)")][0] == "skipped"
    assert sum(s == "success" for s, _ in got.values()) == 1


def test_the_properties_own_test_cases_fold_into_their_stage(tmp_path: Path) -> None:
    pytest_xml = tmp_path / "pytest.xml"
    pytest_xml.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="0" '
        'failures="1" skipped="0" tests="2" time="3.2"><testcase classname="test_tickets" name="test_a" time="1.0">'
        '<properties><property name="k" value="v"/></properties></testcase>'
        '<testcase classname="venv.lib.python3.11.site-packages.peakproof.properties.test_tickets" name="test_b" time="2.2"><failure message="no_oversell: FAIL">'
        'trace</failure></testcase></testsuite></testsuites>', encoding="utf-8")
    cases = junit.pytest_cases(pytest_xml, "peakproof.tickets.properties")
    stage = junit.Stage("properties (Hypothesis)", Outcome.FAIL, [], ["no_oversell: FAIL"], cases=cases)
    path = junit.write(tmp_path / "v.xml", "tickets", [stage], Outcome.FAIL, 4.0)
    # pytest's per-test <properties> are not in the schema: validated() below would refuse them
    got = validated(path)
    assert got[("peakproof.tickets.properties.test_tickets", "test_a")][0] == "success"
    assert got[("peakproof.tickets.properties.test_tickets", "test_b")] == ("failed", "no_oversell: FAIL\ntrace")
    assert junit.pytest_cases(tmp_path / "missing.xml", "x") == []


def test_a_target_s_control_characters_echoed_in_a_violation_still_make_valid_xml(tmp_path: Path) -> None:
    garbage = CheckResult("answers_belong_to_who_asked", False, {"violations": 1}, "answered 'q\x00\x1b[31m'")
    path = junit.write(tmp_path / "v.xml", "tickets", [junit.Stage("properties", Outcome.FAIL, [garbage])],
                       Outcome.FAIL, 1.0)
    assert validated(path)[("peakproof.tickets.properties", "answers_belong_to_who_asked")][0] == "failed"
