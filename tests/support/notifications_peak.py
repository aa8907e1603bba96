"""The seed's peak minute of notifications, sent at the seed's peak rate to the in-process reference core
(virtual time) and judged by every check: the unit tests of the case and the quality tests of its models."""

from __future__ import annotations

from peakproof.cases import get_case
from peakproof.cases.notifications import (IN_VIRTUAL_TIME, InProcessNotifications, NotificationsAnalysis,
                                           check_notifications, peak_minute, urgent_mean_latency)
from peakproof.providers import ProviderConfig
from peakproof.targets.notifications import BreakerConfig

PEAK = get_case("notifications").peak_rate()  # notifications/s at peak, computed by the seed's model (1,736.11)


def run_peak(n: int, *, policy: str = "cascade", providers: ProviderConfig | None = None, urgent_share: float = 0.3,
             capacity: dict[str, float] | None = None, breaker: BreakerConfig | None = None,
             rate: float = PEAK) -> tuple[InProcessNotifications, dict]:
    d = InProcessNotifications(policy=policy, providers=providers, capacity=capacity, breaker=breaker)
    people = peak_minute(n, urgent_share=urgent_share)
    for rid, channels, addresses, _ in people:
        d.put_recipient(rid, channels, addresses)
    for i, (rid, _, _, priority) in enumerate(people):
        d.clock.set(i / rate)
        d.notify(f"e{i}", rid, priority, "Siparişiniz yolda", "Kargonuz bugün teslim edilecek. Teşekkürler!")
    d.advance(200)  # every round (30 s apart) done
    calls = d.provider_calls()
    # the in-process driver tells the core each outcome at once: no answer timeout to wait for
    results = {r.name: r for r in check_notifications(d.history, calls, rules=IN_VIRTUAL_TIME, answer_latency=0.0,
                                                      saturated=False, drives_down=bool(providers and providers.down))}
    results["urgent"] = urgent_mean_latency(NotificationsAnalysis(d.history, calls))
    print(f"\n{policy} {providers.down if providers else ''}: " + "; ".join(
        f"{k} {r.actual_limit()[0]}"
        for k, r in results.items()) + f"; calls/notification {len(calls) / n:.3f}")
    return d, results
