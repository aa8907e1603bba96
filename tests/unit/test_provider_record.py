"""The provider simulator's record of how long an answer took: what the caller waited, never less than the
configured delay (the notification checks decide from it whether the caller heard the answer)."""

from __future__ import annotations

from peakproof.providers import ProviderConfig, ProviderSim


def a_call(sim: ProviderSim) -> int:
    _, index = sim.call("sms", "+905550000000", "k1", "e1", "r1", {"text": "hi", "encoding": "GSM-7", "segments": 1})
    return index


def test_an_answer_that_left_late_is_recorded_with_the_time_it_took() -> None:
    sim = ProviderSim(ProviderConfig(latency=0.1, multiplier=0.0))
    index = a_call(sim)
    sim.answered(index, 0.7)  # an event loop that was busy: the caller (a 0.5 s timeout) never heard it
    assert sim.record()["calls"][index]["latency"] == 0.7


def test_an_answer_is_never_recorded_faster_than_the_configured_delay() -> None:
    sim = ProviderSim(ProviderConfig(latency=0.1, multiplier=0.0))
    index = a_call(sim)
    sim.answered(index, 0.09)  # the clock's grain: the sleep was 0.1 s
    assert sim.record()["calls"][index]["latency"] == 0.1
