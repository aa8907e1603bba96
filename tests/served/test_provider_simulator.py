"""The served provider simulator: the latency its record gives a call is what the answer took, between the
configured delay and what the caller waited (it was the configured delay alone: a busy event loop answered
later, the caller timed out, and the checks, reading 0.1 s, called the caller's breaker unfair)."""

from __future__ import annotations

import time

import requests

from peakproof.launch import ServedTarget




def test_a_calls_recorded_latency_lies_between_the_configured_delay_and_what_the_caller_waited() -> None:
    with ServedTarget("providers", latency=0.05) as p, requests.Session() as s:
        s.put(f"{p.base}/config", json={"multiplier": 0.0}, timeout=10).raise_for_status()
        waited = []
        for i in range(5):
            t0 = time.monotonic()
            r = s.post(f"{p.base}/sms", timeout=10, headers={"Idempotency-Key": f"k{i}"},
                       json={"to": "+905550000000", "event_id": f"e{i}", "recipient_id": "r1",
                             "message": {"text": "hi", "encoding": "GSM-7", "segments": 1}})
            waited.append(time.monotonic() - t0)
            assert r.status_code == 200, r.text
        calls = s.get(f"{p.base}/calls", timeout=10).json()["calls"]
    assert len(calls) == 5
    for call, w in zip(calls, waited):
        assert 0.05 <= call["latency"] <= w, (call["latency"], w)


def test_a_lane_set_over_http_answers_its_recipients_by_its_faults_and_a_bad_one_changes_nothing() -> None:
    def post(s: requests.Session, base: str, recipient: str, key: str) -> tuple[int, float]:
        t0 = time.monotonic()
        r = s.post(f"{base}/sms", timeout=10, headers={"Idempotency-Key": key},
                   json={"to": "+905550000001", "event_id": key, "recipient_id": recipient,
                         "message": {"text": "hi", "encoding": "GSM-7", "segments": 1}})
        return r.status_code, time.monotonic() - t0

    with ServedTarget("providers", latency=0.0) as p, requests.Session() as s:
        s.put(f"{p.base}/config", json={"multiplier": 0.0}, timeout=10).raise_for_status()
        r = s.post(f"{p.base}/config", json={"lanes": {"a-": {"down": ["sms"]}, "b-": {"latency": 0.3}}}, timeout=10)
        assert r.status_code == 200 and r.json()["lanes"] == {"a-": {"down": ["sms"]}, "b-": {"latency": 0.3}}, r.text
        bad = s.post(f"{p.base}/config", json={"lanes": {"a-": {"seed": 1}}}, timeout=10)
        assert bad.status_code == 400 and "expected some of" in bad.json()["message"], bad.text
        assert post(s, p.base, "a-r0", "k1")[0] == 503
        code, took = post(s, p.base, "b-r0", "k2")
        assert code == 200 and took >= 0.3
        code, took = post(s, p.base, "c-r0", "k3")
        assert code == 200 and took < 0.3
        s.post(f"{p.base}/config", json={"lanes": {"a-": None}}, timeout=10).raise_for_status()
        assert post(s, p.base, "a-r0", "k4")[0] == 200
        assert s.put(f"{p.base}/config", json={}, timeout=10).json()["lanes"] == {}  # PUT: the model as started
