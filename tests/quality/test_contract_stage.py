"""The contract stage can fail, over HTTP: each served reference keeps its contract under every
Schemathesis check and phase, with its admin token (so authentication is checked too), and a served
target that breaks one thing its contract states FAILs ``pytest properties/ --target-url``, naming
Schemathesis's check and the answer. A target more lenient than its contract (a request outside it
accepted) gets a note, which ``--strict-contract`` fails; the design's own checks judge what buyers send."""

from __future__ import annotations

import re
from typing import Any

import pytest

from peakproof.cases import get_case
from peakproof.contract import LENIENT_WHY
from peakproof.launch import ServedTarget

from ..support.mutants import served
from tests.support.runs import properties_against



CONTRACT = ("-k", "openapi_contract")  # the contract test alone: each properties file's last
TOKEN = "contract-token"
NOWHERE = "http://127.0.0.1:9"  # notifications deliver nowhere: the contract is about the API's answers


def _options(case: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    served_opts: dict[str, Any] = {"admin_token": TOKEN}
    args: tuple[str, ...] = ("--admin-token", TOKEN)
    if case == "notifications":
        served_opts["provider_url"] = NOWHERE
        args += ("--provider-url", NOWHERE)
    return served_opts, args


@pytest.mark.parametrize("case", ["tickets", "notifications", "feed"])
def test_schemathesis_finds_nothing_against_each_served_reference_in_any_phase(case: str) -> None:
    opts, args = _options(case)
    with ServedTarget(get_case(case), **opts) as t:
        code, out, _ = properties_against(t.url, case, *CONTRACT, *args)
    assert code == 0 and "1 passed" in out, out[-3000:]
    line = next(ln for ln in out.splitlines() if "contract (Schemathesis):" in ln)
    assert re.search(r"PASS: 0 finding\(s\), [\d,]+ test cases over \d+ operations, 0 error\(s\)", line), line
    for phase in ("examples", "coverage", "fuzzing", "stateful"):
        assert f"{phase} success" in line, line
    assert "not checked" not in line, line  # the token was given: authentication was checked too
    print(f"\n{case}: {line.strip()}")


@pytest.mark.parametrize("mutant, check, says", [
    ("tickets-500-on-some-granted-holds", "not_a_server_error", "database unavailable"),
    ("feed-405-without-allow", "unsupported_method", "Allow"),
    ("notifications-unhashable-channel-is-a-500", "not_a_server_error", "TypeError"),
])
def test_a_served_target_off_its_contract_fails_the_contract_test_naming_the_check(mutant: str, check: str,
                                                                                   says: str) -> None:
    case = mutant.split("-")[0]
    opts, args = _options(case)
    with served(mutant, **opts) as t:
        code, out, _ = properties_against(t.url, case, *CONTRACT, *args)
    assert code == 1 and f"({check}," in out and says in out, out[-3000:]
    finding = next(ln for ln in out.splitlines() if f"({check}," in ln)
    assert "reproduce: curl" in out
    print(f"\n{mutant}: {finding.strip()[:300]}")


def test_a_shop_accepting_a_quantity_of_zero_gets_a_contract_note_and_fails_by_its_own_design_check() -> None:
    # Schemathesis's ST201 (a quantity of 0 accepted) is a note: no promise of the contract's bounds is the
    # design's. What the design promises about a buyer's quantity is the tickets property invalid_requests_refused
    # (quantity 0 and -1, a reservation that adds stock): that is what FAILs the shop; --strict-contract fails the note
    opts, args = _options("tickets")
    with served("tickets-accepts-nonpositive-quantity", **opts) as t:
        code, out, _ = properties_against(t.url, "tickets", *CONTRACT, *args)
        strict_code, strict_out, _ = properties_against(t.url, "tickets", *CONTRACT, *args, "--strict-contract")
        own_code, own_out, _ = properties_against(t.url, "tickets", "-k", "outside_the_contract", *args)
    line = next(ln for ln in out.splitlines() if "contract (Schemathesis):" in ln)
    assert code == 0 and "PASS: 0 finding(s), 1 note(s)" in line, out[-3000:]
    assert "contract note: POST /quotas/{quota_id}/reservations: ST201" in out and '"quantity": ' in out, out[-3000:]
    assert f"why a note: {LENIENT_WHY}" in out, out[-3000:]
    assert strict_code == 1 and "contract note (failing: --strict-contract): POST /quotas/{quota_id}/reservations: " \
        "ST201" in strict_out, strict_out[-3000:]
    assert own_code == 1 and "invalid_requests_refused: POST reservations with body" in own_out, own_out[-3000:]
    assert re.search(r"quantity (0|-1)\b", own_out), own_out[-3000:]  # the failing parameter: a quantity of 0 or -1
    print("\n" + next(ln.strip() for ln in own_out.splitlines() if "invalid_requests_refused:" in ln)[:300])


# Each correct stdlib server made more lenient than its contract in one way (tests/support/stdlib_server.py)
LENIENT = [
    ("tickets", "PUT /quotas/{quota_id}: ST201", "1000000001"),  # a capacity above the contract's 10^9
    ("feed", "GET /users/{user_id}/feed: ST201", "cursor="),  # an empty cursor taken as none
    ("notifications", "PUT /recipients/{recipient_id}: ST201", '"email": ""'),  # an empty e-mail address kept
]


@pytest.mark.parametrize("case, note, says", LENIENT, ids=[c for c, *_ in LENIENT])
def test_a_lenient_server_passes_with_notes_and_fails_under_strict_contract(case: str, note: str, says: str) -> None:
    opts, args = _options(case)
    with served(f"{case}-on-stdlib-lenient", **opts) as t:
        code, out, _ = properties_against(t.url, case, *CONTRACT, *args)
        strict_code, strict_out, _ = properties_against(t.url, case, *CONTRACT, *args, "--strict-contract")
    line = next(ln for ln in out.splitlines() if "contract (Schemathesis):" in ln)
    assert code == 0 and "PASS: 0 finding(s)" in line and "note(s)" in line, out[-3000:]
    leniency = next((block for block in out.split("contract note: ")[1:] if block.startswith(note)), None)
    assert leniency is not None and says in leniency and f"why a note: {LENIENT_WHY}" in leniency, out[-3000:]
    assert "answer: [2" in leniency and "reproduce: curl" in leniency, leniency
    strict_line = next(ln for ln in strict_out.splitlines() if "contract (Schemathesis):" in ln)
    assert strict_code == 1 and "FAIL: 0 finding(s)" in strict_line and "(failing: --strict-contract)" in strict_line, \
        strict_out[-3000:]
    assert f"contract note (failing: --strict-contract): {note}" in strict_out, strict_out[-3000:]
    print(f"\n{case}, lenient: {line.strip()[:300]}\n  strict: {strict_line.strip()[:200]}")


@pytest.mark.parametrize("case", ["tickets", "notifications", "feed"])
def test_a_correct_service_on_the_standard_library_s_server_passes_the_contract_notes_listed(case: str) -> None:
    # http.server answers 501 to the methods it does not implement (HTTP allows it), the tickets one refuses
    # 7.0 and NUL as a PostgreSQL shop does (notes, with their curl), the feed answers epoch times and a
    # short delete: no promise of the design is broken, so no FAIL
    opts, args = _options(case)
    with served(f"{case}-on-stdlib", **opts) as t:
        code, out, _ = properties_against(t.url, case, *CONTRACT, *args)
        line = next(ln for ln in out.splitlines() if "contract (Schemathesis):" in ln)
        assert code == 0 and "PASS: 0 finding(s)" in line, out[-3000:]
        assert re.search(r"[1-9]\d* answer\(s\) HTTP allows not counted \(501", line), line
        assert "ST201" not in out, out[-3000:]  # as lenient as its contract: the leniencies are options (LENIENT)
        print(f"\n{case} on http.server: {line.strip()[:400]}")
        if case != "tickets":
            return
        assert "note(s)" in line and "contract note: POST /quotas/{quota_id}/reservations" in out, out[-3000:]
        assert "reproduce: curl" in out and "why a note" in out  # --strict-contract: tests/served/test_contract.py
