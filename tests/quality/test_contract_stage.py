"""The contract stage can fail, over HTTP: each served reference keeps its contract under every
Schemathesis check and phase, with its admin token (so authentication is checked too), and a served
target that breaks one thing its contract states FAILs ``pytest properties/ --target-url``, naming
Schemathesis's check and the answer."""

from __future__ import annotations

import re
from typing import Any

import pytest

from peakproof.launch import ServedTarget

from ..support.mutants import served
from .test_served_mutants import properties_against

pytestmark = [pytest.mark.http, pytest.mark.slow]

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
    with ServedTarget(case, **opts) as t:
        code, out = properties_against(t.url, case, *CONTRACT, *args)
    assert code == 0 and "1 passed" in out, out[-3000:]
    line = next(ln for ln in out.splitlines() if "contract (Schemathesis):" in ln)
    assert re.search(r"PASS: 0 finding\(s\), [\d,]+ test cases over \d+ operations, 0 error\(s\)", line), line
    for phase in ("examples", "coverage", "fuzzing", "stateful"):
        assert f"{phase} success" in line, line
    assert "not checked" not in line, line  # the token was given: authentication was checked too
    print(f"\n{case}: {line.strip()}")


@pytest.mark.parametrize("mutant, check, says", [
    ("tickets-accepts-nonpositive-quantity", "negative_data_rejection", "quantity"),
    ("tickets-500-on-some-granted-holds", "not_a_server_error", "database unavailable"),
    ("feed-405-without-allow", "unsupported_method", "Allow"),
    ("notifications-unhashable-channel-is-a-500", "not_a_server_error", "TypeError"),
])
def test_a_served_target_off_its_contract_fails_the_contract_test_naming_the_check(mutant: str, check: str,
                                                                                   says: str) -> None:
    case = mutant.split("-")[0]
    opts, args = _options(case)
    with served(mutant, **opts) as t:
        code, out = properties_against(t.url, case, *CONTRACT, *args)
    assert code == 1 and f"({check}," in out and says in out, out[-3000:]
    finding = next(ln for ln in out.splitlines() if f"({check}," in ln)
    assert "reproduce: curl" in out
    print(f"\n{mutant}: {finding.strip()[:300]}")


@pytest.mark.parametrize("case", ["tickets", "notifications", "feed"])
def test_a_correct_service_on_the_standard_library_s_server_passes_the_contract_notes_listed(case: str) -> None:
    # http.server answers 501 to the methods it does not implement (HTTP allows it), the tickets one refuses
    # 7.0 and NUL as a PostgreSQL shop does (notes, with their curl), the feed answers epoch times and a
    # short delete: no promise of the design is broken, so no FAIL
    opts, args = _options(case)
    with served(f"{case}-on-stdlib", **opts) as t:
        code, out = properties_against(t.url, case, *CONTRACT, *args)
        line = next(ln for ln in out.splitlines() if "contract (Schemathesis):" in ln)
        assert code == 0 and "PASS: 0 finding(s)" in line, out[-3000:]
        assert re.search(r"[1-9]\d* answer\(s\) HTTP allows not counted \(501", line), line
        print(f"\n{case} on http.server: {line.strip()[:400]}")
        if case != "tickets":
            return
        assert "note(s)" in line and "contract note: POST /quotas/{quota_id}/reservations" in out, out[-3000:]
        assert "reproduce: curl" in out and "why a note" in out  # --strict-contract: tests/served/test_contract.py
