"""Quality: the notification checks catch the seed's rejected designs and a miscounting breaker."""

from __future__ import annotations

import pytest

from typing import Any

from peakproof.cases.notifications import IN_VIRTUAL_TIME as VIRTUAL, InProcessNotifications, check_notifications, peak_minute
from peakproof.checks import CheckResult
from peakproof.providers import ProviderConfig
from peakproof.targets.notifications import core as ncore

from tests.support.notifications_peak import PEAK, run_peak



def test_parallel_delivery_is_caught_delivering_twice() -> None:
    _, r = run_peak(4_000, policy="parallel")
    dup = r["one_delivery_per_event"]
    assert dup.valid is False and dup.counts["duplicate_deliveries"] > 4_000  # the seed: 1.83 extra each
    print(dup.first_violation)


def test_single_channel_is_caught_below_the_delivery_ratio() -> None:
    _, r = run_peak(10_000, policy="single")
    ratio = r["delivery_ratio_at_least"]
    assert ratio.valid is False and 0.95 < ratio.actual.value < 0.97  # the seed: 0.9590
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


# -- one mutant per promise ------------------------------------------------------------------------


def run_and_read(n: int, *, providers: ProviderConfig | None = None) -> dict[str, CheckResult]:
    """The peak in virtual time with bulkheads (calls wait in their lanes), every notification's
    status read three times: right after acceptance, during the backoff, and at the end."""
    capacity = {"push": 954.86, "sms": 434.03, "email": 347.22}  # the seed's peak call rates
    d = InProcessNotifications(providers=providers, capacity=capacity)
    people = peak_minute(n)
    for rid, channels, addresses, _ in people:
        d.put_recipient(rid, channels, addresses)
    ids = []
    for i, (rid, _, _, priority) in enumerate(people):
        d.clock.set(i / PEAK)
        op = d.notify(f"e{i}", rid, priority, "Siparişiniz yolda", "Kargonuz bugün teslim edilecek. Teşekkürler!")
        ids.append(op.value["notification_id"])
        d.get_notification(ids[-1], process="reader")
    for wait in (5.0, 200.0):  # inside the first backoff, then after every round
        d.advance(wait)
        for nid in ids:
            d.get_notification(nid, process="reader")
    return {r.name: r for r in check_notifications(d.history, d.provider_calls(), rules=VIRTUAL,
                                                   answer_latency=0.0)}


def test_the_reference_passes_the_status_reads_that_catch_the_mutants() -> None:
    r = run_and_read(3_000, providers=ProviderConfig(multiplier=3))
    assert not any(x.failed for x in r.values()), [x.summary() for x in r.values() if x.failed]
    assert r["status_moves_forward"].chances and r["status_matches_providers"].chances


def _budget_of_six(monkeypatch: pytest.MonkeyPatch) -> None:
    original = ncore.NotificationsCore.__init__

    def init(self: ncore.NotificationsCore, *args: Any, **kw: Any) -> None:
        original(self, *args, **{**kw, "budget": 6})

    monkeypatch.setattr(ncore.NotificationsCore, "__init__", init)


def _retries_a_dead_channel(monkeypatch: pytest.MonkeyPatch) -> None:
    original = ncore.NotificationsCore._plan

    def plan(self: ncore.NotificationsCore, n: Any, now: float) -> Any:
        if n.attempts and n.attempts[-1].outcome == "permanent" and len(n.attempts) < self.budget:
            return [n.attempts[-1].channel]  # "maybe it works this time"
        return original(self, n, now)

    monkeypatch.setattr(ncore.NotificationsCore, "_plan", plan)


def _ignores_the_preference(monkeypatch: pytest.MonkeyPatch) -> None:
    original = ncore.NotificationsCore._plan

    def plan(self: ncore.NotificationsCore, n: Any, now: float) -> Any:
        r = self.store.load_recipient(n.recipient_id)
        if not n.attempts and r is not None:
            return [next(c for c in ncore.CHANNELS if c in r.addresses)]  # push, SMS, e-mail, whatever they asked
        return original(self, n, now)

    monkeypatch.setattr(ncore.NotificationsCore, "_plan", plan)


def _claims_delivered_on_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    original = ncore.NotificationsCore.complete

    def complete(self: ncore.NotificationsCore, call: Any, outcome: str, now: float | None = None) -> Any:
        n = original(self, call, outcome, now)
        if outcome == "transient" and n.status != "delivered":
            n.status, n.channel = "delivered", call.channel  # "the provider took it"
            self.store.save(n)
        return n

    monkeypatch.setattr(ncore.NotificationsCore, "complete", complete)


def _queued_again_between_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    original = ncore.NotificationsCore.complete

    def complete(self: ncore.NotificationsCore, call: Any, outcome: str, now: float | None = None) -> Any:
        n = original(self, call, outcome, now)
        if n.status == "sending" and n.notification_id in {item[2] for q in self._queues.values() for item in q}:
            n.status = "queued"  # waiting for its next round, shown as if never sent
            self.store.save(n)
        return n

    monkeypatch.setattr(ncore.NotificationsCore, "complete", complete)


def _counts_sms_as_gsm7(monkeypatch: pytest.MonkeyPatch) -> None:
    from peakproof.targets.notifications import formatting as fm

    def sms(title: str, body: str) -> dict[str, object]:
        m = fm.format_sms(title, body)
        return {**m, "encoding": "GSM-7", "segments": 1}  # Turkish letters counted as 7-bit

    monkeypatch.setitem(ncore.FORMATTERS, "sms", sms)


@pytest.mark.parametrize("break_it, caught_by", [
    (_budget_of_six, "attempt_budget_respected"),
    (_retries_a_dead_channel, "no_retry_after_permanent_on_same_channel"),
    (_ignores_the_preference, "preference_respected"),
    (_claims_delivered_on_a_failure, "status_matches_providers"),
    (_queued_again_between_rounds, "status_moves_forward"),
    (_counts_sms_as_gsm7, "formatting_within_channel_limits"),
])
def test_each_notification_promise_has_a_mutant_it_catches(monkeypatch: pytest.MonkeyPatch, break_it: Any,
                                                             caught_by: str) -> None:
    break_it(monkeypatch)
    r = run_and_read(3_000, providers=ProviderConfig(multiplier=3))
    caught = r[caught_by]
    assert caught.valid is False, caught.summary()
    print(f"\n{break_it.__name__} -> {caught_by}: {caught.first_violation}")
