"""The served tickets target over real HTTP on 127.0.0.1: concurrency, durability, contract."""

from __future__ import annotations

import uuid

import requests

from peakproof.cases.tickets import HttpTickets, check_tickets, concurrent_burst
from peakproof.checks import assert_checks
from peakproof.history import OK
from peakproof.http import HttpClientTransport



BURST = dict(capacity=5_000, requests=20_000, threads=16, hold_seconds=600.0, deadline_seconds=240.0)


def burst_against(url: str, **burst: object) -> dict[str, object]:
    transport = HttpClientTransport(timeout=5.0)  # one kept-alive connection per thread: a third of requests' cost
    quota, history = concurrent_burst(lambda h: HttpTickets(url, history=h, transport=transport),
                                      **{**BURST, **burst})  # type: ignore[arg-type]
    results = {r.name: r for r in check_tickets(history, HttpTickets.tolerance)}
    final = history.ops[-1]
    print(f"\n{url}: {history.counts()} final {final.value}")
    for r in results.values():
        print("  " + r.summary().splitlines()[0])
    return {"results": results, "counts": history.counts(), "final": final}


def test_sixteen_concurrent_clients_never_oversell_with_pessimistic_locking(serve_tickets) -> None:
    out = burst_against(serve_tickets(policy="pessimistic").url)
    results = out["results"]
    assert out["counts"]["ok"] > 0 and out["counts"]["invoke"] == 0  # type: ignore[index]
    assert results["no_oversell"].valid is True, results["no_oversell"].summary()  # type: ignore[index]
    assert not any(r.failed for r in results.values()), [r.summary() for r in results.values()]  # type: ignore[union-attr]
    # a burst has no late payments or replays: those promises are the opening scenario's to test
    for name in ("no_oversell", "no_valid_rejection", "stock_is_conserved"):
        assert results[name].valid is True and results[name].chances, results[name].summary()  # type: ignore[union-attr]
    assert out["final"].value["sold"] + out["final"].value["held"] == BURST["capacity"]  # type: ignore[union-attr]


def test_sixteen_concurrent_clients_oversell_without_locking(serve_tickets) -> None:
    # every request of the unprotected discipline takes the row (no sold-out fast path holds): a fifth of
    # the burst, the same 16 writers and 4x demand, shows the lost updates as surely
    out = burst_against(serve_tickets(policy="none").url, capacity=1_000, requests=4_000)
    oversell = out["results"]["no_oversell"]  # type: ignore[index]
    assert oversell.valid is False, "read-decide-write without a lock must oversell under 16 writers"
    assert oversell.counts["oversold_units"] > 0
    assert "oversold by" in oversell.first_violation


def test_confirmed_sales_survive_a_crash_and_restart(serve_tickets) -> None:
    served = serve_tickets(policy="pessimistic")
    d = HttpTickets(served.url)
    quota = f"durable-{uuid.uuid4().hex[:8]}"
    assert d.put_quota(quota, 50, 600.0).type == OK
    sold, held = [], []
    for i in range(30):
        op = d.reserve(quota, f"buyer-{i}", 1, f"r{i}")
        assert op.type == OK, op
        (sold if i < 20 else held).append(op.value["reservation_id"])
    for rid in sold:
        assert d.confirm(rid).type == OK
    before = d.read_quota(quota).value
    served.restart(kill=True)  # SIGKILL: no clean shutdown, no flush on exit
    after = HttpTickets(served.url).read_quota(quota)
    assert after.type == OK, after
    assert (after.value["sold"], after.value["held"], after.value["available"]) == (20, 10, 20) == (
        before["sold"], before["held"], before["available"])
    for rid in sold:
        assert HttpTickets(served.url).get_reservation(rid).value["status"] == "sold"
    # a replay after the restart still finds its reservation instead of holding more
    replay = HttpTickets(served.url).reserve(quota, "buyer-25", 1, "r25")
    assert replay.type == OK and replay.value["reservation_id"] == held[5]
    assert HttpTickets(served.url).read_quota(quota).value["held"] == 10


def test_holds_expire_in_real_time_and_their_units_return(serve_tickets) -> None:
    import time

    served = serve_tickets(policy="pessimistic")
    d = HttpTickets(served.url)
    quota = f"expiry-{uuid.uuid4().hex[:8]}"
    d.put_quota(quota, 2, 0.3)
    rid = d.reserve(quota, "a", 2, "r1").value["reservation_id"]
    reserved_at = time.time()
    assert d.reserve(quota, "b", 1, "r2").value == "sold_out"
    # the supervisor runs every 0.1 s; how soon it gets to run is this machine's business: after the
    # 0.6 s that are plenty here, wait for the release (bounded far above any machine's lag)
    time.sleep(0.6)
    deadline = time.monotonic() + 30
    while (available := d.read_quota(quota).value["available"]) != 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert available == 2, f"the expired hold's units never came back: {d.read_quota(quota).value}"
    assert d.confirm(rid).value == "expired"
    assert d.get_reservation(rid).value["status"] == "expired"
    # a read once the history itself says the units are back (the hold's end plus the checks' allowance
    # for the target's clock and its release loop): units_return_exactly_once's chance to fail
    tol = HttpTickets.tolerance
    time.sleep(max(0.0, reserved_at + 0.3 + tol.skew + tol.return_lag + 0.2 - time.time()))
    assert d.read_quota(quota).value["available"] == 2
    assert_checks(check_tickets(d.history, HttpTickets.tolerance),
                  decided=("expired_hold_is_never_sold", "units_return_exactly_once", "stock_is_conserved"))


def test_quota_setup_needs_the_admin_token_when_the_server_has_one(serve_tickets) -> None:
    served = serve_tickets(admin_token="s3cret")
    r = requests.put(f"{served.url}/quotas/q1", json={"capacity": 5}, timeout=5)
    assert r.status_code == 401 and r.json()["error"] == "unauthorized"
    assert "Bearer" in r.json()["message"]
    ok = requests.put(f"{served.url}/quotas/q1", json={"capacity": 5},
                      headers={"Authorization": "Bearer s3cret"}, timeout=5)
    assert ok.status_code == 200 and ok.json()["available"] == 5


def test_the_contract_is_served_as_openapi_and_errors_have_the_contract_shape(serve_tickets) -> None:
    served = serve_tickets()
    doc = requests.get(f"{served.base}/openapi.json", timeout=5).json()
    assert doc["openapi"].startswith("3.") and "/quotas/{quota_id}/reservations" in doc["paths"]
    for method, path, status in [("GET", "/nope", 404), ("DELETE", "/quotas/x", 405),
                                 ("POST", "/quotas/x/reservations", 400)]:
        r = requests.request(method, served.url + path, data=b"{", timeout=5)
        assert r.status_code == status, (method, path, r.status_code, r.text)
        body = r.json()
        assert set(body) >= {"error", "message"}, body


def test_a_dead_target_is_a_finding_not_a_crash() -> None:
    from peakproof.launch import free_port

    d = HttpTickets(f"http://127.0.0.1:{free_port()}/tickets", timeout=1.0)
    op = d.reserve("q", "a", 1, "r")
    assert op.type == "fail" and op.value == "connection_refused"
