"""The provider simulator's lanes: faults for the recipients whose ids start with a prefix, and for them alone
(the URL properties drive several independent groups of recipients in one example, each with its faults)."""

from __future__ import annotations

import pytest

from peakproof.providers import ProviderConfig, ProviderSim

MESSAGE = {"text": "hi", "encoding": "GSM-7", "segments": 1}


def answer(sim: ProviderSim, recipient: str, key: str, channel: str = "sms") -> tuple[str, float]:
    outcome, index = sim.call(channel, f"+90{abs(hash(recipient)) % 10**10:010d}", key, f"e-{key}", recipient, MESSAGE)
    return outcome, sim.calls[index].latency


def test_a_lane_s_faults_answer_its_recipients_and_no_one_else() -> None:
    sim = ProviderSim(ProviderConfig(multiplier=0.0).updated(
        {"lanes": {"run1-l0-": {"down": ["sms"]}, "run1-l1-": {"ack_lost": 1.0, "latency": 0.2}}}))
    assert answer(sim, "run1-l0-r0", "a") == ("transient", 0.0)
    assert answer(sim, "run1-l1-r0", "b") == ("ack_lost", 0.2)
    assert answer(sim, "run1-l2-r0", "c") == ("ok", 0.0)  # no lane: the model's own answer
    assert answer(sim, "other", "d") == ("ok", 0.0)


def test_the_longest_prefix_that_matches_wins_and_a_lane_set_to_null_ends() -> None:
    cfg = ProviderConfig(multiplier=0.0).updated({"lanes": {"run1-": {"down": ["sms"]}, "run1-l0-": {"latency": 0.3}}})
    sim = ProviderSim(cfg)
    assert answer(sim, "run1-l0-r0", "a") == ("ok", 0.3)  # its lane replaces what it names, not the shorter lane's
    assert answer(sim, "run1-l1-r0", "b") == ("transient", 0.0)
    sim.config = cfg.updated({"lanes": {"run1-": None}})
    assert answer(sim, "run1-l1-r0", "c") == ("ok", 0.0)
    assert sim.config.to_json()["lanes"] == {"run1-l0-": {"latency": 0.3}}


def test_a_lane_s_multiplier_decides_its_recipients_seeded_failures() -> None:
    sim = ProviderSim(ProviderConfig(multiplier=0.0).updated({"lanes": {"l0-": {"multiplier": 1_000.0}}}))
    outcomes = {answer(sim, f"l0-r{i}", f"k{i}")[0] for i in range(20)}
    assert outcomes <= {"transient", "permanent"} and outcomes  # every call fails: rates x 1000
    assert {answer(sim, f"l1-r{i}", f"m{i}")[0] for i in range(20)} == {"ok"}


@pytest.mark.parametrize("lanes, expected", [
    ([], "lanes must map recipient id prefixes"),
    ({"": {"down": ["sms"]}}, "lanes must map recipient id prefixes"),
    ({"l0-": {"seed": 3}}, "expected some of multiplier, down, ack_lost, latency"),
    ({"l0-": {"down": ["fax"]}}, "down must be a list of channels"),
    ({"l0-": {"ack_lost": 2}}, "ack_lost must be >= 0 and <= 1"),
])
def test_a_bad_lane_is_refused_with_what_was_expected_and_nothing_changes(lanes: object, expected: str) -> None:
    cfg = ProviderConfig().updated({"lanes": {"kept-": {"down": ["push"]}}})
    with pytest.raises((ValueError, TypeError), match=expected):
        cfg.updated({"lanes": lanes})
    assert cfg.to_json()["lanes"] == {"kept-": {"down": ["push"]}}
