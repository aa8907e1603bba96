"""The served notifications target over real HTTP on 127.0.0.1, with the served provider simulator."""

from __future__ import annotations

import time

import pytest

from peakproof.cases import get_case
from peakproof.cases.notifications import HttpNotifications, check_notifications, peak_minute
from peakproof.launch import ServedTarget




@pytest.fixture
def providers():
    with ServedTarget("providers", latency=0.02) as p:
        yield p


def test_a_crash_and_restart_mid_run_loses_no_accepted_notification_and_delivers_none_twice(providers) -> None:
    with ServedTarget(get_case("notifications"), provider_url=providers.base, backoff=0.5) as target:
        d = HttpNotifications(target.url, providers.base)
        people = peak_minute(400, urgent_share=0.3)
        for rid, channels, addresses, _ in people:
            assert d.put_recipient(rid, channels, addresses).type == "ok"
        ids = []
        for i, (rid, _, _, priority) in enumerate(people):
            op = d.notify(f"crash-{i}", rid, priority, "Siparişiniz yolda", "Kargo bugün geliyor")
            assert op.type == "ok", op
            ids.append(op.value["notification_id"])
            if i == 250:
                target.restart(kill=True)  # SIGKILL mid-run: calls in flight, rounds pending
        deadline = time.time() + 30
        while time.time() < deadline:
            statuses = [d.get_notification(nid, process="poll").value["status"] for nid in ids]
            if all(s in ("delivered", "failed") for s in statuses):
                break
            time.sleep(0.5)
        calls = d.provider_calls()
    results = {r.name: r for r in check_notifications(d.history, calls)}
    print("\n" + "\n".join(r.summary().splitlines()[0] for r in results.values()))
    accepted = len({(op.args["event_id"], op.args["recipient_id"]) for op in d.history.ops
                    if op.f == "notify" and op.type == "ok"})
    assert accepted == 400
    assert results["one_delivery_per_event"].valid is True
    assert results["delivery_ratio_at_least"].valid is True
    assert results["status_matches_providers"].valid is True
    assert results["status_moves_forward"].valid is not False  # read once each here: rarely a chance


def test_a_replay_returns_the_same_notification_and_bad_requests_get_the_error_shape(providers) -> None:
    import requests

    with ServedTarget(get_case("notifications"), provider_url=providers.base, backoff=0.5) as target:
        d = HttpNotifications(target.url, providers.base)
        d.put_recipient("ayse", ["sms", "push"], {"phone": "+905550001122", "push_token": "tok"})
        first = d.notify("ev-1", "ayse", "urgent", "Kod", "123456")
        again = d.notify("ev-1", "ayse", "reminder", "other", "other")
        assert first.value["notification_id"] == again.value["notification_id"]
        for body, status in [(b"{", 400), (b'{"event_id": "e", "recipient_id": "nobody", "priority": "urgent"}', 404),
                             (b'{"event_id": "e", "recipient_id": "ayse", "priority": "soon"}', 400)]:
            r = requests.post(f"{target.url}/notifications", data=body, timeout=5)
            assert r.status_code == status and {"error", "message"} <= set(r.json()), (body, r.status_code, r.text)
        doc = requests.get(f"{target.base}/openapi.json", timeout=5).json()
        assert "/notifications" in doc["paths"]


def test_the_peak_and_push_down_scenarios_pass_against_the_reference_target(providers, tmp_path) -> None:
    from .test_load_engine import check, run_locust

    with ServedTarget(get_case("notifications"), provider_url=providers.base, backoff=1.0, breaker_cool_down=2) as target:
        for scenario in ("notifications-peak", "notifications-push-down"):
            rc, doc, out = run_locust(target.url, scenario, tmp_path, "--scale", "0.1", "--duration", "5",
                                      "--provider-url", providers.base, "--time-scale", "30", "--backoff", "1",
                                      "--breaker-cool-down", "2")  # the rules it was served with, stated
            calls = doc["details"]["provider calls"]
            print(f"\n{scenario}: pass {doc['pass']}, calls {calls}")
            assert rc == 0, out[-3000:]
            assert check(doc, "checks", "one_delivery_per_event")["valid"] is True
            if scenario == "notifications-push-down":
                assert calls["push"] < 0.2 * calls["total"]  # the breaker keeps the dead channel out
                due = check(doc, "checks", "breaker_opens_when_due")  # push's breaker fell due, and opened
                assert due["valid"] is True and due["chances"] >= 1 and due["due_total"]["held"] >= 1, due
            else:  # nothing fell due at the peak: the check is not reported, rather than "not exercised"
                assert not [r for r in doc["checks"] if r["name"] == "breaker_opens_when_due"], doc["checks"]

