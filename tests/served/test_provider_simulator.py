"""The served provider simulator: the latency its record gives a call is what the answer took, between the
configured delay and what the caller waited (it was the configured delay alone: a busy event loop answered
later, the caller timed out, and the checks, reading 0.1 s, called the caller's breaker unfair)."""

from __future__ import annotations

import time

import pytest
import requests

from peakproof.launch import ServedTarget

pytestmark = [pytest.mark.http, pytest.mark.slow]


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
