"""The driver API a real service needs, piece by piece: per-request headers, the auth hook,
error maps that walk lists and match prefixes and patterns, operations made of several requests,
and the per-run store of ids a service allocates."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from peakproof.driver import HttpDriver, IdStore
from peakproof.history import FAIL, INFO, OK
from peakproof.http import ErrorMap, TransportError


class Recorder:
    """A transport that answers from a script and remembers every request."""

    def __init__(self, *answers: tuple[int, Any]) -> None:
        self.answers = list(answers)
        self.sent: list[tuple[str, str, dict[str, str]]] = []

    def __call__(self, method: str, url: str, body: bytes | None, headers: dict[str, str], name: str) -> tuple[int, bytes]:
        self.sent.append((method, url, dict(headers)))
        status, doc = self.answers.pop(0) if self.answers else (200, {})
        if isinstance(doc, Exception):
            raise doc
        return status, json.dumps(doc).encode()


def driver(cls: type = HttpDriver, *answers: tuple[int, Any], **kw: Any) -> tuple[Any, Recorder]:
    t = Recorder(*answers)
    return cls("http://127.0.0.1:9/api", transport=t, **kw), t


def test_each_request_goes_out_with_its_own_header_values() -> None:
    d, t = driver()
    for i in range(3):
        d._call("reserve", {}, "POST", "/holds", {}, dict, headers={"X-Idempotency-Key": f"k{i}"})
    assert [h["X-Idempotency-Key"] for _, _, h in t.sent] == ["k0", "k1", "k2"]


def test_auth_goes_on_admin_calls_only_by_default() -> None:
    d, t = driver(admin_token="adm")
    d._call("read", {}, "GET", "/x", None, dict)
    d._call("setup", {}, "PUT", "/x", {}, dict, admin=True)
    assert "Authorization" not in t.sent[0][2] and t.sent[1][2]["Authorization"] == "Bearer adm"


class TokenEverywhere(HttpDriver):
    auth = "every"

    def auth_headers(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Token {token}"}


def test_a_driver_that_authenticates_every_call_sends_the_buyers_token_and_the_admins_on_admin_calls() -> None:
    d, t = driver(TokenEverywhere, admin_token="adm", token="buyer")
    d._call("reserve", {}, "POST", "/holds", {}, dict, headers={"X-Idempotency-Key": "k"})
    d._call("setup", {}, "PUT", "/x", {}, dict, admin=True)
    assert t.sent[0][2]["Authorization"] == "Token buyer" and t.sent[0][2]["X-Idempotency-Key"] == "k"
    assert t.sent[1][2]["Authorization"] == "Token adm"
    only_admin, t2 = driver(TokenEverywhere, admin_token="adm")  # no --token: the admin's on every call
    only_admin._call("reserve", {}, "POST", "/holds", {}, dict)
    assert t2.sent[0][2]["Authorization"] == "Token adm"


def test_an_auth_setting_other_than_admin_or_every_is_refused_with_the_choices() -> None:
    class Typo(HttpDriver):
        auth = "all"

    with pytest.raises(ValueError, match="'admin' or 'every'"):
        driver(Typo)


DRF = {"positions": [{}, {"item": ["There is not enough quota available on item 'Ticket' (3 left)."]}]}


def test_an_error_map_walks_lists_to_the_text_and_matches_its_prefix() -> None:
    m = ErrorMap(field=("detail", "positions.item"), prefixes={"There is not enough quota": "sold_out"})
    assert m.code(400, DRF) == "sold_out"
    assert m.message(DRF, b"").startswith("There is not enough quota")
    assert m.code(400, {"detail": "Not found."}) == "Not found."  # unmapped: the text as it is
    assert m.code(404, {"detail": ["Authentication credentials were not provided."]}) is not None


def test_an_error_map_matches_patterns_and_falls_back_to_statuses_then_http_status() -> None:
    m = ErrorMap(field="errors", patterns={r"quota .* exceeded": "sold_out"}, statuses={404: "not_found"})
    assert m.code(409, {"errors": [["the quota was exceeded"]]}) == "sold_out"
    assert m.code(404, {"errors": []}) == "not_found"
    assert m.code(418, {"errors": []}) is None  # the caller names it http_418
    with pytest.raises(ValueError, match="not a regular expression"):
        ErrorMap(patterns={"(": "x"})


def test_a_driver_reads_an_unmapped_nested_refusal_through_its_map() -> None:
    class Shop(HttpDriver):
        errors = ErrorMap(field="positions.item", prefixes={"There is not enough quota": "sold_out"})

    d, _ = driver(Shop, (400, DRF))
    op = d._call("reserve", {}, "POST", "/orders", {}, dict)
    assert (op.type, op.value) == (FAIL, "sold_out")


class Shop(HttpDriver):
    errors = ErrorMap(field="detail", codes={"Not found.": "not_found"})

    def reserve(self, event: str, *, intended_time: float | None = None) -> Any:
        with self.operation("reserve", {"quota_id": event}, intended_time=intended_time) as op:
            item = op.request("GET", f"/events/{event}/items")
            order = op.request("POST", "/orders", {"item": item["id"]})
            op.ok({"reservation_id": order["code"]})
        return op.result


def test_an_operation_of_several_requests_is_one_op_with_one_completion_and_its_whole_latency() -> None:
    d, t = driver(Shop, (200, {"id": 7}), (201, {"code": "ABC12"}))
    intended = time.time() - 0.5  # the curve asked half a second ago
    op = d.reserve("ev", intended_time=intended)
    assert len(t.sent) == 2 and len(d.history.ops) == 1
    assert (op.type, op.value) == (OK, {"reservation_id": "ABC12"})
    assert op.intended_time == intended and op.complete_time - intended >= 0.5


def test_an_operation_ends_at_the_request_that_failed_with_its_code_through_the_map() -> None:
    d, t = driver(Shop, (404, {"detail": "Not found."}))
    op = d.reserve("ev")
    assert (op.type, op.value) == (FAIL, "not_found") and len(t.sent) == 1 and len(d.history.ops) == 1


def test_an_operation_whose_second_request_timed_out_is_info() -> None:
    d, _ = driver(Shop, (200, {"id": 7}), (0, TransportError("timeout", "no answer within 5 s")))
    op = d.reserve("ev")
    assert (op.type, op.value) == (INFO, "timeout")


def test_an_operation_that_cannot_read_an_answer_or_gives_no_value_is_info() -> None:
    d, _ = driver(Shop, (200, {"no_id": 1}))
    assert (d.reserve("ev").type, d.history.ops[-1].value) == (INFO, "bad_response")
    d2, _ = driver(Shop)
    with d2.operation("reserve", {}) as op:
        op.request("GET", "/x")
    assert (op.result.type, op.result.value) == (INFO, "no_value")


def test_ids_a_service_allocates_are_created_once_and_seen_by_every_instance_and_thread() -> None:
    import threading

    calls = []

    def create() -> int:
        calls.append(1)
        time.sleep(0.05)  # a slow look-up: the other threads arrive while it is out
        return 17

    a, _ = driver(Shop)
    b, _ = driver(Shop)
    got: list[Any] = []
    threads = [threading.Thread(target=lambda d=d: got.append(d.ids.get_or_create("event", "opening-1", create)))
               for d in (a, b) * 5]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [17] * 10 and len(calls) == 1
    assert a.ids is b.ids and b.ids.get("event", "opening-1") == 17
    other, _ = driver(TokenEverywhere)
    assert other.ids is not a.ids  # another driver class: another service's ids


GREENLETS = """
from gevent import monkey; monkey.patch_all()
import gevent
from peakproof.driver import HttpDriver
calls = []
def create():
    calls.append(1); gevent.sleep(0.05); return 17
drivers = [HttpDriver("http://127.0.0.1:9/api") for _ in range(2)]
got = [gevent.spawn(d.ids.get_or_create, "event", "opening-1", create) for d in drivers * 5]
gevent.joinall(got, timeout=10)
print([g.value for g in got], len(calls))
"""
def test_the_id_store_is_shared_by_a_load_processs_greenlets_with_one_creation() -> None:
    import subprocess
    import sys

    # as Locust runs it: gevent's monkey patching first, then the greenlets of one generator process
    out = subprocess.run([sys.executable, "-c", GREENLETS], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == f"{[17] * 10} 1", out.stdout + out.stderr


def test_a_failed_creation_stores_nothing_and_the_next_caller_tries_again() -> None:
    store = IdStore()
    assert store.get_or_create("event", "q", lambda: None) is None
    assert store.get_or_create("event", "q", lambda: 5) == 5 and len(store) == 1
