"""The contract stage's own logic: what it reads from a schema, how it judges, what it says when it
cannot test (each test able to fail: they compute from the stage, not from copied figures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from peakproof.cases import get_case
from peakproof.contract import (DEFAULT_ACCEPTED, ContractFinding, ContractResult, accepted_statuses,
                                contract_stage, load_openapi, run_contract, without_security)
from peakproof.errors import UsageError
from peakproof.spec import RunSpec

TICKETS = json.loads(get_case("tickets").contract_file().read_text(encoding="utf-8"))  # type: ignore[union-attr]


def _finding(check: str = "not_a_server_error") -> ContractFinding:
    return ContractFinding("POST /x", check, "ST101", "Server error", "", 500, '{"error": "internal"}',
                           "curl -X POST http://127.0.0.1:8000/x", "fuzzing")


def test_the_refusals_an_operation_states_are_added_to_what_the_positive_data_check_accepts() -> None:
    accepted = accepted_statuses(TICKETS)
    assert accepted["reserve"] == DEFAULT_ACCEPTED + ["422", "413"]  # 409 is among the defaults already
    assert "putQuota" in accepted and "getQuota" not in accepted  # a GET has no body and states none


def test_without_a_token_the_schema_loses_its_security_and_nothing_else() -> None:
    stripped = without_security(TICKETS)
    ops = [op for ops in stripped["paths"].values() for op in ops.values() if isinstance(op, dict)]
    assert not any("security" in op for op in ops)
    assert any("security" in op for ops in TICKETS["paths"].values() for op in ops.values() if isinstance(op, dict))
    assert stripped["paths"].keys() == TICKETS["paths"].keys()


def test_a_finding_fails_the_stage_and_an_error_or_no_test_case_leaves_it_undecided() -> None:
    base = dict(case="tickets", source="s", target="t", test_cases=10, checks_run={"not_a_server_error": 10})
    assert ContractResult(**base).outcome == "PASS"
    failed = ContractResult(**base, findings=[_finding()])
    assert failed.outcome == "FAIL" and "curl -X POST" in failed.report() and "[500]" in failed.report()
    assert [r.valid for r in failed.as_checks()] == [False]
    assert ContractResult(**base, errors=["GET /x: Network Error"]).outcome == "INCONCLUSIVE"
    assert ContractResult(**{**base, "test_cases": 0}).outcome == "INCONCLUSIVE"
    skipped = ContractResult("tickets", "-", "t", skipped="no schema")
    assert skipped.outcome == "INCONCLUSIVE" and skipped.as_checks() == [] and "skipped" in skipped.headline()
    again = ContractResult.from_json(json.loads(json.dumps(failed.to_json())))
    assert again.findings == failed.findings and again.outcome == "FAIL"


def test_with_a_driver_and_no_openapi_the_stage_is_skipped_and_says_how_to_run_it(tmp_path: Path) -> None:
    spec = RunSpec("tickets", target_url="http://127.0.0.1:9/tickets", driver="my_driver.py:Shop")
    result = contract_stage(get_case("tickets"), spec, tmp_path)
    assert result.skipped and "--openapi" in result.skipped and result.test_cases == 0


def test_an_openapi_that_cannot_be_read_is_a_usage_error_saying_what_came(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--openapi: expected an OpenAPI document"):
        load_openapi(tmp_path / "missing.json")
    (tmp_path / "other.json").write_text('{"name": "not a schema"}')
    with pytest.raises(UsageError, match="has no 'paths'"):
        load_openapi(tmp_path / "other.json")
    (tmp_path / "mine.json").write_text(json.dumps(TICKETS))
    assert load_openapi(tmp_path / "mine.json")["paths"].keys() == TICKETS["paths"].keys()


def test_a_target_that_refuses_connections_leaves_the_stage_undecided_without_raising() -> None:
    result = run_contract("tickets", TICKETS, base_url="http://127.0.0.1:9/tickets", max_examples=2,
                          request_timeout=2, phases=("examples",))
    assert result.outcome == "INCONCLUSIVE" and not result.findings
    assert any("Connection" in e or "Network" in e for e in result.errors), result.errors


def test_the_reference_in_process_keeps_its_contract_and_a_broken_one_is_caught(tmp_path: Path) -> None:
    """The same app, once as it is and once with the route table's 405s stripped of ``Allow``."""
    import peakproof.targets._asgi as asgi

    case = get_case("tickets")
    app, headers, stop = case.contract_app(tmp_path)  # type: ignore[misc]
    try:
        kept = run_contract("tickets", TICKETS, app=app, headers=headers, max_examples=5, seed=1,
                            phases=("coverage",))
        original = asgi.HttpError.__init__

        def no_allow(self, status, code, message, headers=None):  # type: ignore[no-untyped-def]
            original(self, status, code, message, None)

        asgi.HttpError.__init__ = no_allow  # type: ignore[method-assign]
        try:
            broken = run_contract("tickets", TICKETS, app=app, headers=headers, max_examples=5, seed=1,
                                  phases=("coverage",))
        finally:
            asgi.HttpError.__init__ = original  # type: ignore[method-assign]
    finally:
        stop()
    assert kept.outcome == "PASS", kept.report()
    assert broken.outcome == "FAIL" and any("Allow" in f.message + f.title for f in broken.findings), broken.report()


def test_the_project_roots_schemathesis_toml_says_what_the_contracts_state() -> None:
    """``st run`` from the project root judges the references as the stage does: its config is written
    from the contracts' stated refusals, and must not drift from them."""
    from peakproof.contract import schemathesis_toml

    root = Path(__file__).resolve().parents[2]
    contracts = {name: json.loads(get_case(name).contract_file().read_text(encoding="utf-8"))  # type: ignore[union-attr]
                 for name in ("tickets", "notifications", "feed")}
    assert (root / "schemathesis.toml").read_text(encoding="utf-8") == schemathesis_toml(contracts), (
        "schemathesis.toml is stale: write it again with peakproof.contract.schemathesis_toml")


@pytest.mark.parametrize("check, status, method, kind", [
    ("unsupported_method", 501, "TRACE", "allowed"),  # RFC 9110 15.6.2: not implemented at all
    ("not_a_server_error", 501, "TRACE", "allowed"),
    ("not_a_server_error", 501, "POST", "finding"),  # a documented operation answered 501 is no freedom
    ("not_a_server_error", 500, "TRACE", "finding"),
    ("unsupported_method", 405, "TRACE", "finding"),  # a 405 without Allow: HTTP's MUST
    ("positive_data_acceptance", 400, "POST", "note"),  # 7.0, NUL in an id: a stricter parser
    ("positive_data_acceptance", 500, "POST", "finding"),
    # ST201, more lenient than the contract: a capacity of 1,000,000,001, `cursor=`, an empty e-mail accepted
    ("negative_data_rejection", 200, "PUT", "note"),
    ("negative_data_rejection", 201, "POST", "note"),
    ("negative_data_rejection", 204, "DELETE", "note"),
    ("negative_data_rejection", 302, "GET", "note"),
    ("negative_data_rejection", 409, "POST", "finding"),  # refused, with a status Schemathesis takes for no refusal
    ("negative_data_rejection", None, "POST", "finding"),  # no answer at all
    ("not_a_server_error", 500, "POST", "finding"),  # what a client relies on stays a finding
    ("response_schema_conformance", 200, "GET", "finding"),
    ("response_headers_conformance", 200, "GET", "finding"),
    ("status_code_conformance", 418, "POST", "finding"),
])
def test_what_http_allows_passes_and_what_breaks_no_promise_is_a_note(check: str, status: int, method: str,
                                                                        kind: str) -> None:
    from peakproof.contract import judge_finding

    assert judge_finding(check, status, method, {"GET", "POST"}) == kind


def test_notes_pass_and_fail_only_under_strict_contract() -> None:
    note = _finding("positive_data_acceptance")
    result = ContractResult("tickets", "the tickets contract", "http://127.0.0.1:8000/tickets", test_cases=10,
                            checks_run={"positive_data_acceptance": 10}, notes=[note])
    assert result.outcome == "PASS" and "1 note(s)" in result.headline() and "why a note" in result.report()
    assert next(r for r in result.as_checks()).valid is True
    result.strict = True
    assert result.outcome == "FAIL" and "contract note (failing: --strict-contract)" in result.report()
    assert next(r for r in result.as_checks()).valid is False
    again = ContractResult.from_json(result.to_json())
    assert again.notes == [note] and again.outcome == "FAIL"


def test_each_kind_of_note_says_why_it_is_one_and_both_fail_under_strict_contract() -> None:
    from peakproof.contract import LENIENT_WHY, NOTE_WHY

    stricter = _finding("positive_data_acceptance")
    lenient = ContractFinding("PUT /quotas/{quota_id}", "negative_data_rejection", "ST201",
                              "API accepted schema-violating request", "", 200, '{"capacity": 1000000001}',
                              "curl -X PUT http://127.0.0.1:8000/tickets/quotas/q -d '{\"capacity\": 1000000001}'",
                              "coverage")
    result = ContractResult("tickets", "the tickets contract", "http://127.0.0.1:8000/tickets", test_cases=10,
                            checks_run={"positive_data_acceptance": 10, "negative_data_rejection": 10},
                            notes=[stricter, lenient])
    report = result.report()
    assert result.outcome == "PASS" and "2 note(s)" in result.headline(), report
    assert report.count(f"why a note: {NOTE_WHY}") == 1 and report.count(f"why a note: {LENIENT_WHY}") == 1, report
    assert "accepted a request outside the contract" in LENIENT_WHY and "invalid_requests_refused" in LENIENT_WHY
    assert all(r.valid is True for r in result.as_checks())
    result.strict = True
    assert result.outcome == "FAIL" and report.count("contract note") == 2
    assert {r.name: r.valid for r in result.as_checks()} == {"contract: negative_data_rejection": False,
                                                             "contract: positive_data_acceptance": False}
