"""Quality: the notification checks catch the seed's rejected designs and a miscounting breaker."""

from __future__ import annotations

import pytest

from targets.notifications import core as ncore

from ..test_notifications import run_peak

pytestmark = pytest.mark.slow


def test_parallel_delivery_is_caught_delivering_twice() -> None:
    _, r = run_peak(4_000, policy="parallel")
    dup = r["one_delivery_per_event"]
    assert dup.valid is False and dup.counts["duplicate_deliveries"] > 4_000  # the seed: 1.83 extra each
    print(dup.first_violation)


def test_single_channel_is_caught_below_the_delivery_ratio() -> None:
    _, r = run_peak(10_000, policy="single")
    ratio = r["delivery_ratio_at_least"]
    assert ratio.valid is False and 0.95 < float(ratio.counts["actual"]) < 0.97  # the seed: 0.9590
    print(ratio.first_violation)


def test_a_breaker_that_counts_permanent_failures_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    original = ncore.Breaker.record

    def counts_permanent_too(self: ncore.Breaker, outcome: str, now: float) -> None:
        original(self, "transient" if outcome == "permanent" else outcome, now)

    monkeypatch.setattr(ncore.Breaker, "record", counts_permanent_too)
    _, r = run_peak(10_000)
    caught = r["breaker_counts_only_transient"]
    assert caught.valid is False, caught.summary()
    print(caught.first_violation)
