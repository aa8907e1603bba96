"""Case T's robustness over HTTP, stated as properties: the contract's bounds (quantity 0, -1, 11, ids too long
or empty) get a 4xx in the contract's error shape, never a 5xx, and never change stock; unknown ids get a 404;
and the contract, checked by Schemathesis. Collected with the rest in :mod:`.properties`."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests
from hypothesis import example, given
from hypothesis import strategies as st

from peakproof.history import OK
from peakproof.pytest_plugin import Target, assert_contract_kept, contract_for, spec_for
from peakproof.spec import RunSpec

from .case import CASE


# -- robustness over HTTP ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def robust_quota(tickets_url: str, request: pytest.FixtureRequest) -> tuple[str, requests.Session]:
    if request.config.getoption("--peakproof-driver") or (request.config.getoption("--spec") and
                                                 RunSpec.load(request.config.getoption("--spec")).driver):
        pytest.skip("the contract's wire-shape probes (raw bodies, its error shape) apply to the contract's API "
                    "only; with --driver the service speaks its own")
    session = requests.Session()
    quota = f"robust-{uuid.uuid4().hex[:10]}"
    # set up through the driver (any 2xx HTTP allows); the probes below are raw: they send what no driver would
    driver = Target(CASE.name, tickets_url, admin_token=spec_for(CASE.name, request.config).admin_token).new_driver()
    op = driver.put_quota(quota, 10, 600)
    assert op.type == OK, f"could not set up a quota on {tickets_url}: {op!r}"
    return quota, session


def _assert_contract_error(resp: requests.Response, what: str) -> None:
    assert 400 <= resp.status_code < 500, (
        f"{what}: expected a 4xx refusal. Actual: HTTP {resp.status_code} {resp.text[:300]!r}")
    try:
        doc = resp.json()
    except ValueError:
        raise AssertionError(f"{what}: the error body must be JSON. Actual: {resp.text[:300]!r}") from None
    assert isinstance(doc, dict) and isinstance(doc.get("error"), str) and isinstance(doc.get("message"), str), (
        f"{what}: errors must be {{\"error\": code, \"message\": text}}. Actual: {doc!r}")


def _assert_stock_untouched(url: str, quota: str, session: requests.Session) -> None:
    q = session.get(f"{url}/quotas/{quota}", timeout=5).json()
    assert (q["available"], q["held"], q["sold"]) == (10, 0, 0), f"a refused request changed stock: {q}"


def _reservation(quantity: Any, buyer_id: Any = "b", request_id: Any = "r") -> bytes:
    return json.dumps({"buyer_id": buyer_id, "quantity": quantity, "request_id": request_id}).encode()


# Schemathesis derives malformed requests from the contract (the contract test below); what only we
# know is that a refusal changes no stock. The contract's bounds are tried every run: a quantity of 0
# or -1 that a server takes is a "reservation" that adds stock; 11 is one past the most a request may
# hold; 7.5 is no integer (7.0 is one, and must be granted: the contract test tries it).
_OUTSIDE_THE_CONTRACT = {
    "quantity 0": _reservation(0), "quantity -1": _reservation(-1), "quantity 11": _reservation(11),
    "quantity 7.5": _reservation(7.5), "quantity '1'": _reservation("1"), "quantity true": _reservation(True),
    "empty buyer_id": _reservation(1, buyer_id=""), "201-character request_id": _reservation(1, request_id="r" * 201),
    "buyer_id a number": _reservation(1, buyer_id=7), "no request_id": b'{"buyer_id": "b", "quantity": 1}',
    "not JSON": b"{not json", "not an object": b"[1, 2]",
}


@pytest.mark.http  # tickets_url: --target-url, or the reference server started on 127.0.0.1
@pytest.mark.parametrize("body", list(_OUTSIDE_THE_CONTRACT.values()), ids=list(_OUTSIDE_THE_CONTRACT))
def test_requests_outside_the_contract_are_refused_with_a_4xx_and_change_no_stock(
        tickets_url: str, robust_quota: tuple[str, requests.Session], body: bytes) -> None:
    quota, session = robust_quota
    resp = session.post(f"{tickets_url}/quotas/{quota}/reservations", data=body,
                        headers={"Content-Type": "application/json"}, timeout=5)
    _assert_contract_error(resp, f"invalid_requests_refused: POST reservations with body {body[:120]!r}")
    _assert_stock_untouched(tickets_url, quota, session)


# What a buyer's app sends as an id: text a person or a program writes (Turkish, emoji, punctuation), not every
# string JSON allows: no control characters (NUL), no lone surrogates, nothing unassigned. A shop whose
# database cannot hold NUL is not broken (its refusal is a contract note, not valid_requests_accepted's FAIL).
_contract_id = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Cn", "Co")), min_size=1, max_size=200)


@pytest.fixture(scope="module")
def roomy_quota(tickets_url: str, robust_quota: tuple[str, requests.Session],
                request: pytest.FixtureRequest) -> str:
    quota = f"roomy-{uuid.uuid4().hex[:10]}"
    driver = Target(CASE.name, tickets_url, admin_token=spec_for(CASE.name, request.config).admin_token).new_driver()
    op = driver.put_quota(quota, 1_000_000, 600)
    assert op.type == OK, f"could not set up a quota on {tickets_url}: {op!r}"
    return quota


@pytest.mark.http
@given(buyer_id=_contract_id, quantity=st.integers(1, 10), request_id=_contract_id)
# the other side of the bounds: the fewest and the most a request may hold, ids of 1 and 200 characters
@example(buyer_id="b", quantity=1, request_id="r").via("the contract's bound")
@example(buyer_id="b" * 200, quantity=10, request_id="r" * 200).via("the contract's bound")
@example(buyer_id="Ayşe Gül 🎫", quantity=10, request_id="İstanbul/ödeme?#1").via("the contract's bound")
def test_every_reservation_the_contract_allows_is_granted_to_who_asked(
        tickets_url: str, robust_quota: tuple[str, requests.Session], roomy_quota: str,
        buyer_id: str, quantity: int, request_id: str) -> None:
    _, session = robust_quota
    body = {"buyer_id": buyer_id, "quantity": quantity, "request_id": f"{uuid.uuid4().hex[:8]}{request_id}"[:200]}
    resp = session.post(f"{tickets_url}/quotas/{roomy_quota}/reservations", json=body, timeout=5)
    assert resp.status_code in (200, 201), (
        f"valid_requests_accepted: a request the contract allows (quantity 1-10, ids of 1-200 characters) "
        f"on a quota with stock to spare must be granted. Actual: HTTP {resp.status_code} {resp.text[:300]!r} "
        f"for body {json.dumps(body)[:300]}")
    doc = resp.json()
    asked = (roomy_quota, buyer_id, quantity)
    got = (doc.get("quota_id"), doc.get("buyer_id"), doc.get("quantity"))
    assert got == asked, (f"answers_belong_to_who_asked: a reservation's answer must be about the quota, buyer "
                          f"and quantity that asked. Asked {asked!r}; the answer says {got!r}")


@pytest.mark.http
@given(some_id=st.text(st.characters(blacklist_categories=("Cs", "Cc", "Cn", "Co")), min_size=1, max_size=40), action=st.sampled_from(["confirm", "cancel", "get", "quota"]))
def test_unknown_ids_get_a_404_in_the_contract_shape(
        tickets_url: str, robust_quota: tuple[str, requests.Session], some_id: str, action: str) -> None:
    quota, session = robust_quota
    ident = "unknown-" + quote(some_id, safe="")
    if action == "quota":
        resp = session.post(f"{tickets_url}/quotas/{ident}/reservations", timeout=5,
                            json={"buyer_id": "b", "quantity": 1, "request_id": "r"})
    elif action == "get":
        resp = session.get(f"{tickets_url}/reservations/{ident}", timeout=5)
    else:
        resp = session.post(f"{tickets_url}/reservations/{ident}/{action}", timeout=5)
    _assert_contract_error(resp, f"{action} on unknown id {ident!r}")
    assert resp.status_code == 404, f"{action} on an unknown id: expected 404. Actual: HTTP {resp.status_code}"
    _assert_stock_untouched(tickets_url, quota, session)


# -- the contract, checked by a peer tool ---------------------------------------------------------------
# Last in the file: over a URL it leaves quotas and reservations of its own behind.

def test_the_target_answers_every_request_as_its_openapi_contract_says(request: pytest.FixtureRequest,
                                                                        tmp_path: Path) -> None:
    assert_contract_kept(contract_for(CASE.name, request.config, tmp_path))
